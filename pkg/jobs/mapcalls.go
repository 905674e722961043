package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Fan-out a handler waits for. Map starts its calls as the jobs of a
// batch, a window of them at a time: one batch per window (a wave),
// created once per wave (its id is derived from the job's id, the step's
// name and the wave), whose end signals the job (driver.WakesParent)
// instead of creating a completion job. The job waits queued on that one
// signal while the wave runs, so it is woken once per wave, never once
// per child: its runs are the waves plus one. The counting is the
// batch's, spread over its shards, so no item is written once per child
// but the child's own. docs/guide/LONG_RUNS.md, "Child jobs".

// How a Map stored among a job's steps stands (stepResult.Child).
const (
	mapWaiting = 3 // a wave runs: Result is its mapProgress
	mapEnded   = 4 // every wave ended: Result is its mapProgress
)

// mapProgress is a Map's place: the wave it waits for (Wave = Waves once
// all ended), of how many.
type mapProgress struct {
	Wave   int `json:"w"`
	Waves  int `json:"n"`
	Window int `json:"k,omitempty"`
	Calls  int `json:"c,omitempty"`
}

// maxMapWaves bounds a Map's waves: each adds a signal to the job's item.
const maxMapWaves = 100

// parentWake is what a Map's batch wakes when it ends: the job, and the
// signal its wave waits for.
type parentWake struct {
	Job    string `json:"j"`
	Signal string `json:"s"`
}

// Map starts calls as job's children and waits until all of them ended,
// then returns their results decoded into R, in the order of calls; for
// children that failed or were cancelled the error joins a *ChildError
// each (errors.As finds the first) and their places hold R's zero value.
//
// At most window children run at once (0: all of them): Map starts them
// in waves of window calls, each a batch (GET /v1/batches/{id} shows it)
// that the next starts after; the job waits queued between them
// (View.WaitingOn "child"), holding no worker or attempt, and is woken
// once per wave, when its last child ends: the handler runs once per wave
// and once more. Calls are 1 to 10,000, in at most 100 waves; a call
// takes no options but Tags.
//
// It is a step of job's (the step named name), and the rules of Step
// apply. Each wave is started once, however often the handler runs. The
// results are not stored with the job's steps (they could be larger than
// a checkpoint): each run that passes Map reads every child (a strongly
// consistent read each, 16 at a time), so a run after the children's
// retention passed fails to read them. Cancelling the job while it waits
// cancels the children of every wave started. On a Job built by hand (a
// handler's unit test) it fails and starts nothing.
func Map[R, P any](ctx context.Context, job *Job[P], name string, calls []Call, window int) ([]R, error) {
	h := job.handle()
	h.stepMu.Lock()
	defer h.stepMu.Unlock()
	if err := h.ready("map", name); err != nil {
		return nil, err
	}
	if len(calls) == 0 || len(calls) > MaxBatchJobs {
		return nil, refuse(codeInvalidRequest, fmt.Sprintf("map %q: 1 to %d calls", name, MaxBatchJobs))
	}
	if window == 0 {
		window = len(calls)
	}
	waves := (len(calls) + window - 1) / max(window, 1)
	if window < 0 || waves > maxMapWaves {
		return nil, refuse(codeInvalidRequest, fmt.Sprintf("map %q: a window of 0 (all) or more, for at most %d waves", name, maxMapWaves))
	}
	if !wire.ValidOwner(name) || len(name) > maxChildName {
		return nil, refuse(codeInvalidRequest, fmt.Sprintf("map name %q: 1 to %d printable ASCII characters", name, maxChildName))
	}
	for i, c := range calls {
		o := c.opts
		o.Tags = nil
		if c.req == nil || !reflect.ValueOf(o).IsZero() {
			return nil, refuse(codeInvalidRequest, fmt.Sprintf("map %q: call %d: a Call made by Kind.Call, with no options but Tags", name, i))
		}
	}
	i := h.nextStep
	at := mapProgress{Waves: waves, Window: window, Calls: len(calls)}
	stored := i < len(h.steps) && h.steps[i].Name == name
	if stored {
		st := h.steps[i]
		was := at
		if (st.Child != mapWaiting && st.Child != mapEnded) || json.Unmarshal(st.Result, &at) != nil ||
			at.Waves != was.Waves || at.Window != was.Window || at.Calls != was.Calls {
			h.nondeterministic = true
			return nil, fmt.Errorf("%w: map %q was stored as another step, or with other calls or another window", errNondeterministic, name)
		}
	} else {
		for _, later := range h.steps[min(i, len(h.steps)):] {
			if later.Name == name {
				h.nondeterministic = true
				return nil, fmt.Errorf("%w: map %q was stored after %q, which this run has not asked for", errNondeterministic, name, h.steps[i].Name)
			}
		}
		if n := childWaits(h.steps); n+waves > maxChildWaits {
			return nil, fmt.Errorf("jobs: map %q: the job waits for %d children already, and %d more passes the most it may (%d)", name, n, waves, maxChildWaits)
		}
	}
	if h.fanOut == nil || h.readJobs == nil || h.checkpoint == nil {
		return nil, errNotAWorkersJob
	}
	now := h.clock()
	since := now.UnixMilli()
	if stored {
		since = h.steps[i].At
	}
	// put stores the Map's place before what it says is done: the first
	// wave's before it is started, so a cancel from then on finds it.
	put := func(child int) error {
		raw, _ := json.Marshal(at)
		steps := slices.Clone(h.steps)
		st := stepResult{Name: name, Child: child, Result: raw, At: since}
		if stored {
			steps[i] = st
		} else {
			steps = slices.Insert(steps, i, st)
		}
		if err := h.checkpoint(ctx, encodeState(jobState{V: h.resume, Steps: steps})); err != nil {
			if errors.Is(err, ErrCancelled) || errors.Is(err, ErrLostClaim) {
				return err
			}
			return fmt.Errorf("jobs: map %q: its place not stored: %w", name, err)
		}
		h.steps, stored = steps, true
		return nil
	}
	if !stored {
		if err := put(mapWaiting); err != nil {
			return nil, err
		}
	}
	batches := make([]*driver.Batch, 0, waves)
	for w := 0; w < at.Wave; w++ {
		b, err := h.fanOut(ctx, mapKey(name, w), nil)
		if err != nil {
			return nil, fmt.Errorf("jobs: map %q: wave %d: %w", name, w, err)
		}
		if b.Total != min((w+1)*window, len(calls))-w*window {
			h.nondeterministic = true
			return nil, fmt.Errorf("%w: map %q: wave %d holds %d calls, this run's %d", errNondeterministic, name, w, b.Total, min((w+1)*window, len(calls))-w*window)
		}
		batches = append(batches, b)
	}
	for at.Wave < waves {
		w := at.Wave
		wave := calls[w*window : min((w+1)*window, len(calls))]
		b, err := h.fanOut(ctx, mapKey(name, w), func(svc *Service, parentID string) (BatchRequest, error) {
			req := BatchRequest{Jobs: make([]JobSpec, len(wave)), wake: &parentWake{Job: parentID, Signal: mapSignal(name, w)}}
			for j, c := range wave {
				o := c.opts
				r, err := c.req(svc, &o)
				if err != nil {
					return req, &BatchJobError{Index: w*window + j, Err: err}
				}
				req.Jobs[j] = JobSpec{Kind: r.Kind, Payload: r.Payload, Tags: r.Tags}
			}
			return req, nil
		})
		if err != nil {
			return nil, fmt.Errorf("jobs: map %q: wave %d: %w", name, w, err)
		}
		if !batchSettled(b) {
			return nil, h.suspendForWave(name, w, i, since, at)
		}
		batches = append(batches, b)
		at.Wave++
		child := mapWaiting
		if at.Wave == waves {
			child = mapEnded
		}
		if err := put(child); err != nil {
			return nil, err
		}
	}
	out, err, pending := mapAnswer[R](ctx, h, name, batches)
	if pending {
		// A child ended, then was retried by hand before this run read
		// it: look again soon (the last wave's signal is spent).
		return nil, h.suspendForWave(name, waves-1, i, since, at)
	}
	h.nextStep = i + 1
	return out, err
}

// suspendForWave suspends the run until wave w of the Map named name (the
// step at i, begun at since, standing at at) ends: its batch's signal,
// or, when that came and the batch is not ended yet, a look again soon.
// The caller holds stepMu; it does not return.
func (h *runHandle) suspendForWave(name string, w, i int, since int64, at mapProgress) error {
	now := h.clock()
	sig := driver.ChildSignal(mapSignal(name, w))
	on, until := driver.WaitSignalOn(sig), now.Add(childRecheck)
	if h.signals[sig] != nil {
		on, until = waitChild, now.Add(childPoll)
	}
	if !h.runEnd.IsZero() && until.After(h.runEnd) {
		until = h.runEnd
	}
	raw, _ := json.Marshal(at)
	steps := slices.Clone(h.steps)
	steps[i] = stepResult{Name: name, Child: mapWaiting, Result: raw, At: since}
	sealed, err := h.seal(encodeState(jobState{V: h.resume, Steps: steps}))
	if err != nil {
		return fmt.Errorf("jobs: map %q: %w", name, err)
	}
	h.steps, h.nextStep = steps, i+1
	h.suspend = &suspension{on: on, until: until.Add(time.Millisecond).Truncate(time.Millisecond), state: sealed}
	runtime.Goexit() // stepMu is unlocked by the deferred call
	return nil
}

// batchSettled reports whether every job of b has ended: its end is
// recorded, or every shard is done (its job is woken before the end is
// recorded).
func batchSettled(b *driver.Batch) bool {
	return b.Status.Final() || (!b.Creating && b.DoneShards >= b.Shards)
}

// mapKey is the idempotency key of wave w of the Map named name (the
// worker makes it the job's own).
func mapKey(name string, w int) string { return name + "\x00" + strconv.Itoa(w) }

// mapSignal is the name of the child signal that wakes wave w of the Map
// named name.
func mapSignal(name string, w int) string { return "map:" + name + "/" + strconv.Itoa(w) }

// mapAnswer reads the children of batches (a Map's waves, in order) and
// returns their results, and a *ChildError each for those that did not
// succeed, joined; pending when a child is not final (it was retried by
// hand since its wave ended). A child missing from a wave that ended was
// never stored (the wave was aborted): it is answered as cancelled, as
// its batch counted it.
func mapAnswer[R any](ctx context.Context, h *runHandle, name string, batches []*driver.Batch) (_ []R, _ error, pending bool) {
	type place struct{ wave, index int }
	var ids []string
	var places []place
	for w, b := range batches {
		for j := range b.Total {
			ids = append(ids, wire.BatchJobID(b.ID, j))
			places = append(places, place{w, j})
		}
	}
	recs, err := h.readJobs(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("jobs: map %q: its children: %w", name, err), false
	}
	var waiting bool
	out := make([]R, len(ids))
	failed := make([]error, len(ids))
	var first error
	for j, id := range ids {
		rec, ok := recs[id]
		switch {
		case !ok && batches[places[j].wave].Status.Final():
			failed[j] = &ChildError{ID: id, Status: StatusCancelled}
		case !ok:
			first = cmp.Or(first, fmt.Errorf("jobs: map %q: child %s: %w", name, id, ErrNotFound))
		case !rec.Status.Final():
			waiting = true
		case rec.Status == StatusSucceeded:
			if len(rec.Result) > 0 {
				if err := json.Unmarshal(rec.Result, &out[j]); err != nil {
					first = cmp.Or(first, fmt.Errorf("jobs: map %q: child %s: %w", name, id, err))
				}
			}
		default:
			failed[j] = &ChildError{ID: rec.ID, Kind: rec.Kind, Status: rec.Status, Code: rec.ErrorCode}
		}
	}
	switch {
	case first != nil:
		return nil, first, false
	case waiting:
		return nil, nil, true
	}
	return out, errors.Join(failed...), false
}

// enqueueMapWave creates wave key's batch of the job parent's Map (build
// makes its request; nil: only read it), for parent's owner, as trusted
// code, or returns it as stored when it exists.
func (s *Service) enqueueMapWave(ctx context.Context, parent *driver.Record, key string, build func(*Service, string) (BatchRequest, error)) (*driver.Batch, error) {
	key = "map-" + wire.DerivedID("map", parent.ID, key)
	b, err := s.store.GetBatch(ctx, batchIDOf(parent.Owner, key))
	switch {
	case err == nil && !b.Creating:
		return b, nil
	case err != nil && !errors.Is(err, ErrNotFound):
		return nil, err
	case build == nil:
		return nil, fmt.Errorf("its batch: %w", ErrNotFound)
	}
	req, err := build(s, parent.ID)
	if err != nil {
		return nil, err
	}
	req.Owner, req.IdempotencyKey = parent.Owner, key
	trusted := *s
	trusted.callers = false
	if b, _, err = trusted.enqueueBatch(ctx, req); err != nil {
		return nil, err
	}
	// Jobs that all ended before their batch was opened leave it to the
	// sweeper (enqueueBatch): a wave settles now instead, one read when
	// it has not (settleBatch is idempotent).
	if cur, err := s.store.GetBatch(ctx, b.ID); err == nil && s.eng.settleBatch(ctx, cur) {
		if ended, err := s.store.GetBatch(ctx, b.ID); err == nil {
			b = ended
		}
	}
	return b, nil
}

// parentLives reports whether the batch b, still being made, is a Map's
// wave whose job has not ended: its next run finishes the wave.
func (e *engine) parentLives(ctx context.Context, b *driver.Batch) bool {
	var w parentWake
	if b.CompletionKind != driver.WakesParent || json.Unmarshal(b.CompletionPayload, &w) != nil {
		return false
	}
	parent, err := e.store.Get(ctx, w.Job)
	switch {
	case errors.Is(err, ErrNotFound):
		return false
	case err != nil:
		return true // unknown: looked at again later
	}
	return !parent.Status.Final()
}

// wakeParent signals the job a Map's batch b wakes (driver.WakesParent);
// a job that ended, or is gone, needs nothing.
func (e *engine) wakeParent(ctx context.Context, b *driver.Batch) error {
	var w parentWake
	if err := json.Unmarshal(b.CompletionPayload, &w); err != nil {
		return err
	}
	return e.wakeWith(ctx, w.Job, driver.ChildSignal(w.Signal))
}

// cancelMapChildren cancels the children of every wave started of the
// cancelled job parent's Map named name.
func (e *engine) cancelMapChildren(ctx context.Context, parent *driver.Record, name string) error {
	for w := 0; w < maxMapWaves; w++ {
		key := "map-" + wire.DerivedID("map", parent.ID, mapKey(name, w))
		b, err := e.store.GetBatch(ctx, batchIDOf(parent.Owner, key))
		switch {
		case errors.Is(err, ErrNotFound):
			return nil // not started (waves start in turn; a Map ends within the retention)
		case err != nil:
			return err
		}
		var wg sync.WaitGroup
		errs := make([]error, b.Total)
		sem := make(chan struct{}, 16)
		for j := range b.Total {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				errs[j] = e.cancelChild(ctx, wire.BatchJobID(b.ID, j))
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	return nil
}
