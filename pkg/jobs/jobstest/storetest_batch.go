package jobstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/storekey"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// batches checks batches: each job is counted once in its shard, and a batch
// ends only once created and counted.
func (c suite) batches(t *testing.T) {
	ctx := context.Background()

	c.run(t, "BatchCountsEachJobOnce", func(t *testing.T, s driver.Store, clock *Clock) {
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
		if err := s.OpenBatch(ctx, batchID); !isConflict(err) {
			t.Fatalf("second OpenBatch: %v, want a *driver.ConflictError", err)
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
		if err := s.EndBatch(ctx, batchID, jobs.StatusFailed, now, now.Add(time.Hour)); !isConflict(err) {
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
		if err := s.EndBatch(ctx, batchID, jobs.StatusFailed, now.Add(time.Second), now.Add(time.Hour)); !isConflict(err) {
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

	c.run(t, "BatchCannotEndWhileBeingCreated", func(t *testing.T, s driver.Store, clock *Clock) {
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
		if err := s.EndBatch(ctx, batchID, jobs.StatusFailed, now, now.Add(time.Hour)); !isConflict(err) {
			t.Fatalf("EndBatch of a batch being created: %v, want a *driver.ConflictError", err)
		}
		if err := s.OpenBatch(ctx, batchID); err != nil {
			t.Fatal(err)
		}
		if err := s.EndBatch(ctx, batchID, jobs.StatusFailed, now, now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	})
}
