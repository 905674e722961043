package jobs

import (
	"context"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"go.opentelemetry.io/contrib/propagators/aws/xray"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Tracing (WorkerConfig.TracerProvider, set by lambdafn when JOBS_TRACING
// is on): the worker opens one span per SQS record, "lambdajobs.process",
// whose parent is the trace the message carries in its AWSTraceHeader
// system attribute (the enqueue's, a retry's, or a foreign source's when it
// traces: EventBridge and SNS do, S3 does not) and which links to the
// invocation's span. The job's DynamoDB and SQS calls are its children, so
// one trace shows a job's enqueue, its wait in the queue and its run.
//
// Spans carry the kind, the job id, the attempt, the status and a failure's
// code; never an owner, a payload or handler error text.

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

func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return noop.NewTracerProvider().Tracer(tracerName)
	}
	return tp.Tracer(tracerName)
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

// startRecord opens the span of one SQS record.
func (w *Worker) startRecord(ctx context.Context, msg *events.SQSMessage) (context.Context, trace.Span) {
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
	return w.tracer.Start(ctx, "lambdajobs.process", opts...)
}

// traceJob names the job a record's span runs.
func traceJob(ctx context.Context, rec *driver.Record) {
	trace.SpanFromContext(ctx).SetAttributes(attrKind.String(rec.Kind), attrJobID.String(rec.ID), attrAttempt.Int(rec.Attempt))
}

// traceEnding records how a run ended on its span.
func traceEnding(ctx context.Context, end ending) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrStatus.String(string(end.ex.Status)), attrRetried.Bool(end.retried))
	if end.ex.Code != "" {
		span.SetAttributes(attrCode.String(end.ex.Code))
	}
	if end.ex.Status == StatusFailed && !end.retried {
		span.SetStatus(codes.Error, end.ex.Code)
	}
}
