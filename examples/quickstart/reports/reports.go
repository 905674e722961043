// Package reports is a team's own job kind, as a team would write it in its
// own repository: building an account's monthly report. It declares the
// failure code it may return and publishes its progress as a partial
// result.
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

// Payload is what a caller sends: {"account": "acme", "months": 3}.
type Payload struct {
	Account string `json:"account"`
	Months  int    `json:"months"`
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

// Register adds the kind to reg and returns its typed handle, which
// enqueues reports from Go.
func Register(reg *jobs.Registry) jobs.Kind[Payload] {
	return jobs.MustRegister(reg, Kind, jobs.HandlerFunc[Payload, Report](Build),
		jobs.WithFailureCodes(CodeNoSuchAccount),
		jobs.WithRetry(jobs.RetryPolicy{MaxAttempts: 3}))
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
