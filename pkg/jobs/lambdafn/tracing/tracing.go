// Package tracing turns on OpenTelemetry tracing in the functions that
// package lambdafn builds, with spans sent to the X-Ray daemon. A main
// passes it to lambdafn.Serve:
//
//	lambdafn.Serve(lambdafn.Any, reg, &lambdafn.Opts{Tracing: tracing.XRay()})
//
// and its functions then trace whenever JOBS_TRACING=on (what the CDK
// construct's Config.Tracing sets, next to Lambda's active tracing). The
// other way out is OTLP/HTTP to a collector, package
// pkg/jobs/lambdafn/tracing/otlp: the same spans, another exporter. A main
// that passes neither links nothing of OpenTelemetry (its SDK, the
// exporter, protobuf): its bootstrap is smaller and starts faster, and it
// refuses to start with JOBS_TRACING=on rather than run untraced (see
// lambdafn.Tracing). Importing this package does nothing by itself.
//
// With tracing on, each invocation is a span whose parent is the segment
// Lambda opened (the _X_AMZN_TRACE_ID header); every DynamoDB, SQS,
// Scheduler, EventBridge and Secrets Manager call is a child span (the AWS
// SDK's own tracing, through smithy-go's OpenTelemetry adapter); every
// message the functions send carries the current span's trace
// (AWSTraceHeader); and the worker opens a span per record in the trace its
// message carries (WorkerTracer). XRay sends the spans to the X-Ray daemon
// Lambda runs next to the function, over UDP in its OTLP framing, flushed
// at the end of each invocation: no collector layer and no HTTP call.
// Sampling is Lambda's: a span is kept when the invocation's (or the
// message's) trace is sampled.
//
// The X-Ray daemon reaches its end of support on 2027-02-25 (AWS's
// timeline: maintenance since 2026-02-25, no release after); Lambda's
// active tracing keeps running it, but AWS points to OpenTelemetry and an
// OTLP endpoint, which is what package otlp's exporter is for.
//
// Why OpenTelemetry rather than the X-Ray SDK for Go: AWS put the X-Ray
// SDKs in maintenance in 2026 and points to OpenTelemetry, and the spans
// are portable to any OTLP backend.
package tracing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/trace"

	"github.com/lambdajobs/lambdajobs/internal/oteltrace"
	"github.com/lambdajobs/lambdajobs/internal/tracehook"
	"github.com/lambdajobs/lambdajobs/internal/xrayudp"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"
)

// XRay is tracing whose spans go to the X-Ray daemon at
// AWS_XRAY_DAEMON_ADDRESS (lambdafn.Config.XRayDaemon, which Lambda sets
// with active tracing), as lambdafn.Opts.Tracing.
func XRay() lambdafn.Tracing { return xrayTracing{} }

type xrayTracing struct{}

// flushTimeout bounds the export at the end of an invocation (a local
// datagram: it takes microseconds).
const flushTimeout = 100 * time.Millisecond

func (xrayTracing) Start(ctx context.Context, cfg lambdafn.Config) (tracehook.Tracing, error) {
	exp, err := otlptrace.New(ctx, xrayudp.New(xrayudp.Address(cfg.XRayDaemon)))
	if err != nil {
		return nil, err
	}
	return oteltrace.New(exp, cfg.Service, flushTimeout), nil
}

// WorkerTracer traces a jobs.Worker's records with tp (set it as
// jobs.Config.Tracer; lambdafn does when tracing is on): one span per
// SQS record, "lambdajobs.process", whose parent is the trace the message
// carries in its AWSTraceHeader system attribute and which links to the
// invocation's span (ctx's when the worker is called). The job's AWS calls
// are its children, so one trace shows a job's enqueue, its wait in the
// queue and its run. A team that runs package jobs without lambdafn traces
// its worker with it and its own tracer provider.
//
// Spans carry the kind, the job id, the attempt, the status and a failure's
// code (lambdajobs.kind, .job_id, .attempt, .status, .code, .retried); a
// failed job's span has error status with its code as the description.
// Never an owner, a payload or handler error text.
func WorkerTracer(tp trace.TracerProvider) jobs.Tracer { return oteltrace.WorkerTracer(tp) }
