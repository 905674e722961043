package examplekinds

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Nightly shows the nightly fan-out a handler waits for (jobs.Map): one
// example.hash child per account, at most Window of them at once (0: all
// at once), each wave a batch. The parent waits queued (waiting_on
// "child") without a worker while a wave runs, and is woken once per wave,
// never once per child; then it sums up. The worker needs no grant to
// start them.
const Nightly = "example.nightly"

// NightlyPayload is example.nightly's payload: how many accounts (1 to
// 10,000), and how many run at once.
type NightlyPayload struct {
	Accounts int `json:"accounts"`
	Window   int `json:"window"`
}

// NightlyResult sums the children up: how many succeeded and failed, and
// a digest of their digests in the accounts' order.
type NightlyResult struct {
	Succeeded int    `json:"succeeded"`
	Failed    int    `json:"failed"`
	Digest    string `json:"digest"`
}

// CodeInvalidNightly is example.nightly's failure for accounts or a
// window out of range.
const CodeInvalidNightly = "invalid_nightly"

// nightly runs example.nightly with hash, the handle of example.hash.
func nightly(hash jobs.Kind[HashPayload]) func(context.Context, *jobs.Job[NightlyPayload]) (jobs.JSON[NightlyResult], error) {
	return func(ctx context.Context, job *jobs.Job[NightlyPayload]) (jobs.JSON[NightlyResult], error) {
		n, window := job.Payload.Accounts, job.Payload.Window
		if n < 1 || n > jobs.MaxBatchJobs || window < 0 || (window > 0 && (n+window-1)/window > 100) {
			return jobs.JSON[NightlyResult]{}, jobs.Fail(CodeInvalidNightly, errors.New("accounts or window out of range"))
		}
		calls := make([]jobs.Call, n)
		for i := range calls {
			calls[i] = hash.Call(HashPayload{Text: fmt.Sprint("account-", i), Rounds: 1}, nil)
		}
		digests, err := jobs.Map[HashResult](ctx, job, "accounts", calls, window)
		var r NightlyResult
		for _, e := range unjoin(err) {
			var ce *jobs.ChildError
			if !errors.As(e, &ce) {
				return jobs.JSON[NightlyResult]{}, err // a fault of the store: the next attempt
			}
			r.Failed++
		}
		sum := sha256.New()
		for _, d := range digests {
			sum.Write([]byte(d.SHA256))
		}
		r.Succeeded, r.Digest = n-r.Failed, hex.EncodeToString(sum.Sum(nil))
		return jobs.JSON[NightlyResult]{V: r}, nil
	}
}

// unjoin is the errors errors.Join joined in err (err itself if it is
// another; none for nil).
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err != nil {
		return []error{err}
	}
	return nil
}
