package simulation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Fan-out a handler waits for. A job with steps may map a plain child over
// MapN calls after its first step (jobs.Map), MapWindow of them at a time
// (0: all): each child waits InvokeS seconds for a signal no one sends,
// then succeeds, or (the MapFail-th, 1-based) fails with the declared
// code, under the store's faults, kills (a run killed while it creates a
// wave's batch leaves it half made), redeliveries and the clients'
// cancels. The invariants:
//   - Map answers only once every child of every wave has ended, with
//     each child's result or code in the calls' order (a call never
//     stored, in a wave the sweeper aborted, answered cancelled), and
//     every run of the parent gets the same answer (as each Map returns);
//   - every call starts one job, however often the parent ran (at the
//     end);
//   - a parent cancelled while it mapped leaves no child running: one
//     that ended otherwise did so within the cascade's bound (at the end).

// mapName is the name the simulated parents give their Map.
const mapName = "map"

// mapBase is the N of a parent's first mapped child: parent N times 16,
// past the other children's.
func mapBase(parentN int) int { return 3_000_000 + parentN*16 }

// mapped is what the parents' Maps answered, by parent, and the Ns of
// their calls.
type mapped struct {
	mu      sync.Mutex
	answers map[string]string
	calls   map[string][3]int // parent -> first N, how many, window
	// aborted counts a parent's calls answered cancelled that were never
	// stored (their wave aborted).
	aborted map[string]int
}

// mapStep maps job's children and checks the answer.
func (w *world) mapStep(ctx context.Context, job *jobs.Job[payload]) error {
	p := job.Payload
	base := mapBase(p.N)
	w.mapped.mu.Lock()
	window := p.MapWindow
	if window == 0 {
		window = p.MapN
	}
	w.mapped.calls[job.ID] = [3]int{base, p.MapN, window}
	w.mapped.mu.Unlock()
	calls := make([]jobs.Call, p.MapN)
	for i := range calls {
		c := payload{N: base + i, Steps: 1, SignalS: p.InvokeS}
		if i+1 == p.MapFail {
			c.Fail = "declared"
		}
		calls[i] = w.plain.Call(c, nil)
	}
	for _, c := range w.mem.All() {
		if _, ok := w.mapCall(job.ID, c); ok {
			if b, err := w.mem.GetBatch(ctx, c.BatchID); err == nil && b.Creating {
				w.cover("mechanism", "map: a wave half made by a run that died, finished by the next")
				break
			}
		}
	}
	rs, err := jobs.Map[result](ctx, job, mapName, calls, p.MapWindow)
	var failed []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		failed = j.Unwrap()
	} else if err != nil {
		failed = []error{err}
	}
	codes := map[string]string{} // child id -> status and code
	cancelled := map[string]bool{}
	for _, e := range failed {
		var ce *jobs.ChildError
		if !errors.As(e, &ce) {
			w.cover("mechanism", "map not answered (a fault)")
			return err
		}
		codes[ce.ID] = fmt.Sprint(ce.Status, " ", ce.Code)
		if ce.Status == jobs.StatusCancelled {
			cancelled[ce.ID] = true
		}
	}
	answer := fmt.Sprint(codes)
	for i, r := range rs {
		if r.N != 0 && r.N != base+i {
			w.violate("job %s: its map's call %d answered %d, its result was %d", job.ID, i, r.N, base+i)
		}
		answer += fmt.Sprint(" ", r.N)
	}
	// Every child ended before the answer. A call whose child was never
	// stored (its create failed in a wave the sweeper then aborted: the
	// parent had failed, and was retried by hand) is answered cancelled,
	// as its ended batch counted it.
	ended := 0
	stored := map[string]bool{}
	batches := map[string]*driver.Batch{}
	for _, c := range w.mem.All() {
		if i, ok := w.mapCall(job.ID, c); ok {
			if !c.Status.Final() {
				w.violate("job %s: Map answered before its call %d (%s) ended", job.ID, i, c.ID)
			}
			ended++
			stored[c.ID] = true
			if b, err := w.mem.GetBatch(ctx, c.BatchID); err == nil {
				batches[b.ID] = b
			}
		}
	}
	aborted := 0
	for id := range cancelled {
		if stored[id] {
			continue
		}
		for _, b := range batches {
			for j := range b.Total {
				if wire.BatchJobID(b.ID, j) == id && !b.Status.Final() {
					w.violate("job %s: Map answered its child %s cancelled, never stored, in wave %s that has not ended", job.ID, id, b.ID)
				}
			}
		}
		aborted++
		w.cover("mechanism", "map: a child never stored, its wave aborted, answered cancelled")
	}
	if ended+aborted != p.MapN {
		w.violate("job %s: Map answered with %d of its %d children stored (%d never stored, answered cancelled)", job.ID, ended, p.MapN, aborted)
	}
	w.mapped.mu.Lock()
	w.mapped.aborted[job.ID] = aborted
	w.mapped.mu.Unlock()
	w.mapped.mu.Lock()
	first := w.mapped.answers[job.ID]
	if first == "" {
		w.mapped.answers[job.ID] = answer
	}
	w.mapped.mu.Unlock()
	if first != "" && first != answer {
		w.violate("job %s: Map answered %q, an earlier run %q", job.ID, answer, first)
	}
	if len(codes) > 0 {
		w.cover("mechanism", "map answered: a child failed")
	} else {
		w.cover("mechanism", "map answered: all succeeded")
	}
	return nil
}

// mapCall reports whether c is a child of parent's Map, and which call:
// its batch wakes parent (driver.WakesParent) for a wave, whose place and
// the job's in the batch give the call.
func (w *world) mapCall(parent string, c *driver.Record) (int, bool) {
	w.mapped.mu.Lock()
	span, ok := w.mapped.calls[parent]
	w.mapped.mu.Unlock()
	if !ok || c.BatchID == "" {
		return 0, false
	}
	b, err := w.mem.GetBatch(context.Background(), c.BatchID)
	if err != nil || b.CompletionKind != driver.WakesParent {
		return 0, false
	}
	var wake struct {
		Job    string `json:"j"`
		Signal string `json:"s"`
	}
	if json.Unmarshal(b.CompletionPayload, &wake) != nil || wake.Job != parent {
		return 0, false
	}
	wave, err := strconv.Atoi(wake.Signal[strings.LastIndexByte(wake.Signal, '/')+1:])
	if err != nil {
		w.violate("batch %s wakes %s with signal %q, of no wave", b.ID, parent, wake.Signal)
		return 0, false
	}
	return wave*span[2] + c.BatchIndex, true
}

// checkMaps: every call of a Map started one job, and a parent cancelled
// while it mapped left no child running past the cascade's bound.
func (w *world) checkMaps(all map[string]*driver.Record) {
	w.mapped.mu.Lock()
	parents := sortedKeys(w.mapped.calls)
	w.mapped.mu.Unlock()
	for _, pid := range parents {
		parent := all[pid]
		seen := map[int]string{}
		for _, id := range sortedKeys(all) {
			c := all[id]
			i, ok := w.mapCall(pid, c)
			if !ok {
				continue
			}
			if prev, dup := seen[i]; dup {
				w.violate("job %s: its map's call %d started twice: %s and %s", pid, i, prev, c.ID)
			}
			seen[i] = c.ID
			if parent == nil || parent.Status != jobs.StatusCancelled || w.sweeperOff {
				continue
			}
			bound := parent.FinishedAt.Add(w.grace + 2*sweepInterval + w.timeoutOf(c.Lane))
			switch {
			case c.Status == jobs.StatusCancelled:
				w.cover("invariant", "a cancelled parent's mapped child was cancelled")
			case !c.Status.Final() || c.FinishedAt.After(bound):
				w.violate("job %s was cancelled at %v while its mapped child %s ran on, to %s at %v",
					pid, parent.FinishedAt.Sub(w.sched.start), c.ID, c.Status, c.FinishedAt.Sub(w.sched.start))
			}
		}
		if parent != nil && parent.Status == jobs.StatusSucceeded {
			w.mapped.mu.Lock()
			n, aborted := w.mapped.calls[pid][1], w.mapped.aborted[pid]
			w.mapped.mu.Unlock()
			if len(seen)+aborted != n {
				w.violate("job %s succeeded with %d of its map's %d children (%d never stored, answered cancelled)", pid, len(seen), n, aborted)
			}
		}
	}
}
