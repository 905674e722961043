// Command worker is the SQS-triggered worker function: it claims and runs each job of a batch.
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
	lambdafn.Main(lambdafn.Worker, reg)
}
