package lambdafn

import (
	"context"
	"fmt"

	smithytracing "github.com/aws/smithy-go/tracing"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/tracehook"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Tracing (JOBS_TRACING=on, which the construct sets with Config.Tracing)
// is OpenTelemetry's, in package pkg/jobs/lambdafn/tracing: a main links it
// by importing that package for its effect. This package links nothing of
// OpenTelemetry, so a main that does not import it builds a smaller
// bootstrap that starts faster, and refuses JOBS_TRACING=on.

// errNoTracing is Build's error for JOBS_TRACING=on in a bootstrap built
// without tracing: never run untraced when tracing was asked for.
var errNoTracing = fmt.Errorf(`%s=on, but this bootstrap was built without tracing: `+
	`import _ "github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn/tracing" in its main (docs/OPERATIONS.md, "Tracing"), or turn tracing off`, deploy.EnvTracing.Name)

// startTracing starts the function's tracing.
func startTracing(ctx context.Context, cfg Config) (tracehook.Tracing, error) {
	if tracehook.Start == nil {
		return nil, errNoTracing
	}
	return tracehook.Start(ctx, cfg.XRayDaemon, cfg.Service)
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
