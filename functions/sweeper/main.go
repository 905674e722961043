// Command sweeper is the scheduled sweeper function: it fails abandoned jobs and re-sends undispatched ones.
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
	lambdafn.Serve(lambdafn.Sweeper, reg, &lambdafn.Opts{Tracing: withtracing.Tracing(), Objects: withobjects.Objects()})
}
