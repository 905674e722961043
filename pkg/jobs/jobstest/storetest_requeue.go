package jobstest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// retriesCancelsAndResubmits checks a job's ways back to the queue or out of
// it: a retry, a cancel (of a queued job, or requested of a running one) and
// a resubmit.
func (c suite) retriesCancelsAndResubmits(t *testing.T) {
	ctx := context.Background()

	c.run(t, "RequeueForRetry", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		_, token := mustClaim(t, s, rec.ID, clock.Now())
		next := clock.Now().Add(30 * time.Second)
		wantConflict(t, s.Requeue(ctx, rec.ID, "stale", driver.Requeue{At: clock.Now(), RunAt: next, SweepAt: next, LastError: "boom"}), jobs.StatusRunning)
		if err := s.Requeue(ctx, rec.ID, token, driver.Requeue{At: clock.Now(), RunAt: next, SweepAt: next.Add(time.Minute), LastError: "boom"}); err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, s, rec.ID)
		if got.Status != jobs.StatusQueued || got.ClaimToken != "" || !got.RunAt.Equal(next) || got.LastError != "boom" || got.Attempt != 1 || !got.SweepAt.Equal(next.Add(time.Minute)) {
			t.Fatalf("requeued %+v", got)
		}
		// The old run cannot finish it now.
		wantConflict(t, s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, At: clock.Now()}), jobs.StatusQueued)
		clock.Advance(time.Minute)
		again, _ := mustClaim(t, s, rec.ID, clock.Now())
		if again.Attempt != 2 {
			t.Fatalf("attempt %d after a retry, want 2", again.Attempt)
		}
	})

	c.run(t, "CancelQueued", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		if err := s.CancelQueued(ctx, rec.ID, driver.CancelQueued{At: clock.Now(), ExpiresAt: clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, s, rec.ID)
		if got.Status != jobs.StatusCancelled || !got.SweepAt.IsZero() || got.ExpiresAt.IsZero() {
			t.Fatalf("cancelled %+v", got)
		}
		_, err := s.Claim(ctx, rec.ID, driver.Claim{Token: "t", At: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute)})
		wantConflict(t, err, jobs.StatusCancelled)
		wantConflict(t, s.CancelQueued(ctx, rec.ID, driver.CancelQueued{At: clock.Now(), ExpiresAt: clock.Now()}), jobs.StatusCancelled)
		if ids, _ := s.Due(ctx, clock.Now().Add(time.Hour), 10); len(ids) != 0 {
			t.Fatalf("a cancelled job is due: %v", ids)
		}
	})

	c.run(t, "RequestCancelLetsOnlyCancelledLand", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		wantConflict(t, s.RequestCancel(ctx, rec.ID, clock.Now()), jobs.StatusQueued)
		_, token := mustClaim(t, s, rec.ID, clock.Now())
		if err := s.RequestCancel(ctx, rec.ID, clock.Now()); err != nil {
			t.Fatal(err)
		}
		wantRunConflict(t, s, runOf{rec.ID, token}, s.Publish(ctx, rec.ID, token, []byte(`1`), clock.Now()), true)
		wantRunConflict(t, s, runOf{rec.ID, token}, s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, Result: []byte(`1`), At: clock.Now()}), true)
		wantRunConflict(t, s, runOf{rec.ID, token}, s.Requeue(ctx, rec.ID, token, driver.Requeue{At: clock.Now(), RunAt: clock.Now(), SweepAt: clock.Now()}), true)
		wantRunConflict(t, s, runOf{rec.ID, "stale"}, s.Publish(ctx, rec.ID, "stale", []byte(`1`), clock.Now()), false)
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusCancelled, At: clock.Now()}); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, rec.ID); got.Status != jobs.StatusCancelled || !got.CancelRequested {
			t.Fatalf("got %+v", got)
		}
		wantConflict(t, s.RequestCancel(ctx, rec.ID, clock.Now()), jobs.StatusCancelled)
	})

	c.run(t, "AbandonedRunKeepsItsLeaseAgainstResubmit", func(t *testing.T, s driver.Store, clock *Clock) {
		now := clock.Now()
		rec := mustCreate(t, s, now)
		_, token := mustClaim(t, s, rec.ID, now)
		if err := s.RequestCancel(ctx, rec.ID, now); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusCancelled, At: now, KeepLease: true}); err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, s, rec.ID)
		if got.LeaseUntil.IsZero() {
			t.Fatal("the abandoned run's lease is gone")
		}
		wantConflict(t, s.Resubmit(ctx, rec.ID, driver.Resubmit{At: now, SweepAt: now.Add(time.Minute)}), jobs.StatusCancelled)
		clock.Advance(2 * time.Minute) // past the lease
		if err := s.Resubmit(ctx, rec.ID, driver.Resubmit{At: clock.Now(), SweepAt: clock.Now().Add(time.Minute)}); err != nil {
			t.Fatalf("resubmit after the lease: %v", err)
		}
		if got := mustGet(t, s, rec.ID); got.AttemptBase != 1 || got.Attempt != 1 || !got.LeaseUntil.IsZero() || got.Dispatches != 0 {
			t.Fatalf("resubmitted %+v, want attempt base 1 and no lease", got)
		}
	})

	c.run(t, "ResubmitOnlyFailedOrCancelled", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		wantConflict(t, s.Resubmit(ctx, rec.ID, driver.Resubmit{At: clock.Now()}), jobs.StatusQueued)
		_, tok := mustClaim(t, s, rec.ID, clock.Now())
		if err := s.Finish(ctx, rec.ID, tok, driver.Outcome{Status: jobs.StatusFailed, Code: "boom", Result: []byte(`{"p":1}`), At: clock.Now(), ExpiresAt: clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Resubmit(ctx, rec.ID, driver.Resubmit{At: clock.Now(), SweepAt: clock.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, s, rec.ID)
		if got.Status != jobs.StatusQueued || got.ErrorCode != "" || got.LastError != "boom" || got.Result != nil || !got.ExpiresAt.IsZero() ||
			!got.FinishedAt.IsZero() || got.Attempt != 1 || !got.RunAt.Equal(clock.Now()) {
			t.Fatalf("resubmitted: %+v", got)
		}
		if due, _ := s.Due(ctx, clock.Now().Add(time.Minute), 10); !slices.Contains(due, rec.ID) {
			t.Fatalf("a resubmitted job is not in the sweep index: %v", due)
		}
		again, tok := mustClaim(t, s, rec.ID, clock.Now())
		if again.Attempt != 2 {
			t.Fatalf("the next attempt is %d, want 2", again.Attempt)
		}
		wantConflict(t, s.Resubmit(ctx, rec.ID, driver.Resubmit{At: clock.Now()}), jobs.StatusRunning)
		_ = tok
		if err := s.Resubmit(ctx, wire.NewID(), driver.Resubmit{At: clock.Now()}); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("an unknown job: %v", err)
		}
	})

	c.run(t, "ResubmitForgetsTheFirstStart", func(t *testing.T, s driver.Store, clock *Clock) {
		// A kind's MaxRunTime counts from the resubmitted run's first
		// start, not the first run's.
		now := clock.Now()
		rec := mustCreate(t, s, now)
		_, token := mustClaim(t, s, rec.ID, now)
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusFailed, Code: "timed_out", At: now, ExpiresAt: now.Add(24 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Hour)
		if err := s.Resubmit(ctx, rec.ID, driver.Resubmit{At: clock.Now(), SweepAt: clock.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, rec.ID); !got.FirstStartedAt.IsZero() {
			t.Fatalf("first start %v after a resubmit, want none", got.FirstStartedAt)
		}
		got, _ := mustClaim(t, s, rec.ID, clock.Now())
		if !got.FirstStartedAt.Equal(clock.Now()) {
			t.Fatalf("first start %v after the resubmitted run's claim at %v", got.FirstStartedAt, clock.Now())
		}
	})
}
