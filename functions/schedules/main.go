// Command schedules is the POST and GET /v1/schedules and GET and DELETE
// /v1/schedules/{name} function: the caller's own recurring schedules, in
// EventBridge Scheduler. Configuration comes from the environment; see
// package lambdafn.
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
	lambdafn.Serve(lambdafn.Schedules, reg, &lambdafn.Opts{Tracing: withtracing.Tracing(), Objects: withobjects.Objects()})
}
