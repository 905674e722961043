package jobs_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// followUps returns the jobs of kind ev.failed.
func (r *eventRig) followUps() []*driver.Record {
	var out []*driver.Record
	for _, rec := range r.mem.All() {
		if rec.Kind == "ev.failed" {
			out = append(out, rec)
		}
	}
	return out
}

func TestOnFailureFollowUpIsEnqueuedOncePerFailure(t *testing.T) {
	t.Parallel()
	r := newEventRig(t, nil)
	failed, ok := r.enqueue(t, "ev", "declared"), r.enqueue(t, "ev", "")
	r.run(t, context.Background(), failed, ok)
	r.run(t, context.Background(), failed, ok) // duplicate deliveries
	r.sweepLater(t)
	fs := r.followUps()
	if len(fs) != 1 {
		t.Fatalf("%d follow-up jobs, want 1 (for the failed job only)", len(fs))
	}
	f := fs[0]
	var p jobs.FailedJob
	if err := json.Unmarshal(f.Payload, &p); err != nil {
		t.Fatal(err)
	}
	if want := (jobs.FailedJob{JobID: failed, Kind: "ev", Code: "card_declined", Attempt: 1}); p != want || f.Owner != "alice" {
		t.Fatalf("follow-up payload %+v owner %q, want %+v alice", p, f.Owner, want)
	}
	if strings.Contains(string(f.Payload), secret) || strings.Contains(string(f.Payload), payloadMarker) {
		t.Fatalf("follow-up payload carries handler or payload text: %s", f.Payload)
	}
	if !slices.Contains(r.queue.Sent(), f.ID) {
		t.Fatalf("follow-up %s not sent (sent %v)", f.ID, r.queue.Sent())
	}
	r.run(t, context.Background(), f.ID, f.ID)
	if got := r.get(t, f.ID); got.Status != jobs.StatusSucceeded || got.Attempt != 1 {
		t.Fatalf("follow-up %s attempt %d, want succeeded once", got.Status, got.Attempt)
	}
}

// The worker dies between the failed outcome and its follow-up: the
// sweeper creates the follow-up, once, and later runs of the step (a
// duplicate delivery, another sweep) create no second one.
func TestOnFailureFollowUpSurvivesWorkerDeath(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		wrap func(*jobstest.MemStore) driver.Store
	}{
		{"dies before creating it", func(m *jobstest.MemStore) driver.Store { return dyingAfterFinish{m} }},
		{"dies after creating it", func(m *jobstest.MemStore) driver.Store { return createThenDie{dyingAfterFinish{m}} }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newEventRig(t, tt.wrap)
			id := r.enqueue(t, "ev", "internal")
			r.run(t, context.WithValue(context.Background(), dieKey{}, true), id)
			if got := r.get(t, id); got.Status != jobs.StatusFailed || len(got.After) == 0 {
				t.Fatalf("after the death: %s steps %v; want failed with steps pending", got.Status, got.After)
			}
			r.sweepLater(t)
			r.run(t, context.Background(), id)
			r.sweepLater(t)
			fs := r.followUps()
			if len(fs) != 1 {
				t.Fatalf("%d follow-up jobs, want 1", len(fs))
			}
			if got := r.get(t, id); len(got.After) != 0 {
				t.Fatalf("steps %v still pending", got.After)
			}
			if evs := r.eventsOf(id); len(evs) != 1 {
				t.Fatalf("%d events, want 1", len(evs))
			}
		})
	}
}

// createThenDie lands the dead worker's create of the follow-up, then
// loses its answer: the step stays pending and runs again.
type createThenDie struct{ dyingAfterFinish }

func (s createThenDie) Create(ctx context.Context, rec *driver.Record) error {
	if ctx.Value(dieKey{}) != nil {
		_ = s.MemStore.Create(context.Background(), rec)
		return errWorkerDied
	}
	return s.MemStore.Create(ctx, rec)
}

// A failed job retried and failing again is a second failure: a second
// follow-up. Cancelled and succeeded outcomes have none.
func TestOnFailureFollowUpPerFailedOutcome(t *testing.T) {
	t.Parallel()
	r := newEventRig(t, nil)
	id := r.enqueue(t, "ev", "declared")
	r.run(t, context.Background(), id)
	if _, err := r.svc.Resubmit(context.Background(), "alice", id); err != nil {
		t.Fatal(err)
	}
	r.run(t, context.Background(), id)
	cancelled := r.enqueue(t, "ev", "")
	if _, err := r.svc.Cancel(context.Background(), "alice", cancelled); err != nil {
		t.Fatal(err)
	}
	if n := len(r.followUps()); n != 2 {
		t.Fatalf("%d follow-ups, want 2 (one per failure)", n)
	}
}

func TestOnFailureKindIsChecked(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		register func(*jobs.Registry)
		want     string
	}{
		{"not registered", func(reg *jobs.Registry) {}, "is not registered"},
		{"takes another payload", func(reg *jobs.Registry) {
			jobs.MustRegister(reg, "notify", func(context.Context, *jobs.Job[struct{ To string }]) (jobs.NoResult, error) {
				return jobs.NoResult{}, nil
			}, nil)
		}, "does not take a jobs.FailedJob payload"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			reg := jobs.NewRegistry()
			jobs.MustRegister(reg, "main", echo, &jobs.KindOpts{OnFailure: "notify"})
			tt.register(reg)
			_, err := testroles.Worker(jobs.Config{Registry: reg, Store: jobstest.NewMemStore(nil)})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("NewWorker: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}
