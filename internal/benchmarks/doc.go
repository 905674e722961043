// Package benchmarks holds the Go benchmarks behind docs/BENCHMARKS.md that
// run against the emulators: the enqueue handler and the worker's per-job
// path side by side with the bare AWS calls they must make. `make bench`
// runs them (benchstat-friendly output) with the rest of the figures.
package benchmarks
