// Command enqueue is the POST /v1/jobs function: it validates a job, stores it queued and sends it to the queue.
// Configuration comes from the environment; see package lambdafn.
package main

import (
	"os"

	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/internal/withobjects"
	"github.com/lambdajobs/lambdajobs/internal/withtracing"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"
)

func main() {
	reg := examplekinds.MustRegistry(os.Getenv)
	// JOBS_TRACING=on works (-tags lambdajobs.notracing: refused).
	lambdafn.Serve(lambdafn.Enqueue, reg, &lambdafn.Opts{Tracing: withtracing.Tracing(), Objects: withobjects.Objects()})
}
