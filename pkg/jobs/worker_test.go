package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

const secret = "sk_live_SECRET_do_not_leak"

type failPayload struct {
	Mode string `json:"mode"`
}

type hugeResult struct{}

func (hugeResult) PublicJSON() ([]byte, error) {
	return []byte(`"` + strings.Repeat("x", jobs.MaxResultBytes) + `"`), nil
}

type rawResult string

func (r rawResult) PublicJSON() ([]byte, error) { return []byte(r), nil }

// harness is a worker on a MemStore with test kinds registered.
type harness struct {
	store   *jobstest.MemStore
	worker  *jobs.Worker
	svc     *jobs.Service
	queue   *jobstest.MemQueue
	logs    *testenv.SyncBuffer
	logger  *slog.Logger
	runs    sync.Map // job id -> *atomic.Int32
	release chan struct{}
}

func newHarness(t *testing.T, deadlines jobs.Deadlines) *harness {
	t.Helper()
	h := &harness{store: jobstest.NewMemStore(nil), queue: &jobstest.MemQueue{}, logs: &testenv.SyncBuffer{}, release: make(chan struct{})}
	t.Cleanup(func() { close(h.release) })
	logger := slog.New(slog.NewJSONHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	h.logger = logger
	reg := jobs.NewRegistry()
	count := func(id string) {
		v, _ := h.runs.LoadOrStore(id, new(atomic.Int32))
		v.(*atomic.Int32).Add(1)
	}
	jobs.MustRegister(reg, "echo", func(ctx context.Context, job *jobs.Job[echoPayload]) (echoResult, error) {
		count(job.ID)
		return echo(ctx, job)
	}, nil)
	jobs.MustRegister(reg, "progress",
		func(ctx context.Context, job *jobs.Job[struct{ Steps int }]) (jobs.JSON[map[string]int], error) {
			count(job.ID)
			for i := 1; i <= job.Payload.Steps; i++ {
				if err := job.Publish(ctx, jobs.JSON[map[string]int]{V: map[string]int{"done": i}}); err != nil {
					return jobs.JSON[map[string]int]{}, err
				}
			}
			return jobs.JSON[map[string]int]{V: map[string]int{"done": job.Payload.Steps, "final": 1}}, nil
		}, nil)
	jobs.MustRegister(reg, "fail",
		func(ctx context.Context, job *jobs.Job[failPayload]) (jobs.Result, error) {
			count(job.ID)
			switch job.Payload.Mode {
			case "declared":
				return nil, jobs.Fail("card_declined", fmt.Errorf("gateway said %s", secret))
			case "undeclared":
				return nil, jobs.Fail("not_declared", errors.New(secret))
			case "reserved":
				return nil, jobs.Fail(jobs.CodeInterrupted, errors.New(secret))
			case "internal":
				return nil, fmt.Errorf("GET https://api.example.test/?token=%s: 500", secret)
			case "panic":
				panic("boom " + secret)
			case "ignore_deadline":
				<-h.release
				return jobs.NoResult{}, nil
			case "honour_deadline":
				<-ctx.Done()
				return nil, ctx.Err()
			case "bad_json":
				return rawResult(`{"a":` + secret), nil
			case "huge":
				return hugeResult{}, nil
			case "nil":
				return nil, nil
			}
			return jobs.NoResult{}, nil
		}, &jobs.KindOpts{FailureCodes: []string{"card_declined"}})
	var err error
	h.worker, err = testroles.Worker(jobs.Config{Registry: reg, Store: h.store, Logger: logger, Deadlines: deadlines, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	h.svc, err = testroles.Service(jobs.Config{Registry: reg, Store: h.store, Queue: h.queue, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *harness) enqueue(t *testing.T, kind, payload string) string {
	t.Helper()
	rec, _, err := enqueued(h.svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "alice", Kind: kind, Payload: json.RawMessage(payload)}))
	if err != nil {
		t.Fatalf("Enqueue(%s, %s): %v", kind, payload, err)
	}
	return rec.ID
}

func (h *harness) runCount(id string) int {
	v, ok := h.runs.Load(id)
	if !ok {
		return 0
	}
	return int(v.(*atomic.Int32).Load())
}

func (h *harness) get(t *testing.T, id string) *driver.Record {
	t.Helper()
	rec, err := h.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func sqsEvent(bodies ...string) events.SQSEvent {
	var ev events.SQSEvent
	for i, b := range bodies {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("m-%d", i), Body: b})
	}
	return ev
}

func failedIDs(resp events.SQSEventResponse) []string {
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

func TestWorkerLifecycleWithPartialResults(t *testing.T) {
	t.Parallel()
	h := newHarness(t, jobs.DefaultDeadlines)
	id := h.enqueue(t, "progress", `{"Steps":3}`)
	resp, _ := h.worker.HandleSQS(context.Background(), sqsEvent(message.Encode(id)))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v, want none", failedIDs(resp))
	}
	rec := h.get(t, id)
	if rec.Status != jobs.StatusSucceeded || string(rec.Result) != `{"done":3,"final":1}` || rec.Attempt != 1 {
		t.Fatalf("got %s %s attempt %d", rec.Status, rec.Result, rec.Attempt)
	}
	if rec.ClaimToken != "" || !rec.SweepAt.IsZero() || rec.ExpiresAt.IsZero() {
		t.Fatalf("finished job keeps claim/sweep or has no expiry: %+v", rec)
	}
}

func TestWorkerStoresOnlyPublicJSON(t *testing.T) {
	t.Parallel()
	h := newHarness(t, jobs.DefaultDeadlines)
	id := h.enqueue(t, "echo", `{"text":"hi"}`)
	h.worker.HandleSQS(context.Background(), sqsEvent(message.Encode(id)))
	if rec := h.get(t, id); string(rec.Result) != `{"text":"hi"}` {
		t.Fatalf("stored result %s, want only the public JSON", rec.Result)
	}
}

func TestWorkerFailureCodes(t *testing.T) {
	t.Parallel()
	tests := []struct{ mode, code string }{
		{"declared", "card_declined"},
		{"undeclared", jobs.CodeInternal},
		{"reserved", jobs.CodeInternal},
		{"internal", jobs.CodeInternal},
		{"panic", jobs.CodeInternal},
		{"bad_json", jobs.CodeInternal},
		{"nil", jobs.CodeInternal},
		{"huge", jobs.CodeResultTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, jobs.DefaultDeadlines)
			id := h.enqueue(t, "fail", `{"mode":"`+tt.mode+`"}`)
			resp, err := h.worker.HandleSQS(context.Background(), sqsEvent(message.Encode(id)))
			if err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("a failed job was listed for retry: %v %v", failedIDs(resp), err)
			}
			rec := h.get(t, id)
			if rec.Status != jobs.StatusFailed || rec.ErrorCode != tt.code {
				t.Fatalf("got %s %q, want failed %q", rec.Status, rec.ErrorCode, tt.code)
			}
			stored, _ := json.Marshal(h.store.All())
			v, err := h.svc.Get(context.Background(), rec.Owner, id)
			if err != nil {
				t.Fatal(err)
			}
			view, _ := json.Marshal(v)
			for what, text := range map[string]string{"store": string(stored), "view": string(view), "logs": h.logs.String()} {
				if strings.Contains(text, secret) {
					t.Fatalf("the handler's secret appears in the %s: %s", what, text)
				}
			}
			if !strings.Contains(h.logs.String(), `"code":"`+tt.code+`"`) {
				t.Fatalf("logs do not name the code %q: %s", tt.code, h.logs.String())
			}
		})
	}
}

func TestWorkerPanicDoesNotStopTheBatch(t *testing.T) {
	t.Parallel()
	h := newHarness(t, jobs.DefaultDeadlines)
	boom := h.enqueue(t, "fail", `{"mode":"panic"}`)
	ok := h.enqueue(t, "echo", `{"text":"after"}`)
	resp, _ := h.worker.HandleSQS(context.Background(), sqsEvent(message.Encode(boom), message.Encode(ok)))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", failedIDs(resp))
	}
	if got := h.get(t, ok).Status; got != jobs.StatusSucceeded {
		t.Fatalf("job after the panic: %s", got)
	}
}

func TestWorkerDuplicatesRunOnce(t *testing.T) {
	t.Parallel()
	h := newHarness(t, jobs.DefaultDeadlines)
	id := h.enqueue(t, "echo", `{"text":"x"}`)
	body := message.Encode(id)
	// Five copies in one batch, run concurrently.
	resp, _ := h.worker.HandleSQS(context.Background(), sqsEvent(body, body, body, body, body))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", failedIDs(resp))
	}
	// And a later batch redelivering it.
	resp, _ = h.worker.HandleSQS(context.Background(), sqsEvent(body))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures on redelivery %v", failedIDs(resp))
	}
	if n := h.runCount(id); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	if rec := h.get(t, id); rec.Attempt != 1 {
		t.Fatalf("attempt %d, want 1", rec.Attempt)
	}
}

func TestWorkerListsOnlyWhatMustComeBack(t *testing.T) {
	t.Parallel()
	h := newHarness(t, jobs.DefaultDeadlines)
	ok := h.enqueue(t, "echo", `{"text":"x"}`)
	failed := h.enqueue(t, "fail", `{"mode":"declared"}`)
	ev := sqsEvent(
		message.Encode(ok),
		message.Encode(failed),
		message.Encode(wire.NewID()),             // not stored (yet): comes back
		`{"Records":[{"eventSource":"aws:s3"}]}`, // not a job reference: comes back, reaches the DLQ
		"not json at all "+secret,
	)
	resp, _ := h.worker.HandleSQS(context.Background(), ev)
	got := strings.Join(failedIDs(resp), ",")
	if got != "m-2,m-3,m-4" && !sameSet(failedIDs(resp), []string{"m-2", "m-3", "m-4"}) {
		t.Fatalf("failures %s, want m-2,m-3,m-4", got)
	}
	logs := h.logs.String()
	if strings.Contains(logs, secret) || strings.Contains(logs, "aws:s3") {
		t.Fatalf("logs quote a message body: %s", logs)
	}
	if !strings.Contains(logs, "keys [Records]") {
		t.Fatalf("logs do not name the unknown message's shape: %s", logs)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		m[x]--
	}
	for _, v := range m {
		if v != 0 {
			return false
		}
	}
	return true
}

var shortDeadlines = jobs.Deadlines{Reserve: 400 * time.Millisecond, FinalWrite: 250 * time.Millisecond, Call: 250 * time.Millisecond, MinRun: 100 * time.Millisecond, Safety: 100 * time.Millisecond}

func TestWorkerAbandonsHandlerAtDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) { testWorkerAbandonsHandlerAtDeadline(t) })
}

func testWorkerAbandonsHandlerAtDeadline(t *testing.T) {
	h := newHarness(t, shortDeadlines)
	ignore := h.enqueue(t, "fail", `{"mode":"ignore_deadline"}`)
	honour := h.enqueue(t, "fail", `{"mode":"honour_deadline"}`)
	ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
	defer cancel()
	deadline, _ := ctx.Deadline()
	resp, _ := h.worker.HandleSQS(ctx, sqsEvent(message.Encode(ignore), message.Encode(honour)))
	if returned := time.Now(); !returned.Before(deadline) {
		t.Fatalf("worker returned %v after the Lambda deadline", returned.Sub(deadline))
	}
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", failedIDs(resp))
	}
	for _, id := range []string{ignore, honour} {
		if rec := h.get(t, id); rec.Status != jobs.StatusFailed || rec.ErrorCode != jobs.CodeTimedOut {
			t.Fatalf("job %s: %s %q, want failed timed_out", id, rec.Status, rec.ErrorCode)
		}
	}
}

// stallingStore blocks every Finish until its context ends, like a
// DynamoDB that stopped answering.
type stallingStore struct{ *jobstest.MemStore }

func (s stallingStore) Finish(ctx context.Context, _, _ string, _ driver.Outcome) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestWorkerFinalWriteStallReturnsBeforeDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) { testWorkerFinalWriteStallReturnsBeforeDeadline(t) })
}

func testWorkerFinalWriteStallReturnsBeforeDeadline(t *testing.T) {
	mem := jobstest.NewMemStore(nil)
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "echo", echo, nil)
	w, err := testroles.Worker(jobs.Config{Registry: reg, Store: stallingStore{mem}, Deadlines: shortDeadlines})
	if err != nil {
		t.Fatal(err)
	}
	rec := jobstest.NewRecord(wire.NewID(), time.Now())
	rec.Kind, rec.Payload = "echo", []byte(`{"text":"x"}`)
	if err := mem.Create(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	resp, _ := w.HandleSQS(ctx, sqsEvent(message.Encode(rec.ID)))
	if !time.Now().Before(deadline) {
		t.Fatal("worker returned after the Lambda deadline")
	}
	if got := failedIDs(resp); len(got) != 1 || got[0] != "m-0" {
		t.Fatalf("failures %v, want [m-0]", got)
	}
	stored, _ := mem.Get(context.Background(), rec.ID)
	if stored.Status != jobs.StatusRunning {
		t.Fatalf("status %s, want running (left for redelivery or the sweeper)", stored.Status)
	}
}

// stallingReleases blocks every ReleaseSlot until its context ends, like
// a DynamoDB that stopped answering the slot items' writes.
type stallingReleases struct{ *jobstest.MemStore }

func (s stallingReleases) ReleaseSlot(ctx context.Context, _, _ string) (string, error) {
	<-ctx.Done()
	return "", ctx.Err()
}

// A limited kind's slots are released after its handler returns: the run's
// per-key slot, then its chain's kind slot, each release a call of its own.
// Stalled, they end by the invocation's write deadline, not Call after
// their start: two of them after a handler that returned at its deadline
// took 4 s of the 3 s reserve (simulation seed 5038 of 10,000).
func TestWorkerSlotReleaseStallReturnsBeforeDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) { testWorkerSlotReleaseStallReturnsBeforeDeadline(t) })
}

func testWorkerSlotReleaseStallReturnsBeforeDeadline(t *testing.T) {
	mem := jobstest.NewMemStore(nil)
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "limited", func(ctx context.Context, _ *jobs.Job[heldPayload]) (jobs.NoResult, error) {
		<-ctx.Done() // returns at its deadline, as asked
		return jobs.NoResult{}, nil
	}, &jobs.KindOpts{Concurrency: 1, ConcurrencyPerKey: 1, LimitKey: "owner"})
	w, err := testroles.Worker(jobs.Config{Registry: reg, Store: stallingReleases{mem}, Deadlines: jobs.DefaultDeadlines, CancelCheck: -1})
	if err != nil {
		t.Fatal(err)
	}
	rec := jobstest.NewRecord(wire.NewID(), time.Now())
	rec.Kind, rec.Payload = "limited", []byte(`{"n":1}`)
	if err := mem.Create(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	_, _ = w.HandleSQS(ctx, sqsEvent(message.Encode(rec.ID)))
	if late := time.Since(deadline.Add(-jobs.DefaultDeadlines.Safety)); late > 0 {
		t.Fatalf("worker returned %v after the Lambda deadline less Safety", late)
	}
}

func TestWorkerRedeliveryInterruptsExpiredRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, jobs.DefaultDeadlines)
	id := h.enqueue(t, "echo", `{"text":"x"}`)
	// A worker claimed it and died: its lease ended a moment ago.
	if _, err := h.store.Claim(context.Background(), id, driver.Claim{Token: "dead", At: time.Now().Add(-time.Minute), LeaseUntil: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	resp, _ := h.worker.HandleSQS(context.Background(), sqsEvent(message.Encode(id)))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", failedIDs(resp))
	}
	if rec := h.get(t, id); rec.Status != jobs.StatusFailed || rec.ErrorCode != jobs.CodeInterrupted {
		t.Fatalf("got %s %q, want failed interrupted", rec.Status, rec.ErrorCode)
	}
	if n := h.runCount(id); n != 0 {
		t.Fatalf("handler ran %d times for an interrupted job", n)
	}
}

// A job of a kind the worker does not register fails unknown_kind once it
// is older than 30 minutes (the kind left the code).
func TestWorkerUnknownKind(t *testing.T) {
	t.Parallel()
	h := newHarness(t, jobs.DefaultDeadlines)
	rec := jobstest.NewRecord(wire.NewID(), time.Now().Add(-31*time.Minute))
	rec.Kind = "removed.kind"
	if err := h.store.Create(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	resp, _ := h.worker.HandleSQS(context.Background(), sqsEvent(message.Encode(rec.ID)))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", failedIDs(resp))
	}
	if got := h.get(t, rec.ID); got.ErrorCode != jobs.CodeUnknownKind {
		t.Fatalf("%s, code %q, waiting on %q, want failed unknown_kind", got.Status, got.ErrorCode, got.WaitingOn)
	}
}

// A job of a kind a deploy just added that reaches a worker still on the
// old code is handed back, no attempt spent, and runs once a worker that
// knows the kind gets it.
func TestWorkerHandsBackAKindItDoesNotKnowYet(t *testing.T) {
	t.Parallel()
	clock := jobstest.NewClock(time.Now())
	store, queue := jobstest.NewMemStore(clock), &jobstest.MemQueue{}
	newReg := func(withKind bool) *jobs.Registry {
		reg := jobs.NewRegistry()
		jobs.MustRegister(reg, "old.kind", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
		if withKind {
			jobs.MustRegister(reg, "new.kind", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
		}
		return reg
	}
	svc, err := testroles.Service(jobs.Config{Registry: newReg(true), Store: store, Queue: queue, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	old, err := testroles.Worker(jobs.Config{Registry: newReg(false), Store: store, Queue: queue, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := testroles.Worker(jobs.Config{Registry: newReg(true), Store: store, Queue: queue, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "new.kind", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Job.ID
	if resp, _ := old.HandleSQS(ctx, sqsEvent(message.Encode(id))); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", failedIDs(resp))
	}
	got, _ := store.Get(ctx, id)
	if got.Status != jobs.StatusQueued || got.WaitingOn != "kind" || got.Attempt != 0 {
		t.Fatalf("after a worker without the kind: %s %q, waiting on %q, attempt %d; want queued, waiting on kind, no attempt spent", got.Status, got.ErrorCode, got.WaitingOn, got.Attempt)
	}
	clock.Advance(time.Minute)
	if resp, _ := fresh.HandleSQS(ctx, sqsEvent(message.Encode(id))); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", failedIDs(resp))
	}
	if got, _ := store.Get(ctx, id); got.Status != jobs.StatusSucceeded || got.Attempt != 1 {
		t.Fatalf("after a worker with the kind: %s on attempt %d, want succeeded on attempt 1", got.Status, got.Attempt)
	}
}

func TestWorkerPayloadThatNoLongerDecodes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, jobs.DefaultDeadlines)
	rec := jobstest.NewRecord(wire.NewID(), time.Now())
	rec.Kind, rec.Payload = "echo", []byte(`{"text":"x","renamed":1}`)
	if err := h.store.Create(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	h.worker.HandleSQS(context.Background(), sqsEvent(message.Encode(rec.ID)))
	if got := h.get(t, rec.ID); got.ErrorCode != jobs.CodeInvalidPayload || h.runCount(rec.ID) != 0 {
		t.Fatalf("code %q runs %d, want invalid_payload and no run", got.ErrorCode, h.runCount(rec.ID))
	}
}
