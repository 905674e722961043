package examplekinds

import (
	"context"
	"errors"
	"fmt"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Chain shows a handler that waits for jobs of its own (jobs.Invoke): one
// example.hash child per text, in turn, each by its name ("text-<i>"),
// its digest fed to the next text. While a child runs, the parent waits
// queued (waiting_on "child") without a worker; the child's end wakes it.
// A child that fails (rounds out of range) fails the chain with
// chain_broken.
const Chain = "example.chain"

// ChainPayload is example.chain's payload: the texts, and the rounds of
// each child (1 to 1,000,000, as example.hash's).
type ChainPayload struct {
	Texts  []string `json:"texts"`
	Rounds int      `json:"rounds"`
}

// ChainResult is each child's digest, in order.
type ChainResult struct {
	Digests []string `json:"digests"`
}

// CodeChainBroken is example.chain's failure when a child failed; its
// code is the child's, in the chain's partial result.
const CodeChainBroken = "chain_broken"

// maxChain bounds example.chain's texts (a job waits for at most 100
// children).
const maxChain = 20

// chain runs example.chain with hash, the handle of example.hash.
func chain(hash jobs.Kind[HashPayload]) func(context.Context, *jobs.Job[ChainPayload]) (jobs.JSON[ChainResult], error) {
	return func(ctx context.Context, job *jobs.Job[ChainPayload]) (jobs.JSON[ChainResult], error) {
		texts := job.Payload.Texts
		if len(texts) < 1 || len(texts) > maxChain {
			return jobs.JSON[ChainResult]{}, jobs.Fail(CodeChainBroken, fmt.Errorf("%d texts: want 1 to %d", len(texts), maxChain))
		}
		var r ChainResult
		prev := ""
		for i, text := range texts {
			d, err := jobs.Invoke[HashResult](ctx, job, fmt.Sprint("text-", i), hash.Call(HashPayload{Text: prev + text, Rounds: job.Payload.Rounds}, nil))
			var ce *jobs.ChildError
			if errors.As(err, &ce) {
				return jobs.JSON[ChainResult]{}, jobs.Fail(CodeChainBroken, err)
			}
			if err != nil {
				return jobs.JSON[ChainResult]{}, err
			}
			r.Digests = append(r.Digests, d.SHA256)
			prev = d.SHA256
		}
		return jobs.JSON[ChainResult]{V: r}, nil
	}
}
