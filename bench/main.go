// Command bench produces docs/evidence/BENCHMARKS.md and docs/evidence/bench-throughput.png:
// requests, capacity and dollars per job; the overhead against the bare AWS
// calls (from the Go benchmarks in internal/dev/benchmarks); throughput and
// latency on the local stack at worker concurrency 1, 2, 4 and 8; cold
// start under the Runtime Interface Emulator; and the sweeper's cost against
// table size. `make bench` runs it with everything it needs.
//
// -only runs the named steps alone (costs, sweep, coldstart, throughput,
// lanes, comma-separated) and prints their sections instead of rewriting
// BENCHMARKS.md: `cd bench && go run . -only coldstart`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

func main() {
	out := flag.String("out", "../docs/evidence", "where BENCHMARKS.md and the plot go")
	overhead := flag.String("overhead", "", "the output of `go test -bench Overhead` (benchstat format)")
	jobsN := flag.Int("jobs", 1000, "jobs per cost scenario")
	throughputN := flag.Int("throughput-jobs", 400, "jobs per throughput level")
	tableSize := flag.Int("table-size", 100000, "finished jobs in the sweeper's table")
	coldRuns := flag.Int("cold-runs", 21, "fresh starts of each function whose median is its first invoke")
	only := flag.String("only", "", "run only these steps (costs, sweep, coldstart, throughput, lanes; comma-separated) and print their results instead of writing BENCHMARKS.md")
	flag.Parse()
	o := options{out: *out, overhead: *overhead, jobs: *jobsN, throughputJobs: *throughputN, tableSize: *tableSize, coldRuns: *coldRuns}
	if *only != "" {
		o.only = map[string]bool{}
		for _, s := range strings.Split(*only, ",") {
			s = strings.TrimSpace(s)
			if !slices.Contains(steps, s) {
				fmt.Fprintf(os.Stderr, "bench: -only %q: want some of %s\n", s, strings.Join(steps, ", "))
				os.Exit(2)
			}
			o.only[s] = true
		}
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// steps are the measurements, in the order run runs them.
var steps = []string{"coldstart", "costs", "sweep", "throughput", "lanes"}

type options struct {
	out, overhead                             string
	jobs, throughputJobs, tableSize, coldRuns int
	only                                      map[string]bool // nil: every step, and BENCHMARKS.md written
}

func run(o options) error {
	ctx := context.Background()
	started := time.Now()
	r := &report{Machine: machine(), Started: started, ColdRuns: o.coldRuns}
	var err error
	step := func(key, name string, f func() error) error {
		if o.only != nil && !o.only[key] {
			return nil
		}
		t := time.Now()
		fmt.Fprintf(os.Stderr, "bench: %s...\n", name)
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(os.Stderr, "bench: %s done in %v\n", name, time.Since(t).Round(time.Second))
		return nil
	}
	// The cold start first, on a machine nothing else has run on yet: it
	// compares milliseconds of CPU-bound start-up, which the other steps'
	// emulators and heaps (a 100,000-job table, this process's own) make
	// noisier.
	if err = step("coldstart", "cold start", func() error { r.Cold, err = coldStart(ctx, o.coldRuns); return err }); err != nil {
		return err
	}
	if err = step("costs", "cost per job", func() error { r.Costs, err = costs(ctx, o.jobs); return err }); err != nil {
		return err
	}
	if err = step("sweep", "sweeper against table size", func() error { r.Sweep, err = sweepCost(ctx, o.tableSize); return err }); err != nil {
		return err
	}
	if err = step("throughput", "throughput", func() error { r.Throughput, err = throughput(ctx, o.throughputJobs); return err }); err != nil {
		return err
	}
	if err = step("lanes", "an urgent job behind a bulk backlog", func() error { r.Lanes, err = lanes(ctx); return err }); err != nil {
		return err
	}
	if o.overhead != "" {
		if r.Overhead, err = readOverhead(o.overhead); err != nil {
			return err
		}
		if r.Exprs, err = readExprs(o.overhead); err != nil {
			return err
		}
	}
	r.Took = time.Since(started)
	if o.only != nil {
		if _, err := os.Stdout.WriteString(r.sections(o.only)); err != nil {
			return err
		}
		return r.checked()
	}
	if err := plotThroughput(r.Throughput, o.out+"/bench-throughput.png"); err != nil {
		return err
	}
	if err := os.WriteFile(o.out+"/BENCHMARKS.md", []byte(r.markdown()), 0o644); err != nil {
		return err
	}
	return r.checked()
}

// checked returns an error naming the checks that do not hold.
func (r *report) checked() error {
	var bad []string
	for _, c := range r.failed() {
		bad = append(bad, fmt.Sprintf("%s: %s, want %s", c.what, c.got, c.limit))
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d limits not kept (docs/evidence/BENCHMARKS.md section 7):\n  %s", len(bad), strings.Join(bad, "\n  "))
	}
	return nil
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
