package simulation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Steps. A plain job's script may run steps first (payload.Steps): each
// through jobs.Step, under the store's faults, kills, redeliveries,
// continuations and retries. The invariant, as each step's function
// starts: no step runs again once a Step call for it returned its result
// stored (the write landed under the run's claim, so every later run
// claimed after it and reads the step back).

//
// Sleeps. A job with steps may sleep after its first (payload.SleepS):
// the run suspends (the handler's goroutine ends), the job waits on
// "sleep" holding no worker, and a later run passes it. The invariant, as
// Sleep returns: no earlier than SleepS after the first run reached it,
// to the store's millisecond (a run whose park did not land sleeps again
// from its own time, later).

//
// Signals. A job with steps may wait for the signal "go" after its first
// (payload.SignalS, its timeout), while the clients signal jobs at random:
// before the wait, while the run that waits runs, while it waits, after
// the timeout, and again (duplicates), under the store's faults. The
// invariants, as the wait answers: every run of a job gets the same
// answer (a step after the wait stores it, and later runs compare); a
// signal is the first one the job accepted, never a duplicate's; and a
// wait does not time out once a signal was accepted a minute before its
// timeout.

// signalGo is the signal sim.plain's handlers wait for.
const signalGo = "go"

// stepLog is what the steps did, by job and step name.
type stepLog struct {
	mu     sync.Mutex
	stored map[string]bool      // "job/step": a Step call returned it stored
	slept  map[string]time.Time // job: when a run first reached its sleep
	// waited: when a run first reached a job's wait for its signal;
	// signalled: the first signal a job accepted, and when.
	waited    map[string]time.Time
	signalled map[string]sentSignal
	// maybe: the values of signals sent to a job, answered or not (one
	// may land before its answer, or land and answer an error); tokens:
	// the callback tokens a job's runs made.
	maybe  map[string][]int
	tokens map[string][]madeToken
}

// madeToken is a callback token a run made, and when it expires.
type madeToken struct {
	token  string
	expiry time.Time
}

// sentSignal is a signal a job accepted: its value, and when.
type sentSignal struct {
	v  int
	at time.Time
}

// runSteps runs job's scripted steps; an error is the run's.
func (w *world) runSteps(ctx context.Context, job *jobs.Job[payload]) error {
	for i := range job.Payload.Steps {
		name := fmt.Sprint("s", i)
		key := job.ID + "/" + name
		ran := false
		v, err := jobs.Step(ctx, job, name, func(ctx context.Context) (int, error) {
			ran = true
			w.stepLog.mu.Lock()
			again := w.stepLog.stored[key]
			w.stepLog.mu.Unlock()
			if again {
				w.violate("job %s: step %s ran again after a run stored it", job.ID, name)
			}
			if jobs.StepKey(ctx) == "" {
				w.violate("job %s: step %s has no key", job.ID, name)
			}
			w.cover("mechanism", "step ran")
			return job.Payload.N*10 + i, nil
		})
		if err != nil {
			w.cover("mechanism", "step not stored (a fault)")
			return err
		}
		if v != job.Payload.N*10+i {
			w.violate("job %s: step %s gave %d, its function %d", job.ID, name, v, job.Payload.N*10+i)
		}
		if !ran {
			w.cover("mechanism", "step read back from an earlier run")
		}
		w.stepLog.mu.Lock()
		w.stepLog.stored[key] = true
		w.stepLog.mu.Unlock()
		if i == 0 && job.Payload.SleepS > 0 {
			if err := w.sleepStep(ctx, job); err != nil {
				return err
			}
		}
		if i == 0 && job.Payload.SignalS > 0 {
			if err := w.signalStep(ctx, job); err != nil {
				return err
			}
		}
		if i == 0 && job.Payload.MapN > 0 {
			if err := w.mapStep(ctx, job); err != nil {
				return err
			}
		} else if i == 0 && job.Payload.InvokeS > 0 {
			if err := w.invokeStep(ctx, job); err != nil {
				return err
			}
		}
	}
	return nil
}

// sleepStep sleeps job's SleepS; it returns only once the sleep passed.
func (w *world) sleepStep(ctx context.Context, job *jobs.Job[payload]) error {
	d := time.Duration(job.Payload.SleepS) * time.Second
	w.stepLog.mu.Lock()
	first, ok := w.stepLog.slept[job.ID]
	if !ok {
		first = time.Now()
		w.stepLog.slept[job.ID] = first
	}
	w.stepLog.mu.Unlock()
	if err := job.Sleep(ctx, "sleep", d); err != nil {
		w.cover("mechanism", "sleep refused")
		return err
	}
	// The engine keeps time in the store's whole milliseconds.
	if now := time.Now(); now.Add(time.Millisecond).Before(first.Add(d)) {
		w.violate("job %s: its sleep of %v passed at %v, %v after a run first reached it", job.ID, d, now, now.Sub(first))
	}
	w.cover("mechanism", "sleep passed")
	return nil
}

// signalStep waits for job's signal for SignalS; it returns once the wait
// answered, and its answer was checked.
func (w *world) signalStep(ctx context.Context, job *jobs.Job[payload]) error {
	d := time.Duration(job.Payload.SignalS) * time.Second
	w.stepLog.mu.Lock()
	first, ok := w.stepLog.waited[job.ID]
	if !ok {
		first = time.Now()
		w.stepLog.waited[job.ID] = first
	}
	w.stepLog.mu.Unlock()
	if job.Payload.TokenS > 0 {
		// A token for the signal, made in a step: a run that repeats the
		// step makes another, which works as well.
		if _, err := jobs.Step(ctx, job, "token", func(context.Context) (bool, error) {
			ttl := time.Duration(job.Payload.TokenS) * time.Second
			tok, err := job.CallbackToken(signalGo, ttl)
			if err != nil {
				w.violate("job %s: no callback token: %v", job.ID, err)
				return false, err
			}
			w.stepLog.mu.Lock()
			w.stepLog.tokens[job.ID] = append(w.stepLog.tokens[job.ID], madeToken{token: tok, expiry: time.Now().Add(ttl)})
			w.stepLog.mu.Unlock()
			return true, nil
		}); err != nil {
			return err
		}
	}
	v, came, err := jobs.WaitForSignal[int](ctx, job, signalGo, d)
	if err != nil {
		w.cover("mechanism", "signal's timeout not stored (a fault)")
		return err
	}
	answer := "timeout"
	if came {
		answer = fmt.Sprint("signal ", v)
	}
	w.stepLog.mu.Lock()
	sent, accepted := w.stepLog.signalled[job.ID]
	maybe := slices.Contains(w.stepLog.maybe[job.ID], v)
	w.stepLog.mu.Unlock()
	switch {
	case came && (accepted && sent.v != v || !accepted && !maybe):
		w.violate("job %s: its wait got the signal %d, the first it accepted was %v (%v)", job.ID, v, sent.v, accepted)
	case !came && accepted && sent.at.Before(first.Add(d-time.Minute)):
		w.violate("job %s: its wait of %v from %v timed out, its signal accepted at %v", job.ID, d, first, sent.at)
	case came:
		w.cover("mechanism", "signal received")
	default:
		w.cover("mechanism", "signal timed out")
	}
	stored, err := jobs.Step(ctx, job, "answer", func(context.Context) (string, error) { return answer, nil })
	if err != nil {
		return err
	}
	if stored != answer {
		w.violate("job %s: its wait answered %q, an earlier run's %q", job.ID, answer, stored)
	}
	return nil
}

// signal delivers the signal "go" with value v to one of the client's
// jobs, recording the first the job accepted.
func (w *world) signal(ctx context.Context, svc *jobs.Service, id string, v int) {
	raw, _ := json.Marshal(v)
	at := time.Now()
	w.mayCome(id, v)
	res, err := svc.Signal(ctx, simOwner, id, signalGo, raw)
	switch {
	case err != nil:
		w.cover("client", "signal"+outcome(err))
		return
	case res.Duplicate:
		w.cover("client", "signal (duplicate)")
		return
	case res.Woke:
		w.cover("client", "signal woke its job")
		w.woke(id, at)
	default:
		w.cover("client", "signal kept for a later wait")
	}
	w.stepLog.mu.Lock()
	if _, ok := w.stepLog.signalled[id]; !ok {
		w.stepLog.signalled[id] = sentSignal{v: v, at: at}
	}
	w.stepLog.mu.Unlock()
}

// callback delivers the signal "go" with value v to job id through one of
// the callback tokens its runs made, if it has one, as a third party
// would: it reports whether it tried. A token refused as expired must be
// past its expiry, and one accepted must not be; a token refused as used
// must belong to a job that has its signal.
func (w *world) callback(ctx context.Context, svc *jobs.Service, id string, v int) bool {
	w.stepLog.mu.Lock()
	made := w.stepLog.tokens[id]
	w.stepLog.mu.Unlock()
	if len(made) == 0 {
		return false
	}
	tok := made[v%len(made)]
	raw, _ := json.Marshal(v)
	at := time.Now()
	w.mayCome(id, v)
	res, err := svc.Callback(ctx, tok.token, raw)
	var re *jobs.RequestError
	code := ""
	if errors.As(err, &re) {
		code = re.Code
	}
	switch {
	case err == nil:
		if !at.Before(tok.expiry.Add(time.Millisecond)) {
			w.violate("job %s: a callback token accepted at %v, past its expiry %v", id, at, tok.expiry)
		}
		w.cover("client", "callback token delivered its signal")
		if res.Woke {
			w.woke(id, at)
		}
		w.stepLog.mu.Lock()
		if _, ok := w.stepLog.signalled[id]; !ok {
			w.stepLog.signalled[id] = sentSignal{v: v, at: at}
		}
		w.stepLog.mu.Unlock()
	case code == "token_expired":
		if time.Now().Add(time.Millisecond).Before(tok.expiry) {
			w.violate("job %s: a callback token refused as expired at %v, before its expiry %v", id, time.Now(), tok.expiry)
		}
		w.cover("client", "callback token expired")
	case code == "token_used":
		w.stepLog.mu.Lock()
		_, had := w.stepLog.signalled[id]
		maybe := len(w.stepLog.maybe[id]) > 0
		w.stepLog.mu.Unlock()
		if !had && !maybe {
			w.violate("job %s: a callback token refused as used, and no signal of it was accepted", id)
		}
		w.cover("client", "callback token used")
	default:
		w.cover("client", "callback token"+outcome(err))
	}
	return true
}

// mayCome records that a signal of value v may come to job id from now
// on: its delivery's write may land, and a run read it, before the
// delivery answers (its message is sent after the write), or land and
// answer an error (a fault after the write).
func (w *world) mayCome(id string, v int) {
	w.stepLog.mu.Lock()
	w.stepLog.maybe[id] = append(w.stepLog.maybe[id], v)
	w.stepLog.mu.Unlock()
}
