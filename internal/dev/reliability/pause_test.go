package reliability_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
)

// TestPausesOnTheLocalStack pauses, through the API and at once, three
// things on the whole local stack (2 worker instances of 10 handlers, and
// a worker per lane):
//   - the kind example.hold, while 200 of its jobs are queued and 5 run;
//   - the lane bulk, while 50 jobs of example.hold_bulk are queued;
//   - alice's jobs of example.hold_urgent (her own pause), while 50 of
//     hers and 50 of bob's are queued.
//
// The 5 running finish; bob's run; for 30 s no held job starts, none
// reaches the dead-letter queue, and each shows waiting_on paused. After
// the resumes every held job runs, once, at its first attempt.
func TestPausesOnTheLocalStack(t *testing.T) {
	ctx := context.Background()
	spans := t.TempDir()
	stack, _ := testenv.StartStack(t, ctx, localstack.Config{
		Root: root, Bootstraps: bootstraps, RIE: rie, APIAddr: "127.0.0.1:0", DynamoDBPort: 0, SQSPort: 0,
		Table: "pause", Queue: "pause", WorkerInstances: 2, BatchSize: 10,
		FunctionEnv: []string{"JOBS_WORKER_CONCURRENCY=10", examplekinds.SpansDirEnv + "=" + spans},
	})
	store := dynamostore.New(localaws.DynamoDBClient(stack.DynamoDBEndpoint), "pause", dynamostore.Config{})
	api := &apiCaller{base: stack.APIURL, http: &http.Client{Timeout: 10 * time.Second}}

	running := api.enqueueN(t, "reliability", examplekinds.Hold, 5, `{"ms":8000}`)
	waitStarted(t, store, running, 30*time.Second)

	// Queue the rest with the event source stopped, pause, and let the
	// workers' copies of the pause set age out (5 s) before it restarts.
	stack.Pause()
	held := api.enqueueN(t, "reliability", examplekinds.Hold, 200, `{"ms":50}`)
	lane := api.enqueueN(t, "reliability", examplekinds.HoldBulk, 50, `{"ms":50}`)
	alices := api.enqueueN(t, "alice", examplekinds.HoldUrgent, 50, `{"ms":50}`)
	bobs := api.enqueueN(t, "bob", examplekinds.HoldUrgent, 50, `{"ms":50}`)
	api.must(t, "operator", "POST", "/v1/admin/pauses", `{"kind":"example.hold"}`, http.StatusCreated)
	api.must(t, "operator", "POST", "/v1/admin/pauses", `{"lane":"bulk","for":600}`, http.StatusCreated)
	api.must(t, "alice", "POST", "/v1/pauses", `{"kind":"example.hold_urgent"}`, http.StatusCreated)
	paused := time.Now()
	time.Sleep(6 * time.Second)
	stack.Unpause()

	for id, rec := range settle(t, store, append(running, bobs...), time.Minute) {
		if rec.Status != jobs.StatusSucceeded || rec.Attempt != 1 {
			t.Fatalf("job %s (running at the pause, or bob's): %s at attempt %d, want succeeded at its first", id, rec.Status, rec.Attempt)
		}
	}
	all := append(append(append([]string{}, held...), lane...), alices...)
	time.Sleep(time.Until(paused.Add(36 * time.Second)))
	for _, id := range all {
		rec, err := store.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status != jobs.StatusQueued || rec.Attempt != 0 {
			t.Fatalf("held job %s (%s): %s at attempt %d 30 s into its pause, want queued, no attempt", id, rec.Kind, rec.Status, rec.Attempt)
		}
		// Handed back unclaimed (the message's hints reached the worker
		// through the emulator), never claimed and parked: not one write.
		if !rec.UpdatedAt.Equal(rec.CreatedAt) || rec.WaitingOn != "" {
			t.Fatalf("held job %s (%s) was written %v after its creation (waiting on %q): want handed back with no write",
				id, rec.Kind, rec.UpdatedAt.Sub(rec.CreatedAt), rec.WaitingOn)
		}
		caller := "reliability"
		if rec.Kind == examplekinds.HoldUrgent {
			caller = "alice"
		}
		var v jobs.View
		if err := json.Unmarshal(api.must(t, caller, "GET", "/v1/jobs/"+id, "", http.StatusOK), &v); err != nil || v.WaitingOn != "paused" {
			t.Fatalf("held job %s (%s) shows waiting_on %q, want paused", id, rec.Kind, v.WaitingOn)
		}
	}
	if d := dlqDepth(t, stack); d != 0 {
		t.Fatalf("%d messages dead-lettered while paused", d)
	}

	api.must(t, "operator", "POST", "/v1/admin/pauses/resume", `{"kind":"example.hold"}`, http.StatusNoContent)
	api.must(t, "operator", "POST", "/v1/admin/pauses/resume", `{"lane":"bulk"}`, http.StatusNoContent)
	api.must(t, "alice", "POST", "/v1/pauses/resume", `{"kind":"example.hold_urgent"}`, http.StatusNoContent)
	resumed := time.Now()
	recs := settle(t, store, all, 2*time.Minute)
	for _, id := range all {
		if rec := recs[id]; rec == nil || rec.Status != jobs.StatusSucceeded || rec.Attempt != 1 {
			t.Fatalf("held job %s after the resumes: %+v, want succeeded at its first attempt", id, rec)
		}
	}
	for _, s := range readSpans(t, spans, all) {
		if s.start.Before(resumed.Add(-time.Second)) {
			t.Fatalf("a held job started %v before the resumes", resumed.Sub(s.start))
		}
	}
	if d := dlqDepth(t, stack); d != 0 {
		t.Fatalf("%d messages dead-lettered", d)
	}
	t.Logf("%d jobs held 36 s by three pauses, all final %v after the resumes", len(all), time.Since(resumed).Round(100*time.Millisecond))
}

// apiCaller calls the local stack's API as a named caller.
type apiCaller struct {
	base string
	http *http.Client
}

// must makes a request and fails the test unless it answers want.
func (a *apiCaller) must(t *testing.T, caller, method, path, body string, want int) []byte {
	t.Helper()
	status, b, err := a.do(caller, method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	if status != want {
		t.Fatalf("%s %s as %s: %d %s, want %d", method, path, caller, status, b, want)
	}
	return b
}

// do makes a request as caller.
func (a *apiCaller) do(caller, method, path, body string) (int, []byte, error) {
	req, err := http.NewRequest(method, a.base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set(localstack.CallerHeader, caller)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// enqueueN enqueues n jobs of kind as caller, 8 at a time.
func (a *apiCaller) enqueueN(t *testing.T, caller, kind string, n int, payload string) []string {
	t.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range next {
				var v jobs.View
				status, b, err := a.do(caller, "POST", "/v1/jobs", fmt.Sprintf(`{"kind":%q,"payload":%s}`, kind, payload))
				if err == nil && status != http.StatusAccepted {
					err = fmt.Errorf("enqueue %s: %d %s", kind, status, b)
				}
				if err == nil {
					err = json.Unmarshal(b, &v)
				}
				if err != nil {
					t.Error(err)
				}
				ids[i] = v.ID
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return ids
}

// waitStarted waits until every job of ids has started (running, or
// ended).
func waitStarted(t *testing.T, store *dynamostore.Store, ids []string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		n := 0
		for _, id := range ids {
			if rec, err := store.Get(context.Background(), id); err == nil && rec.Status != jobs.StatusQueued {
				n++
			}
		}
		if n == len(ids) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs started after %v", n, len(ids), within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
