package tracing_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn/tracing"
)

type sleepPayload struct {
	For string `json:"for"`
}

func sleeper(ctx context.Context, j *jobs.Job[sleepPayload]) (jobs.NoResult, error) {
	d, _ := time.ParseDuration(j.Payload.For)
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return jobs.NoResult{}, ctx.Err()
	}
	return jobs.NoResult{}, nil
}

// The worker opens one span per record in the trace its message carries
// (AWSTraceHeader), linked to the invocation's span; the span names the
// kind, job, attempt and outcome, marks a failure with its code, and
// never holds handler error text. A message whose trace is not sampled
// records nothing; one without a trace joins the invocation's.
func TestWorkerTracesEachRecordInItsMessagesTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	mem := jobstest.NewMemStore(nil)
	reg := jobs.NewRegistry()
	ok := jobs.MustRegister(reg, "ok", sleeper, nil)
	bad := jobs.MustRegister(reg, "bad", func(context.Context, *jobs.Job[sleepPayload]) (jobs.NoResult, error) {
		return jobs.NoResult{}, jobs.Fail("nope", errors.New("card 4242 declined"))
	}, &jobs.KindOpts{FailureCodes: []string{"nope"}})
	svc, _ := testroles.Service(jobs.Config{Registry: reg, Store: mem, Queue: &jobstest.MemQueue{}})
	w, err := testroles.Worker(jobs.Config{Registry: reg, Store: mem, CancelCheck: -1, Tracer: tracing.WorkerTracer(tp)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var ids []string
	for _, k := range []jobs.Kind[sleepPayload]{ok, bad, ok, ok} {
		res, err := k.Enqueue(ctx, svc, "o", sleepPayload{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Job.ID)
	}
	headers := []string{
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1",
		"Root=1-5759e988-bd862e3fe1be46a994272793;Parent=1111111111111111;Sampled=1",
		"Root=1-6759e988-bd862e3fe1be46a994272793;Parent=2222222222222222;Sampled=0",
		"",
	}
	var ev events.SQSEvent
	for i, id := range ids {
		m := events.SQSMessage{MessageId: "m-" + id, Body: message.Encode(id)}
		if headers[i] != "" {
			m.Attributes = map[string]string{"AWSTraceHeader": headers[i]}
		}
		ev.Records = append(ev.Records, m)
	}
	// The invocation's span, as lambdafn opens it under Lambda's segment.
	lambdaTID, _ := trace.TraceIDFromHex("0123456789abcdef0123456789abcdef")
	lambdaSID, _ := trace.SpanIDFromHex("0123456789abcdef")
	ictx := trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: lambdaTID, SpanID: lambdaSID, TraceFlags: trace.FlagsSampled}))
	ictx, inv := tp.Tracer("test").Start(ictx, "worker")
	ictx, cancel := context.WithTimeout(ictx, 15*time.Second)
	defer cancel()
	w.HandleSQS(ictx, ev)
	inv.End()

	byJob := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		if s.Name() != "lambdajobs.process" {
			continue
		}
		for _, a := range s.Attributes() {
			if a.Key == "lambdajobs.job_id" {
				byJob[a.Value.AsString()] = s
			}
			if strings.Contains(a.Value.String(), "4242") {
				t.Fatalf("handler error text in span attribute %s", a.Key)
			}
		}
		if strings.Contains(s.Status().Description, "4242") || len(s.Events()) > 0 {
			t.Fatalf("handler error text in a span: %v %v", s.Status(), s.Events())
		}
		if s.SpanKind() != trace.SpanKindConsumer {
			t.Fatalf("span kind %v", s.SpanKind())
		}
	}
	if len(byJob) != 3 {
		t.Fatalf("%d job spans, want 3 (the unsampled message records none)", len(byJob))
	}
	attr := func(s sdktrace.ReadOnlySpan, key string) string {
		for _, a := range s.Attributes() {
			if string(a.Key) == key {
				return a.Value.String()
			}
		}
		return ""
	}
	okSpan := byJob[ids[0]]
	if okSpan.SpanContext().TraceID().String() != "5759e988bd862e3fe1be46a994272793" || okSpan.Parent().SpanID().String() != "53995c3f42cd8ad8" {
		t.Fatalf("succeeded job's span is not in its message's trace: %v parent %v", okSpan.SpanContext().TraceID(), okSpan.Parent().SpanID())
	}
	if links := okSpan.Links(); len(links) != 1 || links[0].SpanContext.SpanID() != inv.SpanContext().SpanID() {
		t.Fatalf("the job's span does not link the invocation: %v", links)
	}
	if attr(okSpan, "lambdajobs.kind") != "ok" || attr(okSpan, "lambdajobs.status") != "succeeded" || attr(okSpan, "lambdajobs.attempt") != "1" || okSpan.Status().Code == codes.Error {
		t.Fatalf("succeeded job's span: %v %v", okSpan.Attributes(), okSpan.Status())
	}
	badSpan := byJob[ids[1]]
	if attr(badSpan, "lambdajobs.code") != "nope" || badSpan.Status().Code != codes.Error || badSpan.Status().Description != "nope" {
		t.Fatalf("failed job's span: %v %v", badSpan.Attributes(), badSpan.Status())
	}
	plain := byJob[ids[3]]
	if plain.Parent().SpanID() != inv.SpanContext().SpanID() || len(plain.Links()) != 0 {
		t.Fatalf("a message without a trace joins the invocation's: parent %v links %v", plain.Parent(), plain.Links())
	}
}
