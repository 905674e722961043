package jobs

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Sleeps. A durable handler sleeps through Job.Sleep or Job.SleepUntil: the run
// stores the sleep's end among its steps and suspends, so the job waits
// queued (waiting_on "sleep", run_at its end) holding no worker, no
// attempt spent, and a later run of the handler passes the sleep once its
// time has come. docs/guide/LONG_RUNS.md, "Sleeps".

// waitSleep: a queued job whose handler sleeps (Job.Sleep, SleepUntil).
const waitSleep = "sleep"

// errSuspended answers a Step, Checkpoint or Sleep asked for once the run
// has suspended (a handler's deferred call after a Sleep): the state the
// park stores was taken when the run suspended, so nothing later is.
var errSuspended = errors.New("jobs: the run has suspended (Sleep): nothing more is stored by it")

// suspension is what a run that suspends leaves its handle: what the job
// waits on, until when, and the state to store with the park, sealed
// (nil: the stored one stands).
type suspension struct {
	on    string
	until time.Time
	state []byte
}

// Sleep suspends the job's handler for d, as the step named name: the first
// time a run reaches it, the run stores the sleep's end (now plus d) with
// the job's steps and ends, and the job waits queued (View.WaitingOn
// "sleep", RunAt the end) without a worker, a message in flight past the
// queue's delay limit, or an attempt spent; at its end the job runs again
// and, its earlier steps read back, Sleep returns nil. A run that reaches
// a sleep whose end has not come yet (a redelivery) suspends again until
// the stored end.
//
// When it suspends, Sleep does not return: it ends the handler's goroutine
// (runtime.Goexit), so deferred calls run and no code after the call
// does, even in a handler that recovers panics. Call it from the
// handler's own goroutine (a run whose handler returns after a Sleep on
// another goroutine fails with CodeInternal) and outside a Step's
// function (inside one it fails the job with CodeNondeterministic, as
// Step does). Once the run has suspended, the handler's deferred calls
// store nothing: Step, Checkpoint and Sleep return an error. Sleep
// returns an error, and stores nothing, for an end more than MaxDelay
// away or a state (checkpoint and steps) that no longer fits
// driver.MaxCheckpointBytes; sleeps take their place among the steps,
// with the same rules of order. KindOpts.MaxRunTime counts from the job's
// first start, sleeps included: Sleep returns an error, and stores
// nothing, for an end past it. ctx is not consulted: a sleep is a stored
// time, not a wait in this process.
// On a Job built by hand (a handler's unit test), the sleep's time passes
// at once and Sleep returns nil.
func (j *Job[P]) Sleep(ctx context.Context, name string, d time.Duration) error {
	return sleep(j, name, func(now time.Time) time.Time { return now.Add(d) })
}

// SleepUntil is Sleep until t: a t already past returns at once.
func (j *Job[P]) SleepUntil(ctx context.Context, name string, t time.Time) error {
	return sleep(j, name, func(time.Time) time.Time { return t })
}

func sleep[P any](job *Job[P], name string, end func(now time.Time) time.Time) error {
	h := job.handle()
	now := time.Now()
	if h.now != nil {
		now = h.now()
	}
	h.stepMu.Lock()
	if err := h.ready("sleep", name); err != nil {
		h.stepMu.Unlock()
		return err
	}
	i := h.nextStep
	if i < len(h.steps) && h.steps[i].Name == name {
		until := time.UnixMilli(h.steps[i].Until)
		if h.steps[i].Until == 0 || h.steps[i].Signal != 0 {
			h.nondeterministic = true
			h.stepMu.Unlock()
			return fmt.Errorf("%w: sleep %q was stored as a step or a signal's wait", errNondeterministic, name)
		}
		if !now.Before(until) {
			h.nextStep++
			h.stepMu.Unlock()
			return nil
		}
		// Woken before its end: wait again, the stored state as it is.
		h.suspend = &suspension{on: waitSleep, until: until}
		h.stepMu.Unlock()
		runtime.Goexit()
	}
	for _, later := range h.steps[min(i, len(h.steps)):] {
		if later.Name == name {
			h.nondeterministic = true
			h.stepMu.Unlock()
			return fmt.Errorf("%w: sleep %q was stored after %q, which this run has not asked for", errNondeterministic, name, h.steps[i].Name)
		}
	}
	// Stored in whole milliseconds, rounded up: a sleep never ends early.
	until := end(now)
	if t := until.Truncate(time.Millisecond); t.Before(until) {
		until = t.Add(time.Millisecond)
	}
	if until.Sub(now) > MaxDelay {
		h.stepMu.Unlock()
		return fmt.Errorf("jobs: sleep %q: its end %s is more than MaxDelay (%s) away", name, until.UTC().Format(time.RFC3339), MaxDelay)
	}
	if !until.After(now) {
		h.stepMu.Unlock()
		return nil // nothing to wait for, nothing to store
	}
	if !h.runEnd.IsZero() && until.After(h.runEnd) {
		h.stepMu.Unlock()
		return fmt.Errorf("jobs: sleep %q: its end %s is past the kind's MaxRunTime, which ends the job at %s", name,
			until.UTC().Format(time.RFC3339), h.runEnd.UTC().Format(time.RFC3339))
	}
	steps := slices.Insert(slices.Clone(h.steps), i, stepResult{Name: name, Until: until.UnixMilli(), At: now.UnixMilli()})
	if h.checkpoint == nil {
		// A Job built by hand: the time passes at once.
		h.steps, h.nextStep = steps, i+1
		h.stepMu.Unlock()
		return nil
	}
	// Sealed now, so a state too large is the handler's error to see while
	// it can still act on it.
	sealed, err := h.seal(encodeState(jobState{V: h.resume, Steps: steps}))
	if err != nil {
		h.stepMu.Unlock()
		return fmt.Errorf("jobs: sleep %q: %w", name, err)
	}
	h.steps, h.nextStep = steps, i+1
	h.suspend = &suspension{on: waitSleep, until: until, state: sealed}
	h.stepMu.Unlock()
	runtime.Goexit()
	return nil // not reached
}

// execution is the outcome of a run whose handler suspended: its park.
func (s *suspension) execution() execution {
	cause := s.on
	if name, ok := driver.SignalWaitedOn(s.on); ok && driver.IsChildSignal(name) {
		cause = waitChild // a fixed word: the child's name is the handler's
	} else if ok {
		cause = waitSignal // a fixed word: the signal's name is the kind's
	}
	return execution{WaitOn: s.on, WaitUntil: s.until, Cause: cause, Checkpoint: s.state}
}

// suspension returns the run's suspension, nil when it has not suspended.
func (h *runHandle) suspension() *suspension {
	if h == nil {
		return nil
	}
	h.stepMu.Lock()
	defer h.stepMu.Unlock()
	return h.suspend
}
