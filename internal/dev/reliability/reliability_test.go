package reliability_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/faultproxy"
	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

var (
	root       string
	bootstraps string
	rie        string
	results    = map[string]row{}
	resultsMu  sync.Mutex
)

// row is one line of docs/evidence/RELIABILITY.md.
type row struct {
	Scenario, Load, Faults string
	Lost, Stuck            int
	MaxSettle, Bound       time.Duration
	Notes                  string
}

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "reliability:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	var err error
	if root, err = localaws.FindRoot(); err != nil {
		return 0, err
	}
	rie = filepath.Join(root, "bin", "aws-lambda-rie")
	if _, err := os.Stat(rie); err != nil {
		return 0, fmt.Errorf("the Runtime Interface Emulator is required at %s (make test installs it): %w", rie, err)
	}
	dir, err := os.MkdirTemp("", "lambdajobs-reliability-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	bootstraps = dir
	if err := localstack.BuildBootstraps(root, dir); err != nil {
		return 0, err
	}
	code := m.Run()
	if path := os.Getenv("RELIABILITY_REPORT"); path != "" && code == 0 {
		if err := writeReport(path); err != nil {
			return 1, err
		}
	}
	return code, nil
}

// size returns the full-size value under `make reliability`, else the
// modest one `make test` uses.
func size(modest, full int) int {
	if os.Getenv("RELIABILITY_REPORT") != "" {
		return full
	}
	return modest
}

func record(r row) {
	resultsMu.Lock()
	results[r.Scenario] = r
	resultsMu.Unlock()
}

// client drives the HTTP API like a careful user: an idempotency key on
// every job, and retries on 5xx until a 202 (30 tries, or until the time
// until, when set).
type client struct {
	api   string
	http  *http.Client
	until time.Time
}

func (c *client) enqueue(kind, payload, key string) (string, int, error) {
	body := `{"kind":"` + kind + `","payload":` + payload + `}`
	ctx := context.Background()
	if !c.until.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, c.until)
		defer cancel()
	}
	for attempt := 1; ; attempt++ {
		req, _ := http.NewRequest("POST", c.api+"/v1/jobs", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set(localstack.CallerHeader, "reliability")
		req = req.WithContext(ctx)
		resp, err := c.http.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 202 {
				var v jobs.View
				if err := json.Unmarshal(b, &v); err != nil {
					return "", attempt, err
				}
				return v.ID, attempt, nil
			}
			if resp.StatusCode < 500 {
				return "", attempt, fmt.Errorf("enqueue %s: %d %s", kind, resp.StatusCode, b)
			}
		}
		if attempt == 30 || (!c.until.IsZero() && time.Now().After(c.until)) {
			return "", attempt, fmt.Errorf("enqueue %s: no 202 after %d attempts (last: %v)", kind, attempt, err)
		}
		time.Sleep(time.Duration(attempt) * 20 * time.Millisecond)
	}
}

// settle waits until every job is final or the bound passes, reading the
// table directly; it returns the jobs as they are then.
func settle(t *testing.T, store *dynamostore.Store, ids []string, bound time.Duration) map[string]*driver.Record {
	t.Helper()
	ctx := context.Background()
	out := map[string]*driver.Record{}
	deadline := time.Now().Add(bound)
	for {
		final := 0
		for _, id := range ids {
			rec, err := store.Get(ctx, id)
			if err != nil {
				continue // not found (lost) or a read error: look again
			}
			out[id] = rec
			if rec.Status.Final() {
				final++
			}
		}
		if final == len(ids) || time.Now().After(deadline) {
			return out
		}
		time.Sleep(250 * time.Millisecond)
	}
}

var allowedCodes = map[string]bool{
	"example_failed": true, "still_failing": true,
	jobs.CodeInterrupted: true, jobs.CodeTimedOut: true,
}

// TestUnderInjectedFaults runs jobs through the whole local stack while 10%
// of DynamoDB and SQS calls, from every function and the event source, are
// throttled, fail with 500, lose their response after the write, or are
// slow. Every accepted job must end succeeded or with a declared or
// reserved code within the bound: none lost, none stuck.
func TestUnderInjectedFaults(t *testing.T) {
	ctx := context.Background()
	ddbP := testenv.StartDynamoDB(t, ctx, localaws.Options{Root: root})
	sqsP := testenv.StartSQS(t, ctx, localaws.Options{Root: root})
	ddbFaults, err := faultproxy.StartHTTP(ddbP.Endpoint, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ddbFaults.Close)
	sqsFaults, err := faultproxy.StartHTTP(sqsP.Endpoint, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sqsFaults.Close)

	const workerTimeout, grace, sweepEvery = 5 * time.Second, 8 * time.Second, 2 * time.Second
	stack, _ := testenv.StartStack(t, ctx, localstack.Config{
		Root: root, Bootstraps: bootstraps, RIE: rie, APIAddr: "127.0.0.1:0",
		DynamoDBEndpoint: ddbFaults.URL(), SQSEndpoint: sqsFaults.URL(),
		Table: "faults", Queue: "faults", WorkerTimeout: workerTimeout, WorkerInstances: 2, BatchSize: 10,
		SweepEvery: sweepEvery, FunctionEnv: []string{"JOBS_DISPATCH_GRACE=" + grace.String()},
	})
	faults := faultproxy.Faults{Throttle: 0.03, ServerError: 0.03, LostResponse: 0.02, Slow: 0.02, SlowBy: 300 * time.Millisecond}
	ddbFaults.SetFaults(faults)
	sqsFaults.SetFaults(faults)

	n := size(150, 1000)
	c := &client{api: stack.APIURL, http: &http.Client{Timeout: 30 * time.Second}}
	kinds := []struct{ kind, payload string }{
		{"example.hash", `{"text":"x","rounds":1}`},
		{"example.hash", `{"text":"y","rounds":2}`},
		{"example.fail", `{"mode":"declared","secret":"s"}`},
		{"example.flaky", `{"fail_times":1}`},
	}
	ids := make([]string, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var enqueueErr error
	retries := 0
	start := time.Now()
	for p := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < n; i += 8 {
				k := kinds[i%len(kinds)]
				id, attempts, err := c.enqueue(k.kind, k.payload, "job-"+strconv.Itoa(i))
				mu.Lock()
				retries += attempts - 1
				if err != nil && enqueueErr == nil {
					enqueueErr = err
				}
				ids[i] = id
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if enqueueErr != nil {
		t.Fatal(enqueueErr)
	}
	enqueued := time.Since(start)
	// The promised bound for this configuration: a job's message can be
	// lost or delayed by a visibility timeout (2 x the worker timeout:
	// sqsqueue.SpecFor) at each of its attempts, or wait for the sweeper
	// (grace + interval).
	visibility := sqsqueue.SpecFor(workerTimeout, 0).VisibilityTimeout
	bound := 2*(visibility+grace+sweepEvery) + workerTimeout
	store := dynamostore.New(localaws.DynamoDBClient(ddbP.Endpoint), "faults", dynamostore.Config{})
	got := settle(t, store, ids, enqueued+bound)

	lost, stuck := 0, 0
	var maxSettle time.Duration
	statuses := map[string]int{}
	for _, id := range ids {
		rec, ok := got[id]
		switch {
		case !ok:
			lost++
			t.Errorf("job %s was accepted (202) and is gone", id)
			continue
		case !rec.Status.Final():
			stuck++
			t.Errorf("job %s still %s after the bound", id, rec.Status)
			continue
		case rec.Status == jobs.StatusFailed && !allowedCodes[rec.ErrorCode]:
			t.Errorf("job %s failed with %q, neither declared nor an expected reserved code", id, rec.ErrorCode)
		}
		statuses[string(rec.Status)+" "+rec.ErrorCode]++
		maxSettle = max(maxSettle, rec.FinishedAt.Sub(rec.CreatedAt))
	}
	ds, ss := ddbFaults.Stats(), sqsFaults.Stats()
	injected := ds.Throttled + ds.ServerErrors + ds.LostResponses + ds.Slowed + ss.Throttled + ss.ServerErrors + ss.LostResponses + ss.Slowed
	t.Logf("%d jobs, outcomes %v; enqueue retries %d; DynamoDB %+v; SQS %+v; max settle %v (bound %v)", n, statuses, retries, ds, ss, maxSettle, bound)
	if maxSettle > bound {
		t.Errorf("a job took %v to settle, over the %v bound", maxSettle, bound)
	}
	keys := make([]string, 0, len(statuses))
	for k := range statuses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var outcome []string
	for _, k := range keys {
		outcome = append(outcome, fmt.Sprintf("%s: %d", strings.TrimSpace(k), statuses[k]))
	}
	record(row{
		Scenario: "faults", Load: fmt.Sprintf("%d jobs over HTTP (hash, declared failure, retry once), 2 workers", n),
		Faults: fmt.Sprintf("10%% of %d DynamoDB and %d SQS calls: 3%% throttled, 3%% 500, 2%% response lost after the write, 2%% +300 ms (%d injected); %d client retries after 503",
			ds.Requests, ss.Requests, injected, retries),
		Lost: lost, Stuck: stuck, MaxSettle: maxSettle, Bound: bound, Notes: strings.Join(outcome, ", "),
	})
}

// TestWorkerKilledMidJob kills the worker's execution environment (the
// emulator and the bootstrap, SIGKILL) while it runs the first job of a
// batch, with the sweeper off: through redelivery alone (message first:
// no job has a sweep entry), that job must fail as interrupted within the
// dead-worker bound, and the rest of the batch must come back and
// succeed.
func TestWorkerKilledMidJob(t *testing.T) {
	ctx := context.Background()
	const workerTimeout, grace, batchWindow = 6 * time.Second, 7 * time.Second, 2 * time.Second
	stack, _ := testenv.StartStack(t, ctx, localstack.Config{
		Root: root, Bootstraps: bootstraps, RIE: rie, APIAddr: "127.0.0.1:0", DynamoDBPort: 0, SQSPort: 0,
		Table: "kill", Queue: "kill", WorkerTimeout: workerTimeout, WorkerInstances: 1, BatchSize: 5, BatchWindow: batchWindow,
		SweepEvery: 0, // off: the messages alone bring the jobs back
		// One record at a time, so the rest of the batch waits behind the victim.
		// A short reserve leaves the victim's handler 5 s, longer than it needs.
		FunctionEnv: []string{"JOBS_DISPATCH_GRACE=" + grace.String(), "JOBS_WORKER_CONCURRENCY=1",
			"JOBS_HANDLER_RESERVE=1s", "JOBS_FINAL_WRITE_TIMEOUT=500ms"},
	})
	c := &client{api: stack.APIURL, http: &http.Client{Timeout: 10 * time.Second}}
	victim, _, err := c.enqueue("example.sleep", `{"ms":4500,"steps":3}`, "victim")
	if err != nil {
		t.Fatal(err)
	}
	var others []string
	for i := range 4 {
		id, _, err := c.enqueue("example.hash", `{"text":"after","rounds":1}`, "other-"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, id)
	}
	store := dynamostore.New(localaws.DynamoDBClient(stack.DynamoDBEndpoint), "kill", dynamostore.Config{})
	deadline := time.Now().Add(20 * time.Second)
	for {
		rec, err := store.Get(ctx, victim)
		if err == nil && rec.Status == jobs.StatusRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the victim never ran")
		}
		time.Sleep(50 * time.Millisecond)
	}
	killedAt := time.Now()
	stack.Workers()[0].Kill()

	// The dead-worker bound (docs/evidence/RELIABILITY.md): the batch's messages
	// come back a visibility timeout after their receipt, before the
	// kill; the redelivery's invocation then settles them (the victim
	// at its claim; the rest run, one at a time).
	visibility := sqsqueue.SpecFor(workerTimeout, batchWindow).VisibilityTimeout // the batching window included
	bound := visibility + workerTimeout
	othersBound := visibility + 2*workerTimeout
	got := settle(t, store, append([]string{victim}, others...), othersBound+5*time.Second)
	v := got[victim]
	if v == nil || v.Status != jobs.StatusFailed || v.ErrorCode != jobs.CodeInterrupted {
		t.Fatalf("victim %+v, want failed interrupted", v)
	}
	victimSettle := v.FinishedAt.Sub(killedAt)
	if victimSettle > bound {
		t.Errorf("the victim was settled %v after the kill, over the %v bound", victimSettle, bound)
	}
	var maxOther time.Duration
	lost, stuck := 0, 0
	for _, id := range others {
		rec := got[id]
		switch {
		case rec == nil:
			lost++
		case rec.Status != jobs.StatusSucceeded:
			stuck++
			t.Errorf("batch-mate %s ended %s %s", id, rec.Status, rec.ErrorCode)
		default:
			maxOther = max(maxOther, rec.FinishedAt.Sub(killedAt))
		}
	}
	if lost+stuck > 0 {
		t.Fatalf("%d lost, %d not succeeded", lost, stuck)
	}
	t.Logf("victim interrupted %v after the kill (bound %v); batch-mates succeeded %v after it (bound %v); worker restarts %d",
		victimSettle, bound, maxOther, othersBound, stack.Workers()[0].Restarts)
	record(row{
		Scenario: "sigkill", Load: "a batch of 5 (a 4.5 s job first, then 4 quick ones), 1 worker, one record at a time",
		Faults: "SIGKILL to the worker's emulator and bootstrap while the first job runs; the sweeper off",
		Lost:   lost, Stuck: stuck, MaxSettle: max(victimSettle, maxOther), Bound: othersBound,
		Notes: fmt.Sprintf("with the sweeper off, the killed job failed `interrupted` %v after the kill (bound %v: the visibility timeout + the worker timeout), through the redelivery of its message alone; its 4 batch-mates, never claimed, were redelivered with it and succeeded %v after it",
			victimSettle.Round(100*time.Millisecond), bound, maxOther.Round(100*time.Millisecond)),
	})
}

func writeReport(path string) error {
	var b strings.Builder
	b.WriteString(reportHeader)
	b.WriteString("| scenario | load | faults injected | jobs lost | jobs stuck | max time to settle | bound promised | what happened |\n|---|---|---|---|---|---|---|---|\n")
	for _, key := range []string{"faults", "batch", "sigkill", "long", "scale"} {
		r, ok := results[key]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | **%d** | **%d** | %v | %v | %s |\n", r.Scenario, r.Load, r.Faults, r.Lost, r.Stuck,
			r.MaxSettle.Round(100*time.Millisecond), r.Bound, r.Notes)
	}
	b.WriteString(reportFooter)
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
