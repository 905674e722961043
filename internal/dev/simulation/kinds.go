package simulation

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// payload is every simulated kind's payload: a script of what the handler
// does.
type payload struct {
	// Ms is how long the handler works (in steps of StepMs when set).
	Ms int `json:"ms"`
	// StepMs, when set, is the length of the steps between which the
	// handler heartbeats; a step does not watch its context, as a CPU-bound
	// step or a call without a context would not.
	StepMs int `json:"step_ms,omitempty"`
	// WindDownMs is how long the handler takes to stop once a heartbeat
	// says the run was cancelled or lost.
	WindDownMs int `json:"wind_down_ms,omitempty"`
	// Fail: "" succeeds, "declared" fails with a declared code, "retry"
	// asks for a retry, "error" returns a plain error.
	Fail string `json:"fail,omitempty"`
	// Publish partial results this many times.
	Publish int `json:"publish,omitempty"`
	// Cont continues in a new invocation this many times first.
	Cont int `json:"cont,omitempty"`
	// Key is the limit key (LimitKey "payload.key").
	Key string `json:"key,omitempty"`
	// N tells jobs apart.
	N int `json:"n"`
	// Children: the handler starts this many plain jobs by name first
	// (children.go).
	Children int `json:"children,omitempty"`
	// Steps: the handler runs this many durable steps first (steps.go).
	Steps int `json:"steps,omitempty"`
	// SleepS: the handler sleeps this many seconds after its first step
	// (Job.Sleep, steps.go).
	SleepS int `json:"sleep_s,omitempty"`
	// SignalS: the handler waits at most this many seconds for the
	// signal "go" after its first step (jobs.WaitForSignal, steps.go).
	SignalS int `json:"signal_s,omitempty"`
	// TokenS: the handler makes a callback token for that signal, lasting
	// this many seconds, before it waits (steps.go).
	TokenS int `json:"token_s,omitempty"`
	// InvokeS: the handler invokes a plain child after its first step
	// (jobs.Invoke), which waits this many seconds for a signal no one
	// sends, then ends as InvokeFail says (invoke.go).
	InvokeS    int    `json:"invoke_s,omitempty"`
	InvokeFail string `json:"invoke_fail,omitempty"`
	// MapN: the handler maps a plain child over this many calls after its
	// first step instead (jobs.Map), MapWindow at a time, each waiting
	// InvokeS seconds; the MapFail-th (1-based) fails (mapped.go).
	MapN      int `json:"map_n,omitempty"`
	MapWindow int `json:"map_window,omitempty"`
	MapFail   int `json:"map_fail,omitempty"`
}

type result struct {
	N int `json:"n"`
}

func (r result) PublicJSON() ([]byte, error) { return json.Marshal(r) }

// The simulated kinds, one per mechanism.
const (
	kindPlain     = "sim.plain"     // retries, partial results, events
	kindLimited   = "sim.limited"   // a concurrency limit, and one per key
	kindRated     = "sim.rated"     // a rate limit
	kindUnique    = "sim.unique"    // unique keys and debounce
	kindBulk      = "sim.bulk"      // the bulk lane
	kindLong      = "sim.long"      // heartbeats and continuations
	kindFollowUp  = "sim.followup"  // the on-failure follow-up of sim.plain
	kindComplete  = "sim.completed" // batch completions
	kindAdded     = "sim.added"     // a kind a deploy adds
	laneBulk      = "bulk"
	declaredCode  = "sim_failed"
	simOwner      = "sim-owner"
	simOtherOwner = "sim-other"
)

// limitsOf are a world's limits, drawn per seed.
type limitsOf struct {
	conc, concPerKey int
	rate             int
	ratePeriod       time.Duration
	heartbeat        time.Duration
}

// register registers the simulated kinds with the world's handlers; added
// also registers kindAdded, the kind a deploy adds.
func (w *world) register(reg *jobs.Registry, added bool) {
	l, retry := w.lim, w.retry
	if added {
		jobs.MustRegister(reg, kindAdded, w.handle, &jobs.KindOpts{FailureCodes: []string{declaredCode}, Retry: retry})
	}
	plain := jobs.MustRegister(reg, kindPlain, w.handle, &jobs.KindOpts{FailureCodes: []string{declaredCode}, Retry: retry, Events: true, OnFailure: kindFollowUp,
		Signals: map[string]any{signalGo: 0}})
	w.plain = plain
	jobs.MustRegister(reg, kindLimited, w.handle, &jobs.KindOpts{FailureCodes: []string{declaredCode}, Retry: retry, Concurrency: l.conc, ConcurrencyPerKey: l.concPerKey, LimitKey: "payload.key"})
	jobs.MustRegister(reg, kindRated, w.handle, &jobs.KindOpts{FailureCodes: []string{declaredCode}, Retry: retry, RateLimit: l.rate, RatePeriod: l.ratePeriod})
	jobs.MustRegister(reg, kindUnique, w.handle, &jobs.KindOpts{FailureCodes: []string{declaredCode}, Retry: retry})
	jobs.MustRegister(reg, kindBulk, w.handle, &jobs.KindOpts{FailureCodes: []string{declaredCode}, Retry: retry, Lane: laneBulk, Events: true})
	jobs.MustRegister(reg, kindLong, w.handle, &jobs.KindOpts{FailureCodes: []string{declaredCode}, Retry: retry, Heartbeat: l.heartbeat, Events: true})
	declareSchedule(reg, plain)
	jobs.MustRegister(reg, kindFollowUp, func(ctx context.Context, job *jobs.Job[jobs.FailedJob]) (result, error) {
		w.cover("mechanism", "run "+kindFollowUp)
		w.followUps.add(job.Payload.JobID, job.ID)
		return result{}, nil
	}, nil)
	jobs.MustRegister(reg, kindComplete, func(ctx context.Context, job *jobs.Job[payload]) (result, error) {
		w.cover("mechanism", "run "+kindComplete)
		if job.Batch != nil {
			w.completions.add(job.ID, *job.Batch)
		}
		return result{}, nil
	}, nil)
}

// handle is every scripted kind's handler.
func (w *world) handle(ctx context.Context, job *jobs.Job[payload]) (result, error) {
	// A handler the worker abandoned outlives its invocation: the world
	// waits for it before it ends. (Its invocation's goroutine, counted
	// too, is still running as it starts.)
	w.stragglers.Add(1)
	defer w.stragglers.Done()
	inst, _ := ctx.Value(instanceKey{}).(*actor)
	r := w.track.begin(job.ID, job.Kind, job.Payload.Key, inst)
	defer w.track.end(r)
	p := job.Payload
	var done int
	if _, err := job.Resume(&done); err != nil {
		return result{}, err
	}
	if p.Steps > 0 {
		if err := w.runSteps(ctx, job); err != nil {
			return result{}, jobs.Retry(err)
		}
	}
	// Odd microseconds keep a step's end off the instants the worker's
	// timers fire at (its deadlines are whole milliseconds): two timers at
	// one instant wake in no set order, and a seed would not replay.
	step := time.Duration(p.Ms)*time.Millisecond + 7*time.Microsecond
	steps := 1
	if p.StepMs > 0 {
		step = time.Duration(p.StepMs)*time.Millisecond + 3*time.Microsecond
		steps = max(1, p.Ms/p.StepMs)
	}
	for i := range steps {
		if p.StepMs > 0 {
			time.Sleep(step) // a step that does not watch its context
			if r.over() {
				return result{}, errKilled
			}
			if err := job.Heartbeat(ctx); errors.Is(err, jobs.ErrCancelled) || errors.Is(err, jobs.ErrLostClaim) {
				// Wind down as a real handler does: finish the unit of
				// work in hand (not watching the context), then stop.
				time.Sleep(time.Duration(p.WindDownMs) * time.Millisecond)
				return result{}, err
			}
			// Any other error is transient: the next heartbeat may land.
		} else {
			t := time.NewTimer(step)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return result{}, ctx.Err()
			}
		}
		if r.over() {
			return result{}, errKilled
		}
		if p.StepMs > 0 && i == 0 && done < p.Cont {
			// A long run saves where it is, as one that continues does.
			if err := job.Checkpoint(ctx, done); err != nil && !errors.Is(err, jobs.ErrCancelled) && !errors.Is(err, jobs.ErrLostClaim) {
				return result{}, err
			}
		}
		if i < p.Publish {
			if err := job.Publish(ctx, result{N: i}); err != nil {
				return result{}, err
			}
		}
	}
	if done < p.Cont {
		return result{}, jobs.Continue(done + 1)
	}
	if p.Children > 0 {
		if err := w.startChildren(ctx, job); err != nil {
			return result{}, err
		}
	}
	switch p.Fail {
	case "declared":
		return result{}, jobs.Fail(declaredCode, errors.New("scripted failure with secret text"))
	case "retry":
		return result{}, jobs.Retry(jobs.Fail(declaredCode, errors.New("scripted retry")))
	case "error":
		return result{}, errors.New("a plain error")
	}
	return result{N: p.N}, nil
}

type instanceKey struct{}
