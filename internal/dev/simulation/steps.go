package simulation

import (
	"context"
	"fmt"
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

// stepLog is what the steps did, by job and step name.
type stepLog struct {
	mu     sync.Mutex
	stored map[string]bool      // "job/step": a Step call returned it stored
	slept  map[string]time.Time // job: when a run first reached its sleep
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
