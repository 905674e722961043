package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// blind is a store whose conflicts never say the job (Current nil), as a
// Store may answer when it cannot: the engine reads the job again.
type blind struct{ *jobstest.MemStore }

func unsaid(err error) error {
	if errors.As(err, new(*driver.ConflictError)) {
		return &driver.ConflictError{}
	}
	return err
}

func (s blind) Claim(ctx context.Context, id string, c driver.Claim) (*driver.Record, error) {
	rec, err := s.MemStore.Claim(ctx, id, c)
	return rec, unsaid(err)
}

func (s blind) Publish(ctx context.Context, id, token string, result []byte, at time.Time) error {
	return unsaid(s.MemStore.Publish(ctx, id, token, result, at))
}

func (s blind) Heartbeat(ctx context.Context, id, token string, hb driver.Heartbeat) error {
	return unsaid(s.MemStore.Heartbeat(ctx, id, token, hb))
}

func (s blind) Resubmit(ctx context.Context, id string, r driver.Resubmit) error {
	return unsaid(s.MemStore.Resubmit(ctx, id, r))
}

func (s blind) RequestCancel(ctx context.Context, id string, at time.Time) error {
	return unsaid(s.MemStore.RequestCancel(ctx, id, at))
}

func (s blind) AddDependent(ctx context.Context, parentID string, d driver.DependentOf) (*driver.Record, error) {
	rec, err := s.MemStore.AddDependent(ctx, parentID, d)
	return rec, unsaid(err)
}

// A Store says only that a conditional write did not apply; the engine
// tells what that means from the operation and the job (read again when
// the store did not say it), and callers keep the errors they had.
func TestTheEngineReadsWhatAConflictMeans(t *testing.T) {
	for name, raw := range map[string]func(jobs.Clock) driver.Store{
		"with the job": func(c jobs.Clock) driver.Store { return jobstest.NewMemStore(c) },
		"without it":   func(c jobs.Clock) driver.Store { return blind{jobstest.NewMemStore(c)} },
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			clock := jobstest.NewClock(jobstest.Epoch)
			s := jobs.ReadConflicts(raw(clock))
			now := clock.Now()
			want := func(what string, err, meaning error) {
				t.Helper()
				if !errors.Is(err, meaning) || !errors.As(err, new(*driver.ConflictError)) {
					t.Fatalf("%s: %v, want a conflict meaning %v", what, err, meaning)
				}
			}

			rec := jobstest.NewRecord("job-1", now)
			if err := s.Create(ctx, rec); err != nil {
				t.Fatal(err)
			}
			want("a second create", s.Create(ctx, rec), driver.ErrExists)
			want("a cancel of a queued job's run", s.RequestCancel(ctx, rec.ID, now), jobs.ErrNotRunningConflict)
			if _, err := s.Claim(ctx, rec.ID, driver.Claim{Token: "t1", At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
			_, err := s.Claim(ctx, rec.ID, driver.Claim{Token: "t2", At: now, LeaseUntil: now.Add(time.Minute)})
			want("a second claim", err, jobs.ErrNotQueuedConflict)
			want("a stale run's publish", s.Publish(ctx, rec.ID, "t0", []byte(`1`), now), jobs.ErrLostClaim)
			want("a running job's resubmit", s.Resubmit(ctx, rec.ID, driver.Resubmit{At: now}), jobs.ErrNotResubmittable)
			if _, err := s.AddDependent(ctx, rec.ID, driver.DependentOf{Owner: rec.Owner, Max: 1, Dependent: driver.Dependent{JobID: "d1"}}); err != nil {
				t.Fatal(err)
			}
			_, err = s.AddDependent(ctx, rec.ID, driver.DependentOf{Owner: rec.Owner, Max: 1, Dependent: driver.Dependent{JobID: "d2"}})
			want("a dependent over the most", err, jobs.ErrDependentsFull)
			if _, err := s.AddDependent(ctx, rec.ID, driver.DependentOf{Owner: "mallory", Max: 5, Dependent: driver.Dependent{JobID: "d3"}}); !errors.Is(err, jobs.ErrNotFound) {
				t.Fatalf("another owner's parent: %v, want ErrNotFound", err)
			}
			if err := s.RequestCancel(ctx, rec.ID, now); err != nil {
				t.Fatal(err)
			}
			want("the cancelled run's publish", s.Publish(ctx, rec.ID, "t1", []byte(`1`), now), jobs.ErrCancelRequested)
			want("the cancelled run's heartbeat", s.Heartbeat(ctx, rec.ID, "t1", driver.Heartbeat{LeaseUntil: now.Add(time.Minute), At: now}), jobs.ErrCancelRequested)
			if err := s.Publish(ctx, rec.ID, "t0", []byte(`1`), now); errors.Is(err, jobs.ErrCancelRequested) || !errors.Is(err, jobs.ErrLostClaim) {
				t.Fatalf("another run's publish after the cancel: %v, want ErrLostClaim", err)
			}
			if err := s.Finish(ctx, rec.ID, "t1", driver.Outcome{Status: jobs.StatusSucceeded, At: now, ExpiresAt: now.Add(time.Hour), Dependents: 1}); !errors.Is(err, jobs.ErrCancelRequested) {
				t.Fatalf("the cancelled run's success: %v, want the cancel", err)
			}

			done := jobstest.NewRecord("job-2", now)
			if err := s.Create(ctx, done); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Claim(ctx, done.ID, driver.Claim{Token: "t", At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
			if err := s.Finish(ctx, done.ID, "t", driver.Outcome{Status: jobs.StatusSucceeded, At: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			_, err = s.AddDependent(ctx, done.ID, driver.DependentOf{Owner: done.Owner, Max: 5, Dependent: driver.Dependent{JobID: "d4"}})
			want("a dependent of a succeeded parent", err, jobs.ErrFinishedParent)

			sc := driver.Schedule{Name: "a", Expression: "rate(1 hour)", Kind: "test.kind", Owner: "alice", CreatedAt: now}
			if err := s.AddOwnerSchedule(ctx, "alicekey", sc, 1); err != nil {
				t.Fatal(err)
			}
			other := sc
			other.Expression = "rate(2 hours)"
			if err := s.AddOwnerSchedule(ctx, "alicekey", other, 5); !errors.Is(err, jobs.ErrScheduleExists) {
				t.Fatalf("a schedule of a taken name: %v, want ErrScheduleExists", err)
			}
			second := sc
			second.Name = "b"
			want("a schedule over the limit", s.AddOwnerSchedule(ctx, "alicekey", second, 1), jobs.ErrScheduleLimit)
			if err := s.SetLastFire(ctx, "nightly", "", "f1"); err != nil {
				t.Fatal(err)
			}
			want("a raced fire", s.SetLastFire(ctx, "nightly", "", "f2"), jobs.ErrFireRaced)
		})
	}
}
