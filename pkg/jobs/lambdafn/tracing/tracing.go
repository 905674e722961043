// Package tracing turns on OpenTelemetry tracing in the functions that
// package lambdafn builds. A main links it by importing it for its effect:
//
//	import _ "github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn/tracing"
//
// and its functions then trace whenever JOBS_TRACING=on (what the CDK
// construct's Config.Tracing sets, next to Lambda's active tracing). A main
// that does not import it links nothing of OpenTelemetry (its SDK, the
// exporter, protobuf): its bootstrap is smaller and starts faster, and it
// refuses to start with JOBS_TRACING=on rather than run untraced.
//
// With tracing on, each invocation is a span whose parent is the segment
// Lambda opened (the _X_AMZN_TRACE_ID header); every DynamoDB, SQS,
// Scheduler and Secrets Manager call is a child span (the AWS SDK's own
// tracing, through smithy-go's OpenTelemetry adapter); every message the
// functions send carries the current span's trace (AWSTraceHeader); and the
// worker opens a span per record in the trace its message carries
// (WorkerTracer). Spans go to the X-Ray daemon Lambda runs next to the
// function, over UDP in its OTLP framing, flushed at the end of each
// invocation: no collector layer and no HTTP call. Sampling is Lambda's: a
// span is kept when the invocation's (or the message's) trace is sampled.
//
// Why OpenTelemetry rather than the X-Ray SDK for Go: AWS put the X-Ray
// SDKs in maintenance in 2026 and points to OpenTelemetry, and the spans
// are portable to any OTLP backend.
package tracing

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	smithytracing "github.com/aws/smithy-go/tracing"
	"github.com/aws/smithy-go/tracing/smithyoteltracing"
	"go.opentelemetry.io/contrib/propagators/aws/xray"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/lambdajobs/lambdajobs/internal/tracehook"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/internal/xrayudp"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

func init() {
	tracehook.Start = start
	wire.SpanHeader = spanHeader
}

// otelTracing is the tracer provider of a function with tracing on.
type otelTracing struct {
	tp *sdktrace.TracerProvider
}

// start starts the exporter to the daemon at addr (an
// AWS_XRAY_DAEMON_ADDRESS value) for the function service.
func start(ctx context.Context, addr, service string) (tracehook.Tracing, error) {
	exp, err := otlptrace.New(ctx, xrayudp.New(xrayudp.Address(addr)))
	if err != nil {
		return nil, err
	}
	attrs := []attribute.KeyValue{
		attribute.String("service.name", service),
		attribute.String("cloud.provider", "aws"),
		attribute.String("cloud.platform", "aws_lambda"),
	}
	if v := os.Getenv("AWS_LAMBDA_FUNCTION_NAME"); v != "" {
		attrs = append(attrs, attribute.String("faas.name", v))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSpanProcessor(sdkCallsOnly{sdktrace.NewBatchSpanProcessor(exp)}),
		sdktrace.WithIDGenerator(xray.NewIDGenerator()),
		// Lambda samples: follow the parent, start no trace of our own.
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
	)
	return &otelTracing{tp: tp}, nil
}

// sdkCallsOnly keeps one span per AWS call: the SDK opens about ten more
// inside each (serialize, resolve endpoint, sign, retry loop, attempt,
// ...), which would multiply what each invocation sends and X-Ray stores
// without saying more than the call's own span (its duration, status and
// errors).
type sdkCallsOnly struct{ sdktrace.SpanProcessor }

func (p sdkCallsOnly) OnEnd(s sdktrace.ReadOnlySpan) {
	if strings.HasPrefix(s.InstrumentationScope().Name, "github.com/aws/aws-sdk-go-v2/") && !strings.Contains(s.Name(), ".") {
		return
	}
	p.SpanProcessor.OnEnd(s)
}

// Instrument sets an AWS client's Options.TracerProvider, so the SDK opens
// a span per call.
func (t *otelTracing) Instrument(p *smithytracing.TracerProvider) {
	*p = smithyoteltracing.Adapt(t.tp)
}

// Worker traces the worker's records with this provider.
func (t *otelTracing) Worker() jobs.Tracer { return WorkerTracer(t.tp) }

// Wrap makes handler one span per invocation, flushed before it returns.
func (t *otelTracing) Wrap(name string, handler lambda.Handler) lambda.Handler {
	return &tracedHandler{name: name, inner: handler, tp: t.tp, tracer: t.tp.Tracer("github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn")}
}

type tracedHandler struct {
	name   string
	inner  lambda.Handler
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// flushTimeout bounds the export at the end of an invocation (a local
// datagram: it takes microseconds).
const flushTimeout = 100 * time.Millisecond

func (h *tracedHandler) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	header, _ := ctx.Value("x-amzn-trace-id").(string)
	if header == "" {
		header = os.Getenv("_X_AMZN_TRACE_ID")
	}
	ctx = xray.Propagator{}.Extract(ctx, propagation.HeaderCarrier{"X-Amzn-Trace-Id": {header}})
	ctx, span := h.tracer.Start(ctx, h.name, trace.WithSpanKind(trace.SpanKindServer))
	out, err := h.inner.Invoke(ctx, payload)
	if err != nil {
		span.SetStatus(codes.Error, "invocation failed")
	}
	span.End()
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	_ = h.tp.ForceFlush(fctx)
	cancel()
	return out, err
}

// spanHeader is the X-Ray trace header of ctx's span, or "" when ctx has no
// valid span (wire.SpanHeader).
func spanHeader(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	xray.Propagator{}.Inject(ctx, c)
	for _, v := range c {
		return v
	}
	return ""
}
