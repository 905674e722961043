// Command enqueue is the POST /v1/jobs function: it validates a job, stores it queued and sends it to the queue.
// Configuration comes from the environment; see package lambdafn.
package main

import (
	"os"

	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	_ "github.com/lambdajobs/lambdajobs/internal/withtracing" // JOBS_TRACING=on works (-tags lambdajobs.notracing: left out)
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"
)

func main() {
	reg := examplekinds.MustRegistry(os.Getenv)
	lambdafn.Serve(lambdafn.Enqueue, reg, nil)
}
