package jobs_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// fakeTracer records what the worker tells each record's span.
type fakeTracer struct {
	mu    sync.Mutex
	spans map[string]*fakeSpan // by message id
}

type fakeSpan struct {
	t                *fakeTracer
	id, kind, status string
	code             string
	attempt          int
	retried, ended   bool
	calls            []string
}

type spanKey struct{}

func (f *fakeTracer) StartRecord(ctx context.Context, msg *events.SQSMessage) (context.Context, jobs.RecordSpan) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &fakeSpan{t: f}
	f.spans[msg.MessageId] = s
	return context.WithValue(ctx, spanKey{}, s), s
}

func (s *fakeSpan) Job(id, kind string, attempt int) {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	s.id, s.kind, s.attempt = id, kind, attempt
	s.calls = append(s.calls, "job")
}

func (s *fakeSpan) Ended(status jobs.Status, code string, retried bool) {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	s.status, s.code, s.retried = string(status), code, retried
	s.calls = append(s.calls, "ended")
}

func (s *fakeSpan) End() {
	s.t.mu.Lock()
	defer s.t.mu.Unlock()
	s.ended = true
	s.calls = append(s.calls, "end")
}

// The worker opens one span per record through its Tracer, names the job
// the record runs, says how the run ended (status, declared code, retried)
// and ends the span; the job's own calls run under the span's context.
// (The OpenTelemetry implementation is package lambdafn/tracing's, tested
// there.)
func TestWorkerTellsItsTracerEachRecord(t *testing.T) {
	mem := jobstest.NewMemStore(nil)
	reg := jobs.NewRegistry()
	seen := make(chan bool, 1)
	ok := jobs.MustRegister(reg, "ok", func(ctx context.Context, _ *jobs.Job[sleepPayload]) (jobs.NoResult, error) {
		_, has := ctx.Value(spanKey{}).(*fakeSpan)
		seen <- has
		return jobs.NoResult{}, nil
	}, nil)
	bad := jobs.MustRegister(reg, "bad", func(context.Context, *jobs.Job[sleepPayload]) (jobs.NoResult, error) {
		return jobs.NoResult{}, jobs.Fail("nope", errors.New("card 4242 declined"))
	}, &jobs.KindOpts{FailureCodes: []string{"nope"}})
	svc, _ := testroles.Service(jobs.Config{Registry: reg, Store: mem, Queue: &jobstest.MemQueue{}})
	tr := &fakeTracer{spans: map[string]*fakeSpan{}}
	w, err := testroles.Worker(jobs.Config{Registry: reg, Store: mem, CancelCheck: -1, Tracer: tr})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ev events.SQSEvent
	var ids []string
	for _, k := range []jobs.Kind[sleepPayload]{ok, bad} {
		res, err := k.Enqueue(ctx, svc, "o", sleepPayload{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Job.ID)
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: "m-" + res.Job.ID, Body: message.Encode(res.Job.ID)})
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if resp, _ := w.HandleSQS(ctx, ev); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	if !<-seen {
		t.Error("the handler's context does not carry its record's span")
	}
	want := map[string]fakeSpan{
		ids[0]: {id: ids[0], kind: "ok", attempt: 1, status: "succeeded"},
		ids[1]: {id: ids[1], kind: "bad", attempt: 1, status: "failed", code: "nope"},
	}
	for _, id := range ids {
		s := tr.spans["m-"+id]
		if s == nil {
			t.Fatalf("no span for the record of %s", id)
		}
		w := want[id]
		if s.id != w.id || s.kind != w.kind || s.attempt != w.attempt || s.status != w.status || s.code != w.code || s.retried || !s.ended {
			t.Errorf("span of %s: got %+v, want %+v ended", id, *s, w)
		}
		if len(s.calls) != 3 || s.calls[0] != "job" || s.calls[1] != "ended" || s.calls[2] != "end" {
			t.Errorf("span of %s: calls %v, want job, ended, end", id, s.calls)
		}
	}
}

// Without a Tracer the worker runs as before: nothing to call.
func TestWorkerWithoutTracer(t *testing.T) {
	mem := jobstest.NewMemStore(nil)
	reg := jobs.NewRegistry()
	ok := jobs.MustRegister(reg, "ok", sleeper, nil)
	svc, _ := testroles.Service(jobs.Config{Registry: reg, Store: mem, Queue: &jobstest.MemQueue{}})
	w, err := testroles.Worker(jobs.Config{Registry: reg, Store: mem, CancelCheck: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := ok.Enqueue(ctx, svc, "o", sleepPayload{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	w.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m", Body: message.Encode(res.Job.ID)}}})
	if got, err := svc.Get(ctx, "o", res.Job.ID); err != nil || got.Status != jobs.StatusSucceeded {
		t.Fatalf("got %v %v, want succeeded", got, err)
	}
}
