package examplekinds

import (
	"context"
	"errors"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Approve shows a handler that waits for a person: it asks for an
// approval once (a step, where a real handler sends the request, keyed by
// jobs.StepKey), then waits for the signal "approval" for up to Hours
// without holding a worker, and ends with the answer, or with timed_out
// when none came. Deliver it with POST /v1/jobs/{id}/signals/approval
// (ljob signal ID approval '{"approved":true,"by":"ana"}').
const Approve = "example.approve"

// ApprovePayload is example.approve's payload: what to approve, and how
// long to wait for it.
type ApprovePayload struct {
	Item  string `json:"item"`
	Hours int    `json:"hours"`
}

// Approval is the payload of example.approve's signal "approval".
type Approval struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
}

// ApproveResult is how example.approve ended.
type ApproveResult struct {
	Item     string `json:"item"`
	Approved bool   `json:"approved"`
	By       string `json:"by,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
}

// CodeInvalidApproval is example.approve's failure for an empty item or
// hours out of 1 to 720.
const CodeInvalidApproval = "invalid_approval"

// ApproveOpts are example.approve's options: its signal declared.
var ApproveOpts = jobs.KindOpts{FailureCodes: []string{CodeInvalidApproval}, Signals: map[string]any{"approval": Approval{}}}

// RunApprove runs example.approve.
func RunApprove(ctx context.Context, job *jobs.Job[ApprovePayload]) (jobs.JSON[ApproveResult], error) {
	p := job.Payload
	if p.Item == "" || p.Hours < 1 || p.Hours > 720 {
		return jobs.JSON[ApproveResult]{}, jobs.Fail(CodeInvalidApproval, errors.New("item empty or hours out of range"))
	}
	if _, err := jobs.Step(ctx, job, "ask", func(ctx context.Context) (bool, error) {
		// Here a real handler sends the request for approval, passing
		// jobs.StepKey(ctx) to its mail or chat API so that a step run
		// twice sends it once.
		return true, nil
	}); err != nil {
		return jobs.JSON[ApproveResult]{}, err
	}
	a, ok, err := jobs.WaitForSignal[Approval](ctx, job, "approval", time.Duration(p.Hours)*time.Hour)
	if err != nil {
		return jobs.JSON[ApproveResult]{}, err
	}
	return jobs.JSON[ApproveResult]{V: ApproveResult{Item: p.Item, Approved: ok && a.Approved, By: a.By, TimedOut: !ok}}, nil
}
