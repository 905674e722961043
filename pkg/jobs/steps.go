package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// Durable steps. A handler that is a sequence of steps runs each through
// Step: the first run of a step runs its function and stores its result
// in the job's durable state (the checkpoint's item, sealed, never shown);
// a later run of the handler (a retry, a continuation, a redelivery after
// a crash, a manual retry) gets the stored result back without running
// the function again. docs/guide/LONG_RUNS.md, "Steps".

// CodeNondeterministic: the handler asked for its steps in another order
// than an earlier run of the job stored them (its code changed between
// runs, or it branches on something other than its payload and its steps'
// results). The job ends failed with it, whatever the handler returns.
const CodeNondeterministic = "nondeterministic"

// errNondeterministic is what Step returns for a step out of order.
var errNondeterministic = errors.New("jobs: the handler's steps differ from those an earlier run stored")

// jobState is what a job's checkpoint holds: the handler's own checkpoint
// (Job.Checkpoint, Job.Resume) and the results of its completed steps, in
// order. A state without steps is stored as the checkpoint alone, as
// before steps existed; one with steps is stateMark and this as JSON.
type jobState struct {
	V     json.RawMessage `json:"v,omitempty"`
	Steps []stepResult    `json:"s,omitempty"`
}

// stepResult is a completed step: its name and its result's JSON; or a
// sleep (Sleep): its name and its end (Unix milliseconds); or a wait for
// a signal (WaitForSignal): its name, how it stands (Signal), and while it
// waits its timeout (Until).
type stepResult struct {
	Name   string          `json:"n"`
	Result json.RawMessage `json:"r,omitempty"`
	Until  int64           `json:"u,omitempty"`
	Signal int             `json:"g,omitempty"`
	// Child is how a wait for a child stands (Invoke: childWaiting,
	// childEnded); an ended one's Result is its childOutcome.
	Child int `json:"c,omitempty"`
	// At is when the step was done, or its sleep or wait began (Unix
	// milliseconds): what its view shows (StepMark).
	At int64 `json:"t,omitempty"`
}

// handle is the job's run handle: an empty one for a Job built by hand.
func (j *Job[P]) handle() *runHandle {
	if j.h == nil {
		j.h = &runHandle{}
	}
	return j.h
}

// ready says, with stepMu held, whether the run may take its next step
// (what: a step, a sleep, a wait, named name): not once it suspended, nor
// while a step's function runs or after a step came out of order, which
// makes the run nondeterministic.
func (h *runHandle) ready(what, name string) error {
	if h.suspend != nil {
		return errSuspended
	}
	if h.inStep || h.nondeterministic {
		h.nondeterministic = true
		return fmt.Errorf("%w: %s %q asked for while a step runs, or after one out of order", errNondeterministic, what, name)
	}
	return nil
}

// stateMark starts a stored state with steps: no JSON value starts with it.
const stateMark = 0x01

func decodeState(plain []byte) (jobState, error) {
	if len(plain) == 0 || plain[0] != stateMark {
		return jobState{V: plain}, nil
	}
	var st jobState
	if err := json.Unmarshal(plain[1:], &st); err != nil {
		return jobState{}, fmt.Errorf("jobs: decode the job's state: %w", err)
	}
	return st, nil
}

func encodeState(st jobState) []byte {
	if len(st.Steps) == 0 {
		return st.V
	}
	b, _ := json.Marshal(st) // RawMessages already valid, names strings
	return append([]byte{stateMark}, b...)
}

type stepKeyKey struct{}

// StepKey is the idempotency key of the step whose function ctx was given
// to (Step): the same for every run of that step of that job, so a
// payment provider or an API that deduplicates by it does the step's side
// effect once however often the step runs. "" outside a step.
func StepKey(ctx context.Context) string {
	k, _ := ctx.Value(stepKeyKey{}).(string)
	return k
}

// stepKey derives the key of the i-th step, named name, of job id.
func stepKey(id, name string, i int) string {
	sum := sha256.Sum256([]byte("lambdajobs-step\x00" + id + "\x00" + name + "\x00" + strconv.Itoa(i)))
	return hex.EncodeToString(sum[:16])
}

// Step runs fn as the next step of job's handler, named name, and returns
// its result: the first time, by running fn and storing the result (JSON)
// in the job's durable state with one conditional write (for a kind with
// KindOpts.Heartbeat, a heartbeat too); in every later run of the
// handler, by returning the stored result without running fn. A step's
// function is at-least-once: a run that dies after its side effect and
// before the write runs it again, so pass StepKey(ctx) to the side effect.
// An error of fn is returned as it is and stores nothing: the handler
// fails, retries, or goes on without the step (a later run that asks for
// it again runs it then). A write that fails is returned as an error (the
// step's function may run again in a later run); ErrCancelled and
// ErrLostClaim mean the run should stop.
//
// Steps run one after another, never at once: a Step called while another
// runs fails the job with CodeNondeterministic. A run asks for its stored
// steps in the order they were stored (it may leave one out, or add a new
// one between them): a step stored after one it has not reached yet fails
// the job with CodeNondeterministic, whatever the handler returns.
// Results are private: stored sealed (the Sealer of checkpoints), never
// shown by the API, all of a job's state within driver.MaxCheckpointBytes.
// A manual retry keeps the completed steps; a replay starts with none. On
// a Job built by hand (a handler's unit test) the steps are kept in memory.
func Step[T, P any](ctx context.Context, job *Job[P], name string, fn func(ctx context.Context) (T, error)) (T, error) {
	var zero T
	h := job.handle()
	h.stepMu.Lock()
	if err := h.ready("step", name); err != nil {
		h.stepMu.Unlock()
		return zero, err
	}
	i := h.nextStep
	if i < len(h.steps) && h.steps[i].Name == name && (h.steps[i].Until != 0 || h.steps[i].Signal != 0 || h.steps[i].Child != 0) {
		h.nondeterministic = true
		h.stepMu.Unlock()
		return zero, fmt.Errorf("%w: step %q was stored as a sleep or a signal's wait", errNondeterministic, name)
	}
	if i < len(h.steps) && h.steps[i].Name == name {
		done := h.steps[i]
		h.nextStep++
		h.stepMu.Unlock()
		var v T
		if err := json.Unmarshal(done.Result, &v); err != nil {
			return zero, fmt.Errorf("jobs: step %q: decode its stored result: %w", name, err)
		}
		return v, nil
	}
	for _, later := range h.steps[min(i, len(h.steps)):] {
		if later.Name == name {
			h.nondeterministic = true
			h.stepMu.Unlock()
			return zero, fmt.Errorf("%w: step %q was stored after %q, which this run has not asked for", errNondeterministic, name, h.steps[i].Name)
		}
	}
	h.inStep = true
	h.stepMu.Unlock()
	v, err := fn(context.WithValue(ctx, stepKeyKey{}, stepKey(job.ID, name, i)))
	h.stepMu.Lock()
	defer h.stepMu.Unlock()
	h.inStep = false
	if err != nil {
		return zero, err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return zero, fmt.Errorf("jobs: step %q: encode its result: %w", name, err)
	}
	// The new step takes its place in the order of this run.
	steps := slices.Insert(slices.Clone(h.steps), i, stepResult{Name: name, Result: raw, At: h.clock().UnixMilli()})
	if h.checkpoint != nil {
		if err := h.checkpoint(ctx, encodeState(jobState{V: h.resume, Steps: steps})); err != nil {
			if errors.Is(err, ErrCancelled) || errors.Is(err, ErrLostClaim) {
				return v, err
			}
			return zero, fmt.Errorf("jobs: step %q done, its result not stored: %w", name, err)
		}
	}
	h.steps, h.nextStep = steps, i+1
	return v, nil
}
