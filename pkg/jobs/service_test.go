package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

func TestEnqueueRefusesAndStoresNothing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  jobs.EnqueueRequest
		want error
	}{
		{"unknown kind", jobs.EnqueueRequest{Owner: "alice", Kind: "nope", Payload: json.RawMessage(`{}`)}, jobs.ErrUnknownKind},
		{"unknown field", jobs.EnqueueRequest{Owner: "alice", Kind: "echo", Payload: json.RawMessage(`{"text":"a","x":1}`)}, jobs.ErrInvalidPayload},
		{"null payload", jobs.EnqueueRequest{Owner: "alice", Kind: "echo", Payload: json.RawMessage(`null`)}, jobs.ErrInvalidPayload},
		{"missing payload", jobs.EnqueueRequest{Owner: "alice", Kind: "echo"}, jobs.ErrInvalidPayload},
		{"no owner", jobs.EnqueueRequest{Kind: "echo", Payload: json.RawMessage(`{}`)}, jobs.ErrInvalidRequest},
		{"key too long", jobs.EnqueueRequest{Owner: "alice", Kind: "echo", Payload: json.RawMessage(`{}`), EnqueueOpts: jobs.EnqueueOpts{IdempotencyKey: strings.Repeat("k", 256)}}, jobs.ErrInvalidRequest},
		{"key not printable", jobs.EnqueueRequest{Owner: "alice", Kind: "echo", Payload: json.RawMessage(`{}`), EnqueueOpts: jobs.EnqueueOpts{IdempotencyKey: "a\nb"}}, jobs.ErrInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, jobs.DefaultDeadlines)
			if _, _, err := enqueued(h.svc.Enqueue(context.Background(), tt.req)); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if n := h.store.Len(); n != 0 {
				t.Fatalf("%d jobs stored after a refused enqueue", n)
			}
			if sent := h.queue.Sent(); len(sent) != 0 {
				t.Fatalf("messages sent after a refused enqueue: %v", sent)
			}
		})
	}
}

func TestEnqueueStoresAndSends(t *testing.T) {
	t.Parallel()
	h := newHarness(t, jobs.DefaultDeadlines)
	rec, created, err := enqueued(h.svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "alice", Kind: "echo", Payload: json.RawMessage(`{ "text" : "hi" }`)}))
	if err != nil || !created {
		t.Fatalf("Enqueue: %v created=%v", err, created)
	}
	stored, err := h.store.Get(context.Background(), rec.ID)
	if err != nil || !wire.ValidID(rec.ID) || rec.Status != jobs.StatusQueued || string(stored.Payload) != `{"text":"hi"}` {
		t.Fatalf("record %+v %v", stored, err)
	}
	if sent := h.queue.Sent(); len(sent) != 1 || sent[0] != rec.ID {
		t.Fatalf("sent %v, want [%s]", sent, rec.ID)
	}
	if stored.SweepAt.Sub(stored.CreatedAt) != jobs.DefaultDispatchGrace {
		t.Fatalf("sweep at %v after creation, want the dispatch grace", stored.SweepAt.Sub(stored.CreatedAt))
	}
}

func TestEnqueueIdempotency(t *testing.T) {
	t.Parallel()
	h := newHarness(t, jobs.DefaultDeadlines)
	ctx := context.Background()
	req := jobs.EnqueueRequest{Owner: "alice", Kind: "echo", Payload: json.RawMessage(`{"text":"a"}`), EnqueueOpts: jobs.EnqueueOpts{IdempotencyKey: "order-42"}}
	first, created, err := enqueued(h.svc.Enqueue(ctx, req))
	if err != nil || !created {
		t.Fatal(err, created)
	}
	// Same key, same body (formatted differently): the first job.
	req.Payload = json.RawMessage(`{ "text": "a" }`)
	again, created, err := enqueued(h.svc.Enqueue(ctx, req))
	if err != nil || created || again.ID != first.ID {
		t.Fatalf("retry: id %s created %v err %v, want the first job %s", again.ID, created, err, first.ID)
	}
	// Same key, other body: a conflict.
	req.Payload = json.RawMessage(`{"text":"b"}`)
	if _, _, err := enqueued(h.svc.Enqueue(ctx, req)); !errors.Is(err, jobs.ErrIdempotencyConflict) {
		t.Fatalf("other body: %v, want ErrIdempotencyConflict", err)
	}
	// Same key, another owner: an independent job.
	req.Owner = "bob"
	other, created, err := enqueued(h.svc.Enqueue(ctx, req))
	if err != nil || !created || other.ID == first.ID {
		t.Fatalf("other owner: id %s created %v err %v", other.ID, created, err)
	}
	if h.store.Len() != 2 {
		t.Fatalf("%d jobs stored, want 2", h.store.Len())
	}
}

func TestGetIsOwnerOnly(t *testing.T) {
	t.Parallel()
	h := newHarness(t, jobs.DefaultDeadlines)
	id := h.enqueue(t, "echo", `{"text":"a"}`)
	ctx := context.Background()
	if _, err := h.svc.Get(ctx, "alice", id); err != nil {
		t.Fatalf("owner: %v", err)
	}
	for _, tc := range []struct{ owner, id string }{{"bob", id}, {"alice", wire.NewID()}, {"alice", "not-an-id"}, {"alice", strings.ToUpper(id)}} {
		if _, err := h.svc.Get(ctx, tc.owner, tc.id); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("Get(%q, %q) = %v, want ErrNotFound", tc.owner, tc.id, err)
		}
	}
}

// TestSendFailureLosesNoJob: the put lands, every send fails; the job is
// accepted, and the sweeper sends it once the dispatch grace has passed.
func TestSendFailureLosesNoJob(t *testing.T) {
	t.Parallel()
	clock := jobstest.NewClock(time.Now())
	store := jobstest.NewMemStore(clock)
	queue := &jobstest.MemQueue{}
	queue.SetFail(errors.New("sqs: connection refused"))
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "echo", echo, nil)
	svc, _ := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: queue, Clock: clock})
	sweeper, _ := testroles.Sweeper(jobs.Config{Registry: jobs.NewRegistry(), Store: store, Queue: queue, Clock: clock})
	ctx := context.Background()

	rec, _, err := enqueued(svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "alice", Kind: "echo", Payload: json.RawMessage(`{"text":"a"}`)}))
	if err != nil {
		t.Fatalf("Enqueue with SQS down: %v, want the job accepted", err)
	}
	queue.SetFail(nil)
	if rep, _ := sweeper.Sweep(ctx); rep.Resent != 0 {
		t.Fatalf("sweeper re-sent before the grace: %+v", rep)
	}
	clock.Advance(jobs.DefaultDispatchGrace)
	rep, err := sweeper.Sweep(ctx)
	if err != nil || rep.Resent != 1 {
		t.Fatalf("sweep after the grace: %+v %v", rep, err)
	}
	if sent := queue.Sent(); len(sent) != 1 || sent[0] != rec.ID {
		t.Fatalf("sent %v, want [%s]", sent, rec.ID)
	}
	// It backs off: not re-sent again at once, and again after twice the grace.
	if rep, _ := sweeper.Sweep(ctx); rep.Resent != 0 {
		t.Fatalf("re-sent twice in a row: %+v", rep)
	}
	clock.Advance(2 * jobs.DefaultDispatchGrace)
	if rep, _ := sweeper.Sweep(ctx); rep.Resent != 1 {
		t.Fatalf("no second re-send after the backoff: %+v", rep)
	}
}

func TestPayloadsAreStoredCanonically(t *testing.T) {
	t.Parallel()
	store := jobstest.NewMemStore(nil)
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "two", func(context.Context, *jobs.Job[twoFields]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
	svc, _ := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: &jobstest.MemQueue{}})
	ctx := context.Background()
	first, _, err := enqueued(svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "two", Payload: json.RawMessage(`{"a":"x","b":1,"n":12345678901234567890}`), EnqueueOpts: jobs.EnqueueOpts{IdempotencyKey: "k"}}))
	if err != nil {
		t.Fatal(err)
	}
	// The fields in the Go type's order; a big number in an interface field kept exactly.
	if stored, _ := store.Get(ctx, first.ID); string(stored.Payload) != `{"b":1,"a":"x","n":12345678901234567890}` {
		t.Fatalf("stored %s", stored.Payload)
	}
	// The same value with its keys reordered is the same request.
	again, created, err := enqueued(svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "two", Payload: json.RawMessage(` { "n": 12345678901234567890, "b" : 1, "a":"x"}`), EnqueueOpts: jobs.EnqueueOpts{IdempotencyKey: "k"}}))
	if err != nil || created || again.ID != first.ID {
		t.Fatalf("reordered retry: %v created=%v", err, created)
	}
}

type twoFields struct {
	B int    `json:"b"`
	A string `json:"a"`
	N any    `json:"n,omitempty"`
}
