package main

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/perf/benchmath"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
)

type report struct {
	Machine    string
	Started    time.Time
	Took       time.Duration
	Costs      []cost
	Overhead   []overheadResult
	Exprs      []exprResult
	Throughput []level
	Cold       []coldResult
	ColdRuns   int
	Sweep      sweepResult
	Lanes      lanesResult
}

// exprResult is one way of writing the claim's expressions
// (BenchmarkClaimExpression): its median time and its allocations.
type exprResult struct {
	Name          string
	NsOp, AllocOp float64
	BytesOp       float64
}

// readExprs reads BenchmarkClaimExpression's lines from the output of go
// test -bench (the overhead file holds them too).
func readExprs(path string) ([]exprResult, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	runs := map[string][]float64{}
	byName := map[string]*exprResult{}
	var order []string
	for _, line := range strings.Split(string(raw), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "BenchmarkClaimExpression/") {
			continue
		}
		name := strings.TrimPrefix(fields[0], "BenchmarkClaimExpression/")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i]
		}
		r := byName[name]
		if r == nil {
			r = &exprResult{Name: name}
			byName[name] = r
			order = append(order, name)
		}
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			switch fields[i+1] {
			case "ns/op":
				runs[name] = append(runs[name], v)
			case "allocs/op":
				r.AllocOp = v
			case "B/op":
				r.BytesOp = v
			}
		}
	}
	var out []exprResult
	for _, name := range order {
		r := byName[name]
		ns := runs[name]
		sort.Float64s(ns)
		if len(ns) > 0 {
			r.NsOp = ns[len(ns)/2]
		}
		out = append(out, *r)
	}
	return out, nil
}

// exprMD is the paragraph on the two ways of writing expressions.
func (r *report) exprMD() string {
	if len(r.Exprs) != 2 {
		return ""
	}
	own, sdk := r.Exprs[0], r.Exprs[1]
	if own.Name != "expr" {
		own, sdk = sdk, own
	}
	return fmt.Sprintf("Expressions: the store builds a job's own updates (claim, publish, final write, requeue, ...)\n"+
		"with its own expression writer, and every other write (batches, schedules, limits, listing) with the\n"+
		"SDK's `expression.Builder`. The writer stays only on the per-job path, where it pays: the claim's\n"+
		"update and condition take %.1f µs, %.0f allocations and %.1f KB with it, %.1f µs, %.0f allocations\n"+
		"and %.1f KB with the builder (`go test -run '^$' -bench ClaimExpression -benchmem\n"+
		"./pkg/jobs/dynamostore/`, median of the runs), which builds a tree and marshals each value by\n"+
		"reflection.\n\n", own.NsOp/1e3, own.AllocOp, own.BytesOp/1024, sdk.NsOp/1e3, sdk.AllocOp, sdk.BytesOp/1024)
}

// overheadResult is one path's mean over the benchmark's runs, and its
// ratio as benchstat summarises it: the median of the runs and its 95%
// confidence interval.
type overheadResult struct {
	Name          string
	Runs          int
	Handler, Bare float64 // ns/op
	Ratio         float64 // of the means
	MinR, MaxR    float64
	Ratios        []float64
	Median        float64
	Lo, Hi        float64 // benchstat's confidence interval of the median
}

// overheadAim is the highest ratio allowed, judged on benchstat's upper
// bound.
const overheadAim = 1.15

// baseline is the API-enqueued job's cost as this report last measured it
// before the smaller bootstraps (commit 3d5e10a and the ones after it), which
// the cost section itemises against.
var baseline = struct {
	date, commit     string
	total, wru, logs float64
}{"2026-11-30", "3d5e10a", 5.77, 6, 0.28}

// readOverhead parses `go test -bench Overhead` output (the custom metrics
// handler-ns/op, bare-ns/op and ratio).
func readOverhead(path string) ([]overheadResult, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	byName := map[string]*overheadResult{}
	var order []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "BenchmarkOverhead/") {
			continue
		}
		name := strings.TrimPrefix(fields[0], "BenchmarkOverhead/")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i]
		}
		metrics := map[string]float64{}
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err == nil {
				metrics[fields[i+1]] = v
			}
		}
		r := byName[name]
		if r == nil {
			r = &overheadResult{Name: name, MinR: 1e9}
			byName[name] = r
			order = append(order, name)
		}
		r.Runs++
		r.Handler += metrics["handler-ns/op"]
		r.Bare += metrics["bare-ns/op"]
		r.MinR, r.MaxR = min(r.MinR, metrics["ratio"]), max(r.MaxR, metrics["ratio"])
		r.Ratios = append(r.Ratios, metrics["ratio"])
	}
	var out []overheadResult
	for _, n := range order {
		r := byName[n]
		r.Handler /= float64(r.Runs)
		r.Bare /= float64(r.Runs)
		r.Ratio = r.Handler / r.Bare
		// What benchstat prints for the ratio metric: the median and a 95%
		// confidence interval that assumes nothing of the distribution.
		sum := benchmath.AssumeNothing.Summary(benchmath.NewSample(r.Ratios, &benchmath.DefaultThresholds), 0.95)
		r.Median, r.Lo, r.Hi = sum.Center, sum.Lo, sum.Hi
		out = append(out, *r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no BenchmarkOverhead results", path)
	}
	return out, sc.Err()
}

func createFile(path string) (*os.File, error) { return os.Create(path) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// markdown is BENCHMARKS.md: every section.
func (r *report) markdown() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("# Benchmarks\n\n")
	w("Written by `make bench` on %s (%s, %v in all). Every figure below comes from that one\n", r.Started.UTC().Format("2006-01-02 15:04 UTC"), r.Machine, r.Took.Round(time.Second))
	w("run against DynamoDB Local 3.3.1, the fauxqs SQS emulator and the AWS Lambda Runtime Interface\n")
	w("Emulator on this machine; counts (requests, capacity units) are what AWS would bill, timings are\n")
	w("this machine's and only comparable side by side.\n\n")
	b.WriteString(r.costsMD())
	b.WriteString(r.overheadMD())
	b.WriteString(r.throughputMD())
	b.WriteString(r.coldMD())
	b.WriteString(r.sweepMD())
	b.WriteString(r.lanesMD())
	b.WriteString(r.checksMD())
	w("## Reproduce\n\n```sh\nmake bench   # about 7 minutes on 2 cores; rewrites this file and docs/evidence/bench-throughput.png\n")
	w("cd bench && go run . -only coldstart   # one step alone, printed (-only costs, sweep, coldstart, throughput, lanes)\n```\n")
	return b.String()
}

// sections are the sections of the steps in only, for bench -only.
func (r *report) sections(only map[string]bool) string {
	var b strings.Builder
	if only["costs"] {
		b.WriteString(r.costsMD())
	}
	if only["throughput"] {
		b.WriteString(r.throughputMD())
	}
	if only["coldstart"] {
		b.WriteString(r.coldMD())
	}
	if only["sweep"] {
		b.WriteString(r.sweepMD())
	}
	if only["lanes"] {
		b.WriteString(r.lanesMD())
	}
	b.WriteString(r.checksMD())
	return b.String()
}

func (r *report) costsMD() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## 1. Requests, capacity and dollars per job\n\n")
	w("Each scenario runs %d jobs through the real handlers (enqueue, the worker with the SQS event\n", r.Costs[0].Jobs)
	w("source at batch size 10); an SDK middleware counts every AWS request and DynamoDB reports the\n")
	w("capacity it consumed (`ReturnConsumedCapacity`). Dollars are list prices (us-east-1): DynamoDB\n")
	w("on-demand $0.625 per million write units and $0.125 per million read units, SQS $0.40 per million\n")
	w("requests, Lambda arm64 $0.20 per million requests plus $0.0000133334 per GB-second (enqueue at\n")
	w("256 MB, worker at 512 MB, durations as measured here), HTTP API $1.00 per million calls,\n")
	w("CloudWatch Logs ingestion $0.50 per GB (the functions' JSON log lines at Info and their metrics in\n")
	w("Embedded Metric Format, counted byte by byte as the handlers write them). In brackets, the log\n")
	w("bytes with the functions' log level at WARN (`Config.LogLevel`, `-c logLevel=WARN`): the metrics\n")
	w("and any warnings are all that is left of a job that runs normally.\n\n")
	w("| scenario | AWS requests per job | write units | read units | Lambda invocations | log bytes (at WARN) | $ per million jobs |\n|---|---|---|---|---|---|---|\n")
	for _, c := range r.Costs {
		var reqs []string
		var total float64
		keys := make([]string, 0, len(c.Requests))
		for k := range c.Requests {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			reqs = append(reqs, fmt.Sprintf("%s %.2f", k, c.Requests[k]))
			total += c.Requests[k]
		}
		_, _, _, _, _, _, dollars := c.dollars()
		w("| %s | **%.2f**: %s | %.2f | %.2f | %.2f | %.0f (%.0f) | **$%.2f** |\n", c.Name, total, strings.Join(reqs, ", "), c.WRU, c.RRU, c.Invocations, c.LogBytes, c.LogBytesAtWarn, dollars)
	}
	w("\nThe dollars by part, per million jobs:\n\n| scenario | DynamoDB | SQS | Lambda requests | Lambda duration | HTTP API | logs | total |\n|---|---|---|---|---|---|---|---|\n")
	for _, c := range r.Costs {
		d, s, lr, ld, api, logs, total := c.dollars()
		w("| %s | $%.2f | $%.2f | $%.2f | $%.2f | $%.2f | $%.2f | $%.2f |\n", c.Name, d, s, lr, ld, api, logs, total)
	}
	api := r.Costs[0]
	_, _, _, _, _, _, apiTotal := api.dollars()
	w("\nThe log bytes of one API-enqueued job at INFO, line by line (what CloudWatch Logs ingests; the\n")
	w("worker's metrics record and its lines are shared by the 10 jobs of a batch):\n\n| line | bytes per job |\n|---|---|\n")
	lines := make([]string, 0, len(api.LogLines))
	for k := range api.LogLines {
		lines = append(lines, k)
	}
	sort.Slice(lines, func(i, j int) bool { return api.LogLines[lines[i]] > api.LogLines[lines[j]] })
	for _, k := range lines {
		w("| %s | %.0f |\n", k, api.LogLines[k])
	}
	w("| **in all** | **%.0f** |\n\n", api.LogBytes)
	w("Before the trimmed log lines (commit adb93c7) the same job wrote %.0f bytes ($%.2f per million, measured with a metrics namespace of\n", before.logBytes, before.logDollars)
	w("16 characters; the construct derives one of about 40, which every record carries, as here). Dropped\n")
	w("since, as nothing an operator reads is lost: each line's own timestamp (CloudWatch Logs stamps every\n")
	w("event it ingests, which is Logs Insights' `@timestamp`); the request id on INFO lines (a run's line\n")
	w("names its job, which is how it is found; warnings and errors keep it, to find the invocation's other\n")
	w("lines); the run's status as a field of its own (it is in the message: `job succeeded`, `job failed`,\n")
	w("`job cancelled`); the run's `attempt` when it is the first; each EMF count's `\"Unit\":\"Count\"` (the\n")
	w("specification's default, None, gives the same statistics); the `service` dimension of the\n")
	w("enqueue's record, whose total no alarm reads (JobsEnqueued is by kind and in all); and for a job made\n")
	w("from a foreign message or a schedule's fire the INFO line of its creation (now DEBUG). What is left is\n")
	w("what an operator reads or the specification requires: the run's one line (level, message, the job's\n")
	w("id, kind and duration) and the enqueue's record (its timestamp, namespace, dimension sets, the kind\n")
	w("and the count), and the worker's share of its batch's record.\n\n")
	w("The aim of 350 bytes is not met (%.0f): the enqueue's record alone is %.0f bytes, most of them the\n", api.LogBytes, api.LogLines["metrics of enqueue (EMF, JobsEnqueued by kind)"])
	w("specification's (its `_aws` metadata and the namespace). Meeting it means not counting each enqueue\n")
	w("by kind (docs/DESIGN guarantee 15 asks for every transition by kind), or gathering the counts of many\n")
	w("enqueues in one record across invocations, which loses those a frozen execution environment holds\n")
	w("when Lambda retires it. Not counted here, and billed alike: Lambda's own START and REPORT lines per\n")
	w("invocation and API Gateway's access log line per request (docs/operations/OPERATIONS.md, \"Logs\").\n\n")
	_, _, _, _, _, apiLogs, _ := api.dollars()
	w("Against the $%.2f per million measured on %s (commit %s, %.0f write units and $%.2f of logs per\n", baseline.total, baseline.date, baseline.commit, baseline.wru, baseline.logs)
	w("job): the queued and running indexes of the listing since added 4 write units (commit f2c3959) and\n")
	w("sending each job's message before storing it took the sweep index's 2 away (docs/guide/ARCHITECTURE.md,\n")
	w("\"The dual write\"), %+.0f write units in all ($%.2f), and the logs cost $%.2f instead of $%.2f;\n", api.WRU-baseline.wru, (api.WRU-baseline.wru)*priceWRU, apiLogs, baseline.logs)
	w("together $%.2f, measured **$%.2f**.\n", baseline.total+(api.WRU-baseline.wru)*priceWRU+apiLogs-baseline.logs, apiTotal)
	w("\nAgainst the peers: the design's floor for a job enqueued through the API is about **$%.1f** per\n", floorPerMillion)
	w("million (3 write units, 1 send plus batched receive and delete, 1 API call, 1.1 invocations); a\n")
	w("three-state Step Functions Standard workflow is about **$%.0f** per million. Measured: **$%.2f**,\n", sfnPerMillion, apiTotal)
	w("%.1fx the floor and %.0fx cheaper than Step Functions. What the floor leaves out: %.0f write units\n", apiTotal/floorPerMillion, sfnPerMillion/apiTotal, api.WRU)
	w("instead of 3 (the listing's entries: 1 in the owner index that GET /v1/jobs reads and 4 in and out\n")
	w("of the queued and running indexes; see docs/evidence/CAPACITY.md),\n")
	w("and Lambda duration, which the floor does not count. Each partial result adds one write unit\n")
	w("(scenario 3).\n\n")

	if ev, after := r.costNamed(scenarioEvents), r.costNamed(scenarioAfter); ev != nil && after != nil {
		_, _, _, _, _, _, evTotal := ev.dollars()
		_, _, _, _, _, _, afterTotal := after.dollars()
		w("What the features add to that job (scenarios 4 and 5 against scenario 1): announcing its outcome,\n")
		w("%.2f write units, %.2f requests and %.2f EventBridge entries, **$%.2f** per million jobs; running after\n",
			ev.WRU-api.WRU, ev.totalRequests()-api.totalRequests(), ev.Entries, evTotal-apiTotal)
		w("another job (half the jobs of scenario 5 wait on the other half), per such job %.2f write units,\n", 2*(after.WRU-api.WRU))
		w("%.2f read units and %.2f requests, **$%.2f** per million. A kind that uses neither pays nothing:\n",
			2*(after.RRU-api.RRU), 2*(after.totalRequests()-api.totalRequests()), 2*(afterTotal-apiTotal))
		w("scenario 1 makes exactly the requests and write units it made before them (section 7 checks it).\n\n")
	}

	// Stated once, where the tests measure them: a figure here would go
	// stale (it did: docs/docs_test.go checks every doc against CAPACITY.md).
	w("Other write units (a job enqueued inside the caller's own DynamoDB transaction, a retry, a cancel,\n")
	w("a failed job, a job of a batch and its batch, work longer than one invocation) are measured by\n")
	w("tests and stated once, in [CAPACITY.md](CAPACITY.md), with the commands that reproduce them.\n\n")
	return b.String()
}

func (r *report) overheadMD() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## 2. Overhead against the bare AWS calls\n\n")
	if len(r.Overhead) == 0 {
		w("(not run: pass -overhead)\n\n")
	} else {
		w("`go test -run '^$' -bench Overhead -benchtime 300x -count %d ./internal/dev/benchmarks/` (benchstat-friendly):\n", r.Overhead[0].Runs)
		w("each iteration runs the system's path and then the bare SDK calls it must make (enqueue: the\n")
		w("conditional PutItem and the SendMessage; worker: the claim and the final conditional UpdateItem),\n")
		w("interleaved so warm-up and noise fall on both. The system runs as deployed: its JSON log lines\n")
		w("at INFO and its metrics (EMF) on. The ratio is judged as benchstat reports it, by the upper\n")
		w("bound of the 95%% confidence interval of its median over the runs, not by a mean.\n\n")
		w("| path | system (mean) | bare calls (mean) | ratio: median | benchstat's 95%% interval | highest run | aim: upper bound %.2f or less |\n|---|---|---|---|---|---|---|\n", overheadAim)
		for _, o := range r.Overhead {
			verdict := "met"
			if o.Hi > overheadAim {
				verdict = "missed"
			}
			w("| %s | %.2f ms | %.2f ms | %.3f | %.3f to **%.3f** | %.3f | %s |\n", o.Name, o.Handler/1e6, o.Bare/1e6, o.Median, o.Lo, o.Hi, o.MaxR, verdict)
		}
		w("\nBefore the cold-start work (this same benchmark and bare calls, logs and metrics on, at commit adb93c7): the\n")
		w("worker's median %.3f, interval %.3f to %.3f; the enqueue's %.3f, %.3f to %.3f. The worker now runs\n", before.workerMedian, before.workerLo, before.workerHi, before.enqueueMedian, before.enqueueLo, before.enqueueHi)
		w("the last record of a batch on the invocation's own goroutine: a fresh goroutine grew its stack\n")
		w("again through each record's SDK calls (0.07 ms of CPU per one-record batch). And the store writes\n")
		w("a job's own updates (claim, final write, ...) with expressions it assembles itself: the SDK's\n")
		w("expression builder, which builds a tree and marshals each value by reflection, was a fifth of the\n")
		w("worker's CPU per job (the median fell from about 1.15 to 1.11). The bare calls write the same item\n")
		w("and index entries as the store (the listing's indexes included).\n")
		w("\nThe worker's extra time is its bookkeeping per invocation: the deadline plan, the handler's\n")
		w("goroutine and context, the result's public JSON, the log line and the metrics' record; the rest is\n")
		w("DynamoDB's (the store's conditions and index keys make its writes larger than the bare ones).\n")
		w("The enqueue handler adds the strict payload decoding and canonical re-encoding, the request hash\n")
		w("and the problem mapping.\n\n")
		b.WriteString(r.exprMD())
	}
	return b.String()
}

func (r *report) throughputMD() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## 3. Throughput on the local stack\n\n")
	w("The functions under the Runtime Interface Emulator, the local SQS event source at batch size 10\n")
	w("and the given maximum concurrency (one emulator instance each), no-op jobs (`example.hash`, one\n")
	w("round). Under load, 8 producers enqueue them as fast as they can while the workers run; latency is\n")
	w("from the job's creation to its final write (the stored timestamps). Drain: the queue is filled\n")
	w("first, then the workers start; the rate at which they empty it is the worker side alone.\n\n")
	w("| worker concurrency | jobs | under load: jobs per second | p50 latency | p99 latency | drain: jobs per second |\n|---|---|---|---|---|---|\n")
	for _, l := range r.Throughput {
		w("| %d | %d | %.0f | %s | %s | **%.0f** |\n", l.Workers, l.Jobs, l.JobsPerSecond, ms(l.P50), ms(l.P99), l.DrainPerSecond)
	}
	if len(r.Throughput) >= 2 {
		first, last := r.Throughput[0], r.Throughput[len(r.Throughput)-1]
		w("\nUnder load the rate is the producers' (about %.0f jobs per second on this machine): from %d\n", last.JobsPerSecond, r.Throughput[1].Workers)
		w("workers on, the workers keep up and the p50 latency falls to that of one job's path. Draining,\n")
		w("%d workers empty the queue %.1fx as fast as 1. Every process here (DynamoDB Local, fauxqs, each\n", last.Workers, last.DrainPerSecond/first.DrainPerSecond)
		w("emulator and bootstrap, the producers) shares 2 cores, so the curve flattens when they saturate\n")
		w("them; in AWS each worker is its own execution environment and DynamoDB and SQS are elsewhere.\n\n")
	}
	w("![throughput and latency against worker concurrency](bench-throughput.png)\n\n")
	return b.String()
}

func (r *report) coldMD() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("## 4. Cold start\n\n")
	w("Each function's deployable bootstrap (arm64, `make build` flags) and its first invoke under the\n")
	w("Runtime Interface Emulator (built for this machine the same way), against a hello-world\n")
	w("aws-lambda-go bootstrap: the median of %d fresh starts each, the bootstraps taking turns so that\n", r.ColdRuns)
	w("the machine's load falls on all alike (and this step first, before the others' emulators and\n")
	w("heaps), in an environment holding only what Lambda and the\n")
	w("construct set. Each function is built three times: as a team's main that passes no tracing and\n")
	w("no object tier (`-tags lambdajobs.notracing,lambdajobs.noobjects` here); as one that passes the\n")
	w("object tier, `s3objects.Tier{}` (the S3 client), and no tracing (`-tags lambdajobs.notracing`);\n")
	w("and as this repository's `make build` builds it, with `tracing.XRay()` linked too. Both are\n")
	w("linked but unused here (no large kind, no bucket). The first invoke is what the caller waits for: the\n")
	w("process's start, the Go runtime and package initialisation, the function's set-up (together\n")
	w("the emulator's *init*, up to the runtime's first request for work) and the first invocation\n")
	w("itself (for getjob, waitjob and schedules one DynamoDB read; for the sweeper its first sweep, %d index\n", dynamostore.Shards)
	w("queries, measured apart from its start in the next column).\n\n")
	w("| function | bootstrap size | OpenTelemetry modules (`go version -m`) | first invoke | of which init | first invocation | second invoke | first invoke vs hello | added to a start |\n|---|---|---|---|---|---|---|---|---|\n")
	hello := r.cold("hello", false, false)
	for _, c := range r.Cold {
		otel := "none"
		if len(c.OTel) > 0 {
			otel = fmt.Sprintf("%d", len(c.OTel))
		}
		name := c.Name
		switch {
		case c.Traced:
			name += ", S3 and tracing linked"
		case c.Objects:
			name += ", S3 linked"
		}
		w("| %s | %.1f MB | %s | %s | %s | %s | %s | **%.2fx** | %+.1f ms |\n", name, float64(c.SizeARM64)/1e6, otel, ms(c.First), ms(c.Init), ms(c.Invoke), ms(c.Warm),
			float64(c.First)/float64(hello.First), float64(c.First-hello.First)/1e6)
	}
	w("\nWhat a start costs on Lambda: the platform's own part of a cold start (placing the sandbox,\n")
	w("fetching the code, starting the runtime) is the same for hello world and for these bootstraps;\n")
	w("the last column is what ours add to it, in milliseconds of this machine's CPU. Lambda gives a\n")
	w("function a full vCPU at 1,769 MB and a share in proportion below that, so a function of M MB\n")
	w("adds about 1769/M times these milliseconds (the construct's memory sizes: `jobsinfra.Config`);\n")
	w("the ratio is the measure the limits keep (section 7). The emulator's figures are not Lambda's\n")
	w("Init Duration.\n")
	w("\nThe set-up breakdown of the bootstraps with neither linked: milliseconds of each step, medians of\n")
	w("%d more starts of each bootstrap run directly (it sets up, then exits for want of a Runtime\n", r.ColdRuns)
	w("API), with `GODEBUG=inittrace=1` and lambdafn's DEBUG line \"function set up\", which Serve\n")
	w("writes once per process:\n\n")
	var plain []coldResult
	for _, c := range r.Cold {
		if !c.Traced && !c.Objects {
			plain = append(plain, c)
		}
	}
	w("| step |")
	for _, c := range plain {
		w(" %s |", c.Name)
	}
	w("\n|---|")
	for range plain {
		w("---|")
	}
	w("\n")
	for _, row := range setupRows {
		w("| %s |", row.label)
		for _, c := range plain {
			v, ok := c.Steps[row.key]
			switch {
			case row.key == "inits":
				w(" %.2f |", c.Inits)
			case row.key == "inits+objects" || row.key == "inits+tracing":
				if t := r.cold(c.Name, row.key == "inits+tracing", true); t != nil {
					w(" %.2f |", t.Inits)
				} else {
					w(" - |")
				}
			case ok:
				w(" %.2f |", v)
			default:
				w(" - |")
			}
		}
		w("\n")
	}
	w("\n")
	w("Before the cold-start work (commit adb93c7, which added the breakdown, measured by this same benchmark on\n")
	w("%s, in the same turns): tracing was always linked, the AWS configuration came from the SDK's\n", before.date)
	w("shared-config loader, which links the SSO, SSO OIDC, STS, sign-in and instance-metadata clients,\n")
	w("every function built an SQS client, and the kind, code and schedule-name patterns compiled up to\n")
	w("100 copies of a character class each:\n\n")
	w("| function | bootstrap size | first invoke | of which init | first invoke vs hello | package initialisation | lambdafn set-up (of which AWS configuration) | CPU time at the end of set-up |\n|---|---|---|---|---|---|---|---|\n")
	for _, c := range before.cold {
		setup := "-"
		if c.setup > 0 {
			setup = fmt.Sprintf("%.2f ms (%.2f ms)", c.setup, c.awsCfg)
		}
		cpu := "-"
		if c.cpu > 0 {
			cpu = fmt.Sprintf("%.2f ms", c.cpu)
		}
		w("| %s | %.1f MB | %.1f ms | %.1f ms | %.2fx | %.2f ms | %s | %s |\n", c.name, c.size, c.first, c.init, c.first/before.cold[0].first, c.inits, setup, cpu)
	}
	w("\nThe package initialisation that was cut: OpenTelemetry and protobuf (about 0.4 ms; still paid by a\n")
	w("bootstrap that links tracing, the rows above marked so), the loader's credential clients (about 0.8\n")
	w("ms: each AWS client package builds its endpoint tables and, since 2026, its schemas when the process\n")
	w("starts, used or not) and the patterns compiled at start in the functions' own packages (about 0.5\n")
	w("ms in all). The EventBridge and Secrets Manager clients were cut too, for a\n")
	w("caller of our own that signed, retried and resolved endpoints for PutEvents and GetSecretValue; they\n")
	w("are the SDK's clients again, as a signer, retryer and endpoint rules of our own must follow every SDK\n")
	w("change: their cost is in the table above (0.66 MB of each bootstrap: enqueue's 9.37 MB became 10.03\n")
	w("MB, hence the 10.5 MB limit in section 7), and their packages' initialisation about 1 ms (`GODEBUG=inittrace=1`:\n")
	w("EventBridge's schemas 0.45 ms, the rest their endpoint tables and Secrets Manager's schemas), twice what\n")
	w("was expected when they were chosen: the first-invoke limits moved to 1.8x and 2.4x. What remains over hello world is the AWS clients the\n")
	w("functions link: DynamoDB's schemas alone take about 0.65 ms, SQS's schemas and tables and\n")
	w("Scheduler's tables together about 0.35 ms, EventBridge's and Secrets Manager's schemas the rest.\n")
	w("One package serves every role (a team's one main, `lambdafn.Serve`), so every bootstrap links the\n")
	w("SQS, Scheduler, EventBridge and Secrets Manager clients even where it never builds them. The\n")
	w("credentials come from the SDK's providers (the environment's keys, else the container credentials\n")
	w("endpoint, refreshed by the SDK's cache) without the shared loader, whose STS, SSO, SSO OIDC, sign-in\n")
	w("and instance-metadata clients no role calls. The shared loader also read `AWS_CA_BUNDLE` when the\n")
	w("environment had one (this machine's does: 4.4 ms of parsing per start); Lambda's has none, and the\n")
	w("benchmark gives the functions Lambda's environment only.\n\n")
	return b.String()
}

// before holds what this benchmark measured before the smaller bootstraps
// (see the cold-start section): the medians of 21 fresh starts at commit
// adb93c7.
var before = struct {
	date string
	cold []struct {
		name                                         string
		size, first, init, inits, setup, awsCfg, cpu float64
	}
	logBytes, logDollars                float64
	workerMedian, workerLo, workerHi    float64
	enqueueMedian, enqueueLo, enqueueHi float64
}{
	date: "2026-12-01 08:02 UTC",
	cold: []struct {
		name                                         string
		size, first, init, inits, setup, awsCfg, cpu float64
	}{
		{"hello", 5.8, 4.9, 3.2, 0.51, 0, 0, 0},
		{"enqueue", 13.4, 8.8, 7.2, 3.74, 0.18, 0.10, 7.79},
		{"getjob", 13.3, 9.6, 7.6, 3.77, 0.19, 0.11, 8.19},
		{"cancel", 13.5, 10.2, 8.1, 4.02, 0.20, 0.11, 8.09},
		{"worker", 13.4, 9.0, 7.1, 4.06, 0.19, 0.10, 7.94},
		{"sweeper", 13.2, 49.8, 7.5, 3.86, 0.19, 0.10, 8.15},
		{"schedules", 13.3, 11.9, 6.6, 3.87, 0.21, 0.11, 8.11},
	},
	logBytes: 561, logDollars: 0.28,
	workerMedian: 1.149, workerLo: 1.117, workerHi: 1.179,
	enqueueMedian: 1.083, enqueueLo: 1.070, enqueueHi: 1.133,
}

// costNamed returns the cost scenario named name (nil when not run).
func (r *report) costNamed(name string) *cost {
	for i := range r.Costs {
		if r.Costs[i].Name == name {
			return &r.Costs[i]
		}
	}
	return nil
}

// cold returns the cold start of function name, with or without tracing
// and the S3 tier linked (nil when not measured).
func (r *report) cold(name string, traced, objects bool) *coldResult {
	for i, c := range r.Cold {
		if c.Name == name && c.Traced == traced && c.Objects == objects {
			return &r.Cold[i]
		}
	}
	return nil
}

// setupRows are the rows of the set-up breakdown: GODEBUG=inittrace=1's sum,
// then lambdafn's steps (see pkg/jobs/lambdafn/setup.go).
var setupRows = []struct{ key, label string }{
	{"inits", "package initialisation (inittrace)"},
	{"inits+objects", "the same with S3 linked"},
	{"inits+tracing", "the same with S3 and tracing linked"},
	{"main", "main, before lambdafn.Serve (the registry)"},
	{"config", "configuration from the environment"},
	{"aws", "AWS configuration"},
	{"clients", "AWS clients"},
	{"tracing", "tracing"},
	{"metrics", "ColdStart metric"},
	{"handler", "the handler (services, registry checks, keys)"},
	{"secrets", "of which Secrets Manager reads"},
	{"setup", "lambdafn set-up in all"},
	{"cpu", "CPU time at the end of set-up (process)"},
}

func (r *report) sweepMD() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	s := r.Sweep
	w("## 5. Sweeper cost against table size\n\n")
	w("A table holding %d finished jobs and %d stuck ones (claimed by workers that died); one sweep:\n\n", s.Finished, s.Stuck)
	w("| jobs read from the index | jobs failed as interrupted | requests | read units | write units | time |\n|---|---|---|---|---|---|\n")
	var reqs []string
	for _, k := range sortedKeys(s.Requests) {
		reqs = append(reqs, fmt.Sprintf("%s %d", k, s.Requests[k]))
	}
	w("| **%d** | %d | %s | %.1f | %.1f | %s |\n\n", s.Due, s.Interrupted, strings.Join(reqs, ", "), s.ReadUnits, s.WriteUnits, ms(s.Took))
	w("The sweep reads the %d stuck jobs, never the %d finished ones: the sparse `sweep` index holds only\n", s.Stuck, s.Finished)
	w("unfinished jobs (%d shard queries, then one read and one write per stuck job).\n\n", dynamostore.Shards)
	return b.String()
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
