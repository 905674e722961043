// Package browser holds the dashboard's browser tests: headless Chromium
// (Debian's chromium, which make test installs when missing) driven by
// chromedp against the dashboard over a local stack of its own.
//
// They live in the module internal/devtools, not in the library's module,
// so that the browser driver never enters the module graph of a team that
// requires github.com/lambdajobs/lambdajobs (see docs/guide/MODULES.md).
package browser
