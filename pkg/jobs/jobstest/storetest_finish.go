package jobstest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// publishAndFinish checks a run's writes: partial results and the final
// outcome land only under the run's token, an interrupt only after its
// lease, and post-outcome steps keep a final job due until done.
func (c suite) publishAndFinish(t *testing.T) {
	ctx := context.Background()

	c.run(t, "PublishUnderTokenOnly", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		_, token := mustClaim(t, s, rec.ID, clock.Now())
		if err := s.Publish(ctx, rec.ID, token, []byte(`{"done":1}`), clock.Now()); err != nil {
			t.Fatal(err)
		}
		err := s.Publish(ctx, rec.ID, "stale-token", []byte(`{"done":99}`), clock.Now())
		wantConflict(t, err, jobs.StatusRunning)
		if got := mustGet(t, s, rec.ID); string(got.Result) != `{"done":1}` {
			t.Fatalf("result %s after stale publish, want {\"done\":1}", got.Result)
		}
	})

	c.run(t, "PublishQueuedIsLostClaim", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		err := s.Publish(ctx, rec.ID, "", []byte(`1`), clock.Now())
		wantConflict(t, err, jobs.StatusQueued)
	})

	c.run(t, "FinishUnderTokenOnly", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		_, token := mustClaim(t, s, rec.ID, clock.Now())
		err := s.Finish(ctx, rec.ID, "stale-token", driver.Outcome{Status: jobs.StatusSucceeded, Result: []byte(`"stale"`), At: clock.Now()})
		wantConflict(t, err, jobs.StatusRunning)
		clock.Advance(time.Second)
		end := clock.Now()
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, Result: []byte(`"ok"`), At: end, ExpiresAt: end.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, s, rec.ID)
		if got.Status != jobs.StatusSucceeded || string(got.Result) != `"ok"` || got.ClaimToken != "" ||
			!got.LeaseUntil.IsZero() || !got.SweepAt.IsZero() || !got.FinishedAt.Equal(end) || !got.ExpiresAt.Equal(end.Add(time.Hour)) {
			t.Fatalf("finished record %+v", got)
		}
	})

	c.run(t, "FinishedJobIsNotReclaimedRepublishedOrRefinished", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		_, token := mustClaim(t, s, rec.ID, clock.Now())
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusFailed, Code: "boom", At: clock.Now()}); err != nil {
			t.Fatal(err)
		}
		_, err := s.Claim(ctx, rec.ID, driver.Claim{Token: "again", At: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute)})
		wantConflict(t, err, jobs.StatusFailed)
		wantConflict(t, s.Publish(ctx, rec.ID, token, []byte(`1`), clock.Now()), jobs.StatusFailed)
		wantConflict(t, s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, At: clock.Now()}), jobs.StatusFailed)
		if got := mustGet(t, s, rec.ID); got.Status != jobs.StatusFailed || got.ErrorCode != "boom" || got.Attempt != 1 {
			t.Fatalf("finished job changed: %+v", got)
		}
	})

	c.run(t, "NoLostUpdateBetweenPublishAndFinish", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		_, token := mustClaim(t, s, rec.ID, clock.Now())
		if err := s.Publish(ctx, rec.ID, token, []byte(`{"p":1}`), clock.Now()); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, Result: []byte(`{"final":true}`), At: clock.Now()}); err != nil {
			t.Fatal(err)
		}
		// A publish that was in flight when the run finished must not land.
		wantConflict(t, s.Publish(ctx, rec.ID, token, []byte(`{"p":2}`), clock.Now()), jobs.StatusSucceeded)
		if got := mustGet(t, s, rec.ID); string(got.Result) != `{"final":true}` {
			t.Fatalf("result %s, want the final one", got.Result)
		}
	})

	c.run(t, "ConcurrentPublishAndFinish", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		_, token := mustClaim(t, s, rec.ID, clock.Now())
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
		if got := mustGet(t, s, rec.ID); got.Status != jobs.StatusSucceeded || string(got.Result) != `"final"` {
			t.Fatalf("got status %s result %s, want succeeded \"final\"", got.Status, got.Result)
		}
	})

	c.run(t, "FailedRunKeepsLastPartial", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		_, token := mustClaim(t, s, rec.ID, clock.Now())
		if err := s.Publish(ctx, rec.ID, token, []byte(`{"done":3}`), clock.Now()); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusFailed, Code: jobs.CodeTimedOut, At: clock.Now()}); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, rec.ID); got.ErrorCode != jobs.CodeTimedOut || string(got.Result) != `{"done":3}` {
			t.Fatalf("got code %q result %s", got.ErrorCode, got.Result)
		}
	})

	c.run(t, "InterruptOnlyAfterLease", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		_, token := mustClaim(t, s, rec.ID, clock.Now()) // lease: now + 1m
		early := driver.Outcome{Status: jobs.StatusFailed, Code: jobs.CodeInterrupted, At: clock.Now(), LeaseExpiredBy: clock.Now().Add(30 * time.Second)}
		wantConflict(t, s.Finish(ctx, rec.ID, token, early), jobs.StatusRunning)
		clock.Advance(2 * time.Minute)
		late := driver.Outcome{Status: jobs.StatusFailed, Code: jobs.CodeInterrupted, At: clock.Now(), LeaseExpiredBy: clock.Now()}
		if err := s.Finish(ctx, rec.ID, token, late); err != nil {
			t.Fatal(err)
		}
		// The worker that owned the lease comes back late: it cannot overwrite.
		wantConflict(t, s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, Result: []byte(`1`), At: clock.Now()}), jobs.StatusFailed)
	})

	c.run(t, "OverlappingInterruptsOneWinner", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		_, token := mustClaim(t, s, rec.ID, clock.Now())
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
				} else if !isConflict(err) {
					t.Errorf("Finish: %v", err)
				}
			}()
		}
		wg.Wait()
		if wins != 1 {
			t.Fatalf("%d interrupts won, want 1", wins)
		}
	})

	c.run(t, "AfterStepsKeepAFinalJobDueUntilDone", func(t *testing.T, s driver.Store, clock *Clock) {
		now := clock.Now()
		rec := mustCreate(t, s, now)
		_, token := mustClaim(t, s, rec.ID, now)
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, At: now, After: []string{"batch"}}); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, rec.ID); got.Status != jobs.StatusSucceeded || !slices.Equal(got.After, []string{"batch"}) {
			t.Fatalf("finished with a step pending: %+v", got)
		}
		if ids, _ := s.Due(ctx, now.Add(time.Hour), 10); !set(ids)[rec.ID] {
			t.Fatalf("a final job with a step pending is not due: %v", ids)
		}
		of := driver.AfterOfRecord(mustGet(t, s, rec.ID))
		if err := s.DoneAfter(ctx, rec.ID, of); err != nil {
			t.Fatal(err)
		}
		if err := s.DoneAfter(ctx, rec.ID, of); err != nil {
			t.Fatalf("DoneAfter again: %v, want nil", err)
		}
		if got := mustGet(t, s, rec.ID); len(got.After) != 0 {
			t.Fatalf("steps after DoneAfter: %v", got.After)
		}
		if ids, _ := s.Due(ctx, now.Add(time.Hour), 10); len(ids) != 0 {
			t.Fatalf("due after DoneAfter: %v", ids)
		}
		// A cancel of a queued job with steps, likewise.
		other := mustCreate(t, s, now)
		if err := s.CancelQueued(ctx, other.ID, driver.CancelQueued{At: now, ExpiresAt: now.Add(time.Hour), After: []string{"batch"}}); err != nil {
			t.Fatal(err)
		}
		if ids, _ := s.Due(ctx, now.Add(time.Hour), 10); !set(ids)[other.ID] {
			t.Fatalf("a cancelled job with a step pending is not due: %v", ids)
		}
	})
	c.run(t, "EachFinalWriteCountsItsOutcome", func(t *testing.T, s driver.Store, clock *Clock) {
		// Cancelled, resubmitted, cancelled again, resubmitted, run and
		// failed: three outcomes, counted 1, 2, 3; a write that counts from
		// a stale count lands nothing.
		now := clock.Now()
		rec := NewRecord(wire.NewID(), now)
		rec.Events = true
		if err := s.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		cancel := func(seq int) error {
			return s.CancelQueued(ctx, rec.ID, driver.CancelQueued{At: clock.Now(), ExpiresAt: clock.Now().Add(time.Hour), Seq: seq})
		}
		resubmit := func() {
			t.Helper()
			clock.Advance(time.Second)
			if err := s.Resubmit(ctx, rec.ID, driver.Resubmit{At: clock.Now(), SweepAt: clock.Now().Add(time.Minute)}); err != nil {
				t.Fatalf("Resubmit: %v", err)
			}
		}
		if err := cancel(1); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, rec.ID); got.Outcomes != 1 || !got.Events {
			t.Fatalf("after the first cancel: outcomes %d events %v, want 1 true", got.Outcomes, got.Events)
		}
		resubmit()
		wantConflict(t, cancel(1), jobs.StatusQueued) // a cancel that read the job before the resubmit
		clock.Advance(time.Second)
		if err := cancel(2); err != nil {
			t.Fatal(err)
		}
		resubmit()
		_, token := mustClaim(t, s, rec.ID, clock.Now())
		err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusFailed, Code: "boom", At: clock.Now(), Seq: 2})
		wantConflict(t, err, jobs.StatusRunning)
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusFailed, Code: "boom", At: clock.Now(), Seq: 3}); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, rec.ID); got.Outcomes != 3 || got.Status != jobs.StatusFailed {
			t.Fatalf("after the third outcome: %s, outcomes %d; want failed, 3", got.Status, got.Outcomes)
		}
	})

	c.run(t, "OutcomesAreNotCountedWithoutSeq", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		_, token := mustClaim(t, s, rec.ID, clock.Now())
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, At: clock.Now()}); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, rec.ID); got.Outcomes != 0 || got.Events || got.OnFailure != "" {
			t.Fatalf("plain job: outcomes %d events %v on-failure %q; want none", got.Outcomes, got.Events, got.OnFailure)
		}
	})

	c.run(t, "CancelOfAParkedJobMakesItsStepsDue", func(t *testing.T, s driver.Store, clock *Clock) {
		// A job parked for a day (a sleep, a wait) and cancelled with
		// post-outcome steps is due for the sweeper at the cancel, not at
		// the park's end: its steps would wait a day otherwise.
		now := clock.Now()
		rec := mustCreate(t, s, now)
		_, token := mustClaim(t, s, rec.ID, now)
		day := now.Add(24 * time.Hour)
		if err := s.Requeue(ctx, rec.ID, token, driver.Requeue{At: now, RunAt: day, SweepAt: day, WaitingOn: "sleep"}); err != nil {
			t.Fatal(err)
		}
		if err := s.CancelQueued(ctx, rec.ID, driver.CancelQueued{At: now, ExpiresAt: now.Add(time.Hour), After: []string{"event"}}); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, rec.ID); !got.SweepAt.Equal(now) {
			t.Fatalf("cancelled with steps pending: sweep at %v, want the cancel's %v", got.SweepAt, now)
		}
	})

	c.run(t, "NoResubmitWhileStepsArePending", func(t *testing.T, s driver.Store, clock *Clock) {
		// A retry must not start a new outcome before the last one's steps
		// (its event) have run: the pending event would be lost.
		now := clock.Now()
		rec := mustCreate(t, s, now)
		if err := s.CancelQueued(ctx, rec.ID, driver.CancelQueued{At: now, ExpiresAt: now.Add(time.Hour), After: []string{"event"}}); err != nil {
			t.Fatal(err)
		}
		err := s.Resubmit(ctx, rec.ID, driver.Resubmit{At: now, SweepAt: now.Add(time.Minute)})
		wantConflict(t, err, jobs.StatusCancelled)
		if err := s.DoneAfter(ctx, rec.ID, driver.AfterOfRecord(mustGet(t, s, rec.ID))); err != nil {
			t.Fatal(err)
		}
		if err := s.Resubmit(ctx, rec.ID, driver.Resubmit{At: now, SweepAt: now.Add(time.Minute)}); err != nil {
			t.Fatalf("Resubmit once the steps ran: %v", err)
		}
	})

	c.run(t, "DoneAfterOfAnEarlierOutcomeClearsNothing", func(t *testing.T, s driver.Store, clock *Clock) {
		// A step-clearing write for a job's first outcome that lands late,
		// after a retry's second outcome, must leave the second outcome's
		// steps (its event) pending.
		now := clock.Now()
		rec := mustCreate(t, s, now)
		_, token := mustClaim(t, s, rec.ID, now)
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusFailed, Code: "x", At: now, ExpiresAt: now.Add(time.Hour), After: []string{"event"}, Seq: 1}); err != nil {
			t.Fatal(err)
		}
		first := driver.AfterOfRecord(mustGet(t, s, rec.ID))
		if err := s.DoneAfter(ctx, rec.ID, first); err != nil {
			t.Fatal(err)
		}
		if err := s.Resubmit(ctx, rec.ID, driver.Resubmit{At: now, SweepAt: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		_, token = mustClaim(t, s, rec.ID, now)
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, At: now, ExpiresAt: now.Add(time.Hour), After: []string{"event"}, Seq: 2}); err != nil {
			t.Fatal(err)
		}
		if err := s.DoneAfter(ctx, rec.ID, first); err != nil {
			t.Fatalf("a late DoneAfter of the first outcome: %v, want nil", err)
		}
		got := mustGet(t, s, rec.ID)
		if !slices.Equal(got.After, []string{"event"}) {
			t.Fatalf("a late DoneAfter of the first outcome cleared the second's steps: %v", got.After)
		}
		if err := s.DoneAfter(ctx, rec.ID, driver.AfterOfRecord(got)); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, rec.ID); len(got.After) != 0 {
			t.Fatalf("steps after the second outcome's DoneAfter: %v", got.After)
		}
	})

	c.run(t, "RescheduleOfAFinalJobWithPendingSteps", func(t *testing.T, s driver.Store, clock *Clock) {
		// A sweep that cannot run a final job's steps puts the job back
		// later; a final job without pending steps is not in the schedule.
		now := clock.Now()
		rec := mustCreate(t, s, now)
		_, token := mustClaim(t, s, rec.ID, now)
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, At: now, ExpiresAt: now.Add(time.Hour), After: []string{"event"}}); err != nil {
			t.Fatal(err)
		}
		later := now.Add(10 * time.Minute)
		if err := s.Reschedule(ctx, rec.ID, driver.Expect{Status: jobs.StatusSucceeded}, later); err != nil {
			t.Fatalf("Reschedule of a final job with steps pending: %v", err)
		}
		if ids, _ := s.Due(ctx, later.Add(-time.Second), 10); set(ids)[rec.ID] {
			t.Fatalf("due before its new sweep time: %v", ids)
		}
		if ids, _ := s.Due(ctx, later, 10); !set(ids)[rec.ID] {
			t.Fatalf("not due at its new sweep time: %v", ids)
		}
		wantConflict(t, s.Reschedule(ctx, rec.ID, driver.Expect{Status: jobs.StatusFailed}, later), jobs.StatusSucceeded)
		if err := s.DoneAfter(ctx, rec.ID, driver.AfterOfRecord(mustGet(t, s, rec.ID))); err != nil {
			t.Fatal(err)
		}
		if err := s.Reschedule(ctx, rec.ID, driver.Expect{Status: jobs.StatusSucceeded}, later); !isConflict(err) {
			t.Fatalf("Reschedule of a final job without steps: %v, want a conflict", err)
		}
	})
}
