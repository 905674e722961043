// Command worker is the SQS-triggered worker function: it claims and runs each job of a batch.
// Configuration comes from the environment; see package lambdafn.
package main

import (
	"os"

	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"
)

func main() {
	reg := jobs.NewRegistry()
	if err := examplekinds.Register(reg); err != nil {
		panic(err)
	}
	// S3 notifications, EventBridge events and plain envelopes dropped on
	// the queue become example jobs owned by JOBS_EXAMPLE_ROUTE_OWNER.
	routes := examplekinds.Routes(os.Getenv("JOBS_EXAMPLE_ROUTE_OWNER"))
	lambdafn.Main(lambdafn.Worker, reg, lambdafn.WithRoutes(routes))
}
