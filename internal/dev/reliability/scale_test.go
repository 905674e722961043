package reliability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambdajobs/lambdajobs/internal/dev/iamcalls"
	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/internal/dev/partitions"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// HeatReportFile is the key-heat report TestScaleOneOwner writes beside
// RELIABILITY_REPORT (docs/evidence/KEY_HEAT.md under make reliability), linked from
// docs/evidence/CAPACITY.md.
const HeatReportFile = "KEY_HEAT.md"

// scaleOwner is the one owner of the scale scenario: the HTTP caller
// "reliability" and the team's function enqueue as the same principal.
const scaleOwner = "arn:aws:iam::" + localstack.LocalAccount + ":user/reliability"

// TestScaleOneOwner proves guarantee 18 (no hot key) on the whole local
// stack, with DynamoDB Local behind the partition model (package
// partitions), which gives every partition key value of the table and of
// its indexes its share of a partition and cancels overlapping
// transactions, as AWS does.
//
// The run is a scaled copy of one owner running 10,000 jobs a second. It
// first measures the rate this machine processes jobs at, unthrottled (a
// full queue drained by the workers): that rate R stands for 10,000 jobs a
// second, so k = R / 10,000 and every key gets k x 1,000 write and k x
// 3,000 read units a second. Then, with the budgets on, one owner runs, at
// the same time:
//
//   - one batch of N jobs (10,000 under make reliability) with a completion
//     job, enqueued through the Go API (jobs.Service.EnqueueBatch over a
//     dynamostore.Store on the model's endpoint) as a team's function would;
//     its jobs are created at 3/4 R, as a function creating 10,000 jobs a
//     second would at full scale (unpaced, a local enqueue runs many times
//     faster than the workers and its burst would stand for far more than
//     10,000 jobs a second);
//   - a stream of plain jobs over HTTP at 1/4 R while the batch is created;
//
// so jobs are created at R, then the workers run the batch at R.
//
// Every job must end succeeded (example.hash), each handler must run once
// (one claim per job, one "job succeeded" (or failed, or cancelled) per job), the batch must end
// once with exact counts and its completion job run once, and no key may
// go over its budget: a throttled request means a key that at 10,000 jobs
// a second would need more than its partition gives. The key-heat report
// is logged, and written to docs/evidence/KEY_HEAT.md under make reliability.
//
// On the store of 2026-12-01 this fails, as it should: the owner index's
// partition key is the owner alone (one hot index partition, 1 write unit
// per job created: the batch's creation never finishes in the bound), and
// each batch job's final write is a transaction with the batch's counter
// item (one hot item, 2 write units and a strongly consistent read per
// job; transactions on it conflict and final writes fail). The sweep
// index's 8 shards share 2 write units per job (about 2,500 units/s each at
// 10,000 jobs/s): over their share too once the others are fixed.
func TestScaleOneOwner(t *testing.T) {
	ctx := context.Background()
	const table = "scale"
	ddbP := testenv.StartDynamoDB(t, ctx, localaws.Options{Root: root})
	model, err := partitions.Start(partitions.Config{Target: ddbP.Endpoint, Table: dynamostore.CreateTableInput(table), Classify: keyClass})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(model.Close)
	const workerTimeout, grace, sweepEvery = 10 * time.Second, 30 * time.Second, 2 * time.Second
	runs := &runLog{finished: map[string]int{}, problems: map[string]int{}}
	stack, _ := testenv.StartStack(t, ctx, localstack.Config{
		Root: root, Bootstraps: bootstraps, RIE: rie, APIAddr: "127.0.0.1:0",
		DynamoDBEndpoint: model.URL(), Table: table, Queue: "scale",
		WorkerTimeout: workerTimeout, WorkerInstances: 3, BatchSize: 10, SweepEvery: sweepEvery,
		Output: runs, FunctionEnv: []string{"JOBS_DISPATCH_GRACE=" + grace.String()},
	})
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, examplekinds.Hash, examplekinds.HashText, nil)
	queue := sqsqueue.New(stack.SQSAs(iamcalls.Enqueuer), stack.Queues.Queue)
	team := func(api dynamostore.API, grace time.Duration) *jobs.Service {
		svc, err := testroles.Service(jobs.Config{Registry: reg, Store: dynamostore.New(api, table, dynamostore.Config{}), Queue: queue, DispatchGrace: grace,
			MessageFirst: true}) // as the deployment's functions
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	teamDDB := stack.DynamoDBAs(iamcalls.Enqueuer)
	hash := func(text string) json.RawMessage { return json.RawMessage(`{"text":"` + text + `","rounds":1}`) }

	// 1. The rate this machine runs jobs at: fill the queue, then let the
	// workers drain it, the model counting but limiting nothing.
	calibration := size(100, 600)
	stack.Pause()
	calib := team(teamDDB, grace)
	var calibIDs []string
	for i := range calibration {
		res, err := calib.Enqueue(ctx, jobs.EnqueueRequest{Owner: scaleOwner, Kind: examplekinds.Hash, Payload: hash("c" + strconv.Itoa(i))})
		if err != nil {
			t.Fatalf("calibration enqueue: %v", err)
		}
		calibIDs = append(calibIDs, res.Job.ID)
	}
	drained := time.Now()
	stack.Unpause()
	if !runs.waitFinished(calibIDs, 2*time.Minute) {
		t.Fatalf("calibration: %d of %d jobs finished in 2 minutes", runs.count(calibIDs), calibration)
	}
	rate := float64(calibration) / time.Since(drained).Seconds()
	k := rate / partitions.FullScaleJobsPerSecond
	limits := partitions.Scaled(k)
	model.SetLimits(limits)
	model.SetScale(k)
	model.Reset()
	t.Logf("calibration: %d jobs drained at %.0f jobs/s: k = %.4f, each key gets %.1f write and %.1f read units/s", calibration, rate, k, limits.WriteUnitsPerSecond, limits.ReadUnitsPerSecond)

	// 2. One owner: the batch through the Go API, the stream over HTTP.
	n := size(150, 10000)
	batchRate, streamRate := 0.75*rate, 0.25*rate
	creation := time.Duration(float64(n) / batchRate * float64(time.Second))
	m := int(streamRate * creation.Seconds())
	expected := creation + time.Duration(float64(n)/rate*float64(time.Second))
	bound := 2*expected + time.Duration(size(15, 120))*time.Second
	start := time.Now()
	deadline := start.Add(bound)
	specs := make([]jobs.JobSpec, n)
	for i := range specs {
		specs[i] = jobs.JobSpec{Kind: examplekinds.Hash, Payload: hash("b" + strconv.Itoa(i))}
	}
	// The batch's id follows from its owner and idempotency key: its jobs
	// can be looked for even if EnqueueBatch never returned.
	const batchKey = "scale"
	batchID := wire.DerivedID("batch-idempotency", scaleOwner, batchKey)
	var batch *jobs.Batch
	var batchErrs []string
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		// The batch's grace (after which the sweeper aborts a batch still
		// being created) is the default grace scaled like the rates: work
		// that takes a second at 10,000 jobs/s takes 1/k seconds here, and
		// a creation slowed by a hot key must meet that key, not a grace
		// that would not have passed yet in AWS.
		svc := team(&pacedAPI{API: teamDDB, every: time.Duration(float64(time.Second) / batchRate)}, time.Duration(float64(jobs.DefaultDispatchGrace)/k))
		bctx, cancel := context.WithDeadline(ctx, deadline)
		defer cancel()
		// A careful team retries with the same idempotency key.
		for bctx.Err() == nil {
			res, err := svc.EnqueueBatch(bctx, jobs.BatchRequest{Owner: scaleOwner, Jobs: specs, IdempotencyKey: batchKey,
				Completion: &jobs.JobSpec{Kind: examplekinds.Hash, Payload: hash("completion")}})
			if err == nil {
				batch = &res.Batch
				return
			}
			batchErrs = append(batchErrs, errorKind(err))
		}
	}()
	c := &client{api: stack.APIURL, http: &http.Client{Timeout: 30 * time.Second}, until: deadline}
	streamIDs := make([]string, m)
	var refused atomic.Int64
	go func() {
		defer wg.Done()
		every := time.Duration(float64(time.Second) / streamRate)
		var sw sync.WaitGroup
		for i := range m {
			time.Sleep(time.Until(start.Add(time.Duration(i) * every)))
			sw.Add(1)
			go func() {
				defer sw.Done()
				id, _, err := c.enqueue(examplekinds.Hash, string(hash("s"+strconv.Itoa(i))), "stream-"+strconv.Itoa(i))
				if err != nil {
					refused.Add(1)
					return
				}
				streamIDs[i] = id
			}()
		}
		sw.Wait()
	}()
	wg.Wait()
	created := time.Since(start)
	t.Logf("created the batch of %d (paced at %.0f/s) and %d jobs over HTTP (at %.0f/s) in %v (expected %v); batch enqueue errors: %v",
		n, batchRate, m, streamRate, created.Round(time.Second), creation.Round(time.Second), summarize(batchErrs))

	// 3. Wait for every job, the batch's end and its completion job.
	store := dynamostore.New(localaws.DynamoDBClient(ddbP.Endpoint), table, dynamostore.Config{})
	if batch != nil && batch.ID != batchID {
		t.Fatalf("batch id %s, want %s (derived from the owner and the idempotency key)", batch.ID, batchID)
	}
	batchIDs := make([]string, n)
	for i := range n {
		batchIDs[i] = wire.BatchJobID(batchID, i)
	}
	completionID := wire.DerivedID("batch-completion", batchID)
	ids := slices.Clone(batchIDs)
	for _, id := range streamIDs {
		if id != "" {
			ids = append(ids, id)
		}
	}
	waitFor := append(slices.Clone(ids), completionID)
	runs.waitFinished(waitFor, time.Until(deadline))
	settled := time.Since(start)
	report := model.Report(15)

	// 4. The outcome.
	recs := readAll(ctx, store, waitFor)
	report.Jobs = len(recs) // the jobs created
	notSucceeded, lost, rerun, finishedTwice := map[string]int{}, 0, 0, 0
	for _, id := range waitFor {
		rec, ok := recs[id]
		switch {
		case !ok && id == completionID:
			continue // checked with the batch
		case !ok:
			lost++
			continue
		case rec.Status != jobs.StatusSucceeded:
			notSucceeded[strings.TrimSpace(string(rec.Status)+" "+rec.ErrorCode)]++
		}
		if rec.Attempt > 1 {
			rerun++
		}
		if runs.times(id) > 1 {
			finishedTwice++
		}
	}
	if batch == nil {
		t.Errorf("EnqueueBatch never succeeded within the bound: %d tries failed (%v)", len(batchErrs), summarize(batchErrs))
	}
	b, err := store.GetBatch(ctx, batchID)
	if err == nil {
		b, err = store.CountBatch(ctx, b) // the counts are in the batch's shards
	}
	if err != nil || b.Status != jobs.StatusSucceeded || b.Total != n || b.Succeeded != n || b.Failed+b.Cancelled+b.Remaining != 0 || b.Creating {
		var got string
		if b != nil {
			got = fmt.Sprintf("%s (creating %v) with %d succeeded, %d failed, %d cancelled, %d remaining", b.Status, b.Creating, b.Succeeded, b.Failed, b.Cancelled, b.Remaining)
		}
		t.Errorf("batch %s %v, want succeeded with exactly %d succeeded", got, err, n)
	}
	if ended := runs.ended(); ended != 1 {
		t.Errorf("the batch's end was recorded %d times, want once", ended)
	}
	if c, ok := recs[completionID]; !ok || c.Status != jobs.StatusSucceeded || c.Attempt != 1 || c.BatchCounts == nil || c.BatchCounts.Succeeded != n {
		t.Errorf("completion job %+v, want it succeeded once with %d succeeded", c, n)
	}
	if r := refused.Load(); r > 0 {
		t.Errorf("%d of %d jobs over HTTP were never accepted (no 202 after the client's retries)", r, m)
	}
	if lost > 0 || len(notSucceeded) > 0 {
		t.Errorf("of %d jobs: %d never stored, not succeeded %v (within %v)", len(ids), lost, notSucceeded, bound)
	}
	if rerun > 0 || finishedTwice > 0 {
		t.Errorf("%d jobs ran their handler more than once (claimed again), %d finished twice", rerun, finishedTwice)
	}
	if report.ErrorCount > 0 {
		t.Errorf("the partition model could not charge %d requests exactly: %v", report.ErrorCount, report.Errors)
	}
	if report.Throttled > 0 {
		var over []string
		for _, k := range report.ThrottledKeys[:min(8, len(report.ThrottledKeys))] {
			over = append(over, fmt.Sprintf("%s (%s): %d writes and %d reads refused, peaks %.1f w/s %.1f r/s",
				k.Name(), k.Class, k.Write.Refused, k.Read.Refused, k.Write.Peak, k.Read.Peak))
		}
		t.Errorf("%d requests were throttled on %d key(s) over their budget (%.1f write, %.1f read units/s); the hottest:\n  %s",
			report.Throttled, len(report.ThrottledKeys), limits.WriteUnitsPerSecond, limits.ReadUnitsPerSecond, strings.Join(over, "\n  "))
	}
	t.Logf("%d jobs settled in %v (expected %v, bound %v); warnings and errors in the logs: %v", len(ids), settled.Round(time.Second),
		expected.Round(time.Second), bound.Round(time.Second), runs.problemSummary())
	ran := ranAt(recs, batchIDs)
	t.Logf("the workers ran the batch at %.0f jobs/s (calibrated: %.0f)", ran, rate)
	heat := heatReport(report, rate, ran, n, m, created, settled, runs.count(waitFor))
	stuck := 0
	for _, c := range notSucceeded {
		stuck += c
	}
	record(row{
		Scenario: "scale", Load: fmt.Sprintf("one owner: a batch of %d jobs through the Go API and %d jobs over HTTP at once, at the rate this machine runs (%.0f jobs/s) standing for 10,000 jobs/s, 3 workers", n, m, rate),
		Faults: fmt.Sprintf("DynamoDB's partition limits, scaled (%.1f write and %.1f read units/s per key), and transaction conflicts (partition model)", limits.WriteUnitsPerSecond, limits.ReadUnitsPerSecond),
		Lost:   lost, Stuck: stuck, MaxSettle: settled, Bound: bound.Round(time.Second),
		Notes: fmt.Sprintf("%d requests throttled, %d transaction conflicts; every job ran once; key heat in [%s](%s)", report.Throttled, report.Conflicts, HeatReportFile, HeatReportFile),
	})
	t.Logf("key heat:\n%s", heat)
	if path := os.Getenv("RELIABILITY_REPORT"); path != "" {
		out := filepath.Join(filepath.Dir(path), HeatReportFile)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Errorf("write %s: %v", out, err)
		}
		if err := os.WriteFile(out, []byte(heat), 0o644); err != nil {
			t.Errorf("write %s: %v", out, err)
		}
	}
}

// keyClass names the classes of keys of the store's table.
func keyClass(index, key string) string {
	switch {
	case index == "" && strings.HasPrefix(key, "batch#"):
		return "batch item"
	case index == "" && strings.HasPrefix(key, "schedule"):
		return "schedule item"
	case index == "":
		return "job item"
	case index == dynamostore.OwnerIndex:
		return "owner index partition"
	case index == dynamostore.AttentionIndex:
		return "attention index partition"
	case index == dynamostore.SweepIndex:
		return "sweep index shard"
	}
	return index + " index partition"
}

// ranAt is the rate the batch's succeeded jobs ran at: from the first
// start to the last finish.
func ranAt(recs map[string]*driver.Record, ids []string) float64 {
	var first, last time.Time
	done := 0
	for _, id := range ids {
		r, ok := recs[id]
		if !ok || r.Status != jobs.StatusSucceeded {
			continue
		}
		done++
		if first.IsZero() || r.StartedAt.Before(first) {
			first = r.StartedAt
		}
		if r.FinishedAt.After(last) {
			last = r.FinishedAt
		}
	}
	if done < 2 || !last.After(first) {
		return 0
	}
	return float64(done) / last.Sub(first).Seconds()
}

func heatReport(r partitions.Report, rate, ran float64, n, m int, created, settled time.Duration, finished int) string {
	var b strings.Builder
	b.WriteString("# Key heat at 10,000 jobs per second from one owner\n\n")
	b.WriteString("Written by `make reliability` (`TestScaleOneOwner` in `internal/dev/reliability`): the whole local stack with DynamoDB Local behind the partition model (`internal/dev/partitions`), which gives each partition key value of the table and of its indexes its share of a partition, scaled, and cancels overlapping transactions.\n\n")
	fmt.Fprintf(&b, "This machine ran %.0f jobs/s unthrottled: that rate stands for 10,000 jobs/s (k = %s). One owner then enqueued a batch of %d jobs through the Go API (created at 3/4 of that rate) and %d jobs over HTTP (1/4) at the same time, which took %v; the workers ran the batch at %.0f jobs/s. Of the %d jobs stored (the completion job included), %d had finished after %v.\n\n",
		rate, strconv.FormatFloat(r.Scale, 'g', 4, 64), n, m, created.Round(time.Second), ran, r.Jobs, finished, settled.Round(time.Second))
	b.WriteString(r.Markdown())
	b.WriteString(heatNotRun)
	return b.String()
}

// heatNotRun is what the scenario's jobs (plain, sent first, and a batch's)
// do not do: the moves of a sweep-index entry that parks, retries and
// heartbeats make, per job, from the write units docs/evidence/CAPACITY.md
// measures, and the heat they give each of the 32 sweep shards, which
// every owner shares, at 10,000 such jobs a second.
const heatNotRun = `
## Moves of a sweep entry the scenario does not make

The sweep index's 32 shards are shared by every owner (an entry's shard is
its job id's), so what heats them is each job's moves of its entry. A job
sent first (the scenario's HTTP jobs) makes none; a batch's job makes two
(in at its final write while its count is pending, out when it is done:
the scenario's sweep shard row). The others, from the write units
[CAPACITY.md](CAPACITY.md) measures:

| a job that | moves of its sweep entry | each shard at 10,000 such jobs/s |
|---|---|---|
| retries, sent first | 0 (its new message is its net) | 0 |
| retries, stored with an entry | 2 per retry (the key moved: out, in) | 625 write units/s |
| parks on a limit (sent first) | 2 (in at the park, out at its final write) | 625 write units/s |
| heartbeats (sent first) | 2 (in at the first heartbeat, out at its final write or continuation), and 2 each time the sweeper finds its lease renewed (about once per lease, at most once per sweep) | 625 write units/s, and 625 more for each lease its run lasts |

A partition takes 1,000 write units a second: each of these stays under it
alone, and a kind that parks and heartbeats too comes near it at 10,000
jobs a second. Before message first every job entered and left the index
(2 moves) and every retry, park and first heartbeat moved it (2 more).
`

// pacedAPI is a team's DynamoDB client that creates jobs at a steady
// rate: each PutItem waits for its turn.
type pacedAPI struct {
	dynamostore.API
	every time.Duration
	mu    sync.Mutex
	next  time.Time
}

func (p *pacedAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	p.mu.Lock()
	now := time.Now()
	if p.next.Before(now) {
		p.next = now
	}
	at := p.next
	p.next = p.next.Add(p.every)
	p.mu.Unlock()
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return p.API.PutItem(ctx, in, opts...)
}

// readAll reads jobs straight from DynamoDB Local (not through the
// model: the test's reads are no load of the system's).
func readAll(ctx context.Context, store *dynamostore.Store, ids []string) map[string]*driver.Record {
	out := map[string]*driver.Record{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan string)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range work {
				if rec, err := store.Get(ctx, id); err == nil {
					mu.Lock()
					out[id] = rec
					mu.Unlock()
				}
			}
		}()
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	return out
}

// errorKind names an error without its text (which may quote anything).
func errorKind(err error) string {
	for _, e := range []error{jobs.ErrUnavailable, context.DeadlineExceeded} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	return fmt.Sprintf("%T", err)
}

func summarize(errs []string) map[string]int {
	out := map[string]int{}
	for _, e := range errs {
		out[e]++
	}
	return out
}

// runLog reads the functions' output as it comes: how many times each job
// finished, how often the batch ended, and the warnings and errors by
// message. It keeps no log line.
type runLog struct {
	mu         sync.Mutex
	buf        []byte
	finished   map[string]int
	batchEnded int
	problems   map[string]int
}

func (l *runLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.read(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

func (l *runLog) read(line []byte) {
	i := bytes.IndexByte(line, '{')
	if i < 0 || !bytes.Contains(line, []byte(`"message"`)) {
		return
	}
	var rec struct {
		Message string `json:"message"`
		Level   string `json:"level"`
		JobID   string `json:"job_id"`
	}
	if json.Unmarshal(line[i:], &rec) != nil {
		return
	}
	switch {
	case rec.Message == "job succeeded" || rec.Message == "job failed" || rec.Message == "job cancelled":
		l.finished[rec.JobID]++
	case rec.Message == "batch ended":
		l.batchEnded++
	}
	if rec.Level == "WARN" || rec.Level == "ERROR" {
		l.problems[rec.Level+" "+rec.Message]++
	}
}

func (l *runLog) times(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.finished[id]
}

func (l *runLog) ended() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.batchEnded
}

func (l *runLog) count(ids []string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, id := range ids {
		if l.finished[id] > 0 {
			n++
		}
	}
	return n
}

// waitFinished waits until every job of ids finished once, or for d.
func (l *runLog) waitFinished(ids []string, d time.Duration) bool {
	until := time.Now().Add(d)
	for {
		if l.count(ids) == len(ids) {
			return true
		}
		if time.Now().After(until) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (l *runLog) problemSummary() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	keys := make([]string, 0, len(l.problems))
	for k := range l.problems {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return l.problems[keys[i]] > l.problems[keys[j]] })
	var out []string
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%q x%d", k, l.problems[k]))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}
