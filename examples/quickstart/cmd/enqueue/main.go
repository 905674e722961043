// Command enqueue is one of the team's other programs: it enqueues a report
// from outside the jobs' own functions, with one call (lambdafn.NewService)
// over the environment jobsinfra's GrantEnqueue gives a function in AWS, or
// that `make run` prints for the local stack:
//
//	export JOBS_TABLE=... JOBS_QUEUE_URL=... (as printed)
//	go run ./cmd/enqueue -account acme -months 3
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"

	"example.com/quickstart/reports"
)

func main() {
	account := flag.String("account", "acme", "the account to report on")
	months := flag.Int("months", 3, "how many months")
	owner := flag.String("owner", reports.Owner, "who owns the job: the IAM principal that reads it through the API")
	flag.Parse()
	ctx := context.Background()
	reg := jobs.NewRegistry()
	build := reports.Register(reg)
	svc, err := lambdafn.NewService(ctx, reg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "enqueue:", err)
		os.Exit(1)
	}
	res, err := build.Enqueue(ctx, svc, *owner, reports.Payload{Account: *account, Months: *months}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "enqueue:", err)
		os.Exit(1)
	}
	fmt.Println(res.Job.ID)
}
