package jobstest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/storekey"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// NewStoreFunc returns an empty store for one test, reading time from clock.
type NewStoreFunc func(t *testing.T, clock jobs.Clock) driver.Store

// Epoch is the time the conformance suite's clocks start at.
var Epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// NewRecord returns a queued record as enqueue would write it.
func NewRecord(id string, now time.Time) *driver.Record {
	return &driver.Record{
		ID: id, Kind: "test.kind", Owner: "arn:aws:iam::000000000000:user/alice", Status: jobs.StatusQueued,
		Payload: []byte(`{"n":1}`), RequestHash: "h1",
		CreatedAt: now, UpdatedAt: now, SweepAt: now.Add(2 * time.Minute),
	}
}

// RunStoreTests runs the conformance suite against the stores newStore
// makes. Each subtest gets its own store and fake clock.
func RunStoreTests(t *testing.T, newStore NewStoreFunc) {
	t.Run("LongWork", func(t *testing.T) { runLongWorkTests(t, newStore) })
	ctx := context.Background()
	setup := func(t *testing.T) (driver.Store, *Clock) {
		t.Helper()
		clock := NewClock(Epoch)
		return newStore(t, clock), clock
	}
	create := func(t *testing.T, s driver.Store, now time.Time) *driver.Record {
		t.Helper()
		rec := NewRecord(wire.NewID(), now)
		if err := s.Create(ctx, rec); err != nil {
			t.Fatalf("Create: %v", err)
		}
		return rec
	}
	claim := func(t *testing.T, s driver.Store, id string, now time.Time) (*driver.Record, string) {
		t.Helper()
		token := wire.NewID()
		rec, err := s.Claim(ctx, id, driver.Claim{Token: token, At: now, LeaseUntil: now.Add(time.Minute)})
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		return rec, token
	}
	get := func(t *testing.T, s driver.Store, id string) *driver.Record {
		t.Helper()
		rec, err := s.Get(ctx, id)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		return rec
	}
	wantConflict := func(t *testing.T, err, sentinel error, wantStatus jobs.Status) {
		t.Helper()
		if !errors.Is(err, sentinel) {
			t.Fatalf("got error %v, want %v", err, sentinel)
		}
		var ce *driver.ConflictError
		if !errors.As(err, &ce) {
			t.Fatalf("got %T, want *driver.ConflictError", err)
		}
		if wantStatus != "" && (ce.Current == nil || ce.Current.Status != wantStatus) {
			t.Fatalf("conflict reports current %+v, want status %s", ce.Current, wantStatus)
		}
	}

	t.Run("CreateGetRoundTrip", func(t *testing.T) {
		s, clock := setup(t)
		rec := NewRecord(wire.NewID(), clock.Now())
		rec.Payload = []byte(`{"text":"héllo","n":[1,2,3]}`)
		if err := s.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		got := get(t, s, rec.ID)
		if !reflect.DeepEqual(got, rec) {
			t.Fatalf("Get returned\n%+v\nwant\n%+v", got, rec)
		}
	})

	t.Run("CreateExistingIsConflict", func(t *testing.T) {
		s, clock := setup(t)
		rec := create(t, s, clock.Now())
		again := NewRecord(rec.ID, clock.Now())
		again.Payload = []byte(`{"n":2}`)
		err := s.Create(ctx, again)
		wantConflict(t, err, driver.ErrExists, jobs.StatusQueued)
		if got := get(t, s, rec.ID); string(got.Payload) != `{"n":1}` {
			t.Fatalf("second create overwrote the payload: %s", got.Payload)
		}
	})

	t.Run("GetUnknownIsNotFound", func(t *testing.T) {
		s, _ := setup(t)
		if _, err := s.Get(ctx, wire.NewID()); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	})

	t.Run("ClaimStampsTokenLeaseAttempt", func(t *testing.T) {
		s, clock := setup(t)
		rec := create(t, s, clock.Now())
		clock.Advance(time.Second)
		now := clock.Now()
		got, err := s.Claim(ctx, rec.ID, driver.Claim{Token: "tok-1", At: now, LeaseUntil: now.Add(30 * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != jobs.StatusRunning || got.ClaimToken != "tok-1" || got.Attempt != 1 ||
			!got.LeaseUntil.Equal(now.Add(30*time.Second)) || !got.StartedAt.Equal(now) {
			t.Fatalf("claimed record %+v", got)
		}
		if string(got.Payload) != string(rec.Payload) || got.Kind != rec.Kind || got.Owner != rec.Owner {
			t.Fatalf("claim did not return the job's payload/kind/owner: %+v", got)
		}
		if stored := get(t, s, rec.ID); stored.ClaimToken != "tok-1" || stored.Status != jobs.StatusRunning {
			t.Fatalf("stored after claim: %+v", stored)
		}
	})

	t.Run("SecondClaimFails", func(t *testing.T) {
		s, clock := setup(t)
		rec := create(t, s, clock.Now())
		claim(t, s, rec.ID, clock.Now())
		_, err := s.Claim(ctx, rec.ID, driver.Claim{Token: "other", At: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute)})
		wantConflict(t, err, driver.ErrNotQueued, jobs.StatusRunning)
		if got := get(t, s, rec.ID); got.Attempt != 1 || got.ClaimToken == "other" {
			t.Fatalf("losing claim changed the job: %+v", got)
		}
	})

	t.Run("ClaimUnknownIsNotFound", func(t *testing.T) {
		s, clock := setup(t)
		_, err := s.Claim(ctx, wire.NewID(), driver.Claim{Token: "t", At: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute)})
		if !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
		if _, err := s.Get(ctx, wire.NewID()); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("a failed claim created a job: %v", err)
		}
	})

	t.Run("ConcurrentClaimsOneWinner", func(t *testing.T) {
		s, clock := setup(t)
		rec := create(t, s, clock.Now())
		const n = 16
		var wg sync.WaitGroup
		wins := make(chan string, n)
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				token := fmt.Sprintf("tok-%d", i)
				_, err := s.Claim(ctx, rec.ID, driver.Claim{Token: token, At: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute)})
				switch {
				case err == nil:
					wins <- token
				case errors.Is(err, driver.ErrNotQueued):
				default:
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(wins)
		close(errs)
		for err := range errs {
			t.Fatalf("unexpected claim error: %v", err)
		}
		var winners []string
		for w := range wins {
			winners = append(winners, w)
		}
		if len(winners) != 1 {
			t.Fatalf("%d claims won (%v), want exactly 1", len(winners), winners)
		}
		if got := get(t, s, rec.ID); got.ClaimToken != winners[0] || got.Attempt != 1 {
			t.Fatalf("stored token %q attempt %d, want %q and 1", got.ClaimToken, got.Attempt, winners[0])
		}
	})

	t.Run("PublishUnderTokenOnly", func(t *testing.T) {
		s, clock := setup(t)
		rec := create(t, s, clock.Now())
		_, token := claim(t, s, rec.ID, clock.Now())
		if err := s.Publish(ctx, rec.ID, token, []byte(`{"done":1}`), clock.Now()); err != nil {
			t.Fatal(err)
		}
		err := s.Publish(ctx, rec.ID, "stale-token", []byte(`{"done":99}`), clock.Now())
		wantConflict(t, err, jobs.ErrLostClaim, jobs.StatusRunning)
		if got := get(t, s, rec.ID); string(got.Result) != `{"done":1}` {
			t.Fatalf("result %s after stale publish, want {\"done\":1}", got.Result)
		}
	})

	t.Run("PublishQueuedIsLostClaim", func(t *testing.T) {
		s, clock := setup(t)
		rec := create(t, s, clock.Now())
		err := s.Publish(ctx, rec.ID, "", []byte(`1`), clock.Now())
		wantConflict(t, err, jobs.ErrLostClaim, jobs.StatusQueued)
	})

	t.Run("FinishUnderTokenOnly", func(t *testing.T) {
		s, clock := setup(t)
		rec := create(t, s, clock.Now())
		_, token := claim(t, s, rec.ID, clock.Now())
		err := s.Finish(ctx, rec.ID, "stale-token", driver.Outcome{Status: jobs.StatusSucceeded, Result: []byte(`"stale"`), At: clock.Now()})
		wantConflict(t, err, jobs.ErrLostClaim, jobs.StatusRunning)
		clock.Advance(time.Second)
		end := clock.Now()
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, Result: []byte(`"ok"`), At: end, ExpiresAt: end.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		got := get(t, s, rec.ID)
		if got.Status != jobs.StatusSucceeded || string(got.Result) != `"ok"` || got.ClaimToken != "" ||
			!got.LeaseUntil.IsZero() || !got.SweepAt.IsZero() || !got.FinishedAt.Equal(end) || !got.ExpiresAt.Equal(end.Add(time.Hour)) {
			t.Fatalf("finished record %+v", got)
		}
	})

	t.Run("FinishedJobIsNotReclaimedRepublishedOrRefinished", func(t *testing.T) {
		s, clock := setup(t)
		rec := create(t, s, clock.Now())
		_, token := claim(t, s, rec.ID, clock.Now())
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusFailed, Code: "boom", At: clock.Now()}); err != nil {
			t.Fatal(err)
		}
		_, err := s.Claim(ctx, rec.ID, driver.Claim{Token: "again", At: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute)})
		wantConflict(t, err, driver.ErrNotQueued, jobs.StatusFailed)
		wantConflict(t, s.Publish(ctx, rec.ID, token, []byte(`1`), clock.Now()), jobs.ErrLostClaim, jobs.StatusFailed)
		wantConflict(t, s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, At: clock.Now()}), jobs.ErrLostClaim, jobs.StatusFailed)
		if got := get(t, s, rec.ID); got.Status != jobs.StatusFailed || got.ErrorCode != "boom" || got.Attempt != 1 {
			t.Fatalf("finished job changed: %+v", got)
		}
	})

	t.Run("NoLostUpdateBetweenPublishAndFinish", func(t *testing.T) {
		s, clock := setup(t)
		rec := create(t, s, clock.Now())
		_, token := claim(t, s, rec.ID, clock.Now())
		if err := s.Publish(ctx, rec.ID, token, []byte(`{"p":1}`), clock.Now()); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, Result: []byte(`{"final":true}`), At: clock.Now()}); err != nil {
			t.Fatal(err)
		}
		// A publish that was in flight when the run finished must not land.
		wantConflict(t, s.Publish(ctx, rec.ID, token, []byte(`{"p":2}`), clock.Now()), jobs.ErrLostClaim, jobs.StatusSucceeded)
		if got := get(t, s, rec.ID); string(got.Result) != `{"final":true}` {
			t.Fatalf("result %s, want the final one", got.Result)
		}
	})

	t.Run("ConcurrentPublishAndFinish", func(t *testing.T) {
		s, clock := setup(t)
		rec := create(t, s, clock.Now())
		_, token := claim(t, s, rec.ID, clock.Now())
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = s.Publish(ctx, rec.ID, token, fmt.Appendf(nil, `{"p":%d}`, i), clock.Now())
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, Result: []byte(`"final"`), At: clock.Now()}); err != nil {
				t.Errorf("Finish: %v", err)
			}
		}()
		wg.Wait()
		if got := get(t, s, rec.ID); got.Status != jobs.StatusSucceeded || string(got.Result) != `"final"` {
			t.Fatalf("got status %s result %s, want succeeded \"final\"", got.Status, got.Result)
		}
	})

	t.Run("FailedRunKeepsLastPartial", func(t *testing.T) {
		s, clock := setup(t)
		rec := create(t, s, clock.Now())
		_, token := claim(t, s, rec.ID, clock.Now())
		if err := s.Publish(ctx, rec.ID, token, []byte(`{"done":3}`), clock.Now()); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusFailed, Code: jobs.CodeTimedOut, At: clock.Now()}); err != nil {
			t.Fatal(err)
		}
		if got := get(t, s, rec.ID); got.ErrorCode != jobs.CodeTimedOut || string(got.Result) != `{"done":3}` {
			t.Fatalf("got code %q result %s", got.ErrorCode, got.Result)
		}
	})

	t.Run("InterruptOnlyAfterLease", func(t *testing.T) {
		s, clock := setup(t)
		rec := create(t, s, clock.Now())
		_, token := claim(t, s, rec.ID, clock.Now()) // lease: now + 1m
		early := driver.Outcome{Status: jobs.StatusFailed, Code: jobs.CodeInterrupted, At: clock.Now(), LeaseExpiredBy: clock.Now().Add(30 * time.Second)}
		wantConflict(t, s.Finish(ctx, rec.ID, token, early), jobs.ErrLostClaim, jobs.StatusRunning)
		clock.Advance(2 * time.Minute)
		late := driver.Outcome{Status: jobs.StatusFailed, Code: jobs.CodeInterrupted, At: clock.Now(), LeaseExpiredBy: clock.Now()}
		if err := s.Finish(ctx, rec.ID, token, late); err != nil {
			t.Fatal(err)
		}
		// The worker that owned the lease comes back late: it cannot overwrite.
		wantConflict(t, s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, Result: []byte(`1`), At: clock.Now()}), jobs.ErrLostClaim, jobs.StatusFailed)
	})

	t.Run("OverlappingInterruptsOneWinner", func(t *testing.T) {
		s, clock := setup(t)
		rec := create(t, s, clock.Now())
		_, token := claim(t, s, rec.ID, clock.Now())
		clock.Advance(2 * time.Minute)
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusFailed, Code: jobs.CodeInterrupted, At: clock.Now(), LeaseExpiredBy: clock.Now()})
				if err == nil {
					mu.Lock()
					wins++
					mu.Unlock()
				} else if !errors.Is(err, jobs.ErrLostClaim) {
					t.Errorf("Finish: %v", err)
				}
			}()
		}
		wg.Wait()
		if wins != 1 {
			t.Fatalf("%d interrupts won, want 1", wins)
		}
	})

	t.Run("DueListsOnlyUnfinishedJobsWhoseTimeCame", func(t *testing.T) {
		s, clock := setup(t)
		now := clock.Now()
		queued := create(t, s, now)           // sweep at now+2m
		running := create(t, s, now)          // claimed below
		finished := create(t, s, now)         // finished below
		later := NewRecord(wire.NewID(), now) // sweep at now+1h
		later.SweepAt = now.Add(time.Hour)
		if err := s.Create(ctx, later); err != nil {
			t.Fatal(err)
		}
		claim(t, s, running.ID, now)
		_, tok := claim(t, s, finished.ID, now)
		if err := s.Finish(ctx, finished.ID, tok, driver.Outcome{Status: jobs.StatusSucceeded, At: now}); err != nil {
			t.Fatal(err)
		}
		ids, err := s.Due(ctx, now.Add(3*time.Minute), 100)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := set(ids), set([]string{queued.ID, running.ID}); !reflect.DeepEqual(got, want) {
			t.Fatalf("Due = %v, want %v", ids, []string{queued.ID, running.ID})
		}
		if ids, _ := s.Due(ctx, now, 100); len(ids) != 0 {
			t.Fatalf("Due before any sweep time = %v, want none", ids)
		}
		if ids, _ := s.Due(ctx, now.Add(2*time.Hour), 1); len(ids) != 1 {
			t.Fatalf("Due with limit 1 returned %d ids", len(ids))
		}
	})

	t.Run("Reschedule", func(t *testing.T) {
		s, clock := setup(t)
		now := clock.Now()
		q := create(t, s, now)
		if err := s.Reschedule(ctx, q.ID, driver.Expect{Status: jobs.StatusQueued}, now.Add(10*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if got := get(t, s, q.ID); got.Dispatches != 1 || !got.SweepAt.Equal(now.Add(10*time.Minute)) {
			t.Fatalf("rescheduled queued job: dispatches %d sweep %v", got.Dispatches, got.SweepAt)
		}
		r := create(t, s, now)
		_, token := claim(t, s, r.ID, now)
		wantConflict(t, s.Reschedule(ctx, r.ID, driver.Expect{Status: jobs.StatusRunning, Token: "stale"}, now.Add(time.Hour)), jobs.ErrLostClaim, jobs.StatusRunning)
		wantConflict(t, s.Reschedule(ctx, r.ID, driver.Expect{Status: jobs.StatusQueued}, now.Add(time.Hour)), jobs.ErrLostClaim, jobs.StatusRunning)
		if err := s.Reschedule(ctx, r.ID, driver.Expect{Status: jobs.StatusRunning, Token: token}, now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(ctx, r.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, At: now}); err != nil {
			t.Fatal(err)
		}
		// A finished job has no sweep schedule to move: it must not reappear in the index.
		wantConflict(t, s.Reschedule(ctx, r.ID, driver.Expect{Status: jobs.StatusRunning, Token: token}, now), jobs.ErrLostClaim, jobs.StatusSucceeded)
		if ids, _ := s.Due(ctx, now.Add(2*time.Hour), 100); len(ids) != 1 || ids[0] != q.ID {
			t.Fatalf("Due = %v, want only the queued job", ids)
		}
	})

	t.Run("ExpiredJobIsGoneAndItsIDReusable", func(t *testing.T) {
		s, clock := setup(t)
		rec := create(t, s, clock.Now())
		_, token := claim(t, s, rec.ID, clock.Now())
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, At: clock.Now(), ExpiresAt: clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Hour + time.Second)
		if _, err := s.Get(ctx, rec.ID); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("Get of an expired job: %v, want ErrNotFound", err)
		}
		fresh := NewRecord(rec.ID, clock.Now())
		if err := s.Create(ctx, fresh); err != nil {
			t.Fatalf("Create over an expired job: %v", err)
		}
		if got := get(t, s, rec.ID); got.Status != jobs.StatusQueued || got.Attempt != 0 {
			t.Fatalf("recreated job %+v", got)
		}
	})

	t.Run("DelayedJobIsClaimedOnlyWhenDue", func(t *testing.T) {
		s, clock := setup(t)
		rec := NewRecord(wire.NewID(), clock.Now())
		rec.RunAt = clock.Now().Add(10 * time.Minute)
		if err := s.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		_, err := s.Claim(ctx, rec.ID, driver.Claim{Token: "early", At: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute)})
		wantConflict(t, err, driver.ErrNotQueued, jobs.StatusQueued)
		clock.Advance(10 * time.Minute)
		if _, err := s.Claim(ctx, rec.ID, driver.Claim{Token: "on-time", At: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute)}); err != nil {
			t.Fatalf("claim at run_at: %v", err)
		}
	})

	t.Run("RequeueForRetry", func(t *testing.T) {
		s, clock := setup(t)
		rec := create(t, s, clock.Now())
		_, token := claim(t, s, rec.ID, clock.Now())
		next := clock.Now().Add(30 * time.Second)
		wantConflict(t, s.Requeue(ctx, rec.ID, "stale", driver.Requeue{At: clock.Now(), RunAt: next, SweepAt: next, LastError: "boom"}), jobs.ErrLostClaim, jobs.StatusRunning)
		if err := s.Requeue(ctx, rec.ID, token, driver.Requeue{At: clock.Now(), RunAt: next, SweepAt: next.Add(time.Minute), LastError: "boom"}); err != nil {
			t.Fatal(err)
		}
		got := get(t, s, rec.ID)
		if got.Status != jobs.StatusQueued || got.ClaimToken != "" || !got.RunAt.Equal(next) || got.LastError != "boom" || got.Attempt != 1 || !got.SweepAt.Equal(next.Add(time.Minute)) {
			t.Fatalf("requeued %+v", got)
		}
		// The old run cannot finish it now.
		wantConflict(t, s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, At: clock.Now()}), jobs.ErrLostClaim, jobs.StatusQueued)
		clock.Advance(time.Minute)
		again, _ := claim(t, s, rec.ID, clock.Now())
		if again.Attempt != 2 {
			t.Fatalf("attempt %d after a retry, want 2", again.Attempt)
		}
	})

	t.Run("CancelQueued", func(t *testing.T) {
		s, clock := setup(t)
		rec := create(t, s, clock.Now())
		if err := s.CancelQueued(ctx, rec.ID, driver.CancelQueued{At: clock.Now(), ExpiresAt: clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		got := get(t, s, rec.ID)
		if got.Status != jobs.StatusCancelled || !got.SweepAt.IsZero() || got.ExpiresAt.IsZero() {
			t.Fatalf("cancelled %+v", got)
		}
		_, err := s.Claim(ctx, rec.ID, driver.Claim{Token: "t", At: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute)})
		wantConflict(t, err, driver.ErrNotQueued, jobs.StatusCancelled)
		wantConflict(t, s.CancelQueued(ctx, rec.ID, driver.CancelQueued{At: clock.Now(), ExpiresAt: clock.Now()}), driver.ErrNotQueued, jobs.StatusCancelled)
		if ids, _ := s.Due(ctx, clock.Now().Add(time.Hour), 10); len(ids) != 0 {
			t.Fatalf("a cancelled job is due: %v", ids)
		}
	})

	t.Run("RequestCancelLetsOnlyCancelledLand", func(t *testing.T) {
		s, clock := setup(t)
		rec := create(t, s, clock.Now())
		wantConflict(t, s.RequestCancel(ctx, rec.ID, clock.Now()), driver.ErrNotRunning, jobs.StatusQueued)
		_, token := claim(t, s, rec.ID, clock.Now())
		if err := s.RequestCancel(ctx, rec.ID, clock.Now()); err != nil {
			t.Fatal(err)
		}
		wantConflict(t, s.Publish(ctx, rec.ID, token, []byte(`1`), clock.Now()), driver.ErrCancelRequested, jobs.StatusRunning)
		wantConflict(t, s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, Result: []byte(`1`), At: clock.Now()}), driver.ErrCancelRequested, jobs.StatusRunning)
		wantConflict(t, s.Requeue(ctx, rec.ID, token, driver.Requeue{At: clock.Now(), RunAt: clock.Now(), SweepAt: clock.Now()}), driver.ErrCancelRequested, jobs.StatusRunning)
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusCancelled, At: clock.Now()}); err != nil {
			t.Fatal(err)
		}
		if got := get(t, s, rec.ID); got.Status != jobs.StatusCancelled || !got.CancelRequested {
			t.Fatalf("got %+v", got)
		}
		wantConflict(t, s.RequestCancel(ctx, rec.ID, clock.Now()), driver.ErrNotRunning, jobs.StatusCancelled)
	})

	t.Run("CountUnfinishedCountsTheOwnersQueuedAndRunning", func(t *testing.T) {
		s, clock := setup(t)
		now := clock.Now()
		mk := func(owner, kind string) *driver.Record {
			rec := NewRecord(wire.NewID(), now)
			rec.Owner, rec.Kind = owner, kind
			if err := s.Create(ctx, rec); err != nil {
				t.Fatal(err)
			}
			return rec
		}
		mk("o", "a")
		mk("o", "a")
		running := mk("o", "b")
		claim(t, s, running.ID, now)
		done := mk("o", "b")
		_, tok := claim(t, s, done.ID, now)
		if err := s.Finish(ctx, done.ID, tok, driver.Outcome{Status: jobs.StatusSucceeded, At: now}); err != nil {
			t.Fatal(err)
		}
		mk("p", "a")
		got, err := s.CountUnfinished(ctx, wire.OwnerKey("o"), 100)
		want := map[string]jobs.KindCounts{"a": {Queued: 2}, "b": {Running: 1}}
		if err != nil || got.Truncated || !reflect.DeepEqual(got.Kinds, want) {
			t.Fatalf("counts %+v %v, want %v", got, err, want)
		}
		if got, _ := s.CountUnfinished(ctx, wire.OwnerKey("o"), 2); !got.Truncated {
			t.Fatalf("counts at most 2: %+v, want truncated", got)
		}
	})

	t.Run("AfterStepsKeepAFinalJobDueUntilDone", func(t *testing.T) {
		s, clock := setup(t)
		now := clock.Now()
		rec := create(t, s, now)
		_, token := claim(t, s, rec.ID, now)
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, At: now, After: []string{"batch"}}); err != nil {
			t.Fatal(err)
		}
		if got := get(t, s, rec.ID); got.Status != jobs.StatusSucceeded || !slices.Equal(got.After, []string{"batch"}) {
			t.Fatalf("finished with a step pending: %+v", got)
		}
		if ids, _ := s.Due(ctx, now.Add(time.Hour), 10); !set(ids)[rec.ID] {
			t.Fatalf("a final job with a step pending is not due: %v", ids)
		}
		if err := s.DoneAfter(ctx, rec.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.DoneAfter(ctx, rec.ID); err != nil {
			t.Fatalf("DoneAfter again: %v, want nil", err)
		}
		if got := get(t, s, rec.ID); len(got.After) != 0 {
			t.Fatalf("steps after DoneAfter: %v", got.After)
		}
		if ids, _ := s.Due(ctx, now.Add(time.Hour), 10); len(ids) != 0 {
			t.Fatalf("due after DoneAfter: %v", ids)
		}
		// A cancel of a queued job with steps, likewise.
		other := create(t, s, now)
		if err := s.CancelQueued(ctx, other.ID, driver.CancelQueued{At: now, ExpiresAt: now.Add(time.Hour), After: []string{"batch"}}); err != nil {
			t.Fatal(err)
		}
		if ids, _ := s.Due(ctx, now.Add(time.Hour), 10); !set(ids)[other.ID] {
			t.Fatalf("a cancelled job with a step pending is not due: %v", ids)
		}
	})

	t.Run("AbandonedRunKeepsItsLeaseAgainstResubmit", func(t *testing.T) {
		s, clock := setup(t)
		now := clock.Now()
		rec := create(t, s, now)
		_, token := claim(t, s, rec.ID, now)
		if err := s.RequestCancel(ctx, rec.ID, now); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusCancelled, At: now, KeepLease: true}); err != nil {
			t.Fatal(err)
		}
		got := get(t, s, rec.ID)
		if got.LeaseUntil.IsZero() {
			t.Fatal("the abandoned run's lease is gone")
		}
		wantConflict(t, s.Resubmit(ctx, rec.ID, driver.Resubmit{At: now, SweepAt: now.Add(time.Minute)}), jobs.ErrNotResubmittable, jobs.StatusCancelled)
		clock.Advance(2 * time.Minute) // past the lease
		if err := s.Resubmit(ctx, rec.ID, driver.Resubmit{At: clock.Now(), SweepAt: clock.Now().Add(time.Minute)}); err != nil {
			t.Fatalf("resubmit after the lease: %v", err)
		}
		if got := get(t, s, rec.ID); got.AttemptBase != 1 || got.Attempt != 1 || !got.LeaseUntil.IsZero() || got.Dispatches != 0 {
			t.Fatalf("resubmitted %+v, want attempt base 1 and no lease", got)
		}
	})

	t.Run("BatchCountsEachJobOnce", func(t *testing.T) {
		s, clock := setup(t)
		now := clock.Now()
		batchID := wire.NewID()
		b, err := s.CreateBatch(ctx, &driver.Batch{ID: batchID, Owner: "o", Status: jobs.StatusRunning, Total: 5, Shards: 2, RequestHash: "h", CreatedAt: now, SweepAt: now.Add(time.Minute)})
		if err != nil || !b.Creating || b.Total != 5 || b.Shards != 2 || b.DoneShards != 0 {
			t.Fatalf("created batch %+v %v, want 5 jobs over 2 shards, being created", b, err)
		}
		if again, err := s.CreateBatch(ctx, &driver.Batch{ID: batchID, Owner: "o", Total: 7, Shards: 3, RequestHash: "other"}); !errors.Is(err, driver.ErrExists) || again.Total != 5 || again.RequestHash != "h" {
			t.Fatalf("second CreateBatch: %+v %v, want the first batch and ErrExists", again, err)
		}
		count := func(i int, st jobs.Status) driver.BatchShard {
			t.Helper()
			sh, err := s.CountInBatch(ctx, b, driver.BatchCount{Index: i, Status: st, ExpiresAt: now.Add(time.Hour)})
			if err != nil {
				t.Fatal(err)
			}
			return sh
		}
		// Shard 0 holds jobs 0, 2 and 4; shard 1 jobs 1 and 3.
		if sh := count(0, jobs.StatusSucceeded); sh.Jobs != 3 || sh.Succeeded != 1 || sh.Done() {
			t.Fatalf("shard 0 after one: %+v", sh)
		}
		if sh := count(0, jobs.StatusSucceeded); sh.Succeeded != 1 {
			t.Fatalf("a job counted twice counts once: %+v", sh)
		}
		count(2, jobs.StatusFailed)
		if sh := count(4, jobs.StatusCancelled); !sh.Done() || sh.Succeeded != 1 || sh.Failed != 1 || sh.Cancelled != 1 {
			t.Fatalf("shard 0 complete: %+v", sh)
		}
		if err := s.OpenBatch(ctx, batchID); err != nil {
			t.Fatal(err)
		}
		if err := s.OpenBatch(ctx, batchID); !errors.Is(err, driver.ErrBatchOpened) {
			t.Fatalf("second OpenBatch: %v, want ErrBatchOpened", err)
		}
		if err := s.OpenBatch(ctx, wire.NewID()); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("OpenBatch of no batch: %v, want ErrNotFound", err)
		}
		if n, err := s.ShardDone(ctx, batchID, 0); err != nil || n != 1 {
			t.Fatalf("shard 0 done: %d %v", n, err)
		}
		if n, _ := s.ShardDone(ctx, batchID, 0); n != 1 {
			t.Fatalf("a shard done twice is done once: %d", n)
		}
		if err := s.EndBatch(ctx, batchID, jobs.StatusFailed, now, now.Add(time.Hour)); !errors.Is(err, driver.ErrBatchNotDone) {
			t.Fatalf("EndBatch with a shard pending: %v", err)
		}
		counted, err := s.CountBatch(ctx, b)
		if err != nil || counted.Succeeded != 1 || counted.Failed != 1 || counted.Cancelled != 1 || counted.Remaining != 2 {
			t.Fatalf("counts %+v %v, want 1 1 1 and 2 pending", counted, err)
		}
		count(1, jobs.StatusSucceeded)
		if sh := count(3, jobs.StatusSucceeded); !sh.Done() {
			t.Fatalf("shard 1 complete: %+v", sh)
		}
		if n, _ := s.ShardDone(ctx, batchID, 1); n != 2 {
			t.Fatalf("shards done %d, want 2", n)
		}
		if got, err := s.GetBatch(ctx, batchID); err != nil || got.DoneShards != 2 || got.Creating {
			t.Fatalf("batch %+v %v, want both shards done", got, err)
		}
		if ids, _ := s.Due(ctx, now.Add(time.Hour), 100); !set(ids)[storekey.BatchPrefix+batchID] {
			t.Fatalf("a running batch past its sweep time is not due: %v", ids)
		}
		if err := s.EndBatch(ctx, batchID, jobs.StatusFailed, now, now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		// The same end again is our own write retried (its answer lost):
		// it landed. Another end finds the batch ended.
		if err := s.EndBatch(ctx, batchID, jobs.StatusFailed, now, now.Add(time.Hour)); err != nil {
			t.Fatalf("the same EndBatch again: %v, want nil (our own write)", err)
		}
		if err := s.EndBatch(ctx, batchID, jobs.StatusFailed, now.Add(time.Second), now.Add(time.Hour)); !errors.Is(err, driver.ErrBatchNotDone) {
			t.Fatalf("second EndBatch: %v", err)
		}
		if ids, _ := s.Due(ctx, now.Add(time.Hour), 100); set(ids)[storekey.BatchPrefix+batchID] {
			t.Fatal("an ended batch is still due")
		}
		counted, err = s.CountBatch(ctx, b)
		if err != nil || counted.Succeeded != 3 || counted.Failed != 1 || counted.Cancelled != 1 || counted.Remaining != 0 {
			t.Fatalf("final counts %+v %v", counted, err)
		}
		// A batch's shards are not jobs.
		if _, err := s.Get(ctx, storekey.BatchShardPrefix+batchID+"#0"); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("a shard read as a job: %v", err)
		}
		// Once expired, the id can be taken again, being created anew.
		clock.Advance(2 * time.Hour)
		b, err = s.CreateBatch(ctx, &driver.Batch{ID: batchID, Owner: "o", Status: jobs.StatusRunning, Total: 2, Shards: 2, RequestHash: "h2", CreatedAt: clock.Now(), SweepAt: clock.Now().Add(time.Minute)})
		if err != nil || b.Total != 2 || b.DoneShards != 0 || !b.Creating || !b.ExpiresAt.IsZero() {
			t.Fatalf("batch created over an expired one: %+v %v, want fresh", b, err)
		}
	})

	t.Run("BatchCannotEndWhileBeingCreated", func(t *testing.T) {
		s, clock := setup(t)
		now := clock.Now()
		batchID := wire.NewID()
		b, err := s.CreateBatch(ctx, &driver.Batch{ID: batchID, Owner: "o", Status: jobs.StatusRunning, Total: 1, Shards: 1, RequestHash: "h", CreatedAt: now, SweepAt: now})
		if err != nil {
			t.Fatal(err)
		}
		if sh, _ := s.CountInBatch(ctx, b, driver.BatchCount{Index: 0, Status: jobs.StatusCancelled, ExpiresAt: now.Add(time.Hour)}); !sh.Done() {
			t.Fatalf("shard %+v", sh)
		}
		if _, err := s.ShardDone(ctx, batchID, 0); err != nil {
			t.Fatal(err)
		}
		if err := s.EndBatch(ctx, batchID, jobs.StatusFailed, now, now.Add(time.Hour)); !errors.Is(err, driver.ErrBatchNotDone) {
			t.Fatalf("EndBatch of a batch being created: %v, want ErrBatchNotDone", err)
		}
		if err := s.OpenBatch(ctx, batchID); err != nil {
			t.Fatal(err)
		}
		if err := s.EndBatch(ctx, batchID, jobs.StatusFailed, now, now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("ClaimSkipsKindsThatNeedMoreTime", func(t *testing.T) {
		s, clock := setup(t)
		rec := create(t, s, clock.Now())
		_, err := s.Claim(ctx, rec.ID, driver.Claim{Token: "t", At: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute), SkipKinds: []string{"slow", rec.Kind}})
		wantConflict(t, err, driver.ErrNotQueued, jobs.StatusQueued)
		if got := get(t, s, rec.ID); got.Attempt != 0 || got.Status != jobs.StatusQueued {
			t.Fatalf("a skipped claim changed the job: %+v", got)
		}
		if _, err := s.Claim(ctx, rec.ID, driver.Claim{Token: "t", At: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute), SkipKinds: []string{"slow"}}); err != nil {
			t.Fatalf("claim skipping other kinds: %v", err)
		}
	})

	t.Run("ListIsOwnedNewestFirstFilteredAndPaged", func(t *testing.T) {
		s, clock := setup(t)
		mine, theirs := wire.OwnerKey("alice"), wire.OwnerKey("bob")
		var ids []string // alice's, oldest first
		for i := range 7 {
			rec := NewRecord(wire.NewID(), clock.Now())
			rec.Owner = "alice"
			if i%2 == 1 {
				rec.Kind = "other"
			}
			if err := s.Create(ctx, rec); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, rec.ID)
			clock.Advance(time.Second)
		}
		bobs := NewRecord(wire.NewID(), clock.Now())
		bobs.Owner = "bob"
		if err := s.Create(ctx, bobs); err != nil {
			t.Fatal(err)
		}
		// ids[0] fails, ids[1] is cancelled while queued, ids[2] succeeds.
		_, tok := claim(t, s, ids[0], clock.Now())
		if err := s.Finish(ctx, ids[0], tok, driver.Outcome{Status: jobs.StatusFailed, Code: "boom", At: clock.Now(), ExpiresAt: clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := s.CancelQueued(ctx, ids[1], driver.CancelQueued{At: clock.Now(), ExpiresAt: clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		_, tok = claim(t, s, ids[2], clock.Now())
		if err := s.Finish(ctx, ids[2], tok, driver.Outcome{Status: jobs.StatusSucceeded, At: clock.Now(), ExpiresAt: clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		all := func(q driver.ListQuery) []string {
			t.Helper()
			var got []string
			for i := 0; i < 50; i++ {
				page, err := s.List(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if len(page.Records) > q.Limit {
					t.Fatalf("a page of %d with limit %d", len(page.Records), q.Limit)
				}
				for _, r := range page.Records {
					if wire.OwnerKey(r.Owner) != q.OwnerKey {
						t.Fatalf("listed %s's job", r.Owner)
					}
					got = append(got, r.ID)
				}
				if page.Next == "" {
					return got
				}
				q.After = page.Next
			}
			t.Fatal("the listing never ended")
			return nil
		}
		rev := func(xs ...string) []string {
			out := append([]string(nil), xs...)
			slices.Reverse(out)
			return out
		}
		for name, c := range map[string]struct {
			q    driver.ListQuery
			want []string
		}{
			"all, in pages of 3": {driver.ListQuery{OwnerKey: mine, Limit: 3}, rev(ids...)},
			"failed":             {driver.ListQuery{OwnerKey: mine, Limit: 2, Status: jobs.StatusFailed}, ids[:1]},
			"cancelled":          {driver.ListQuery{OwnerKey: mine, Limit: 2, Status: jobs.StatusCancelled}, ids[1:2]},
			"succeeded":          {driver.ListQuery{OwnerKey: mine, Limit: 2, Status: jobs.StatusSucceeded}, ids[2:3]},
			"queued":             {driver.ListQuery{OwnerKey: mine, Limit: 2, Status: jobs.StatusQueued}, rev(ids[3:]...)},
			"kind other":         {driver.ListQuery{OwnerKey: mine, Limit: 2, Kind: "other"}, rev(ids[1], ids[3], ids[5])},
			"cancelled of kind":  {driver.ListQuery{OwnerKey: mine, Limit: 2, Kind: "other", Status: jobs.StatusCancelled}, ids[1:2]},
			"created before":     {driver.ListQuery{OwnerKey: mine, Limit: 10, CreatedBefore: Epoch.Add(2 * time.Second)}, rev(ids[:2]...)},
			"bob's":              {driver.ListQuery{OwnerKey: theirs, Limit: 10}, nil},
		} {
			got := all(c.q)
			if name == "bob's" {
				c.want = []string{bobs.ID}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("%s: %v, want %v", name, got, c.want)
			}
		}
		// Retried, the failed job is queued again and no longer failed.
		if err := s.Resubmit(ctx, ids[0], driver.Resubmit{At: clock.Now(), SweepAt: clock.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if got := all(driver.ListQuery{OwnerKey: mine, Limit: 5, Status: jobs.StatusFailed}); len(got) != 0 {
			t.Fatalf("a retried job is still listed as failed: %v", got)
		}
	})

	t.Run("ResubmitOnlyFailedOrCancelled", func(t *testing.T) {
		s, clock := setup(t)
		rec := create(t, s, clock.Now())
		wantConflict(t, s.Resubmit(ctx, rec.ID, driver.Resubmit{At: clock.Now()}), jobs.ErrNotResubmittable, jobs.StatusQueued)
		_, tok := claim(t, s, rec.ID, clock.Now())
		if err := s.Finish(ctx, rec.ID, tok, driver.Outcome{Status: jobs.StatusFailed, Code: "boom", Result: []byte(`{"p":1}`), At: clock.Now(), ExpiresAt: clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Resubmit(ctx, rec.ID, driver.Resubmit{At: clock.Now(), SweepAt: clock.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		got := get(t, s, rec.ID)
		if got.Status != jobs.StatusQueued || got.ErrorCode != "" || got.LastError != "boom" || got.Result != nil || !got.ExpiresAt.IsZero() ||
			!got.FinishedAt.IsZero() || got.Attempt != 1 || !got.RunAt.Equal(clock.Now()) {
			t.Fatalf("resubmitted: %+v", got)
		}
		if due, _ := s.Due(ctx, clock.Now().Add(time.Minute), 10); !slices.Contains(due, rec.ID) {
			t.Fatalf("a resubmitted job is not in the sweep index: %v", due)
		}
		again, tok := claim(t, s, rec.ID, clock.Now())
		if again.Attempt != 2 {
			t.Fatalf("the next attempt is %d, want 2", again.Attempt)
		}
		wantConflict(t, s.Resubmit(ctx, rec.ID, driver.Resubmit{At: clock.Now()}), jobs.ErrNotResubmittable, jobs.StatusRunning)
		_ = tok
		if err := s.Resubmit(ctx, wire.NewID(), driver.Resubmit{At: clock.Now()}); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("an unknown job: %v", err)
		}
	})

	t.Run("OwnerSchedulesAreOwnedNamedAndLimited", func(t *testing.T) {
		s, clock := setup(t)
		a := jobs.Schedule{Name: "a", Expression: "rate(1 hour)", TimeZone: "UTC", Kind: "k", Payload: []byte(`{"x":1}`), Overlap: jobs.OverlapAllow, Owner: "alice"}
		b := a
		b.Name = "b.with.dots"
		if list, err := s.OwnerSchedules(ctx, "alicekey"); err != nil || len(list) != 0 {
			t.Fatalf("an owner without schedules: %v %v", list, err)
		}
		for _, sc := range []jobs.Schedule{a, b} {
			if err := s.AddOwnerSchedule(ctx, "alicekey", sc, 2); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.AddOwnerSchedule(ctx, "alicekey", a, 2); err != nil {
			t.Fatalf("the same schedule again (a lost answer): %v", err)
		}
		changed := a
		changed.Expression = "rate(2 hours)"
		if err := s.AddOwnerSchedule(ctx, "alicekey", changed, 5); !errors.Is(err, jobs.ErrScheduleExists) {
			t.Fatalf("another schedule of the same name: %v, want ErrScheduleExists", err)
		}
		c := a
		c.Name = "c"
		if err := s.AddOwnerSchedule(ctx, "alicekey", c, 2); !errors.Is(err, driver.ErrScheduleLimit) {
			t.Fatalf("a third schedule with a limit of 2: %v, want ErrScheduleLimit", err)
		}
		list, err := s.OwnerSchedules(ctx, "alicekey")
		if err != nil || len(list) != 2 || list[0].Name != "a" || list[1].Name != "b.with.dots" || string(list[0].Payload) != `{"x":1}` || list[1].Owner != "alice" {
			t.Fatalf("alice's schedules: %+v %v", list, err)
		}
		if other, _ := s.OwnerSchedules(ctx, "bobkey"); len(other) != 0 {
			t.Fatalf("another owner sees %+v", other)
		}
		if err := s.RemoveOwnerSchedule(ctx, "bobkey", "a"); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("another owner removed alice's schedule: %v", err)
		}
		if err := s.RemoveOwnerSchedule(ctx, "alicekey", "a"); err != nil {
			t.Fatal(err)
		}
		if err := s.RemoveOwnerSchedule(ctx, "alicekey", "a"); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("removing twice: %v", err)
		}
		if err := s.AddOwnerSchedule(ctx, "alicekey", c, 2); err != nil {
			t.Fatalf("a removed schedule frees its place: %v", err)
		}
		if due, err := s.Due(ctx, clock.Now().Add(24*time.Hour), 100); err != nil || len(due) != 0 {
			t.Fatalf("schedules due: %v %v", due, err)
		}
	})

	t.Run("LastFireMovesOnlyFromWhatWasRead", func(t *testing.T) {
		s, clock := setup(t)
		if last, err := s.LastFire(ctx, "nightly"); err != nil || last != "" {
			t.Fatalf("a schedule never fired: %q %v", last, err)
		}
		if err := s.SetLastFire(ctx, "nightly", "", "a"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetLastFire(ctx, "nightly", "", "b"); !errors.Is(err, driver.ErrFireRaced) {
			t.Fatalf("a second first fire: %v, want ErrFireRaced", err)
		}
		if err := s.SetLastFire(ctx, "nightly", "", "a"); err != nil {
			t.Fatalf("the same write again (a lost answer): %v", err)
		}
		if err := s.SetLastFire(ctx, "nightly", "a", "b"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetLastFire(ctx, "nightly", "a", "c"); !errors.Is(err, driver.ErrFireRaced) {
			t.Fatalf("moving from a stale read: %v, want ErrFireRaced", err)
		}
		if last, _ := s.LastFire(ctx, "nightly"); last != "b" {
			t.Fatalf("last fire %q, want b", last)
		}
		if last, _ := s.LastFire(ctx, "other"); last != "" {
			t.Fatalf("schedules share state: %q", last)
		}
		// The state is not a job and never due.
		if _, err := s.Get(ctx, "schedule#nightly"); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("schedule state read as a job: %v", err)
		}
		if due, err := s.Due(ctx, clock.Now().Add(24*time.Hour), 100); err != nil || len(due) != 0 {
			t.Fatalf("schedule state due: %v %v", due, err)
		}
	})
}

func set(ids []string) map[string]bool {
	m := map[string]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}
