package jobs_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

func TestSweeperInterruptsOnlyAfterLease(t *testing.T) {
	t.Parallel()
	clock := jobstest.NewClock(time.Now())
	store := jobstest.NewMemStore(clock)
	queue := &jobstest.MemQueue{}
	sweeper, _ := testroles.Sweeper(jobs.Config{Registry: jobs.NewRegistry(), Store: store, Queue: queue, Clock: clock})
	ctx := context.Background()
	rec := jobstest.NewRecord(wire.NewID(), clock.Now())
	rec.SweepAt = clock.Now().Add(time.Minute)
	if err := store.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	// Claimed by a worker whose lease lasts 5 minutes, past the sweep time.
	if _, err := store.Claim(ctx, rec.ID, driver.Claim{Token: "w1", At: clock.Now(), LeaseUntil: clock.Now().Add(5 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(2 * time.Minute)
	rep, _ := sweeper.Sweep(ctx)
	if rep.Deferred != 1 || rep.Interrupted != 0 {
		t.Fatalf("sweep within the lease: %+v, want it deferred", rep)
	}
	if got, _ := store.Get(ctx, rec.ID); got.Status != jobs.StatusRunning {
		t.Fatalf("status %s within the lease", got.Status)
	}
	clock.Advance(4 * time.Minute)
	rep, _ = sweeper.Sweep(ctx)
	if rep.Interrupted != 1 {
		t.Fatalf("sweep after the lease: %+v", rep)
	}
	got, _ := store.Get(ctx, rec.ID)
	if got.Status != jobs.StatusFailed || got.ErrorCode != jobs.CodeInterrupted {
		t.Fatalf("got %s %q", got.Status, got.ErrorCode)
	}
	if ids, _ := store.Due(ctx, clock.Now().Add(time.Hour), 10); len(ids) != 0 {
		t.Fatalf("settled job still due: %v", ids)
	}
}

// Two sweepers overlap and the job's own worker comes back late: exactly one
// outcome is recorded.
func TestOverlappingSweepersAndLateWorker(t *testing.T) {
	t.Parallel()
	clock := jobstest.NewClock(time.Now())
	store := jobstest.NewMemStore(clock)
	queue := &jobstest.MemQueue{}
	ctx := context.Background()
	const n = 50
	var ids []string
	for range n {
		rec := jobstest.NewRecord(wire.NewID(), clock.Now())
		if err := store.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Claim(ctx, rec.ID, driver.Claim{Token: "late", At: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rec.ID)
	}
	clock.Advance(10 * time.Minute)
	s1, _ := testroles.Sweeper(jobs.Config{Registry: jobs.NewRegistry(), Store: store, Queue: queue, Clock: clock, SweepPageSize: 7})
	s2, _ := testroles.Sweeper(jobs.Config{Registry: jobs.NewRegistry(), Store: store, Queue: queue, Clock: clock, SweepPageSize: 11})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var reps []jobs.SweepReport
	lateWins := 0
	for _, s := range []*jobs.Sweeper{s1, s2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep, _ := s.Sweep(ctx)
			mu.Lock()
			reps = append(reps, rep)
			mu.Unlock()
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for _, id := range ids {
			err := store.Finish(ctx, id, "late", driver.Outcome{Status: jobs.StatusSucceeded, Result: []byte(`1`), At: clock.Now()})
			if err == nil {
				mu.Lock()
				lateWins++
				mu.Unlock()
			} else if ce := (*driver.ConflictError)(nil); !errors.As(err, &ce) {
				t.Errorf("late finish: %v", err)
			}
		}
	}()
	wg.Wait()
	interrupted := reps[0].Interrupted + reps[1].Interrupted
	if interrupted+lateWins != n {
		t.Fatalf("interrupted %d + late successes %d = %d outcomes for %d jobs", interrupted, lateWins, interrupted+lateWins, n)
	}
	for _, id := range ids {
		rec, _ := store.Get(ctx, id)
		if !rec.Status.Final() {
			t.Fatalf("job %s left %s", id, rec.Status)
		}
	}
}

// A queued job whose message keeps getting lost is re-sent by every sweep
// that finds it, each time looked at again later: 2, 4, then 8 times the
// dispatch grace after the re-send, and never later than 8 however many
// re-sends follow (the wait once grew to 64 graces, a job lost for
// hours).
func TestSweeperResendBackoffIsCappedAtEightGraces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const grace = time.Minute
	clock := jobstest.NewClock(jobstest.Epoch)
	store, queue := jobstest.NewMemStore(clock), &jobstest.MemQueue{}
	sweeper, err := testroles.Sweeper(jobs.Config{Registry: jobs.NewRegistry(), Store: store, Queue: queue, Clock: clock, DispatchGrace: grace})
	if err != nil {
		t.Fatal(err)
	}
	rec := jobstest.NewRecord(wire.NewID(), clock.Now())
	rec.SweepAt = clock.Now().Add(grace)
	if err := store.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	for i, graces := range []int{2, 4, 8, 8, 8, 8} {
		clock.Set(rec.SweepAt) // the next sweep that finds it
		rep, err := sweeper.Sweep(ctx)
		if err != nil || rep.Resent != 1 {
			t.Fatalf("sweep %d: %+v, %v; want the job re-sent", i+1, rep, err)
		}
		if rec, err = store.Get(ctx, rec.ID); err != nil {
			t.Fatal(err)
		}
		if got, want := rec.SweepAt.Sub(clock.Now()), time.Duration(graces)*grace; got != want {
			t.Errorf("after re-send %d: looked at again %v later, want %v (%d graces)", i+1, got, want, graces)
		}
	}
	if n := len(queue.Sent()); n != 6 {
		t.Fatalf("%d messages sent, want one per sweep (6)", n)
	}
}

// A page of items whose handling keeps failing (here 1,000 finished jobs
// whose events cannot be put: an EventBridge outage) sits at the head of
// the sweep index. Each is put back later, so the sweep reads past them
// and interrupts the dead worker's job behind them in the same sweep.
func TestFailingItemsDoNotStallTheSweep(t *testing.T) {
	t.Parallel()
	clock := jobstest.NewClock(time.Now().Truncate(time.Millisecond))
	store := jobstest.NewMemStore(clock)
	bus := &jobstest.MemBus{}
	bus.SetFail(errors.New("eventbridge: unavailable"))
	sweeper, err := testroles.Sweeper(jobs.Config{Registry: jobs.NewRegistry(), Store: store, Queue: &jobstest.MemQueue{}, Clock: clock, Bus: bus})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := clock.Now()
	failing := map[string]bool{}
	for i := range 1000 {
		rec := jobstest.NewRecord(wire.NewID(), now.Add(-time.Hour))
		rec.Events = true
		rec.SweepAt = now.Add(-time.Hour + time.Duration(i)*time.Millisecond)
		if err := store.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Claim(ctx, rec.ID, driver.Claim{Token: "t", At: now.Add(-time.Hour), LeaseUntil: now.Add(-time.Hour + time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if err := store.Finish(ctx, rec.ID, "t", driver.Outcome{Status: jobs.StatusSucceeded, At: now.Add(-time.Hour), ExpiresAt: now.Add(time.Hour), After: []string{"event"}, Seq: 1}); err != nil {
			t.Fatal(err)
		}
		failing[rec.ID] = true
	}
	dead := jobstest.NewRecord(wire.NewID(), now.Add(-10*time.Minute))
	dead.SweepAt = now.Add(-30 * time.Second) // due after every failing item
	if err := store.Create(ctx, dead); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(ctx, dead.ID, driver.Claim{Token: "gone", At: now.Add(-10 * time.Minute), LeaseUntil: now.Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}

	rep, err := sweeper.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := store.Get(ctx, dead.ID); got.Status != jobs.StatusFailed || got.ErrorCode != jobs.CodeInterrupted {
		t.Fatalf("the dead worker's job behind 1,000 failing items is %s %q after a sweep (%+v); want failed interrupted", got.Status, got.ErrorCode, rep)
	}
	ids, _ := store.Due(ctx, clock.Now(), 2000)
	if len(ids) != 0 {
		t.Fatalf("%d items still due right after the sweep; want the failing ones put back later", len(ids))
	}
	for id := range failing {
		if got, _ := store.Get(ctx, id); !slices.Contains(got.After, "event") || !got.SweepAt.After(now) {
			t.Fatalf("failing item %s: steps %v, sweep at %v; want its event pending and a later sweep", id, got.After, got.SweepAt.Sub(now))
		}
	}
	// When the outage ends, the items come back (their outcomes are an
	// hour old: eight graces later) and their events go out.
	bus.SetFail(nil)
	clock.Advance(8*jobs.DefaultDispatchGrace + time.Second)
	if _, err := sweeper.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if ids, _ := store.Due(ctx, clock.Now().Add(time.Hour), 2000); len(ids) != 0 {
		t.Fatalf("%d items still due after the outage ended", len(ids))
	}
}

// unreadableStore fails every read of the jobs in bad (throttled, or
// their answers lost, sweep after sweep).
type unreadableStore struct {
	*jobstest.MemStore
	bad map[string]bool
}

func (s unreadableStore) Get(ctx context.Context, id string) (*driver.Record, error) {
	if s.bad[id] {
		return nil, errors.New("dynamodb: throttled")
	}
	return s.MemStore.Get(ctx, id)
}

// A whole page of items the sweep cannot read (so cannot put back later)
// sits at the head of the sweep index: the next read returns only them.
// The sweep reads past them rather than taking that page for the end of
// the index, and interrupts the dead worker's job behind them (the
// simulator's seeds 9736 and 9532: each failed read ended a sweep early).
func TestAPageOfUnreadableItemsDoesNotEndTheSweep(t *testing.T) {
	t.Parallel()
	clock := jobstest.NewClock(time.Now().Truncate(time.Millisecond))
	mem := jobstest.NewMemStore(clock)
	store := unreadableStore{MemStore: mem, bad: map[string]bool{}}
	sweeper, err := testroles.Sweeper(jobs.Config{Registry: jobs.NewRegistry(), Store: store, Queue: &jobstest.MemQueue{}, Clock: clock, SweepPageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := clock.Now()
	for i := range 2 {
		rec := jobstest.NewRecord(wire.NewID(), now.Add(-time.Hour))
		rec.SweepAt = now.Add(-time.Hour + time.Duration(i)*time.Millisecond)
		if err := mem.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		store.bad[rec.ID] = true
	}
	dead := jobstest.NewRecord(wire.NewID(), now.Add(-10*time.Minute))
	dead.SweepAt = now.Add(-30 * time.Second) // due after the unreadable items
	if err := mem.Create(ctx, dead); err != nil {
		t.Fatal(err)
	}
	if _, err := mem.Claim(ctx, dead.ID, driver.Claim{Token: "gone", At: now.Add(-10 * time.Minute), LeaseUntil: now.Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}

	rep, err := sweeper.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := mem.Get(ctx, dead.ID); got.Status != jobs.StatusFailed || got.ErrorCode != jobs.CodeInterrupted {
		t.Fatalf("the dead worker's job behind a page of unreadable items is %s %q after a sweep (%+v); want failed interrupted", got.Status, got.ErrorCode, rep)
	}
	if rep.Errors != 2 || rep.Interrupted != 1 || !rep.Complete {
		t.Fatalf("report %+v, want 2 errors, 1 interrupted, complete", rep)
	}
}

// slowStore answers each job read and write after 10 ms, as DynamoDB
// does under load; failOpen makes OpenBatch fail (an enqueue that dies
// before it opens its batch).
type slowStore struct {
	*jobstest.MemStore
	failOpen atomic.Bool
}

// slow waits 10 ms, or until ctx ends (as the SDK's call would).
func slow(ctx context.Context) error {
	select {
	case <-time.After(10 * time.Millisecond):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *slowStore) Get(ctx context.Context, id string) (*driver.Record, error) {
	if err := slow(ctx); err != nil {
		return nil, err
	}
	return s.MemStore.Get(ctx, id)
}

func (s *slowStore) CancelQueued(ctx context.Context, id string, c driver.CancelQueued) error {
	if err := slow(ctx); err != nil {
		return err
	}
	return s.MemStore.CancelQueued(ctx, id, c)
}

func (s *slowStore) CountInBatch(ctx context.Context, b *driver.Batch, c driver.BatchCount) (driver.BatchShard, error) {
	if err := slow(ctx); err != nil {
		return driver.BatchShard{}, err
	}
	return s.MemStore.CountInBatch(ctx, b, c)
}

func (s *slowStore) OpenBatch(ctx context.Context, id string) error {
	if s.failOpen.Load() {
		return errors.New("the enqueue died")
	}
	return s.MemStore.OpenBatch(ctx, id)
}

// A 10,000-job batch whose enqueue died before opening it is aborted (its
// queued jobs cancelled, the batch ended) within three sweeps, on a store
// that takes 10 ms a call: the abort works on many jobs at once rather
// than restarting from its first job at every sweep.
func TestAbandonedBatchOfTenThousandJobsEndsWithinThreeSweeps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := &slowStore{MemStore: jobstest.NewMemStore(nil)}
		reg := jobs.NewRegistry()
		jobs.MustRegister(reg, "k", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
		queue := &jobstest.MemQueue{}
		svc, err := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: queue})
		if err != nil {
			t.Fatal(err)
		}
		sw, err := testroles.Sweeper(jobs.Config{Store: store, Queue: queue, Registry: reg})
		if err != nil {
			t.Fatal(err)
		}
		specs := make([]jobs.JobSpec, 10_000)
		for i := range specs {
			specs[i] = jobs.JobSpec{Kind: "k", Payload: []byte(`{}`)}
		}
		store.failOpen.Store(true)
		if _, err := svc.EnqueueBatch(ctx, jobs.BatchRequest{Owner: "o", Jobs: specs}); err == nil {
			t.Fatal("the batch opened; want its enqueue to die before")
		}
		store.failOpen.Store(false)
		ids, _ := store.Due(ctx, time.Now().Add(time.Hour), 20_000)
		var batchID string
		for _, id := range ids {
			if strings.HasPrefix(id, "batch#") {
				batchID = strings.TrimPrefix(id, "batch#")
			}
		}
		if batchID == "" {
			t.Fatal("no batch in the sweep index")
		}
		for sweep := 1; ; sweep++ {
			time.Sleep(time.Until(time.Now().Truncate(time.Minute).Add(time.Minute)) + jobs.DefaultDispatchGrace)
			sctx, cancel := context.WithTimeout(ctx, time.Minute)
			_, err := sw.Sweep(sctx)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			if b, _ := store.GetBatch(ctx, batchID); b.Status != jobs.StatusRunning {
				t.Logf("ended %s after %d sweeps", b.Status, sweep)
				break
			}
			if sweep == 3 {
				b, _ := store.GetBatch(ctx, batchID)
				t.Fatalf("the abandoned batch is still %s (creating %v) after 3 sweeps", b.Status, b.Creating)
			}
		}
		if rec, _ := store.MemStore.Get(ctx, wire.BatchJobID(batchID, 9_999)); rec.Status != jobs.StatusCancelled {
			t.Fatalf("its last job is %s, want cancelled", rec.Status)
		}
	})
}
