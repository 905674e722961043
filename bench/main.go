// Command bench produces docs/BENCHMARKS.md and docs/bench-throughput.png:
// requests, capacity and dollars per job; the overhead against the bare AWS
// calls (from the Go benchmarks in internal/benchmarks); throughput and
// latency on the local stack at worker concurrency 1, 2, 4 and 8; cold
// start under the Runtime Interface Emulator; and the sweeper's cost against
// table size. `make bench` runs it with everything it needs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

func main() {
	out := flag.String("out", "../docs", "where BENCHMARKS.md and the plot go")
	overhead := flag.String("overhead", "", "the output of `go test -bench Overhead` (benchstat format)")
	jobsN := flag.Int("jobs", 1000, "jobs per cost scenario")
	throughputN := flag.Int("throughput-jobs", 400, "jobs per throughput level")
	tableSize := flag.Int("table-size", 100000, "finished jobs in the sweeper's table")
	flag.Parse()
	if err := run(*out, *overhead, *jobsN, *throughputN, *tableSize); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(out, overheadFile string, jobsN, throughputN, tableSize int) error {
	ctx := context.Background()
	started := time.Now()
	r := &report{Machine: machine(), Started: started}
	var err error
	step := func(name string, f func() error) error {
		t := time.Now()
		fmt.Fprintf(os.Stderr, "bench: %s...\n", name)
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(os.Stderr, "bench: %s done in %v\n", name, time.Since(t).Round(time.Second))
		return nil
	}
	if err = step("cost per job", func() error { r.Costs, err = costs(ctx, jobsN); return err }); err != nil {
		return err
	}
	if err = step("sweeper against table size", func() error { r.Sweep, err = sweepCost(ctx, tableSize); return err }); err != nil {
		return err
	}
	if err = step("cold start", func() error { r.Cold, err = coldStart(ctx); return err }); err != nil {
		return err
	}
	if err = step("throughput", func() error { r.Throughput, err = throughput(ctx, throughputN); return err }); err != nil {
		return err
	}
	if overheadFile != "" {
		if r.Overhead, err = readOverhead(overheadFile); err != nil {
			return err
		}
	}
	r.Took = time.Since(started)
	if err := plotThroughput(r.Throughput, out+"/bench-throughput.png"); err != nil {
		return err
	}
	return os.WriteFile(out+"/BENCHMARKS.md", []byte(r.markdown()), 0o644)
}

func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(line, ":", 2)[1])
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d cores, %s %s/%s", cpu, runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
