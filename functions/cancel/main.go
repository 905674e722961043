// Command cancel is the POST /v1/jobs/{id}/cancel function: it cancels the caller's job.
// Configuration comes from the environment; see package lambdafn.
package main

import (
	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"
)

func main() {
	reg := jobs.NewRegistry()
	if err := examplekinds.Register(reg); err != nil {
		panic(err)
	}
	lambdafn.Main(lambdafn.Cancel, reg)
}
