package jobstest

import (
	"context"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// longWork is the conformance suite's part for work longer than one
// invocation: heartbeats, checkpoints and continuations.
func (c suite) longWork(t *testing.T) {
	ctx := context.Background()
	start := func(t *testing.T, s driver.Store, clock *Clock) (*driver.Record, string) {
		t.Helper()
		rec := NewRecord(wire.NewID(), clock.Now())
		if err := s.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		token := wire.NewID()
		got, err := s.Claim(ctx, rec.ID, driver.Claim{Token: token, At: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if !got.FirstStartedAt.Equal(clock.Now()) {
			t.Fatalf("first start %v, want the claim's time", got.FirstStartedAt)
		}
		return got, token
	}

	c.run(t, "ALateHeartbeatOrCheckpointNeverMovesTheLeaseBack", func(t *testing.T, s driver.Store, clock *Clock) {
		now := clock.Now()
		rec := NewRecord(wire.NewID(), now)
		rec.SweepAt = time.Time{}
		if err := s.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		_, token := mustClaim(t, s, rec.ID, now)
		later := now.Add(3 * time.Minute)
		if err := s.Heartbeat(ctx, rec.ID, token, driver.Heartbeat{LeaseUntil: later, At: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		// Sent before that one, held by the network, landing after it.
		early := now.Add(2 * time.Minute)
		if err := s.Heartbeat(ctx, rec.ID, token, driver.Heartbeat{LeaseUntil: early, At: now, SweepAt: early}); err != nil {
			t.Fatalf("a late heartbeat: %v, want it to land (without its lease)", err)
		}
		if err := s.Checkpoint(ctx, rec.ID, token, driver.Checkpoint{Data: []byte("cp"), LeaseUntil: early, At: now}); err != nil {
			t.Fatalf("a late checkpoint: %v, want it stored", err)
		}
		got := mustGet(t, s, rec.ID)
		if !got.LeaseUntil.Equal(later) || string(got.Checkpoint) != "cp" {
			t.Fatalf("lease %v checkpoint %q; want the later lease %v kept and the checkpoint stored", got.LeaseUntil, got.Checkpoint, later)
		}
		if ids, _ := s.Due(ctx, early, 10); len(ids) != 1 {
			t.Fatalf("the late first heartbeat's sweep entry: Due = %v", ids)
		}
		// A stale run's write still changes nothing.
		wantConflict(t, s.Heartbeat(ctx, rec.ID, "stale", driver.Heartbeat{LeaseUntil: early, At: now}), jobs.StatusRunning)
	})

	c.run(t, "HeartbeatExtendsTheLeaseOfItsOwnRunOnly", func(t *testing.T, s driver.Store, clock *Clock) {
		rec, token := start(t, s, clock)
		later := clock.Now().Add(10 * time.Minute)
		if err := s.Heartbeat(ctx, rec.ID, token, driver.Heartbeat{LeaseUntil: later, At: clock.Now(), SweepAt: later}); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Get(ctx, rec.ID); !got.LeaseUntil.Equal(later) || !got.SweepAt.Equal(later) {
			t.Fatalf("lease %v sweep %v, want both %v", got.LeaseUntil, got.SweepAt, later)
		}
		wantRunConflict(t, s, runOf{rec.ID, "stale"}, s.Heartbeat(ctx, rec.ID, "stale", driver.Heartbeat{LeaseUntil: later.Add(time.Hour), At: clock.Now()}), false)
		if err := s.RequestCancel(ctx, rec.ID, clock.Now()); err != nil {
			t.Fatal(err)
		}
		// After a cancel request a heartbeat still renews the lease (the
		// handler may take a while to stop, and no retry may start beside
		// it), and says the run was cancelled.
		renewed := later.Add(time.Hour)
		wantRunConflict(t, s, runOf{rec.ID, token}, s.Heartbeat(ctx, rec.ID, token, driver.Heartbeat{LeaseUntil: renewed, At: clock.Now()}), true)
		wantRunConflict(t, s, runOf{rec.ID, token}, s.Checkpoint(ctx, rec.ID, token, driver.Checkpoint{Data: []byte("late"), LeaseUntil: renewed, At: clock.Now()}), true)
		if got, _ := s.Get(ctx, rec.ID); !got.LeaseUntil.Equal(renewed) {
			t.Fatalf("a heartbeat after a cancel request left the lease at %v, want it renewed to %v", got.LeaseUntil, renewed)
		}
	})

	c.run(t, "CheckpointIsStoredWithItsRunsLeaseAndKeptForTheNextRun", func(t *testing.T, s driver.Store, clock *Clock) {
		rec, token := start(t, s, clock)
		lease := clock.Now().Add(5 * time.Minute)
		if err := s.Checkpoint(ctx, rec.ID, token, driver.Checkpoint{Data: []byte("sealed-1"), LeaseUntil: lease, At: clock.Now()}); err != nil {
			t.Fatal(err)
		}
		wantRunConflict(t, s, runOf{rec.ID, "stale"}, s.Checkpoint(ctx, rec.ID, "stale", driver.Checkpoint{Data: []byte("stale"), LeaseUntil: lease, At: clock.Now()}), false)
		got, _ := s.Get(ctx, rec.ID)
		if string(got.Checkpoint) != "sealed-1" || !got.LeaseUntil.Equal(lease) {
			t.Fatalf("checkpoint %q lease %v, want sealed-1 and %v", got.Checkpoint, got.LeaseUntil, lease)
		}
		if err := s.Checkpoint(ctx, rec.ID, token, driver.Checkpoint{Data: make([]byte, driver.MaxCheckpointBytes+1), LeaseUntil: lease, At: clock.Now()}); err == nil {
			t.Fatal("a checkpoint over MaxCheckpointBytes was stored")
		}
		// A continuation gives its attempt back, counts itself, keeps the
		// checkpoint and the first start; the next claim sees them.
		clock.Advance(time.Minute)
		if err := s.Requeue(ctx, rec.ID, token, driver.Requeue{At: clock.Now(), RunAt: clock.Now(), SweepAt: clock.Now().Add(time.Minute), Continue: true}); err != nil {
			t.Fatal(err)
		}
		got, _ = s.Get(ctx, rec.ID)
		if got.Status != jobs.StatusQueued || got.Attempt != 0 || got.Continuations != 1 || string(got.Checkpoint) != "sealed-1" {
			t.Fatalf("after a continuation: %s attempt %d continuations %d checkpoint %q", got.Status, got.Attempt, got.Continuations, got.Checkpoint)
		}
		next, err := s.Claim(ctx, rec.ID, driver.Claim{Token: wire.NewID(), At: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		if next.Attempt != 1 || string(next.Checkpoint) != "sealed-1" || !next.FirstStartedAt.Equal(Epoch) || !next.StartedAt.Equal(clock.Now()) {
			t.Fatalf("the next run: attempt %d checkpoint %q first start %v start %v", next.Attempt, next.Checkpoint, next.FirstStartedAt, next.StartedAt)
		}
	})
}
