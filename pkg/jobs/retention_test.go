package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// A kind's own retention (KindOpts.Retention) sets the expiry of every
// final write of its jobs: a run's outcome, and a queued job's cancel (one
// at a time or in bulk); a kind without one keeps the deployment's.
func TestKindRetentionSetsEveryFinalExpiry(t *testing.T) {
	ctx := context.Background()
	clock := jobstest.NewClock(jobstest.Epoch)
	mem, queue := jobstest.NewMemStore(clock), &jobstest.MemQueue{}
	const deployment, kept = 48 * time.Hour, 30 * 24 * time.Hour
	reg := jobs.NewRegistry()
	keptKind := jobs.MustRegister(reg, "kept", sleeper, &jobs.KindOpts{Retention: kept})
	plain := jobs.MustRegister(reg, "plain", sleeper, nil)
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: mem, Queue: queue, Clock: clock, Retention: deployment,
		PageTokenKey: []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	w, err := testroles.Worker(jobs.Config{Registry: reg, Store: mem, Queue: queue, Clock: clock, Retention: deployment, CancelCheck: -1})
	if err != nil {
		t.Fatal(err)
	}
	enqueue := func(k jobs.Kind[sleepPayload]) string {
		t.Helper()
		res, err := k.Enqueue(ctx, svc, "o", sleepPayload{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.Job.ID
	}
	ran, cancelled, bulk := enqueue(keptKind), enqueue(keptKind), enqueue(keptKind)
	plainCancelled := enqueue(plain)
	if resp, _ := w.HandleSQS(ctx, sqsEvent(message.Encode(ran))); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", failedIDs(resp))
	}
	clock.Advance(time.Minute)
	for _, id := range []string{cancelled, plainCancelled} {
		if _, err := svc.Cancel(ctx, "o", id); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Minute)
	if res, err := svc.Bulk(ctx, "o", jobs.BulkRequest{Action: jobs.BulkCancel, Kind: "kept", Status: jobs.StatusQueued}); err != nil || res.Changed != 1 {
		t.Fatalf("bulk cancel: %+v, %v; want the one queued job cancelled", res, err)
	}
	for id, want := range map[string]time.Duration{ran: kept, cancelled: kept, bulk: kept, plainCancelled: deployment} {
		rec, err := mem.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !rec.Status.Final() || rec.FinishedAt.IsZero() {
			t.Fatalf("job %s of %s: %s, want final", id, rec.Kind, rec.Status)
		}
		if got := rec.ExpiresAt.Sub(rec.FinishedAt); got != want {
			t.Errorf("job of %s, %s: expires %v after it ended, want %v", rec.Kind, rec.Status, got, want)
		}
	}
}
