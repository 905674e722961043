package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/lambdajobs/lambdajobs/internal/errtypes"
	"github.com/lambdajobs/lambdajobs/internal/metricnames"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Jobs that run after other jobs (EnqueueOpts.After). A dependent job is
// stored queued, waiting on its parents (WaitingOn "parents": the one
// waiting state, as for a slot or a rate), and registers itself on each
// parent's item; the claim never takes it. Each parent's final write
// then names a post-outcome step, afterDependents, that counts the
// parent in each of its dependents when it succeeded (the last one counted
// releases the dependent: it is sent like any job due now) and cancels
// them, code dependency_failed, when it failed or was cancelled (their own
// dependents follow through their own post-outcome step). While it waits,
// a dependent is out of the sweep schedule: its parents hold what must
// happen next, and the sweeper runs a dead worker's post-outcome steps.
//
// Cycles cannot form: a job names only jobs that exist when it is
// enqueued, and its own id is new then. A parent retried after it failed
// brings back the dependents its failure cancelled when it succeeds
// (revive); a dependent retried by hand waits on its parents again, and
// is refused while one of them is failed or cancelled.
//
// docs/guide/DEPENDENCIES.md has the design and the costs.

// maxAfter bounds the jobs one job runs after (EnqueueOpts.After).
const maxAfter = 100

// maxDependents bounds the jobs that run after one job, checked when a
// dependent is enqueued: each is about 40 bytes on the parent's item,
// which every later write of the parent pays for. Concurrent enqueues may
// take a parent past it, up to hardMaxDependents, which the store's write
// enforces: a job that would pass it is cancelled, dependency_failed, as
// if its parent had failed (it can never count it).
const (
	maxDependents     = 100
	hardMaxDependents = 2 * maxDependents
)

// afterDependents counts a final job's outcome in its dependents.
const afterDependents = "dependents"

// parentsConcurrency bounds the parallel writes to a job's parents or
// dependents.
const parentsConcurrency = 8

// codeUnknownParent is the problem code of an After naming no job of the
// caller's; codeTooManyDependents of a parent with maxDependents already.
const (
	codeUnknownParent     = "unknown_parent"
	codeTooManyDependents = "too_many_dependents"
)

// checkAfter refuses an After that is malformed: too many, a malformed id,
// twice the same, or beside a unique key.
func checkAfter(o EnqueueOpts) error {
	if len(o.After) == 0 {
		return nil
	}
	if len(o.After) > maxAfter {
		return refuse(codeInvalidRequest, fmt.Sprintf(`"after": at most %d jobs`, maxAfter))
	}
	if o.UniqueKey != "" {
		return refuse(codeInvalidRequest, `"after" cannot be combined with "unique_key"`)
	}
	seen := make(map[string]bool, len(o.After))
	for i, id := range o.After {
		if !wire.ValidID(id) {
			return refuse(codeInvalidRequest, fmt.Sprintf(`"after"[%d] is not a job id`, i))
		}
		if seen[id] {
			return refuse(codeInvalidRequest, fmt.Sprintf(`"after"[%d] names a job twice`, i))
		}
		seen[id] = true
	}
	return nil
}

// checkParents reads the parents of a new job of owner: each must be a
// job of the owner's with room for another dependent. It reads each once
// (a strongly consistent read), in parallel; nothing is written.
func (s *Service) checkParents(ctx context.Context, owner string, after []string) error {
	errs := make([]error, len(after))
	forEach(len(after), func(i int) {
		rec, err := s.get(ctx, owner, after[i])
		switch {
		case errors.Is(err, ErrNotFound):
			errs[i] = refuse(codeUnknownParent, fmt.Sprintf(`"after"[%d]: you have no job with that id`, i))
		case err != nil:
			errs[i] = err
		case len(rec.Dependents) >= maxDependents:
			errs[i] = refuse(codeTooManyDependents, fmt.Sprintf(`"after"[%d]: that job has %d jobs that run after it already`, i, maxDependents))
		}
	})
	return errors.Join(errs...)
}

// forEach calls f(0) to f(n-1), at most parentsConcurrency at once.
func forEach(n int, f func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, parentsConcurrency)
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(i)
		}()
	}
	wg.Wait()
}

// awaitParents registers the waiting job rec on each parent not counted
// yet and counts those that succeeded already: it returns rec as it then
// is (released when every parent is counted; cancelled, code
// dependency_failed, when one failed or was cancelled; else waiting, out
// of the sweep schedule). It is safe to repeat: enqueue calls it, and the
// sweeper (for a job whose enqueue died before it finished), a resubmit
// and a revived dependent call it again. An error leaves rec in the sweep
// schedule, for the sweeper to call it again.
//
// A failed or cancelled parent records rec too, and rec is then
// cancelled: when that parent is retried and succeeds, its post-outcome
// step brings rec back (revive).
func (e *engine) awaitParents(ctx context.Context, rec *driver.Record) (*driver.Record, error) {
	var (
		mu       sync.Mutex
		done     []int
		failedBy = -1
		errs     []error
	)
	forEach(len(rec.Parents), func(i int) {
		if slices.Contains(rec.ParentsDone, i) {
			return
		}
		p, err := e.store.AddDependent(ctx, rec.Parents[i], driver.DependentOf{Owner: rec.Owner, Max: hardMaxDependents,
			Dependent: driver.Dependent{JobID: rec.ID, Index: i}})
		mu.Lock()
		defer mu.Unlock()
		failed := func() {
			if failedBy < 0 || i < failedBy {
				failedBy = i
			}
		}
		switch {
		case err == nil && (p.Status == StatusFailed || p.Status == StatusCancelled):
			failed() // recorded: its retry's success brings rec back
		case err == nil:
		case errors.Is(err, errFinished):
			done = append(done, i) // succeeded already
		case errors.Is(err, errDependentsFull), errors.Is(err, ErrNotFound):
			// Full (enqueues raced past the check), or gone (expired since
			// it was named): it can never count rec.
			failed()
		default:
			errs = append(errs, err)
		}
	})
	if failedBy >= 0 {
		return e.cancelForParent(ctx, rec, rec.Parents[failedBy])
	}
	if len(errs) > 0 {
		return rec, errors.Join(errs...)
	}
	// One write: the counts as this enqueue found them, conditional on
	// the job's counts being those it read; when that makes every parent
	// counted, it releases the job too, so no moment has it out of the
	// sweep schedule with nothing left to wake it.
	for range 5 {
		now := e.now()
		pc := driver.ParentCount{Done: done, Await: true, Known: len(rec.ParentsDone), At: now}
		counted := len(rec.ParentsDone)
		for _, i := range done {
			if !slices.Contains(rec.ParentsDone, i) {
				counted++
			}
		}
		d := e.deliveryAt(now, rec.RunAt, rec.Lane)
		if counted == len(rec.Parents) {
			pc.Release = &driver.ReleaseParents{At: now, SweepAt: d.sweepAt}
		}
		got, err := e.store.CountParents(ctx, rec.ID, pc)
		var ce *driver.ConflictError
		switch {
		case errors.As(err, &ce) && ce.Current != nil && ce.Current.Status == StatusQueued && ce.Current.WaitingOn == driver.WaitParents:
			rec = ce.Current // a parent counted itself since: count again from there
			continue
		case isConflict(err):
			if cur, gerr := e.store.Get(ctx, rec.ID); gerr == nil {
				return cur, nil // released or cancelled meanwhile: not ours
			}
			return rec, nil
		case err != nil:
			return rec, err
		case pc.Release != nil:
			if serr := e.deliver(ctx, got, d); serr != nil {
				e.log.LogAttrs(ctx, slog.LevelWarn, "released job not sent; the sweeper will send it", slog.String("job_id", got.ID),
					slog.String("err_types", errtypes.Of(serr)))
			}
			count(ctx, got.Kind, metricnames.JobsWoken)
		}
		return got, nil
	}
	return rec, errors.New("jobs: the job's parents kept counting themselves")
}

// releaseParents ends the wait of rec, whose parents are all counted, and
// sends it as the delivery rule says (a send that fails is the sweeper's,
// after the grace: the release puts it back in the sweep schedule).
func (e *engine) releaseParents(ctx context.Context, rec *driver.Record) error {
	now := e.now()
	d := e.deliveryAt(now, rec.RunAt, rec.Lane)
	err := e.store.ReleaseParents(ctx, rec.ID, driver.ReleaseParents{At: now, SweepAt: d.sweepAt})
	switch {
	case isConflict(err):
		return nil // released by another counter's run of the step, or cancelled
	case err != nil:
		return err
	}
	rec.WaitingOn, rec.SweepAt = "", d.sweepAt
	if serr := e.deliver(ctx, rec, d); serr != nil {
		e.log.LogAttrs(ctx, slog.LevelWarn, "released job not sent; the sweeper will send it", slog.String("job_id", rec.ID),
			slog.String("err_types", errtypes.Of(serr)))
	}
	count(ctx, rec.Kind, metricnames.JobsWoken)
	return nil
}

// cancelForParent cancels the waiting job rec because its parent
// parentID failed or was cancelled, and returns it as cancelled (its own
// post-outcome steps run: its dependents are cancelled in turn).
func (e *engine) cancelForParent(ctx context.Context, rec *driver.Record, parentID string) (*driver.Record, error) {
	ctx = withCascade(ctx)
	done, err := e.cancelQueuedAs(ctx, rec, CodeDependencyFailed, parentID)
	if isConflict(err) {
		return rec, nil // it moved on: cancelled by its owner, or by another parent
	}
	return done, err
}

// settleDependents is the post-outcome step of a job with dependents: a
// succeeded job is counted in each (the last parent counted releases it),
// a failed or cancelled one cancels each that still waits. Each write is
// conditional and repeating it changes nothing, so the step may run twice.
func (e *engine) settleDependents(ctx context.Context, parent *driver.Record) error {
	ctx = withCascade(ctx) // one budget for the whole cascade below
	errs := make([]error, len(parent.Dependents))
	forEach(len(parent.Dependents), func(i int) {
		d := parent.Dependents[i]
		if parent.Status == StatusSucceeded {
			errs[i] = e.countParent(ctx, parent, d)
			return
		}
		child, err := e.store.Get(ctx, d.JobID)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			errs[i] = err
		case child.Status == StatusQueued && child.WaitingOn == driver.WaitParents:
			_, errs[i] = e.cancelForParent(ctx, child, parent.ID)
		}
	})
	return errors.Join(errs...)
}

// countParent counts the succeeded parent in its dependent d, and releases
// d when it was the last. A dependent that this parent's earlier failure
// cancelled comes back (revive): the parent was retried and succeeded.
func (e *engine) countParent(ctx context.Context, parent *driver.Record, d driver.Dependent) error {
	child, err := e.store.CountParents(ctx, d.JobID, driver.ParentCount{Done: []int{d.Index}, At: e.now()})
	var ce *driver.ConflictError
	switch {
	case err == nil:
		if child.ParentsLeft() == 0 {
			return e.releaseParents(ctx, child)
		}
		return nil
	case errors.As(err, &ce) && ce.Current != nil:
		cur := ce.Current
		if cur.Status == StatusCancelled && cur.ErrorCode == CodeDependencyFailed && cur.CancelledBy == parent.ID {
			return e.revive(ctx, cur)
		}
		return nil // released, running, finished or cancelled for another reason
	case errors.Is(err, ErrNotFound):
		return nil
	}
	return err
}

// errStepsPending is why a revive waits: the cancelled dependent's own
// post-outcome steps (its event, its dependents) have not all run.
var errStepsPending = errors.New("jobs: the dependent's post-outcome steps are pending")

// revive puts a dependent that a parent's failure cancelled back to
// waiting on its parents, now that the parent succeeded.
func (e *engine) revive(ctx context.Context, rec *driver.Record) error {
	if len(rec.After) > 0 {
		return errStepsPending // the sweeper runs the parent's step again after them
	}
	_, err := e.resubmitAs(ctx, rec)
	var ce *driver.ConflictError
	if errors.As(err, &ce) && ce.Current != nil && len(ce.Current.After) > 0 {
		return errStepsPending
	}
	if isConflict(err) || errors.Is(err, ErrNotResubmittable) {
		return nil // revived by another run of the step
	}
	return err
}

// failedParent returns the index of the first parent of rec, among those
// not counted, that failed, was cancelled or is gone (-1 when none): a
// resubmit of rec waits for such a parent's own retry.
func (e *engine) failedParent(ctx context.Context, rec *driver.Record) (int, error) {
	failed := make([]bool, len(rec.Parents))
	errs := make([]error, len(rec.Parents))
	forEach(len(rec.Parents), func(i int) {
		if slices.Contains(rec.ParentsDone, i) {
			return
		}
		p, err := e.store.Get(ctx, rec.Parents[i])
		switch {
		case errors.Is(err, ErrNotFound):
			failed[i] = true
		case err != nil:
			errs[i] = err
		case p.Status == StatusFailed || p.Status == StatusCancelled:
			failed[i] = true
		}
	})
	if err := errors.Join(errs...); err != nil {
		return -1, err
	}
	return slices.Index(failed, true), nil
}

// A cancel that cascades runs the cancelled jobs' own post-outcome steps
// (their dependents' cancels, and theirs) in the same call, up to
// cascadeBudget cancels in all; past it, each job cancelled keeps its
// steps pending in the sweep schedule, and the sweeper goes on with them
// (as many again per sweep). So one cancel of a wide, deep tree neither
// outlasts its API call nor holds a worker.
const cascadeBudget = 100

type cascadeKey struct{}

// withCascade returns ctx carrying a cascade's budget (the one it carries
// already, if any).
func withCascade(ctx context.Context) context.Context {
	if _, ok := ctx.Value(cascadeKey{}).(*atomic.Int32); ok {
		return ctx
	}
	b := &atomic.Int32{}
	b.Store(cascadeBudget)
	return context.WithValue(ctx, cascadeKey{}, b)
}

// inlineSteps reports whether a cancel in ctx may run its job's steps
// now (a cascade's budget is not spent), spending one of it.
func inlineSteps(ctx context.Context) bool {
	b, ok := ctx.Value(cascadeKey{}).(*atomic.Int32)
	return !ok || b.Add(-1) >= 0
}

// afterRequest is the part of an enqueue's request hash that names its
// parents (none for a job without).
func afterRequest(after []string) []byte {
	if len(after) == 0 {
		return nil
	}
	// In any order: the same parents are the same request.
	return []byte("after=" + strings.Join(slices.Sorted(slices.Values(after)), ","))
}

// parentsView is the part of a job's view that names its parents.
func parentsView(v *View, r *driver.Record) {
	if len(r.Parents) == 0 {
		return
	}
	v.After = r.Parents
	if r.Status == StatusQueued && r.WaitingOn == driver.WaitParents {
		v.ParentsLeft = r.ParentsLeft()
	}
}
