package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// Idempotent retries of jobs and batches (docs/reference/HTTP.md, Idempotency-Key).

// sealedService is a Service with its own sealer over a shared store, as
// one Lambda instance with its own key ring.
func sealedService(t *testing.T, store driver.Store, clock jobs.Clock, keys ...[]byte) *jobs.Service {
	t.Helper()
	sealer, err := jobs.NewAESSealer(keys...)
	if err != nil {
		t.Fatal(err)
	}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "echo", echo, nil)
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: &jobstest.MemQueue{}, Sealer: sealer, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// An identical retry matches after a key rotation (new key put
// first) and across a rolling deploy where old and new instances hold
// different rings, in both directions.
func TestIdempotentRetriesSurviveKeyRotation(t *testing.T) {
	t.Parallel()
	oldKey, newKey := newKey(t), newKey(t)
	store := jobstest.NewMemStore(nil)
	before := sealedService(t, store, nil, oldKey)        // not yet rotated
	after := sealedService(t, store, nil, newKey, oldKey) // rotated: seals with the new key
	ctx := context.Background()
	req := jobs.EnqueueRequest{Owner: "alice", Kind: "echo", Payload: json.RawMessage(`{"text":"a"}`), EnqueueOpts: jobs.EnqueueOpts{IdempotencyKey: "k1"}}
	first, _, err := enqueued(before.Enqueue(ctx, req))
	if err != nil {
		t.Fatal(err)
	}
	again, created, err := enqueued(after.Enqueue(ctx, req))
	if err != nil || created || again.ID != first.ID {
		t.Fatalf("retry after rotation: %v created=%v, want the first job", err, created)
	}
	req.IdempotencyKey = "k2"
	second, _, err := enqueued(after.Enqueue(ctx, req))
	if err != nil {
		t.Fatal(err)
	}
	again, created, err = enqueued(before.Enqueue(ctx, req))
	if err != nil || created || again.ID != second.ID {
		t.Fatalf("retry on an instance not yet rotated: %v created=%v, want the first job", err, created)
	}
	req.Payload = json.RawMessage(`{"text":"b"}`)
	if _, _, err := enqueued(after.Enqueue(ctx, req)); !errors.Is(err, jobs.ErrIdempotencyConflict) {
		t.Fatalf("another body after rotation: %v, want ErrIdempotencyConflict", err)
	}
}

// Run_at and delay are part of the request: the same key with
// another schedule is a conflict, the same delay retried later is not.
func TestScheduleIsPartOfTheIdempotentRequest(t *testing.T) {
	t.Parallel()
	clock := jobstest.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	svc := sealedService(t, jobstest.NewMemStore(clock), clock, newKey(t))
	ctx := context.Background()
	req := jobs.EnqueueRequest{Owner: "alice", Kind: "echo", Payload: json.RawMessage(`{"text":"a"}`), EnqueueOpts: jobs.EnqueueOpts{IdempotencyKey: "k", Delay: time.Minute}}
	first, _, err := enqueued(svc.Enqueue(ctx, req))
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(5 * time.Second) // the client's retry comes later
	again, created, err := enqueued(svc.Enqueue(ctx, req))
	if err != nil || created || again.ID != first.ID || !again.RunAt.Equal(*first.RunAt) {
		t.Fatalf("same delay retried later: %v created=%v, want the first job unchanged", err, created)
	}
	req.Delay = time.Hour
	if _, _, err := enqueued(svc.Enqueue(ctx, req)); !errors.Is(err, jobs.ErrIdempotencyConflict) {
		t.Fatalf("same key, other delay: %v, want ErrIdempotencyConflict", err)
	}
	req.Delay, req.RunAt = 0, clock.Now().Add(time.Minute)
	if _, _, err := enqueued(svc.Enqueue(ctx, req)); !errors.Is(err, jobs.ErrIdempotencyConflict) {
		t.Fatalf("same key, a run time instead of a delay: %v, want ErrIdempotencyConflict", err)
	}
}

func batchOf(n int, text string) []jobs.JobSpec {
	specs := make([]jobs.JobSpec, n)
	for i := range specs {
		specs[i] = jobs.JobSpec{Kind: "echo", Payload: json.RawMessage(fmt.Sprintf(`{"text":%q}`, text))}
	}
	return specs
}

// Two concurrent requests with one key and different bodies:
// one batch, the other request refused, no job of the loser stored, counts
// never above the total.
func TestConcurrentBatchRequestsWithOneKey(t *testing.T) {
	t.Parallel()
	for range 20 {
		store := jobstest.NewMemStore(nil)
		svc := sealedService(t, store, nil, newKey(t))
		var wg sync.WaitGroup
		errs := make([]error, 2)
		batches := make([]*jobs.Batch, 2)
		for i, n := range []int{3, 5} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				batches[i], _, errs[i] = enqueuedBatch(svc.EnqueueBatch(context.Background(), jobs.BatchRequest{Owner: "o", IdempotencyKey: "same", Jobs: batchOf(n, fmt.Sprint(n))}))
			}()
		}
		wg.Wait()
		won := -1
		for i, err := range errs {
			switch {
			case err == nil:
				won = i
			case !errors.Is(err, jobs.ErrIdempotencyConflict):
				t.Fatalf("request %d: %v", i, err)
			}
		}
		if won < 0 || errs[1-won] == nil {
			t.Fatalf("errors %v, want exactly one request refused", errs)
		}
		if got := store.Len(); got != batches[won].Total {
			t.Fatalf("%d jobs stored for a batch of %d: the refused request added jobs", got, batches[won].Total)
		}
	}
}

// An expired batch does not answer for its key any more: a new
// request with the key makes a new batch.
func TestExpiredBatchIsReplaced(t *testing.T) {
	t.Parallel()
	clock := jobstest.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	store := jobstest.NewMemStore(clock)
	svc := sealedService(t, store, clock, newKey(t))
	ctx := context.Background()
	b, _, err := enqueuedBatch(svc.EnqueueBatch(ctx, jobs.BatchRequest{Owner: "o", IdempotencyKey: "k", Jobs: batchOf(2, "a")}))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := svc.Cancel(ctx, "o", wire.BatchJobID(b.ID, i)); err != nil {
			t.Fatal(err)
		}
	}
	if ended, err := svc.GetBatch(ctx, "o", b.ID, "", 0); err != nil || ended.Status != jobs.StatusFailed {
		t.Fatalf("the batch after its jobs were cancelled: %+v %v", ended, err)
	}
	clock.Advance(jobs.DefaultRetention + time.Hour)
	nb, created, err := enqueuedBatch(svc.EnqueueBatch(ctx, jobs.BatchRequest{Owner: "o", IdempotencyKey: "k", Jobs: batchOf(3, "b")}))
	if err != nil || !created || nb.Total != 3 || nb.Counts.Pending != 3 || nb.Counts.Cancelled != 0 {
		t.Fatalf("batch over an expired one: %+v created=%v %v, want a fresh batch of 3", nb, created, err)
	}
}

// failingCreates fails every Create after the first n.
type failingCreates struct {
	*jobstest.MemStore
	mu sync.Mutex
	n  int
}

func (s *failingCreates) Create(ctx context.Context, rec *driver.Record) error {
	s.mu.Lock()
	s.n--
	fail := s.n < 0
	s.mu.Unlock()
	if fail {
		return errors.New("dynamodb unavailable")
	}
	return s.MemStore.Create(ctx, rec)
}

// A batch whose jobs were not all stored is finished by a retry
// with the same key, or, without one, aborted by the sweeper: its stored
// jobs that have not started are cancelled, the missing ones counted
// cancelled, and the batch ends with exact counts and a retention.
func TestBatchWhoseCreationFailed(t *testing.T) {
	t.Parallel()
	for _, retry := range []bool{true, false} {
		t.Run(fmt.Sprintf("retry=%v", retry), func(t *testing.T) {
			t.Parallel()
			clock := jobstest.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
			mem := jobstest.NewMemStore(clock)
			store := &failingCreates{MemStore: mem, n: 2}
			svc := sealedService(t, store, clock, newKey(t))
			ctx := context.Background()
			req := jobs.BatchRequest{Owner: "o", IdempotencyKey: "k", Jobs: batchOf(5, "x")}
			if _, _, err := enqueuedBatch(svc.EnqueueBatch(ctx, req)); !errors.Is(err, jobs.ErrUnavailable) {
				t.Fatalf("enqueue with a failing store: %v, want ErrUnavailable", err)
			}
			batchID := wire.DerivedID("batch-idempotency", "o", "k")
			if retry {
				store.mu.Lock()
				store.n = 1 << 20
				store.mu.Unlock()
				b, created, err := enqueuedBatch(svc.EnqueueBatch(ctx, req))
				stored, _ := mem.GetBatch(ctx, b.ID)
				if err != nil || created || stored == nil || stored.Creating || b.Total != 5 || mem.Len() != 5 {
					t.Fatalf("retry: %+v created=%v %v with %d jobs, want the batch finished with 5 jobs", b, created, err, mem.Len())
				}
				return
			}
			clock.Advance(jobs.DefaultDispatchGrace + time.Minute)
			sw, _ := testroles.Sweeper(jobs.Config{Registry: jobs.NewRegistry(), Store: mem, Queue: &jobstest.MemQueue{}, Clock: clock})
			if _, err := sw.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
			b, err := mem.GetBatch(ctx, batchID)
			if err == nil {
				b, err = mem.CountBatch(ctx, b)
			}
			if err != nil || b.Status != jobs.StatusFailed || b.Cancelled != 5 || b.Remaining != 0 || b.ExpiresAt.IsZero() {
				t.Fatalf("batch after the sweep: %+v %v, want failed with 5 cancelled and a retention", b, err)
			}
			for _, rec := range mem.All() {
				if rec.Status != jobs.StatusCancelled {
					t.Fatalf("job %s of the aborted batch is %s, want cancelled", rec.ID, rec.Status)
				}
			}
		})
	}
}
