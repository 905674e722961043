package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// countingStore counts the store's counts of queued jobs.
type countingStore struct {
	*jobstest.MemStore
	counts atomic.Int32
}

func (s *countingStore) CountQueued(ctx context.Context, q driver.QueueCount) (int, error) {
	s.counts.Add(1)
	return s.MemStore.CountQueued(ctx, q)
}

type capRig struct {
	t     *testing.T
	clock *jobstest.Clock
	store *countingStore
	svc   *jobs.Service
}

// newCapRig is a service with "capped" (at most 3 queued, 2 per owner),
// "per_owner" (2 per owner), and "plain" (no cap).
func newCapRig(t *testing.T) *capRig {
	t.Helper()
	clock := jobstest.NewClock(time.Unix(1_800_000_000, 0))
	r := &capRig{t: t, clock: clock, store: &countingStore{MemStore: jobstest.NewMemStore(clock)}}
	reg := jobs.NewRegistry()
	noop := func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }
	jobs.MustRegister(reg, "capped", noop, &jobs.KindOpts{MaxQueued: 3, MaxQueuedPerOwner: 2})
	jobs.MustRegister(reg, "per_owner", noop, &jobs.KindOpts{MaxQueuedPerOwner: 2})
	jobs.MustRegister(reg, "plain", noop, nil)
	var err error
	if r.svc, err = testroles.Service(jobs.Config{Registry: reg, Store: r.store, Queue: &jobstest.MemQueue{}, Clock: clock}); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *capRig) enqueue(owner, kind string, opts jobs.EnqueueOpts) (*jobs.EnqueueResult, error) {
	return r.svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: owner, Kind: kind, Payload: json.RawMessage(`{}`), EnqueueOpts: opts})
}

func (r *capRig) queued(kind string) int {
	r.t.Helper()
	n, err := r.store.MemStore.CountQueued(context.Background(), driver.QueueCount{Kind: kind})
	if err != nil {
		r.t.Fatal(err)
	}
	return n
}

// A kind's cap on its queued jobs holds: the enqueue that would pass it
// gets ErrQueueFull (a *QueueFullError saying which cap, and when to try
// again) and stores nothing; per owner, each owner has its own; once jobs
// leave the queue (claimed) and the count is read again, enqueues are
// accepted again.
func TestQueueCapsRefuseWithErrQueueFull(t *testing.T) {
	r := newCapRig(t)
	for _, owner := range []string{"a", "a"} {
		if _, err := r.enqueue(owner, "capped", jobs.EnqueueOpts{}); err != nil {
			t.Fatalf("enqueue for %s under the caps: %v", owner, err)
		}
	}
	_, err := r.enqueue("a", "capped", jobs.EnqueueOpts{})
	var qe *jobs.QueueFullError
	if !errors.Is(err, jobs.ErrQueueFull) || !errors.As(err, &qe) || qe.Kind != "capped" || qe.RetryAfter < time.Second {
		t.Fatalf("a's third job (a at its 2 per owner): %v, want a *QueueFullError matching ErrQueueFull", err)
	}
	if !qe.PerOwner || qe.Cap != 2 {
		t.Fatalf("refused for %+v, want the per-owner cap of 2", qe)
	}
	if _, err := r.enqueue("b", "capped", jobs.EnqueueOpts{}); err != nil {
		t.Fatalf("b's first job (the kind's third): %v", err)
	}
	_, err = r.enqueue("c", "capped", jobs.EnqueueOpts{})
	if !errors.As(err, &qe) || qe.PerOwner || qe.Cap != 3 {
		t.Fatalf("c's first job (the kind at its 3): %v, want the kind's cap", err)
	}
	if errors.Is(err, jobs.ErrInvalidRequest) || errors.Is(err, jobs.ErrUnavailable) {
		t.Fatalf("%v: a full queue is neither a bad request nor a dependency down", err)
	}
	if n := r.queued("capped"); n != 3 {
		t.Fatalf("%d queued after two refusals, want 3: a refused enqueue stored something", n)
	}
	// Per owner only: each owner's own 2.
	for _, owner := range []string{"a", "a", "b", "b"} {
		if _, err := r.enqueue(owner, "per_owner", jobs.EnqueueOpts{}); err != nil {
			t.Fatalf("per_owner for %s: %v", owner, err)
		}
	}
	if _, err := r.enqueue("b", "per_owner", jobs.EnqueueOpts{}); !errors.Is(err, jobs.ErrQueueFull) {
		t.Fatalf("b's third per_owner job: %v, want ErrQueueFull", err)
	}
	// A job claimed leaves the queue: after the window, room again.
	page, _ := r.store.List(context.Background(), driver.ListQuery{OwnerKey: wire.OwnerKey("a"), Status: jobs.StatusQueued, Kind: "capped", Limit: 10})
	if _, err := r.store.Claim(context.Background(), page.Records[0].ID, driver.Claim{Token: "t", At: r.clock.Now(), LeaseUntil: r.clock.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.enqueue("c", "capped", jobs.EnqueueOpts{}); !errors.Is(err, jobs.ErrQueueFull) {
		t.Fatalf("within the window: %v, want still full (the count is a second old at most)", err)
	}
	r.clock.Advance(time.Second)
	if _, err := r.enqueue("c", "capped", jobs.EnqueueOpts{}); err != nil {
		t.Fatalf("after a job left the queue and the window: %v", err)
	}
}

// An instance reads a count at most once a window, however many jobs it
// enqueues, and adds what it accepts to it; a kind without a cap never
// counts (nor marks its jobs for the kind's index).
func TestQueueCapsCountOncePerWindowAndNeverForUncappedKinds(t *testing.T) {
	r := newCapRig(t)
	for i := range 20 {
		res, err := r.enqueue(fmt.Sprint("o", i), "plain", jobs.EnqueueOpts{})
		if err != nil {
			t.Fatal(err)
		}
		if rec, _ := r.store.Get(context.Background(), res.Job.ID); rec.QueueCapped {
			t.Fatal("a job of a kind without a cap is marked QueueCapped: it would pay the kind index's writes")
		}
	}
	if n := r.store.counts.Load(); n != 0 {
		t.Fatalf("20 jobs of a kind without a cap made %d counts, want 0", n)
	}
	res, err := r.enqueue("a", "capped", jobs.EnqueueOpts{})
	if err != nil {
		t.Fatal(err)
	}
	if rec, _ := r.store.Get(context.Background(), res.Job.ID); !rec.QueueCapped {
		t.Fatal("a job of a kind with MaxQueued is not marked QueueCapped: the kind's count would miss it")
	}
	// Both caps counted once (the kind's and a's); the next enqueues in the
	// window use them, with what this instance accepted added.
	for _, owner := range []string{"b", "c"} {
		_, _ = r.enqueue(owner, "capped", jobs.EnqueueOpts{})
	}
	if n := r.store.counts.Load(); n != 4 {
		t.Fatalf("%d counts for 3 enqueues of 3 owners in one window, want 4 (the kind's once, each owner's once)", n)
	}
	if _, err := r.enqueue("d", "capped", jobs.EnqueueOpts{}); !errors.Is(err, jobs.ErrQueueFull) {
		t.Fatalf("a fourth job in the window: %v, want ErrQueueFull from this instance's own count", err)
	}
}

// At a cap, a retry with the same idempotency key of a job that was
// accepted answers with it, as a unique key's holder answers a
// duplicate; a unique enqueue refused at the cap leaves its key free.
func TestQueueCapsLetReplaysAndDuplicatesAnswer(t *testing.T) {
	r := newCapRig(t)
	first, err := r.enqueue("a", "capped", jobs.EnqueueOpts{IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	held, err := r.enqueue("a", "capped", jobs.EnqueueOpts{UniqueKey: "u"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := r.enqueue("a", "capped", jobs.EnqueueOpts{IdempotencyKey: "k1"})
	if err != nil || !again.Replayed || again.Job.ID != first.Job.ID {
		t.Fatalf("a replay at the cap: %+v %v, want the first job", again, err)
	}
	dup, err := r.enqueue("a", "capped", jobs.EnqueueOpts{UniqueKey: "u"})
	if err != nil || dup.Duplicate != "unique" || dup.Job.ID != held.Job.ID {
		t.Fatalf("a duplicate at the cap: %+v %v, want the key's holder", dup, err)
	}
	if _, err := r.enqueue("a", "capped", jobs.EnqueueOpts{UniqueKey: "v"}); !errors.Is(err, jobs.ErrQueueFull) {
		t.Fatalf("a new unique key at the cap: %v, want ErrQueueFull", err)
	}
	// Room again (a's first job is claimed, the window passed): the key
	// the refused enqueue took was freed, so it makes a job (a key left
	// to a job never stored would answer 503 for a minute).
	if _, err := r.store.Claim(context.Background(), first.Job.ID, driver.Claim{Token: "t", At: r.clock.Now(), LeaseUntil: r.clock.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(time.Second)
	res, err := r.enqueue("a", "capped", jobs.EnqueueOpts{UniqueKey: "v"})
	if err != nil || res.Duplicate != "" {
		t.Fatalf("the refused key, with room again: %+v %v, want a new job", res, err)
	}
}

// A batch counts its jobs of a capped kind against the cap together, and
// is refused whole when they would pass it: nothing stored.
func TestQueueCapsRefuseABatchWhole(t *testing.T) {
	r := newCapRig(t)
	spec := jobs.JobSpec{Kind: "capped", Payload: json.RawMessage(`{}`)}
	_, err := r.svc.EnqueueBatch(context.Background(), jobs.BatchRequest{Owner: "a", Jobs: []jobs.JobSpec{spec, spec, spec}})
	if !errors.Is(err, jobs.ErrQueueFull) {
		t.Fatalf("3 jobs for an owner capped at 2: %v, want ErrQueueFull", err)
	}
	if n := r.queued("capped"); n != 0 {
		t.Fatalf("%d jobs stored by a refused batch", n)
	}
	if _, err := r.svc.EnqueueBatch(context.Background(), jobs.BatchRequest{Owner: "a", Jobs: []jobs.JobSpec{spec, spec, {Kind: "plain", Payload: json.RawMessage(`{}`)}}}); err != nil {
		t.Fatalf("2 capped jobs and a plain one: %v", err)
	}
}

// Negative caps are refused at registration.
func TestQueueCapsMustNotBeNegative(t *testing.T) {
	noop := func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }
	for _, opts := range []jobs.KindOpts{{MaxQueued: -1}, {MaxQueuedPerOwner: -5}} {
		if _, err := jobs.Register(jobs.NewRegistry(), "k", noop, &opts); err == nil {
			t.Errorf("%+v registered, want refused", opts)
		}
	}
}

// A store that cannot count queued jobs cannot serve a capped kind: the
// service refuses to start rather than accept jobs past the cap.
func TestQueueCapsNeedAStoreThatCounts(t *testing.T) {
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "capped", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, &jobs.KindOpts{MaxQueued: 1})
	_, err := testroles.Service(jobs.Config{Registry: reg, Store: struct{ driver.Store }{jobstest.NewMemStore(nil)}, Queue: &jobstest.MemQueue{}})
	if err == nil {
		t.Fatal("a service over a store without driver.QueueCounter accepted a capped kind")
	}
}
