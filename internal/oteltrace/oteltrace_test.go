package oteltrace_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/lambdajobs/lambdajobs/internal/oteltrace"
	"github.com/lambdajobs/lambdajobs/internal/wire"
)

// Inside a traced invocation, wire.TraceHeader (what every SQS send puts in
// AWSTraceHeader) is the X-Ray header of the current span: the
// invocation's, in Lambda's trace. Outside one it is empty.
func TestInvocationsCarryTheirSpansHeader(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	var header string
	tr := oteltrace.New(exp, "enqueue", time.Second)
	defer func() { _ = tr.Shutdown(context.Background()) }()
	h := tr.Wrap("enqueue", lambda.NewHandler(func(ctx context.Context) error {
		header = wire.TraceHeader(ctx)
		return nil
	}))
	//lint:ignore SA1029 the key aws-lambda-go itself puts the trace header under
	ctx := context.WithValue(context.Background(), "x-amzn-trace-id", "Root=1-674f0000-aaaaaaaaaaaaaaaaaaaaaaaa;Parent=1234567890abcdef;Sampled=1")
	if _, err := h.Invoke(ctx, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	spans := exp.GetSpans() // flushed before Invoke returned
	if len(spans) != 1 {
		t.Fatalf("%d spans exported, want the invocation's", len(spans))
	}
	want := "Root=1-674f0000-aaaaaaaaaaaaaaaaaaaaaaaa;Parent=" + spans[0].SpanContext.SpanID().String() + ";Sampled=1"
	if header != want {
		t.Fatalf("the invocation's trace header %q, want %q", header, want)
	}
	if got := wire.TraceHeader(context.Background()); got != "" {
		t.Fatalf("a context outside any invocation has the header %q", got)
	}
}
