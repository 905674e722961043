package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

func TestKindHandleEnqueues(t *testing.T) {
	t.Parallel()
	reg := jobs.NewRegistry()
	echoes := jobs.MustRegister(reg, "echo", echo, nil)
	if echoes.Name() != "echo" {
		t.Fatalf("name %q", echoes.Name())
	}
	store, queue := jobstest.NewMemStore(nil), &jobstest.MemQueue{}
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	opts := &jobs.EnqueueOpts{IdempotencyKey: "k", Delay: time.Minute}
	first, err := echoes.Enqueue(ctx, svc, "alice", echoPayload{Text: "a"}, opts)
	if err != nil || first.Replayed || first.Job.Kind != "echo" || first.Job.RunAt.IsZero() {
		t.Fatalf("enqueue: %+v %v, want a new delayed echo job", first, err)
	}
	again, err := echoes.Enqueue(ctx, svc, "alice", echoPayload{Text: "a"}, opts)
	if err != nil || !again.Replayed || again.Job.ID != first.Job.ID {
		t.Fatalf("retry: %+v %v, want the first job, replayed", again, err)
	}
	if _, err := echoes.Enqueue(ctx, svc, "alice", echoPayload{Text: "b"}, opts); !errors.Is(err, jobs.ErrIdempotencyConflict) {
		t.Fatalf("same key, other payload: %v", err)
	}
	rec, err := echoes.Prepare(svc, "alice", echoPayload{Text: "c"}, nil)
	if err != nil || rec.Status != jobs.StatusQueued || store.Len() != 1 {
		t.Fatalf("prepare: %+v %v with %d stored, want a queued record and nothing stored", rec, err, store.Len())
	}
	// A handle of a kind the service does not have, or has with another
	// payload type, is refused.
	other := jobs.NewRegistry()
	stranger := jobs.MustRegister(other, "stranger", echo, nil)
	if _, err := stranger.Enqueue(ctx, svc, "alice", echoPayload{}, nil); !errors.Is(err, jobs.ErrUnknownKind) {
		t.Fatalf("unknown kind: %v", err)
	}
	impostor := jobs.MustRegister(jobs.NewRegistry(), "echo",
		func(context.Context, *jobs.Job[failPayload]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
	if _, err := impostor.Enqueue(ctx, svc, "alice", failPayload{}, nil); !errors.Is(err, jobs.ErrPayloadType) {
		t.Fatalf("another payload type: %v", err)
	}
}
