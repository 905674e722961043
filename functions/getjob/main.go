// Command getjob is the GET /v1/jobs/{id} function: it returns the caller's job.
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
	lambdafn.Serve(lambdafn.GetJob, reg, &lambdafn.Opts{Tracing: withtracing.Tracing(), Objects: withobjects.Objects()})
}
