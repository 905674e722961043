package simulation

import (
	"context"
	"fmt"
	"sync"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Steps. A plain job's script may run steps first (payload.Steps): each
// through jobs.Step, under the store's faults, kills, redeliveries,
// continuations and retries. The invariant, as each step's function
// starts: no step runs again once a Step call for it returned its result
// stored (the write landed under the run's claim, so every later run
// claimed after it and reads the step back).

// stepLog is what the steps did, by job and step name.
type stepLog struct {
	mu     sync.Mutex
	stored map[string]bool // "job/step": a Step call returned it stored
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
	}
	return nil
}
