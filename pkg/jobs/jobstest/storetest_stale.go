package jobstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// staleParts: writes that do not land never change the parts a job names,
// nor how long their items last.
func (c suite) staleParts(t *testing.T) {
	ctx := context.Background()
	c.run(t, "AStaleFinishNeverShortensAResultItem", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		_, token := mustClaim(t, s, rec.ID, clock.Now())
		big := bigPayload("s")
		expires := clock.Now().Add(2 * time.Hour)
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, Result: big, ResultUntil: expires, At: clock.Now(), ExpiresAt: expires}); err != nil {
			t.Fatal(err)
		}
		// A stale run (its lease ended; its final write computed earlier)
		// with the same result: its final write fails, its item put did not.
		stale := clock.Now().Add(-time.Hour)
		var ce *driver.ConflictError
		if err := s.Finish(ctx, rec.ID, "stale-token", driver.Outcome{Status: jobs.StatusSucceeded, Result: big, ResultUntil: stale.Add(2 * time.Hour),
			At: stale, ExpiresAt: stale.Add(2 * time.Hour)}); !errors.As(err, &ce) {
			t.Fatalf("a stale finish: %v, want a conflict", err)
		}
		clock.Advance(90 * time.Minute)
		got := mustGet(t, s, rec.ID)
		if got.ResultRef == "" {
			return // inline
		}
		if r, _, err := s.ReadPart(ctx, got, driver.PartResult); err != nil || string(r) != string(big) {
			t.Fatalf("the job (expiring at %v) lost its result item to a stale finish: %v", got.ExpiresAt, err)
		}
	})

	c.run(t, "AStaleCheckpointIsNeverNamed", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		_, token := mustClaim(t, s, rec.ID, clock.Now())
		until := clock.Now().Add(30 * 24 * time.Hour)
		mine := bigPayload("m")
		if err := s.Checkpoint(ctx, rec.ID, token, driver.Checkpoint{Data: mine, LeaseUntil: clock.Now().Add(time.Minute), At: clock.Now(), Until: until}); err != nil {
			t.Fatal(err)
		}
		if err := s.Checkpoint(ctx, rec.ID, "stale-token", driver.Checkpoint{Data: bigPayload("x"), LeaseUntil: clock.Now().Add(time.Minute), At: clock.Now(), Until: until}); err == nil {
			t.Fatal("a stale checkpoint landed")
		}
		if err := s.Requeue(ctx, rec.ID, "stale-token", driver.Requeue{At: clock.Now(), RunAt: clock.Now(), Continue: true, Checkpoint: bigPayload("y"), CheckpointUntil: until}); err == nil {
			t.Fatal("a stale continuation landed")
		}
		got := mustGet(t, s, rec.ID)
		cp, _, err := s.ReadPart(ctx, got, driver.PartCheckpoint)
		if err != nil || string(cp) != string(mine) {
			t.Fatalf("checkpoint %d bytes (%v), want the run's own", len(cp), err)
		}
	})
}
