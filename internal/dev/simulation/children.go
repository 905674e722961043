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

// Children. A plain job's script may start children (payload.Children):
// its handler enqueues that many plain jobs by name (Kind.EnqueueChild),
// each time it runs, under the store's faults, kills, redeliveries and
// retries. The invariants, at the end:
//   - a parent's children are only those its names derive, each its
//     owner's: however often the handler ran, every name started at most
//     one job;
//   - every answer a run got for a name named that one job;
//   - a parent that succeeded has a child for each of its names.

// kids is what the parents' runs were told, by parent.
type kids struct {
	mu   sync.Mutex
	want map[string]int               // parent -> how many children its script starts
	got  map[string]map[string]string // parent -> name -> the child id its runs were answered
}

// startChildren starts the children of job's script, each by its name,
// as a handler would; an error (a fault of the store or the queue) is the
// run's, retried under the kind's policy.
func (w *world) startChildren(ctx context.Context, job *jobs.Job[payload]) error {
	p := job.Payload
	w.kids.mu.Lock()
	w.kids.want[job.ID] = p.Children
	w.kids.mu.Unlock()
	for i := range p.Children {
		name := fmt.Sprint("c", i)
		child := payload{N: 1_000_000 + p.N*10 + i, Ms: (p.N*37 + i*101) % 3000}
		res, err := w.plain.EnqueueChild(ctx, job, name, child, nil)
		if errors.Is(err, jobs.ErrIdempotencyConflict) {
			w.violate("job %s: child %s, enqueued again with the same payload, is an idempotency conflict", job.ID, name)
		}
		if err != nil {
			w.cover("mechanism", "child not started (a fault)")
			return jobs.Retry(err)
		}
		if res.Replayed {
			w.cover("mechanism", "child found by its name again")
		} else {
			w.cover("mechanism", "child started")
		}
		w.kids.mu.Lock()
		if w.kids.got[job.ID] == nil {
			w.kids.got[job.ID] = map[string]string{}
		}
		if prev, ok := w.kids.got[job.ID][name]; ok && prev != res.Job.ID {
			w.violate("job %s: child %s was answered %s, then %s", job.ID, name, prev, res.Job.ID)
		}
		w.kids.got[job.ID][name] = res.Job.ID
		w.kids.mu.Unlock()
	}
	return nil
}

// checkChildren checks the parents' children (all: every job by id).
func (w *world) checkChildren(all map[string]*driver.Record) {
	byParent := map[string][]*driver.Record{}
	for _, id := range sortedKeys(all) {
		if r := all[id]; r.ChildOf != "" {
			byParent[r.ChildOf] = append(byParent[r.ChildOf], r)
		}
	}
	for _, pid := range sortedKeys(byParent) {
		parent, want := all[pid], w.kids.want[pid]
		derived := map[string]string{}
		for i := range want {
			derived[wire.DerivedID("child", pid, fmt.Sprint("c", i))] = fmt.Sprint("c", i)
		}
		if w.isInvoker(pid) {
			derived[wire.DerivedID("child", pid, childName)] = childName
		}
		for _, c := range byParent[pid] {
			switch {
			case parent == nil:
				w.violate("child %s names a parent %s that is not stored", c.ID, pid)
			case c.Owner != parent.Owner:
				w.violate("child %s is %s's, its parent %s is %s's", c.ID, c.Owner, pid, parent.Owner)
			case derived[c.ID] == "":
				w.violate("child %s of %s is none of the %d its names derive: a name started a job twice", c.ID, pid, want)
			}
		}
	}
	for _, pid := range sortedKeys(w.kids.want) {
		parent, want := all[pid], w.kids.want[pid]
		if parent == nil || parent.Status != jobs.StatusSucceeded {
			continue
		}
		for i := range want {
			id := wire.DerivedID("child", pid, fmt.Sprint("c", i))
			if all[id] == nil {
				w.violate("job %s succeeded without its child c%d (%s)", pid, i, id)
			}
			if got := w.kids.got[pid][fmt.Sprint("c", i)]; got != "" && got != id {
				w.violate("job %s's child c%d was answered %s, not %s", pid, i, got, id)
			}
		}
		if want > 0 {
			w.cover("invariant", "a parent's children: one per name")
		}
	}
}
