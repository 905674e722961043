// Package reports is a team's own job kinds, as a team would write them in
// its own repository: building an account's monthly report (with a failure
// code it declares, a retry policy, progress published as a partial result
// and a secret field sealed at rest), and a nightly clean-up declared as a
// schedule.
package reports

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Kind is the kind's name.
const Kind = "reports.build"

// CodeNoSuchAccount is the failure of a report for an account that does not
// exist (declared at registration; the only code the handler returns).
const CodeNoSuchAccount = "no_such_account"

// Payload is what a caller sends: {"account": "acme", "months": 3}, and
// optionally the account's API token, which is sealed before it is stored
// and shown as "[secret]" when the job is read.
type Payload struct {
	Account string `json:"account"`
	Months  int    `json:"months"`
	Token   string `json:"token,omitempty" jobs:"secret"`
}

// Report is the result. Only its public JSON is stored and returned: the
// time it took stays with the handler.
type Report struct {
	Account string
	Rows    int
	Took    time.Duration
}

// PublicJSON says what of the report is public.
func (r Report) PublicJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"account": r.Account, "rows": r.Rows})
}

// Progress is the partial result published after each month.
type Progress struct {
	Done  int `json:"done"`
	Total int `json:"total"`
}

// Owner is who reads the jobs the team makes from Go (the clean-up's, the
// enqueue program's): the IAM principal the team calls the API as. Locally
// that is the caller X-Local-Caller: team; in your account, your team's
// role's ARN.
const Owner = "arn:aws:iam::000000000000:user/team"

// Cleanup is the nightly clean-up's kind; CleanupSchedule its schedule.
const (
	Cleanup         = "reports.cleanup"
	CleanupSchedule = "reports-cleanup"
)

// CleanupPayload says which reports the clean-up removes.
type CleanupPayload struct {
	OlderThanDays int `json:"older_than_days"`
}

// Register adds the kinds and the clean-up's schedule to reg and returns
// the report kind's typed handle, which enqueues reports from Go. The
// schedule's jobs are owned by Owner, so the team reads them through the
// API as its own.
func Register(reg *jobs.Registry) jobs.Kind[Payload] {
	build := jobs.MustRegister(reg, Kind, Build, &jobs.KindOpts{
		FailureCodes: []string{CodeNoSuchAccount},
		Retry:        jobs.RetryPolicy{MaxAttempts: 3},
	})
	cleanup := jobs.MustRegister(reg, Cleanup, Clean, nil)
	if err := cleanup.Every(reg, CleanupSchedule, "cron(0 3 * * ? *)", CleanupPayload{OlderThanDays: 90}, &jobs.ScheduleOpts{Owner: Owner}); err != nil {
		panic(err)
	}
	return build
}

// Clean removes old reports (here: counts how many it would).
func Clean(ctx context.Context, job *jobs.Job[CleanupPayload]) (jobs.JSON[map[string]int], error) {
	return jobs.JSON[map[string]int]{V: map[string]int{"older_than_days": job.Payload.OlderThanDays, "removed": 0}}, nil
}

// Build builds the report, one month at a time, publishing its progress.
func Build(ctx context.Context, job *jobs.Job[Payload]) (Report, error) {
	p := job.Payload
	if p.Account == "" || strings.HasPrefix(p.Account, "closed-") {
		return Report{}, jobs.Fail(CodeNoSuchAccount, nil)
	}
	months := min(max(p.Months, 1), 24)
	start := time.Now()
	r := Report{Account: p.Account}
	for m := 1; m <= months; m++ {
		if err := ctx.Err(); err != nil {
			return Report{}, err // the deadline came: a retry finishes it
		}
		r.Rows += 10 * m
		if err := job.Publish(ctx, jobs.JSON[Progress]{V: Progress{Done: m, Total: months}}); err != nil {
			return Report{}, err
		}
	}
	r.Took = time.Since(start)
	return r, nil
}
