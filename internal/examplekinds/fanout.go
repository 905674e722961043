package examplekinds

import (
	"context"
	"errors"
	"fmt"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// FanOut shows a handler that starts jobs of its own, as a nightly job
// that starts one job per account does: one example.hash child per
// account, each by its name ("account-<i>"), for the parent's owner. A
// retry or a redelivery of the parent starts none twice: it finds the
// children its earlier runs started. The worker needs no grant to enqueue
// (Kind.EnqueueChild).
const FanOut = "example.fanout"

// FanOutPayload is example.fanout's payload: how many accounts.
type FanOutPayload struct {
	Accounts int `json:"accounts"`
}

// FanOutResult is what example.fanout did: the children it started in
// this run, and those an earlier run had started.
type FanOutResult struct {
	Started int `json:"started"`
	Found   int `json:"found"`
}

// CodeInvalidFanOut is example.fanout's failure for an account count out
// of 1 to MaxFanOut.
const CodeInvalidFanOut = "invalid_fanout"

// MaxFanOut bounds example.fanout's accounts.
const MaxFanOut = 1000

// fanOut runs example.fanout with hash, the handle of example.hash.
func fanOut(hash jobs.Kind[HashPayload]) func(context.Context, *jobs.Job[FanOutPayload]) (jobs.JSON[FanOutResult], error) {
	return func(ctx context.Context, job *jobs.Job[FanOutPayload]) (jobs.JSON[FanOutResult], error) {
		n := job.Payload.Accounts
		if n < 1 || n > MaxFanOut {
			return jobs.JSON[FanOutResult]{}, jobs.Fail(CodeInvalidFanOut, errors.New("accounts out of range"))
		}
		var r FanOutResult
		for i := range n {
			res, err := hash.EnqueueChild(ctx, job, fmt.Sprint("account-", i), HashPayload{Text: fmt.Sprint("account-", i), Rounds: 1}, nil)
			if err != nil {
				// A fault of the store or the queue: the next attempt
				// starts the rest, and finds these.
				return jobs.JSON[FanOutResult]{}, jobs.Retry(err)
			}
			if res.Replayed {
				r.Found++
			} else {
				r.Started++
			}
		}
		return jobs.JSON[FanOutResult]{V: r}, nil
	}
}
