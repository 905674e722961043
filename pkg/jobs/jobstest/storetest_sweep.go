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

	c.run(t, "AJobSentFirstIsOutOfTheIndexUntilAHeartbeatOrARequeueWithASweepTime", func(t *testing.T, s driver.Store, clock *Clock) {
		now := clock.Now()
		rec := NewRecord(wire.NewID(), now)
		rec.SweepAt = time.Time{} // its message was sent first
		if err := s.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		late := now.Add(24 * time.Hour)
		due := func() []string {
			ids, err := s.Due(ctx, late, 100)
			if err != nil {
				t.Fatal(err)
			}
			return ids
		}
		if ids := due(); len(ids) != 0 {
			t.Fatalf("a job sent before it was stored is due: %v", ids)
		}
		// Nothing to move: a reschedule finds no entry.
		wantConflict(t, s.Reschedule(ctx, rec.ID, driver.Expect{Status: jobs.StatusQueued}, now), jobs.StatusQueued)
		_, token := mustClaim(t, s, rec.ID, now)
		if ids := due(); len(ids) != 0 {
			t.Fatalf("its claim put it in the index: %v", ids)
		}
		// A heartbeat's lease is timed by the sweeper: in.
		if err := s.Heartbeat(ctx, rec.ID, token, driver.Heartbeat{LeaseUntil: now.Add(time.Minute), At: now, SweepAt: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if ids := due(); len(ids) != 1 || ids[0] != rec.ID {
			t.Fatalf("after a heartbeat with a sweep time: Due = %v, want the job", ids)
		}
		// A retry whose new message is sent: out again.
		if err := s.Requeue(ctx, rec.ID, token, driver.Requeue{At: now, RunAt: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, rec.ID); got.Status != jobs.StatusQueued || !got.SweepAt.IsZero() {
			t.Fatalf("requeued without a sweep time: %+v", got)
		}
		if ids := due(); len(ids) != 0 {
			t.Fatalf("a retry whose message was sent is due: %v", ids)
		}
		// One whose send failed: in, at its sweep time.
		_, token = mustClaim(t, s, rec.ID, now.Add(time.Minute))
		if err := s.Requeue(ctx, rec.ID, token, driver.Requeue{At: now, RunAt: now.Add(2 * time.Minute), SweepAt: now.Add(5 * time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if ids := due(); len(ids) != 1 || ids[0] != rec.ID {
			t.Fatalf("a retry with a sweep time: Due = %v, want the job", ids)
		}
	})
}
