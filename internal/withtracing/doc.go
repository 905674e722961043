// Package withtracing links OpenTelemetry tracing (package
// pkg/jobs/lambdafn/tracing) into this repository's six functions, which
// import it for its effect: the stack this repository deploys can turn
// tracing on (Config.Tracing, `-c tracing=true`) with the bootstraps
// `make build` makes. Built with the tag lambdajobs.notracing it links
// nothing, and neither do the bootstraps: how docs/BENCHMARKS.md measures
// the functions a team builds without tracing.
package withtracing
