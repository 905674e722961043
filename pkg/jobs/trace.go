package jobs

import (
	"context"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Tracer traces the worker's records (Config.Tracer): one span per
// SQS record, whose parent is the trace the message carries in its
// AWSTraceHeader system attribute (the enqueue's, a retry's, or a foreign
// source's when it traces: EventBridge and SNS do, S3 does not), so one
// trace shows a job's enqueue, its wait in the queue and its run. Package
// pkg/jobs/lambdafn/tracing implements it with OpenTelemetry (lambdafn sets
// it when JOBS_TRACING is on and the main passed its tracing); this package depends on no tracing library,
// and a nil Tracer costs nothing.
//
// What the worker tells a span: the kind, the job id, the attempt, the
// status, a failure's code and whether the job goes back for another
// attempt; never an owner, a payload or handler error text.
type Tracer interface {
	// StartRecord starts the span of one record and returns ctx carrying
	// it: the calls the record's job makes with that ctx are its children.
	StartRecord(ctx context.Context, msg *events.SQSMessage) (context.Context, RecordSpan)
}

// RecordSpan is the span of one SQS record (see Tracer).
type RecordSpan interface {
	// Job names the job the record runs.
	Job(id, kind string, attempt int)
	// Ended says how the job's run ended: its status, its failure code
	// (empty unless it failed) and whether it goes back to the queue for
	// another attempt.
	Ended(status Status, code string, retried bool)
	// End ends the span.
	End()
}

type recordSpanKey struct{}

// startRecord opens the span of one SQS record (a no-op without a Tracer).
func (w *Worker) startRecord(ctx context.Context, msg *events.SQSMessage) (context.Context, RecordSpan) {
	if w.tracer == nil {
		return ctx, noSpan{}
	}
	ctx, span := w.tracer.StartRecord(ctx, msg)
	return context.WithValue(ctx, recordSpanKey{}, span), span
}

// traceJob names the job a record's span runs.
func traceJob(ctx context.Context, rec *driver.Record) {
	if span, ok := ctx.Value(recordSpanKey{}).(RecordSpan); ok {
		span.Job(rec.ID, rec.Kind, rec.Attempt)
	}
}

// traceEnding records how a run ended on its span.
func traceEnding(ctx context.Context, end ending) {
	if span, ok := ctx.Value(recordSpanKey{}).(RecordSpan); ok {
		span.Ended(end.ex.Status, end.ex.Code, end.retried)
	}
}

// noSpan is the span of a worker without a Tracer.
type noSpan struct{}

func (noSpan) Job(string, string, int)    {}
func (noSpan) Ended(Status, string, bool) {}
func (noSpan) End()                       {}
