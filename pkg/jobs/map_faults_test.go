package jobs_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// A run whose wave's creation failed half way, its job retried only after
// the dispatch grace: the sweeper leaves the half-made wave to the job
// (its job lives), whose next run finishes it; every call runs once and
// the job gets its answer.
func TestMapWaveHalfMadeIsFinishedByTheNextRun(t *testing.T) {
	ctx := context.Background()
	clock := jobstest.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	mem := jobstest.NewMemStore(clock)
	store := &failingCreates{MemStore: mem, n: 1 << 20}
	queue := &jobstest.MemQueue{}
	reg := jobs.NewRegistry()
	sealer, _ := jobs.NewAESSealer(newKey(t))
	var mu sync.Mutex // the handlers run on the worker's goroutines
	ran := map[string]int{}
	quote := jobs.MustRegister(reg, "quote", func(ctx context.Context, job *jobs.Job[quotePayload]) (jobs.JSON[quoteV], error) {
		mu.Lock()
		ran[job.Payload.Item]++
		mu.Unlock()
		return jobs.JSON[quoteV]{V: quoteV{Item: job.Payload.Item, Cents: len(job.Payload.Item)}}, nil
	}, nil)
	var mapErrs []string
	jobs.MustRegister(reg, "basket", func(ctx context.Context, job *jobs.Job[basketIn]) (jobs.NoResult, error) {
		calls := make([]jobs.Call, 5)
		for i := range calls {
			calls[i] = quote.Call(quotePayload{Item: strings.Repeat("x", i+1)}, nil)
		}
		_, err := jobs.Map[quoteV](ctx, job, "quotes", calls, 0)
		var ce *jobs.ChildError
		if err != nil && !errors.As(err, &ce) {
			mu.Lock()
			mapErrs = append(mapErrs, err.Error())
			mu.Unlock()
			return jobs.NoResult{}, err
		}
		return jobs.NoResult{}, nil
	}, &jobs.KindOpts{Retry: jobs.RetryPolicy{MaxAttempts: 5, RetryErrors: true, BaseDelay: 10 * time.Minute}})
	svc, _ := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: queue, Clock: clock, Sealer: sealer})
	w, err := testroles.Worker(jobs.Config{Registry: reg, Store: store, Queue: queue, Clock: clock, CancelCheck: -1, Sealer: sealer})
	if err != nil {
		t.Fatal(err)
	}
	sw, _ := testroles.Sweeper(jobs.Config{Registry: reg, Store: store, Queue: queue, Clock: clock, Sealer: sealer})
	res, err := svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "basket", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Job.ID
	store.mu.Lock()
	store.n = 2 // two children stored, three not
	store.mu.Unlock()
	_, _ = w.HandleSQS(ctx, sqsEvent(message.Encode(id)))
	store.mu.Lock()
	store.n = 1 << 20
	store.mu.Unlock()
	clock.Advance(jobs.DefaultDispatchGrace + time.Second)
	if _, err := sw.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	for range 6 {
		clock.Advance(time.Hour)
		for _, sent := range append([]string{id}, queue.Sent()...) {
			_, _ = w.HandleSQS(ctx, sqsEvent(message.Encode(sent)))
		}
		if _, err := sw.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	rec, _ := mem.Get(ctx, id)
	mu.Lock()
	defer mu.Unlock()
	if rec.Status != jobs.StatusSucceeded || len(mapErrs) != 1 || !strings.Contains(mapErrs[0], "unavailable") {
		t.Fatalf("the parent after its half-made wave: %s %s attempt %d; Map's errors: %q", rec.Status, rec.ErrorCode, rec.Attempt, mapErrs)
	}
	if len(ran) != 5 {
		t.Fatalf("children run: %v, want each of the 5 once", ran)
	}
	for item, n := range ran {
		if n != 1 {
			t.Fatalf("child %s ran %d times", item, n)
		}
	}
}

// The window changes between runs (a deploy) with the same number of
// waves: the job ends nondeterministic instead of skipping calls.
func TestMapWindowChangedBetweenRuns(t *testing.T) {
	ctx := context.Background()
	reg := jobs.NewRegistry()
	var mu sync.Mutex // the handlers run on the worker's goroutines
	ran := map[string]int{}
	quote := jobs.MustRegister(reg, "quote", func(ctx context.Context, job *jobs.Job[quotePayload]) (jobs.JSON[quoteV], error) {
		mu.Lock()
		ran[job.Payload.Item]++
		mu.Unlock()
		if job.Payload.Hold {
			if _, _, err := jobs.WaitForSignal[string](ctx, job, "go", time.Hour); err != nil {
				return jobs.JSON[quoteV]{}, err
			}
		}
		return jobs.JSON[quoteV]{V: quoteV{Item: job.Payload.Item, Cents: len(job.Payload.Item)}}, nil
	}, &jobs.KindOpts{Signals: map[string]any{"go": ""}})
	window := 6
	var got []int
	jobs.MustRegister(reg, "basket", func(ctx context.Context, job *jobs.Job[basketIn]) (jobs.NoResult, error) {
		calls := make([]jobs.Call, 10)
		for i := range calls {
			calls[i] = quote.Call(quotePayload{Item: strings.Repeat("x", i+1), Hold: i < 6}, nil)
		}
		mu.Lock()
		w := window
		mu.Unlock()
		qs, err := jobs.Map[quoteV](ctx, job, "quotes", calls, w)
		if err != nil {
			return jobs.NoResult{}, err
		}
		mu.Lock()
		defer mu.Unlock()
		for _, q := range qs {
			got = append(got, q.Cents)
		}
		return jobs.NoResult{}, nil
	}, nil)
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := r.Service.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "basket", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	window = 8 // a deploy: still two waves
	mu.Unlock()
	list, _ := r.Service.List(ctx, "o", jobs.ListRequest{Kind: "quote", Limit: 100})
	for _, c := range list.Jobs {
		_, _ = r.Service.Signal(ctx, "o", c.ID, "go", []byte(`""`))
	}
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	v, _ := r.Service.Get(ctx, "o", res.Job.ID)
	mu.Lock()
	defer mu.Unlock()
	if v.Status != jobs.StatusFailed || v.Error == nil || *v.Error != jobs.CodeNondeterministic || len(got) != 0 || len(ran) != 6 {
		t.Fatalf("the parent after its window changed: %s %v; results %v; children run %d, want failed nondeterministic, none, 6",
			v.Status, v.Error, got, len(ran))
	}
}
