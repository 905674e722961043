// Command waitjob is the GET /v1/jobs/{id}/wait function: it answers the caller's job once it changes.
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
	lambdafn.Serve(lambdafn.WaitJob, reg, &lambdafn.Opts{Tracing: withtracing.Tracing(), Objects: withobjects.Objects()})
}
