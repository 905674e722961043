package jobstest

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// sweepIndex checks the sweep index: what is due, and moving a job's sweep
// time.
func (c suite) sweepIndex(t *testing.T) {
	ctx := context.Background()

	c.run(t, "DueListsOnlyUnfinishedJobsWhoseTimeCame", func(t *testing.T, s driver.Store, clock *Clock) {
		now := clock.Now()
		queued := mustCreate(t, s, now)       // sweep at now+2m
		running := mustCreate(t, s, now)      // claimed below
		finished := mustCreate(t, s, now)     // finished below
		later := NewRecord(wire.NewID(), now) // sweep at now+1h
		later.SweepAt = now.Add(time.Hour)
		if err := s.Create(ctx, later); err != nil {
			t.Fatal(err)
		}
		mustClaim(t, s, running.ID, now)
		_, tok := mustClaim(t, s, finished.ID, now)
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

	c.run(t, "Reschedule", func(t *testing.T, s driver.Store, clock *Clock) {
		now := clock.Now()
		q := mustCreate(t, s, now)
		if err := s.Reschedule(ctx, q.ID, driver.Expect{Status: jobs.StatusQueued}, now.Add(10*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, q.ID); got.Dispatches != 1 || !got.SweepAt.Equal(now.Add(10*time.Minute)) {
			t.Fatalf("rescheduled queued job: dispatches %d sweep %v", got.Dispatches, got.SweepAt)
		}
		r := mustCreate(t, s, now)
		_, token := mustClaim(t, s, r.ID, now)
		wantConflict(t, s.Reschedule(ctx, r.ID, driver.Expect{Status: jobs.StatusRunning, Token: "stale"}, now.Add(time.Hour)), jobs.StatusRunning)
		wantConflict(t, s.Reschedule(ctx, r.ID, driver.Expect{Status: jobs.StatusQueued}, now.Add(time.Hour)), jobs.StatusRunning)
		if err := s.Reschedule(ctx, r.ID, driver.Expect{Status: jobs.StatusRunning, Token: token}, now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(ctx, r.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, At: now}); err != nil {
			t.Fatal(err)
		}
		// A finished job has no sweep schedule to move: it must not reappear in the index.
		wantConflict(t, s.Reschedule(ctx, r.ID, driver.Expect{Status: jobs.StatusRunning, Token: token}, now), jobs.StatusSucceeded)
		if ids, _ := s.Due(ctx, now.Add(2*time.Hour), 100); len(ids) != 1 || ids[0] != q.ID {
			t.Fatalf("Due = %v, want only the queued job", ids)
		}
	})
}
