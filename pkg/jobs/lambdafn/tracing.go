package lambdafn

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	smithytracing "github.com/aws/smithy-go/tracing"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/tracehook"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Tracing is how a main's functions trace (Opts.Tracing): spans to the
// X-Ray daemon Lambda runs beside a function with active tracing
// (tracing.XRay, package pkg/jobs/lambdafn/tracing), or over OTLP/HTTP to a
// collector, such as ADOT's Lambda layer on localhost:4318 (otlp.HTTP,
// package pkg/jobs/lambdafn/tracing/otlp). Only those packages make one.
//
// The option links the tracing; JOBS_TRACING=on (what the CDK construct
// sets with Config.Tracing, beside Lambda's active tracing) turns it on:
//
//   - JOBS_TRACING=on and a Tracing: the function traces;
//   - JOBS_TRACING=on and no Tracing: the function refuses to start, rather
//     than run untraced when tracing was asked for;
//   - JOBS_TRACING unset or off: the function does not trace, whatever the
//     option (nothing is started; the code is only linked).
//
// This package links nothing of OpenTelemetry: a main that passes no
// Tracing builds a smaller bootstrap that starts faster.
type Tracing interface {
	// Start starts the tracing of the function cfg configures, once, at
	// its start.
	Start(ctx context.Context, cfg Config) (tracehook.Tracing, error)
}

// errNoTracing is Build's error for JOBS_TRACING=on in a main that passed
// no Opts.Tracing: never run untraced when tracing was asked for.
var errNoTracing = fmt.Errorf(`%s=on, but this function's main passes no tracing: `+
	`give lambdafn.Opts{Tracing: tracing.XRay()} (package pkg/jobs/lambdafn/tracing) or otlp.HTTP() (pkg/jobs/lambdafn/tracing/otlp) `+
	`to lambdafn.Serve (docs/operations/OPERATIONS.md, "Tracing"), or turn tracing off`, deploy.EnvTracing.Name)

// startTracing starts the function's tracing when JOBS_TRACING is on (nil
// when it is off).
func startTracing(ctx context.Context, cfg Config, opts *Opts) (tracehook.Tracing, error) {
	if !cfg.Tracing {
		return nil, nil
	}
	if opts == nil || opts.Tracing == nil {
		return nil, errNoTracing
	}
	return opts.Tracing.Start(ctx, cfg)
}

// instrument sets an AWS client's Options.TracerProvider when tracing is
// on; off, it leaves the SDK's default (no spans: the client resolved it
// before its options ran, so nil must not be set).
func instrument(t tracehook.Tracing, p *smithytracing.TracerProvider) {
	if t != nil {
		t.Instrument(p)
	}
}

// workerTracer is the worker's record tracer (nil when tracing is off, so
// the interface stays nil).
func workerTracer(t tracehook.Tracing) jobs.Tracer {
	if t == nil {
		return nil
	}
	return t.Worker()
}

// shutdownTimeout bounds the export of the spans left when a tracing is
// shut down (see tracedFunction.Close).
const shutdownTimeout = time.Second

// tracedFunction is a traced function's handler: Close shuts its tracing
// down (see Build).
type tracedFunction struct {
	lambda.Handler
	tracing tracehook.Tracing
}

// Close exports the spans left and stops the tracing's exporter; the
// handler traces nothing after it.
func (f tracedFunction) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	return f.tracing.Shutdown(ctx)
}
