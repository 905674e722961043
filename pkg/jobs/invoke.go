package jobs

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Child jobs a handler waits for. Invoke starts a child (EnqueueChild's
// once per name, with the child marked as awaited: Record.AwaitedAs) and
// stores the wait among the parent's steps. While the child runs the
// parent waits queued on its child's signal (waiting_on "child"), holding
// no worker: the park is conditional on the signal not having come, as a
// wait for a signal's is. The child's final write names a post-outcome
// step, afterParent, that sends its parent that signal (one conditional
// write, which makes a parent that waits for it due); the parent's next
// run reads the child's outcome and stores it among its steps, so every
// later run gets the same answer. Cancelling the parent cancels the child
// it waits for (afterChildren). docs/guide/LONG_RUNS.md, "Child jobs".

// How an Invoke stored among a job's steps stands (stepResult.Child).
const (
	childWaiting = 1 // started, not ended when last looked at
	childEnded   = 2 // ended: Result is its childOutcome
)

// childRecheck is how long a parent waits for its child's signal before
// it looks at the child again anyway: a safety net that costs a claim and
// a park a day of a child's run.
const childRecheck = 24 * time.Hour

// childPoll is how soon a parent looks again at a child that ended, sent
// its signal, and was then retried by hand before the parent read it: the
// signal is spent, so the parent polls until the child ends again.
const childPoll = time.Minute

// waitChild: View.WaitingOn of a job whose handler waits for a child.
const waitChild = "child"

// childOutcome is an ended child as its parent stores it.
type childOutcome struct {
	ID     string          `json:"id"`
	Status Status          `json:"s"`
	Code   string          `json:"c,omitempty"`
	Result json.RawMessage `json:"r,omitempty"`
}

// ChildError is what Invoke returns for a child that failed or was
// cancelled: its id, kind, status and failure code (a code its kind
// declares, or a reserved one). errors.As finds it.
type ChildError struct {
	ID     string
	Kind   string
	Status Status
	Code   string
}

func (e *ChildError) Error() string {
	return fmt.Sprintf("jobs: child %s (%s) %s: %s", e.ID, e.Kind, e.Status, e.Code)
}

// Call is a job Invoke starts: a kind with its payload and options
// (Kind.Call).
type Call struct {
	kind string
	opts EnqueueOpts
	req  func(svc *Service, opts *EnqueueOpts) (EnqueueRequest, error)
}

// Call is a job of kind k with payload and opts, for Invoke to start as a
// child. opts may be nil; a child's name is its key, so opts gives no
// IdempotencyKey or UniqueKey.
func (k Kind[P]) Call(payload P, opts *EnqueueOpts) Call {
	c := Call{kind: k.name, req: func(svc *Service, o *EnqueueOpts) (EnqueueRequest, error) { return k.request(svc, "", payload, o) }}
	if opts != nil {
		c.opts = *opts
	}
	return c
}

// Invoke starts call's job as the child of job named name (as
// Kind.EnqueueChild does: once per name, however often the handler
// runs), waits for it to end, and returns its result decoded
// into R; a child that failed or was cancelled returns a *ChildError with
// its code. It is a step of job's (the step named name): the first run
// that reaches it before the child ended stores the wait with the job's
// steps and suspends as Sleep does (the job waits queued, View.WaitingOn
// "child", holding no worker or attempt; Invoke does not return, and no
// code after it runs). The child's end makes the job due, and its next
// run passes the wait: the child's outcome is stored with the job's
// steps (one conditional write; its result counts towards
// driver.MaxCheckpointBytes), so every later run gets the same answer
// even once the child is gone.
//
// The rules of Step apply: call it from the handler's goroutine, outside
// a Step's function, in the same order in every run. Cancelling the job
// while it waits cancels the child (a queued child at once; a running
// one's handler sees ErrCancelled). A job may have at most 100 waits for
// children (each adds its name to the job's item). On a Job built by hand
// (a handler's unit test) it fails and starts nothing.
func Invoke[R, P any](ctx context.Context, job *Job[P], name string, call Call) (R, error) {
	var zero R
	h := job.handle()
	h.stepMu.Lock()
	defer h.stepMu.Unlock()
	if err := h.ready("child", name); err != nil {
		return zero, err
	}
	i := h.nextStep
	stored := i < len(h.steps) && h.steps[i].Name == name
	if stored {
		switch st := h.steps[i]; st.Child {
		case 0:
			h.nondeterministic = true
			return zero, fmt.Errorf("%w: child %q was stored as a step, a sleep or a wait for a signal", errNondeterministic, name)
		case childEnded:
			h.nextStep++
			return childAnswer[R](name, call.kind, st.Result)
		}
	} else {
		for _, later := range h.steps[min(i, len(h.steps)):] {
			if later.Name == name {
				h.nondeterministic = true
				return zero, fmt.Errorf("%w: child %q was stored after %q, which this run has not asked for", errNondeterministic, name, h.steps[i].Name)
			}
		}
		if n := childWaits(h.steps); n >= maxChildWaits {
			return zero, fmt.Errorf("jobs: child %q: the job waits for %d children already, the most it may", name, n)
		}
	}
	if h.child == nil || h.readChild == nil || h.checkpoint == nil {
		return zero, errNotAWorkersJob
	}
	if call.req == nil {
		return zero, refuse(codeInvalidRequest, fmt.Sprintf("child %q: a Call made by Kind.Call", name))
	}
	o := call.opts
	if o.IdempotencyKey != "" || o.UniqueKey != "" {
		return zero, refuse(codeInvalidRequest, "a child's name is its key: give no IdempotencyKey or UniqueKey")
	}
	if !wire.ValidOwner(name) || len(name) > maxChildName {
		return zero, refuse(codeInvalidRequest, fmt.Sprintf("child name %q: 1 to %d printable ASCII characters", name, maxChildName))
	}
	now := h.clock()
	fresh := !stored
	if fresh {
		// The wait is stored before the child is started, so that a
		// cancel of the job from then on finds it in the job's marks
		// (afterChildren), whatever becomes of this run.
		steps := slices.Insert(slices.Clone(h.steps), i, stepResult{Name: name, Child: childWaiting, At: now.UnixMilli()})
		if err := h.checkpoint(ctx, encodeState(jobState{V: h.resume, Steps: steps})); err != nil {
			if errors.Is(err, ErrCancelled) || errors.Is(err, ErrLostClaim) {
				return zero, err
			}
			return zero, fmt.Errorf("jobs: child %q: its wait not stored: %w", name, err)
		}
		h.steps, stored = steps, true
	}
	var child *driver.Record
	var err error
	if !fresh {
		child, err = h.readChild(ctx, name)
	}
	if fresh || errors.Is(err, ErrNotFound) {
		// Started once per name: a run that stored the wait and died
		// before the child was made makes it now.
		if _, err := h.child(ctx, name, func(svc *Service) (EnqueueRequest, error) {
			req, err := call.req(svc, &o)
			req.awaited = true
			return req, err
		}); err != nil {
			return zero, fmt.Errorf("jobs: child %q: %w", name, err)
		}
		child, err = h.readChild(ctx, name)
	}
	if err != nil {
		return zero, fmt.Errorf("jobs: child %q: %w", name, err)
	}
	if child.Status.Final() {
		out, err := json.Marshal(childOutcome{ID: child.ID, Status: child.Status, Code: child.ErrorCode, Result: child.Result})
		if err != nil {
			return zero, fmt.Errorf("jobs: child %q: %w", name, err)
		}
		steps := slices.Clone(h.steps)
		ended := stepResult{Name: name, Child: childEnded, Result: out, At: now.UnixMilli()}
		if stored {
			steps[i] = ended
		} else {
			steps = slices.Insert(steps, i, ended)
		}
		// Stored before it is answered: a child retried by hand later
		// changes no later run's answer.
		if err := h.checkpoint(ctx, encodeState(jobState{V: h.resume, Steps: steps})); err != nil {
			if errors.Is(err, ErrCancelled) || errors.Is(err, ErrLostClaim) {
				return zero, err
			}
			return zero, fmt.Errorf("jobs: child %q ended, its outcome not stored: %w", name, err)
		}
		h.steps, h.nextStep = steps, i+1
		return childAnswer[R](name, call.kind, out)
	}
	// Not ended: wait for its signal, or, when its signal came and it was
	// retried since, look again soon.
	on, until := driver.WaitSignalOn(driver.ChildSignal(name)), now.Add(childRecheck)
	if h.signals[driver.ChildSignal(name)] != nil {
		on, until = waitChild, now.Add(childPoll)
	}
	if !h.runEnd.IsZero() && until.After(h.runEnd) {
		until = h.runEnd
	}
	steps := slices.Clone(h.steps)
	waiting := stepResult{Name: name, Child: childWaiting, At: now.UnixMilli()}
	if stored {
		waiting.At = h.steps[i].At
		steps[i] = waiting
	} else {
		steps = slices.Insert(steps, i, waiting)
	}
	sealed, err := h.seal(encodeState(jobState{V: h.resume, Steps: steps}))
	if err != nil {
		return zero, fmt.Errorf("jobs: child %q: %w", name, err)
	}
	h.steps, h.nextStep = steps, i+1
	h.suspend = &suspension{on: on, until: until.Truncate(time.Millisecond).Add(time.Millisecond), state: sealed}
	runtime.Goexit() // stepMu is unlocked by the deferred call
	return zero, nil
}

// maxChildWaits bounds the children a job waits for (Invoke): each
// child's signal is an attribute of the job's item.
const maxChildWaits = 100

// childWaits counts the waits for children among steps: one an Invoke,
// one a wave of a Map (each waits for a signal of its own).
func childWaits(steps []stepResult) int {
	n := 0
	for _, st := range steps {
		var at mapProgress
		switch {
		case st.Child == mapWaiting || st.Child == mapEnded:
			_ = json.Unmarshal(st.Result, &at)
			n += max(1, at.Waves)
		case st.Child != 0:
			n++
		}
	}
	return n
}

// childAnswer is Invoke's answer for the stored outcome raw of the child
// named name, of kind.
func childAnswer[R any](name, kind string, raw json.RawMessage) (R, error) {
	var zero R
	var out childOutcome
	if err := json.Unmarshal(raw, &out); err != nil {
		return zero, fmt.Errorf("jobs: child %q: decode its stored outcome: %w", name, err)
	}
	if out.Status != StatusSucceeded {
		return zero, &ChildError{ID: out.ID, Kind: kind, Status: out.Status, Code: out.Code}
	}
	var v R
	if len(out.Result) > 0 {
		if err := json.Unmarshal(out.Result, &v); err != nil {
			return zero, fmt.Errorf("jobs: child %q: decode its result: %w", name, err)
		}
	}
	return v, nil
}

// readChild reads parent's child named name with its result (a final
// one's, wherever the store keeps it).
func (e *engine) readChild(ctx context.Context, parent *driver.Record, name string) (*driver.Record, error) {
	return e.readJob(ctx, wire.DerivedID("child", parent.ID, name))
}

// readJob reads the job id with its result (a final one's, wherever the
// store keeps it).
func (e *engine) readJob(ctx context.Context, id string) (*driver.Record, error) {
	child, err := e.store.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if child.Status == StatusSucceeded && child.ResultRef != "" && child.Result == nil {
		if child.Result, _, err = e.store.ReadPart(ctx, child, driver.PartResult); err != nil {
			return nil, err
		}
	}
	return child, nil
}

// readJobs reads the jobs ids with their results, as readJob reads each:
// in requests of many (driver.ManyGetter: dynamostore's BatchGetItem,
// 100 a request) when the store can, else one by one, 16 at a time. A job
// that is not stored is absent from the answer.
func (e *engine) readJobs(ctx context.Context, ids []string) (map[string]*driver.Record, error) {
	var out map[string]*driver.Record
	var mu sync.Mutex
	each := func(f func(id string) error) error {
		var first error
		sem := make(chan struct{}, 16)
		var wg sync.WaitGroup
		for _, id := range ids {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				if err := f(id); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return first
	}
	if e.many != nil {
		recs, err := e.many.GetMany(ctx, ids)
		if err != nil {
			return nil, err
		}
		out = recs
	} else {
		out = map[string]*driver.Record{}
		err := each(func(id string) error {
			rec, err := e.store.Get(ctx, id)
			switch {
			case errors.Is(err, ErrNotFound):
				return nil
			case err != nil:
				return err
			}
			mu.Lock()
			out[id] = rec
			mu.Unlock()
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	// Results kept apart are read one by one.
	err := each(func(id string) error {
		mu.Lock()
		rec := out[id]
		mu.Unlock()
		if rec == nil || rec.Status != StatusSucceeded || rec.ResultRef == "" || rec.Result != nil {
			return nil
		}
		result, _, err := e.store.ReadPart(ctx, rec, driver.PartResult)
		rec.Result = result
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// afterParent sends the parent of an awaited child its signal (Invoke).
const afterParent = "parent"

// notifyParent is the post-outcome step of a final awaited child: it
// sends its parent the child's signal, which wakes a parent that waits
// for it; a parent that ended, or has the signal already, needs nothing.
func (e *engine) notifyParent(ctx context.Context, child *driver.Record) error {
	return e.wakeWith(ctx, child.ChildOf, driver.ChildSignal(child.AwaitedAs))
}

// wakeWith sends the job id the child signal name (Invoke's, a Map's
// wave's), which wakes it if it waits for it; a job that ended, is gone,
// or has the signal already needs nothing.
func (e *engine) wakeWith(ctx context.Context, id, name string) error {
	if e.signaller == nil {
		return errors.New("jobs: the store keeps no signals (driver.Signaller): a parent waiting for its children is never woken")
	}
	parent, err := e.store.Get(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	_, err = e.signal(ctx, parent, name, []byte{1})
	if errors.Is(err, ErrAlreadyFinal) || errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// afterChildren cancels the children a cancelled job waited for (Invoke,
// Map).
const afterChildren = "children"

// awaitedChild is the mark of the wait for children a job's marks say it
// waits in (false: none): the last mark, when it is one.
func awaitedChild(marks string) (StepMark, bool) {
	ms := stepMarks(marks)
	if len(ms) == 0 {
		return StepMark{}, false
	}
	m := ms[len(ms)-1]
	return m, (m.Kind == "child" || m.Kind == "children") && m.Status == "waiting"
}

// cancelChildren is the post-outcome step of a cancelled job that waited
// for children: they are cancelled (queued: at once; running: their runs
// are asked to stop). Children that ended need nothing.
func (e *engine) cancelChildren(ctx context.Context, parent *driver.Record) error {
	m, ok := awaitedChild(parent.StepMarks)
	switch {
	case !ok:
		return nil
	case m.Kind == "children":
		return e.cancelMapChildren(withCascade(ctx), parent, m.Name)
	}
	return e.cancelChild(withCascade(ctx), wire.DerivedID("child", parent.ID, m.Name))
}

// cancelChild cancels the job id, a cancelled parent's child (ctx is
// withCascade's); one that ended, or is gone, needs nothing.
func (e *engine) cancelChild(ctx context.Context, id string) error {
	child, err := e.store.Get(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil
	case err != nil:
		return err
	}
	for try := 0; ; try++ {
		err := e.cancel(ctx, child)
		switch {
		case err == nil || errors.Is(err, ErrAlreadyFinal):
			return nil
		case !isConflict(err) || try == 3:
			return err
		}
		// It moved since it was read (claimed, or it ended): again.
		if child, err = e.store.Get(ctx, child.ID); errors.Is(err, ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
	}
}
