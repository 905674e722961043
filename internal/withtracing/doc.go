// Package withtracing is the tracing of this repository's seven functions
// (lambdafn.Opts.Tracing): the stack this repository deploys can turn
// tracing on (Config.Tracing, `-c tracing=true`) with the bootstraps
// `make build` makes, whose spans go to Lambda's X-Ray daemon
// (tracing.XRay). Built with the tag lambdajobs.notracing, Tracing is nil
// and nothing of OpenTelemetry is linked: how docs/evidence/BENCHMARKS.md measures
// the functions a team builds without tracing.
package withtracing
