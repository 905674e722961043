package simulation

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Children a handler waits for. A job with steps may invoke a plain child
// after its first step (payload.InvokeS, jobs.Invoke): the child waits
// InvokeS seconds for a signal no one sends, then succeeds or fails with
// the declared code, under the store's faults, kills, redeliveries and the
// clients' cancels (a parent cancelled while it waits cancels the child).
// The invariants:
//   - Invoke answers only once its child has ended, with the child's
//     status, code and result, and every run of the parent gets the same
//     answer (as each Invoke returns);
//   - the child is started once, under the id its name derives (at the
//     end, checkChildren);
//   - a parent cancelled while its child had not ended leaves the child
//     cancelled, not ending later on its own (at the end).

// childName is the name the simulated parents give their child.
const childName = "inv"

// invoked is what the parents' Invokes answered, by parent.
type invoked struct {
	mu      sync.Mutex
	answers map[string]string
}

// invokeStep invokes job's child and checks the answer.
func (w *world) invokeStep(ctx context.Context, job *jobs.Job[payload]) error {
	p := job.Payload
	child := payload{N: 2_000_000 + p.N, Steps: 1, SignalS: p.InvokeS, Fail: p.InvokeFail}
	w.invoked.mu.Lock()
	w.invoked.answers[job.ID] += "" // a parent: its child's id derives from childName
	w.invoked.mu.Unlock()
	r, err := jobs.Invoke[result](ctx, job, childName, w.plain.Call(child, nil))
	var ce *jobs.ChildError
	answer, status := "", jobs.StatusSucceeded
	switch {
	case errors.As(err, &ce):
		answer, status = fmt.Sprint(ce.Status, " ", ce.Code), ce.Status
	case err != nil:
		w.cover("mechanism", "child not invoked (a fault)")
		return err
	default:
		answer = fmt.Sprint("succeeded ", r.N)
		if r.N != child.N {
			w.violate("job %s: its child answered %d, its result was %d", job.ID, r.N, child.N)
		}
	}
	id := wire.DerivedID("child", job.ID, childName)
	if cur, err := w.mem.Get(ctx, id); err != nil || cur.FinishedAt.IsZero() {
		w.violate("job %s: Invoke answered %q before its child %s ended (%v)", job.ID, answer, id, err)
	}
	w.invoked.mu.Lock()
	first := w.invoked.answers[job.ID]
	if first == "" {
		w.invoked.answers[job.ID] = answer
	}
	w.invoked.mu.Unlock()
	if first != "" && first != answer {
		w.violate("job %s: Invoke answered %q, an earlier run %q", job.ID, answer, first)
	}
	w.cover("mechanism", "child invoked: "+string(status))
	return nil
}

// isInvoker reports whether job's runs invoked a child.
func (w *world) isInvoker(job string) bool {
	w.invoked.mu.Lock()
	defer w.invoked.mu.Unlock()
	_, ok := w.invoked.answers[job]
	return ok
}

// checkCascades: a parent cancelled while its child had not ended leaves
// the child cancelled: a child that ended otherwise did so before the
// cancel's cascade could reach it (within the dispatch grace, two sweeps
// and a worker timeout of the parent's cancel).
func (w *world) checkCascades(all map[string]*driver.Record) {
	for _, id := range sortedKeys(all) {
		c := all[id]
		if c.AwaitedAs == "" {
			continue
		}
		parent := all[c.ChildOf]
		if parent == nil || parent.Status != jobs.StatusCancelled || w.sweeperOff {
			continue
		}
		bound := parent.FinishedAt.Add(w.grace + 2*sweepInterval + w.timeoutOf(c.Lane))
		switch {
		case c.Status == jobs.StatusCancelled:
			w.cover("invariant", "a cancelled parent's child was cancelled")
		case c.FinishedAt.After(bound):
			w.violate("job %s was cancelled at %v while its child %s ran on, to %s at %v",
				parent.ID, parent.FinishedAt.Sub(w.sched.start), c.ID, c.Status, c.FinishedAt.Sub(w.sched.start))
		}
	}
}
