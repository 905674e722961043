// Package benchmarks holds the Go benchmarks behind docs/evidence/BENCHMARKS.md that
// run against the emulators: the enqueue handler and the worker's per-job
// path side by side with the bare AWS calls they must make, with the
// functions' logs and metrics on as deployed. `make bench` runs them
// (benchstat-friendly output) with the rest of the figures, and judges the
// ratio by benchstat's confidence interval, not by its mean.
package benchmarks
