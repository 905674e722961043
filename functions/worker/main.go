// Command worker is the SQS-triggered worker function: it claims and runs each job of a batch.
// Configuration comes from the environment; see package lambdafn.
package main

import (
	"os"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/internal/withobjects"
	"github.com/lambdajobs/lambdajobs/internal/withtracing"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"
)

func main() {
	reg := examplekinds.MustRegistry(os.Getenv)
	// JOBS_TRACING=on works (-tags lambdajobs.notracing: refused).
	opts := lambdafn.Opts{Tracing: withtracing.Tracing(), Objects: withobjects.Objects()}
	// S3 notifications, EventBridge events and plain envelopes dropped on
	// the queue become example jobs owned by JOBS_EXAMPLE_ROUTE_OWNER.
	if examplekinds.Enabled(os.Getenv) {
		opts.Routes = examplekinds.Routes(os.Getenv(deploy.EnvExampleRouteOwner.Name))
	}
	lambdafn.Serve(lambdafn.Worker, reg, &opts)
}
