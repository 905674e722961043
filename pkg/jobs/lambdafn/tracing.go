package lambdafn

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

	"github.com/lambdajobs/lambdajobs/internal/xrayudp"
)

// Tracing (JOBS_TRACING=on, which the construct sets with Config.Tracing,
// next to Lambda's active tracing) uses OpenTelemetry: each invocation is a
// span whose parent is the segment Lambda opened (the _X_AMZN_TRACE_ID
// header), every DynamoDB, SQS and Secrets Manager call is a child span
// (the AWS SDK's own tracing, through smithy-go's OpenTelemetry adapter),
// and the worker opens a span per record in the trace its
// message carries (see jobs.WorkerConfig.TracerProvider). Spans go to the
// X-Ray daemon Lambda runs next to the function, over UDP in its OTLP
// framing (package xrayudp), flushed at the end of each invocation: no
// collector layer and no HTTP call. Sampling is Lambda's: a span is kept
// when the invocation's (or the message's) trace is sampled.
//
// Why OpenTelemetry rather than the X-Ray SDK for Go: AWS put the X-Ray
// SDKs in maintenance in 2026 and points to OpenTelemetry; the spans are
// portable to any OTLP backend; and the core jobs package depends only on
// the OpenTelemetry API, which costs nothing with tracing off.

// otelTracing is the tracer provider of a function with tracing on.
type otelTracing struct {
	tp *sdktrace.TracerProvider
}

// newTracing starts the exporter to the daemon at addr (an
// AWS_XRAY_DAEMON_ADDRESS value) for the function service.
func newTracing(ctx context.Context, addr, service string) (*otelTracing, error) {
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

// instrument sets an AWS client's Options.TracerProvider, so the SDK opens
// a span per call; with tracing off it leaves the SDK's default (no spans:
// the client resolved it before its options ran, so nil must not be set).
func (t *otelTracing) instrument(p *smithytracing.TracerProvider) {
	if t != nil {
		*p = smithyoteltracing.Adapt(t.tp)
	}
}

// provider is the tracer provider to hand to the jobs package (nil when
// tracing is off, so the interface stays nil).
func (t *otelTracing) provider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.tp
}

// wrap makes handler one span per invocation, flushed before it returns.
func (t *otelTracing) wrap(name string, handler any) lambda.Handler {
	return &tracedHandler{name: name, inner: lambda.NewHandler(handler), t: t, tracer: t.tp.Tracer("github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn")}
}

type tracedHandler struct {
	name   string
	inner  lambda.Handler
	t      *otelTracing
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
	_ = h.t.tp.ForceFlush(fctx)
	cancel()
	return out, err
}
