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

// parents is the conformance suite's part for jobs that run after other
// jobs: dependents recorded on their parents, parents counted on their
// dependents, and the writes that must not miss either.
func (c suite) parents(t *testing.T) {
	ctx := context.Background()
	// mustWaiting stores a job that waits on parents.
	mustWaiting := func(t *testing.T, s driver.Store, now time.Time, parents ...string) *driver.Record {
		t.Helper()
		rec := NewRecord(wire.NewID(), now)
		rec.Parents, rec.WaitingOn = parents, driver.WaitParents
		if err := s.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		return rec
	}
	c.run(t, "DependentsAreRecordedOnUnfinishedParentsOnly", func(t *testing.T, s driver.Store, clock *Clock) {
		now := clock.Now()
		p := mustCreate(t, s, now)
		d := driver.DependentOf{Owner: p.Owner, Max: 2, Dependent: driver.Dependent{JobID: wire.NewID(), Index: 3}}
		for range 2 { // once however often
			got, err := s.AddDependent(ctx, p.ID, d)
			if err != nil {
				t.Fatal(err)
			}
			if got.ID != p.ID || len(got.Dependents) != 1 {
				t.Fatalf("AddDependent answered %+v, want the parent with its one dependent", got)
			}
		}
		if got := mustGet(t, s, p.ID).Dependents; !slices.Equal(got, []driver.Dependent{d.Dependent}) {
			t.Fatalf("dependents %v, want %v once", got, d.Dependent)
		}
		if _, err := s.AddDependent(ctx, p.ID, driver.DependentOf{Owner: "someone else", Max: 2, Dependent: d.Dependent}); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("another owner's parent: %v, want ErrNotFound", err)
		}
		if _, err := s.AddDependent(ctx, wire.NewID(), d); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("no such parent: %v, want ErrNotFound", err)
		}
		// Running: still recorded.
		_, token := mustClaim(t, s, p.ID, now)
		d2 := driver.DependentOf{Owner: p.Owner, Max: 2, Dependent: driver.Dependent{JobID: wire.NewID(), Index: 0}}
		if _, err := s.AddDependent(ctx, p.ID, d2); err != nil {
			t.Fatal(err)
		}
		// Max reached: a third is refused, a repeat of one recorded is not.
		_, err := s.AddDependent(ctx, p.ID, driver.DependentOf{Owner: p.Owner, Max: 2, Dependent: driver.Dependent{JobID: wire.NewID()}})
		if cur := currentOf(t, s, p.ID, err); cur.Status != jobs.StatusRunning || len(cur.Dependents) != 2 {
			t.Fatalf("a third dependent over the most: the conflict reports %s with %d dependents, want running with 2", cur.Status, len(cur.Dependents))
		}
		if _, err := s.AddDependent(ctx, p.ID, d2); err != nil {
			t.Fatalf("a repeat at the most dependents: %v", err)
		}
		// The final write is conditional on the dependents its writer knows.
		err = s.Finish(ctx, p.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, At: now, ExpiresAt: now.Add(time.Hour), Dependents: 1})
		if cur := currentOf(t, s, p.ID, err); cur.Status != jobs.StatusRunning || len(cur.Dependents) != 2 {
			t.Fatalf("the refused final write reports %s with %d dependents, want running with 2", cur.Status, len(cur.Dependents))
		}
		if err := s.Finish(ctx, p.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, At: now, ExpiresAt: now.Add(time.Hour), Dependents: 2}); err != nil {
			t.Fatal(err)
		}
		_, err = s.AddDependent(ctx, p.ID, d2)
		if cur := currentOf(t, s, p.ID, err); cur.Status != jobs.StatusSucceeded {
			t.Fatalf("a dependent of a succeeded parent: the conflict reports %s, want succeeded", cur.Status)
		}
		// A failed parent records a dependent: its retry's outcome reaches it.
		f := mustCreate(t, s, now)
		_, ftoken := mustClaim(t, s, f.ID, now)
		if err := s.Finish(ctx, f.ID, ftoken, driver.Outcome{Status: jobs.StatusFailed, Code: "boom", At: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.AddDependent(ctx, f.ID, driver.DependentOf{Owner: f.Owner, Max: 2, Dependent: driver.Dependent{JobID: wire.NewID()}}); err != nil || got.Status != jobs.StatusFailed || len(got.Dependents) != 1 {
			t.Fatalf("a dependent of a failed parent: %+v %v, want recorded, the parent failed", got, err)
		}
	})
	c.run(t, "ACancelIsConditionalOnTheDependentsAndKeepsItsCode", func(t *testing.T, s driver.Store, clock *Clock) {
		now := clock.Now()
		rec := mustWaiting(t, s, now, wire.NewID())
		if _, err := s.AddDependent(ctx, rec.ID, driver.DependentOf{Owner: rec.Owner, Max: 2, Dependent: driver.Dependent{JobID: wire.NewID()}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.CountParents(ctx, rec.ID, driver.ParentCount{Await: true, At: now}); err != nil {
			t.Fatal(err)
		}
		cancel := driver.CancelQueued{At: now, ExpiresAt: now.Add(time.Hour), After: []string{"dependents"}, Code: "dependency_failed", CancelledBy: rec.Parents[0]}
		wantConflict(t, s.CancelQueued(ctx, rec.ID, cancel), jobs.StatusQueued)
		cancel.Dependents = 1
		if err := s.CancelQueued(ctx, rec.ID, cancel); err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, s, rec.ID)
		if got.Status != jobs.StatusCancelled || got.ErrorCode != "dependency_failed" || got.CancelledBy != rec.Parents[0] || got.WaitingOn != "" {
			t.Fatalf("cancelled: %s code %q by %q waiting %q", got.Status, got.ErrorCode, got.CancelledBy, got.WaitingOn)
		}
		// It was out of the sweep schedule while it waited; its steps put
		// it back, so the sweeper runs them if the canceller dies.
		ids, err := s.Due(ctx, now, 10)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(ids, rec.ID) {
			t.Fatalf("the cancelled job with steps pending is not due (due %v)", ids)
		}
		// A resubmit waits on the parents again and forgets the cause.
		if err := s.DoneAfter(ctx, rec.ID, driver.AfterOfRecord(mustGet(t, s, rec.ID))); err != nil {
			t.Fatal(err)
		}
		if err := s.Resubmit(ctx, rec.ID, driver.Resubmit{At: now, SweepAt: now.Add(time.Minute), WaitingOn: driver.WaitParents}); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, rec.ID); got.Status != jobs.StatusQueued || got.WaitingOn != driver.WaitParents || got.CancelledBy != "" || got.ErrorCode != "" {
			t.Fatalf("resubmitted: %s waiting %q by %q code %q", got.Status, got.WaitingOn, got.CancelledBy, got.ErrorCode)
		}
	})
	c.run(t, "AJobWaitingOnItsParentsIsCountedReleasedAndNeverClaimed", func(t *testing.T, s driver.Store, clock *Clock) {
		now := clock.Now()
		rec := mustWaiting(t, s, now, wire.NewID(), wire.NewID())
		_, err := s.Claim(ctx, rec.ID, driver.Claim{Token: "t", At: now, LeaseUntil: now.Add(time.Minute)})
		wantConflict(t, err, jobs.StatusQueued)
		// Await is conditional on the counts its writer read.
		_, err = s.CountParents(ctx, rec.ID, driver.ParentCount{Done: []int{1}, Await: true, Known: 1, At: now})
		wantConflict(t, err, jobs.StatusQueued)
		got, err := s.CountParents(ctx, rec.ID, driver.ParentCount{Done: []int{1}, Await: true, At: now})
		if err != nil {
			t.Fatal(err)
		}
		if got.ParentsLeft() != 1 || !got.SweepAt.IsZero() {
			t.Fatalf("after one parent: %d left, sweep %v; want 1 left, out of the sweep schedule", got.ParentsLeft(), got.SweepAt)
		}
		if ids, _ := s.Due(ctx, now.Add(time.Hour), 10); slices.Contains(ids, rec.ID) {
			t.Fatal("a waiting job is in the sweep schedule")
		}
		for range 2 { // a set: once each
			if got, err = s.CountParents(ctx, rec.ID, driver.ParentCount{Done: []int{0, 1}, At: now}); err != nil {
				t.Fatal(err)
			}
		}
		if got.ParentsLeft() != 0 || len(got.ParentsDone) != 2 {
			t.Fatalf("after both: done %v", got.ParentsDone)
		}
		sweep := now.Add(3 * time.Minute)
		if err := s.ReleaseParents(ctx, rec.ID, driver.ReleaseParents{At: now, SweepAt: sweep}); err != nil {
			t.Fatal(err)
		}
		wantConflict(t, s.ReleaseParents(ctx, rec.ID, driver.ReleaseParents{At: now, SweepAt: sweep}), jobs.StatusQueued)
		_, err = s.CountParents(ctx, rec.ID, driver.ParentCount{Done: []int{0}, At: now})
		wantConflict(t, err, jobs.StatusQueued)
		if got := mustGet(t, s, rec.ID); got.WaitingOn != "" || !got.SweepAt.Equal(sweep) {
			t.Fatalf("released: waiting %q sweep %v, want none and %v", got.WaitingOn, got.SweepAt, sweep)
		}
		if _, err := s.Claim(ctx, rec.ID, driver.Claim{Token: "t", At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
			t.Fatalf("claim of the released job: %v", err)
		}
		// Counted and released in one write.
		one := mustWaiting(t, s, now, wire.NewID())
		rel, err := s.CountParents(ctx, one.ID, driver.ParentCount{Done: []int{0}, Await: true, Release: &driver.ReleaseParents{At: now, SweepAt: sweep}, At: now})
		if err != nil {
			t.Fatal(err)
		}
		if rel.WaitingOn != "" || !rel.SweepAt.Equal(sweep) || rel.ParentsLeft() != 0 {
			t.Fatalf("counted and released: waiting %q sweep %v left %d", rel.WaitingOn, rel.SweepAt, rel.ParentsLeft())
		}
	})
}
