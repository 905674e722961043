package jobs

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/errtypes"
)

// Sleeps. A durable handler sleeps through Job.Sleep or Job.SleepUntil: the run
// stores the sleep's end among its steps and suspends, so the job waits
// queued (waiting_on "sleep", run_at its end) holding no worker, no
// attempt spent, and a later run of the handler passes the sleep once its
// time has come. docs/LONG_RUNS.md, "Sleeps".

// waitSleep: a queued job whose handler sleeps (Job.Sleep, SleepUntil).
const waitSleep = "sleep"

// suspension is what a run that suspends leaves its handle: what the job
// waits on, until when, and the state to store with the park (nil: the
// stored one stands).
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
// handler's own goroutine and outside a Step's function (inside one it
// fails the job with CodeNondeterministic, as Step does). It returns an
// error, and stores nothing, for an end more than MaxDelay away;
// sleeps take their place among the steps, with the same rules of order.
// KindOpts.MaxRunTime counts from the job's first start, sleeps included.
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
	if job.h == nil {
		job.h = &runHandle{}
	}
	h := job.h
	now := time.Now()
	if h.now != nil {
		now = h.now()
	}
	h.stepMu.Lock()
	if h.inStep || h.nondeterministic {
		h.nondeterministic = true
		h.stepMu.Unlock()
		return fmt.Errorf("%w: sleep %q asked for while a step runs, or after one out of order", errNondeterministic, name)
	}
	i := h.nextStep
	if i < len(h.steps) && h.steps[i].Name == name {
		until := time.UnixMilli(h.steps[i].Until)
		if h.steps[i].Until == 0 {
			h.nondeterministic = true
			h.stepMu.Unlock()
			return fmt.Errorf("%w: sleep %q was stored as a step", errNondeterministic, name)
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
	steps := slices.Insert(slices.Clone(h.steps), i, stepResult{Name: name, Until: until.UnixMilli()})
	if h.checkpoint == nil {
		// A Job built by hand: the time passes at once.
		h.steps, h.nextStep = steps, i+1
		h.stepMu.Unlock()
		return nil
	}
	h.suspend = &suspension{on: waitSleep, until: until, state: encodeState(jobState{V: h.resume, Steps: steps})}
	h.stepMu.Unlock()
	runtime.Goexit()
	return nil // not reached
}

// suspended is the execution of a run whose handler suspended (h.suspend):
// its park, with the state to store sealed.
func suspended(sealer Sealer, id string, s *suspension) execution {
	ex := execution{WaitOn: s.on, WaitUntil: s.until, Cause: s.on}
	if s.state != nil {
		sealed, err := sealCheckpoint(sealer, id, s.state)
		if err != nil {
			return execution{Status: StatusFailed, Code: CodeInternal, Cause: "checkpoint", ErrTypes: errtypes.Of(err)}
		}
		ex.Checkpoint = sealed
	}
	return ex
}
