package oteltrace

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"go.opentelemetry.io/contrib/propagators/aws/xray"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// WorkerTracer is the public tracing.WorkerTracer (documented there):
// one span per SQS record, in the trace its message carries.
func WorkerTracer(tp trace.TracerProvider) jobs.Tracer {
	return workerTracer{tracer: tp.Tracer(tracerName)}
}

const tracerName = "github.com/lambdajobs/lambdajobs/pkg/jobs"

// Span attribute keys.
const (
	attrKind    = attribute.Key("lambdajobs.kind")
	attrJobID   = attribute.Key("lambdajobs.job_id")
	attrAttempt = attribute.Key("lambdajobs.attempt")
	attrStatus  = attribute.Key("lambdajobs.status")
	attrCode    = attribute.Key("lambdajobs.code")
	attrRetried = attribute.Key("lambdajobs.retried")
)

type workerTracer struct{ tracer trace.Tracer }

// StartRecord opens the span of one SQS record.
func (w workerTracer) StartRecord(ctx context.Context, msg *events.SQSMessage) (context.Context, jobs.RecordSpan) {
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(attribute.String("messaging.system", "aws_sqs"), attribute.String("messaging.message.id", msg.MessageId)),
	}
	if parent := messageParent(msg); parent.IsValid() {
		if inv := trace.SpanContextFromContext(ctx); inv.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: inv}))
		}
		ctx = trace.ContextWithRemoteSpanContext(ctx, parent)
	}
	ctx, span := w.tracer.Start(ctx, "lambdajobs.process", opts...)
	return ctx, recordSpan{span}
}

// messageParent returns the span context in a message's AWSTraceHeader.
func messageParent(msg *events.SQSMessage) trace.SpanContext {
	h := msg.Attributes["AWSTraceHeader"]
	if h == "" {
		return trace.SpanContext{}
	}
	ctx := xray.Propagator{}.Extract(context.Background(), propagation.HeaderCarrier{"X-Amzn-Trace-Id": {h}})
	return trace.SpanContextFromContext(ctx)
}

type recordSpan struct{ span trace.Span }

func (s recordSpan) Job(id, kind string, attempt int) {
	s.span.SetAttributes(attrKind.String(kind), attrJobID.String(id), attrAttempt.Int(attempt))
}

func (s recordSpan) Ended(status jobs.Status, code string, retried bool) {
	if !s.span.IsRecording() {
		return
	}
	s.span.SetAttributes(attrStatus.String(string(status)), attrRetried.Bool(retried))
	if code != "" {
		s.span.SetAttributes(attrCode.String(code))
	}
	if status == jobs.StatusFailed && !retried {
		s.span.SetStatus(codes.Error, code)
	}
}

func (s recordSpan) End() { s.span.End() }
