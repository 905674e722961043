// Command jobs is the team's one Lambda main: it serves every function
// (enqueue, getjob, waitjob, cancel, worker, sweeper, schedules); the CDK construct
// tells each which it is (JOBS_FUNCTION).
package main

import (
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"

	"example.com/quickstart/reports"
)

func main() {
	reg := jobs.NewRegistry()
	reports.Register(reg)
	lambdafn.Serve(lambdafn.Any, reg, nil)
}
