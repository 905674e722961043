// Package tracehook is the shape of a started function's tracing, between
// lambdafn, which asks for it when JOBS_TRACING is on, and the tracing
// packages a main passes as lambdafn.Opts.Tracing (pkg/jobs/lambdafn/tracing,
// pkg/jobs/lambdafn/tracing/otlp). It holds no state: a bootstrap whose main
// passes no tracing links nothing of OpenTelemetry, and refuses to start
// with JOBS_TRACING=on rather than run untraced.
package tracehook

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"
	smithytracing "github.com/aws/smithy-go/tracing"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Tracing is one function's tracing, once started.
type Tracing interface {
	// Instrument sets an AWS client's TracerProvider option, so the SDK
	// opens a span per call.
	Instrument(p *smithytracing.TracerProvider)
	// Worker traces the worker's records.
	Worker() jobs.Tracer
	// Wrap makes handler one span per invocation, flushed before it
	// returns.
	Wrap(name string, handler lambda.Handler) lambda.Handler
	// Shutdown exports what is left, within ctx, and stops the exporter's
	// goroutine. A function never calls it (its tracing lives as long as
	// its process); a Build that fails, or a test done with Build's
	// handler, does.
	Shutdown(ctx context.Context) error
}
