// Package oteltrace is the OpenTelemetry tracing that packages
// pkg/jobs/lambdafn/tracing (X-Ray daemon) and pkg/jobs/lambdafn/tracing/otlp
// (OTLP/HTTP) hand to lambdafn: a tracer provider over one exporter, the
// AWS clients' spans, the worker's record spans, and one span per
// invocation, flushed before the invocation returns. The two public
// packages differ only in the exporter, so that a bootstrap links the one
// its main chose (OTLP/HTTP brings gRPC's packages with it).
package oteltrace

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
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/lambdajobs/lambdajobs/internal/tracehook"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Tracing is a function's tracing over one exporter (tracehook.Tracing).
type Tracing struct {
	tp *sdktrace.TracerProvider
	// flush bounds the export at the end of an invocation.
	flush time.Duration
}

// New returns the tracing of the function service, whose spans go to exp,
// each invocation's flushed within flush (and before the invocation's
// deadline).
func New(exp sdktrace.SpanExporter, service string, flush time.Duration) *Tracing {
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
		// Lambda's trace ids are X-Ray's: the function's spans join them.
		sdktrace.WithIDGenerator(xray.NewIDGenerator()),
		// Lambda samples: follow the parent, start no trace of our own.
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
	)
	return &Tracing{tp: tp, flush: flush}
}

var _ tracehook.Tracing = (*Tracing)(nil)

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
func (t *Tracing) Instrument(p *smithytracing.TracerProvider) {
	*p = smithyoteltracing.Adapt(t.tp)
}

// Worker traces the worker's records with this provider.
func (t *Tracing) Worker() jobs.Tracer { return WorkerTracer(t.tp) }

// Shutdown exports the spans left, within ctx, and stops the batch span
// processor's goroutine.
func (t *Tracing) Shutdown(ctx context.Context) error { return t.tp.Shutdown(ctx) }

// Wrap makes handler one span per invocation, flushed before it returns.
func (t *Tracing) Wrap(name string, handler lambda.Handler) lambda.Handler {
	return &tracedHandler{name: name, inner: handler, t: t, tracer: t.tp.Tracer("github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn")}
}

type tracedHandler struct {
	name   string
	inner  lambda.Handler
	t      *Tracing
	tracer trace.Tracer
}

// deadlineMargin is what a flush leaves of the invocation: an export
// that has not ended by then is given up (its spans are lost), so that
// tracing never makes an invocation time out (a worker's batch response
// would be lost with it).
const deadlineMargin = 100 * time.Millisecond

func (h *tracedHandler) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	header, _ := ctx.Value("x-amzn-trace-id").(string)
	if header == "" {
		header = os.Getenv("_X_AMZN_TRACE_ID")
	}
	ctx = xray.Propagator{}.Extract(ctx, propagation.HeaderCarrier{"X-Amzn-Trace-Id": {header}})
	ctx, span := h.tracer.Start(ctx, h.name, trace.WithSpanKind(trace.SpanKindServer))
	out, err := h.inner.Invoke(ContextWithSpanHeader(ctx), payload)
	if err != nil {
		span.SetStatus(codes.Error, "invocation failed")
	}
	span.End()
	timeout := h.t.flush
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl)-deadlineMargin)
	}
	if timeout > 0 {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		_ = h.t.tp.ForceFlush(fctx)
		cancel()
	}
	return out, err
}

// ContextWithSpanHeader returns ctx carrying the way to the X-Ray trace
// header of a context's current span (wire.TraceHeader), which the messages
// the function sends carry.
func ContextWithSpanHeader(ctx context.Context) context.Context {
	return wire.WithSpanHeader(ctx, spanHeader)
}

// spanHeader is the X-Ray trace header of ctx's span, or "" when ctx has no
// valid span.
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
