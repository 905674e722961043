// Package tracehook is where tracing plugs into the functions. lambdafn
// asks it for tracing when JOBS_TRACING is on; package
// pkg/jobs/lambdafn/tracing registers its OpenTelemetry implementation when
// a main imports it. A bootstrap whose main does not link nothing of
// OpenTelemetry, and refuses to start with JOBS_TRACING=on rather than run
// untraced.
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
}

// Start starts the tracing of the function service, whose spans go to the
// X-Ray daemon at addr (an AWS_XRAY_DAEMON_ADDRESS value). Nil unless a
// tracing package is linked.
var Start func(ctx context.Context, addr, service string) (Tracing, error)
