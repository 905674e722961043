// Command schedules is the POST and GET /v1/schedules and GET and DELETE
// /v1/schedules/{name} function: the caller's own recurring schedules, in
// EventBridge Scheduler. Configuration comes from the environment; see
// package lambdafn.
package main

import (
	"os"

	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	_ "github.com/lambdajobs/lambdajobs/internal/withtracing" // JOBS_TRACING=on works (-tags lambdajobs.notracing: left out)
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"
)

func main() {
	reg := examplekinds.MustRegistry(os.Getenv)
	lambdafn.Serve(lambdafn.Schedules, reg, nil)
}
