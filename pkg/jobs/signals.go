package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/errtypes"
	"github.com/lambdajobs/lambdajobs/internal/jsonin"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Signals. A durable handler waits for a signal (a person's approval, a
// webhook's answer) through WaitForSignal: the run stores the wait among
// its steps and suspends, so the job waits queued (waiting_on "signal",
// run_at the wait's timeout) holding no worker and no attempt; a signal
// delivered to the job (Service.Signal, POST /v1/jobs/{id}/signals/{name})
// is stored on it, sealed, and makes it due; the next run's wait returns
// the signal. A signal that comes before the wait asks for it is kept
// until it does; a second signal of the same name changes nothing.
// docs/guide/LONG_RUNS.md, "Signals".

// waitSignal: View.WaitingOn of a job whose handler waits for a signal
// (its Record.WaitingOn is driver.WaitSignalOn of the signal's name).
const waitSignal = "signal"

// maxSignalBytes bounds a signal's payload (JSON), and maxSignals the
// signals one job keeps (and a kind declares): each is an attribute of the
// job's own item (or names an item of its own, in a store that keeps
// large ones apart: driver.SignalPart), read at each claim
// (docs/evidence/CAPACITY.md).
const (
	maxSignalBytes = 4 << 10
	maxSignals     = 8
)

// How a wait stored among a job's steps stands (stepResult.Signal).
const (
	signalWaiting   = 1 // asked for, not come: Until is its timeout
	signalTimedOut  = 2 // its timeout came first: it returns no signal, ever
	signalDelivered = 3 // the job's signal of its name is what it returns
)

var signalName = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,63}$`)

// checkSignals checks KindOpts.Signals: each name valid, each type one a
// signal's JSON decodes into.
func checkSignals(in map[string]any) (map[string]reflect.Type, error) {
	if len(in) > maxSignals {
		return nil, fmt.Errorf("%d signals: a job keeps at most %d", len(in), maxSignals)
	}
	out := make(map[string]reflect.Type, len(in))
	for name, v := range in {
		if !signalName.MatchString(name) {
			return nil, fmt.Errorf("signal %q: want a lower-case letter, then up to 63 lower-case letters, digits, '.', '_' or '-'", name)
		}
		if v == nil {
			return nil, fmt.Errorf("signal %q: give a zero value of its payload's type (Approval{}), not nil", name)
		}
		out[name] = reflect.TypeOf(v)
	}
	return out, nil
}

// signalNames are a kind's signals, sorted.
func (k *kindDef) signalNames() []string {
	var out []string
	for n := range k.signals {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// decodeSignal decodes raw strictly into a value of type t: as a payload
// is (decodePayload), within maxSignalBytes.
func decodeSignal(raw []byte, t reflect.Type) (any, error) {
	if len(raw) > maxSignalBytes {
		return nil, &PayloadError{Reason: fmt.Sprintf("%d bytes is more than the %d a signal may have", len(raw), maxSignalBytes), Limit: maxSignalBytes}
	}
	if err := checkJSON(raw, maxSignalBytes); err != nil {
		return nil, err
	}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, payloadErr("the signal's payload is null")
	}
	p := reflect.New(t)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(p.Interface()); err != nil {
		return nil, payloadErr("%s", jsonin.Reason(err))
	}
	return p.Elem().Interface(), nil
}

// signalAAD binds a sealed signal to its job and its name.
func signalAAD(id, name string) []byte { return []byte(id + "\x00signal\x00" + name) }

// WaitForSignal waits for the signal named name of job's kind
// (KindOpts.Signals declares it, with T its payload's type) for at most
// timeout, as the step named name: it returns the signal's payload and
// true once one is delivered to the job (Service.Signal, POST
// /v1/jobs/{id}/signals/{name}), or the zero T and false once timeout
// has passed without one; a later run of the handler gets the same answer.
// A signal delivered before the handler asks for it is kept until it
// does.
//
// The first time a run reaches a wait whose signal has not come, the run
// stores the wait with the job's steps and suspends as Sleep does: the job
// waits queued (View.WaitingOn "signal", View.Signal name, RunAt the
// timeout) without a worker or an attempt spent, and WaitForSignal does
// not return (runtime.Goexit: deferred calls run, no code after the call
// does). The signal makes the job due, and its next run passes the wait.
// The rules of Sleep apply: call it from the handler's goroutine, outside
// a Step's function, in the same order in every run; a timeout more than
// MaxDelay away or past the kind's MaxRunTime is an error, and stores
// nothing. A timeout that comes first is stored (one conditional write)
// before WaitForSignal returns false, so a signal that comes later changes
// nothing. On a Job built by hand (a handler's unit test), no signal
// comes: it returns false at once.
func WaitForSignal[T, P any](ctx context.Context, job *Job[P], name string, timeout time.Duration) (T, bool, error) {
	var zero T
	h := job.handle()
	now := h.clock()
	h.stepMu.Lock()
	defer h.stepMu.Unlock()
	if err := h.ready("signal", name); err != nil {
		return zero, false, err
	}
	if t, ok := h.signalTypes[name]; h.signalTypes != nil && (!ok || t != reflect.TypeFor[T]()) {
		return zero, false, fmt.Errorf("jobs: signal %q: the kind's KindOpts.Signals does not declare it with a payload of type %s", name, reflect.TypeFor[T]())
	}
	i := h.nextStep
	stored := i < len(h.steps) && h.steps[i].Name == name
	var st stepResult
	if stored {
		st = h.steps[i]
		switch st.Signal {
		case 0:
			h.nondeterministic = true
			return zero, false, fmt.Errorf("%w: signal %q was stored as a step or a sleep", errNondeterministic, name)
		case signalTimedOut:
			h.nextStep++
			return zero, false, nil
		}
	} else {
		for _, later := range h.steps[min(i, len(h.steps)):] {
			if later.Name == name {
				h.nondeterministic = true
				return zero, false, fmt.Errorf("%w: signal %q was stored after %q, which this run has not asked for", errNondeterministic, name, h.steps[i].Name)
			}
		}
	}
	// When the wait ends: as stored, or from now for a new one.
	until := time.UnixMilli(st.Until)
	if !stored {
		var err error
		if until, err = h.signalEnd(name, now, timeout); err != nil {
			return zero, false, err
		}
	}
	plain, came, err := h.openSignal(name)
	switch {
	case came && errors.Is(err, errUnknownKey):
		// Sealed under a key this instance lacks (a rotation that has not
		// reached it yet): the job goes back, no attempt spent, for an
		// instance that holds it (waiting_on "key"), as long as its wait
		// lasts (a delivered one: as long as a payload's key is waited
		// for), then fails payload_unreadable.
		deadline := until
		if stored && st.Signal == signalDelivered {
			deadline = time.UnixMilli(st.At).Add(unknownKindGrace)
		}
		if !now.Before(deadline) || h.checkpoint == nil {
			h.unreadable = true
			return zero, false, fmt.Errorf("jobs: signal %q: %w", name, err)
		}
		var state []byte
		if !stored {
			steps := slices.Insert(slices.Clone(h.steps), i, stepResult{Name: name, Until: until.UnixMilli(), Signal: signalWaiting, At: now.UnixMilli()})
			if state, err = h.seal(encodeState(jobState{V: h.resume, Steps: steps})); err != nil {
				return zero, false, fmt.Errorf("jobs: signal %q: %w", name, err)
			}
			h.steps, h.nextStep = steps, i+1
		}
		h.suspend = &suspension{on: waitKey, until: now.Add(unknownKindWait), state: state}
		runtime.Goexit() // stepMu is unlocked by the deferred call
	case came && err != nil:
		h.unreadable = true
		return zero, false, fmt.Errorf("jobs: signal %q: %w", name, err)
	case came:
		v, err := decodePayload[T](plain, maxSignalBytes)
		if err != nil {
			return zero, false, fmt.Errorf("jobs: signal %q: its payload does not decode: %w", name, err)
		}
		// Nothing to store: the signal lasts as long as the job and says
		// the same to every run; the next write of the job's state says
		// the wait is done.
		if stored {
			h.steps[i].Signal, h.steps[i].Until, h.steps[i].At = signalDelivered, 0, now.UnixMilli()
		} else {
			h.steps = slices.Insert(slices.Clone(h.steps), i, stepResult{Name: name, Signal: signalDelivered, At: now.UnixMilli()})
		}
		h.nextStep = i + 1
		return v, true, nil
	case stored && st.Signal == signalDelivered:
		// Stored as delivered, and gone: never, as signals last as long
		// as their job; refuse rather than answer otherwise.
		h.nondeterministic = true
		return zero, false, fmt.Errorf("%w: signal %q was delivered to an earlier run and is gone", errNondeterministic, name)
	case stored && now.Before(until):
		// Woken before its timeout without the signal: wait again.
		h.suspend = &suspension{on: driver.WaitSignalOn(name), until: until}
		runtime.Goexit() // stepMu is unlocked by the deferred call
	case stored:
		// The timeout came first: stored before it is answered, so that a
		// signal delivered from now on changes no later run's answer.
		steps := slices.Clone(h.steps)
		steps[i].Signal, steps[i].Until, steps[i].At = signalTimedOut, 0, now.UnixMilli()
		if h.checkpoint != nil {
			if err := h.checkpoint(ctx, encodeState(jobState{V: h.resume, Steps: steps})); err != nil {
				if errors.Is(err, ErrCancelled) || errors.Is(err, ErrLostClaim) {
					return zero, false, err
				}
				return zero, false, fmt.Errorf("jobs: signal %q: its timeout not stored: %w", name, err)
			}
		}
		h.steps, h.nextStep = steps, i+1
		return zero, false, nil
	case h.checkpoint == nil:
		// A Job built by hand: nothing will come.
		h.steps = slices.Insert(slices.Clone(h.steps), i, stepResult{Name: name, Signal: signalTimedOut, At: now.UnixMilli()})
		h.nextStep = i + 1
		return zero, false, nil
	}
	steps := slices.Insert(slices.Clone(h.steps), i, stepResult{Name: name, Until: until.UnixMilli(), Signal: signalWaiting, At: now.UnixMilli()})
	sealed, err := h.seal(encodeState(jobState{V: h.resume, Steps: steps}))
	if err != nil {
		return zero, false, fmt.Errorf("jobs: signal %q: %w", name, err)
	}
	h.steps, h.nextStep = steps, i+1
	h.suspend = &suspension{on: driver.WaitSignalOn(name), until: until, state: sealed}
	runtime.Goexit() // stepMu is unlocked by the deferred call
	return zero, false, nil
}

// signalEnd is when a new wait for the signal name, of timeout, ends:
// rounded up to the store's millisecond; an error for a timeout out of
// bounds (more than 0, at most MaxDelay, within the kind's MaxRunTime).
func (h *runHandle) signalEnd(name string, now time.Time, timeout time.Duration) (time.Time, error) {
	if timeout <= 0 || timeout > MaxDelay {
		return time.Time{}, fmt.Errorf("jobs: signal %q: timeout %v: want more than 0, at most MaxDelay (%s)", name, timeout, MaxDelay)
	}
	until := now.Add(timeout)
	if t := until.Truncate(time.Millisecond); t.Before(until) {
		until = t.Add(time.Millisecond)
	}
	if !h.runEnd.IsZero() && until.After(h.runEnd) {
		return time.Time{}, fmt.Errorf("jobs: signal %q: its timeout %s is past the kind's MaxRunTime, which ends the job at %s", name,
			until.UTC().Format(time.RFC3339), h.runEnd.UTC().Format(time.RFC3339))
	}
	return until, nil
}

// openSignal opens the job's signal named name: came is false when the
// job has none.
func (h *runHandle) openSignal(name string) (plain []byte, came bool, err error) {
	sealed, came := h.signals[name]
	if !came {
		return nil, false, nil
	}
	if h.open == nil {
		return nil, true, errNoSealer
	}
	plain, err = h.open(name, sealed)
	return plain, true, err
}

// SignalResult is what Service.Signal did.
type SignalResult struct {
	// Duplicate: the job had a signal of that name already, which stands;
	// nothing changed.
	Duplicate bool `json:"duplicate"`
	// Woke: the job was waiting for the signal and is due now.
	Woke bool `json:"woke"`
}

var (
	errUnknownSignal = refuse("unknown_signal", "the job's kind declares no signal of that name")
	errSignalLimit   = refuse("signal_limit", fmt.Sprintf("the job holds %d signals, the most it keeps", maxSignals))
)

// Signal delivers the signal named name, with payload (JSON that decodes
// strictly into the type the job's kind declares for it in
// KindOpts.Signals), to owner's job id: it is stored on the job, sealed,
// and a job whose handler waits for it (WaitForSignal) is made due and
// sent at once. A job whose handler has not asked for it yet keeps it
// until it does. A signal of a name the job has already had is a
// duplicate: it changes nothing (SignalResult.Duplicate), whatever its
// payload. The errors: ErrNotFound for an unknown id or another owner's
// job, a *RequestError "unknown_signal" for a name the kind does not
// declare, a *PayloadError for a payload that does not decode,
// ErrAlreadyFinal for a finished job, a *RequestError "signal_limit" for a
// job that holds 8 signals; nothing is stored for any of them.
func (s *Service) Signal(ctx context.Context, owner, id, name string, payload json.RawMessage) (*SignalResult, error) {
	rec, err := s.get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if err := s.callerActs(rec); err != nil {
		return nil, err
	}
	return s.signal(ctx, rec, name, payload)
}

// signal is Signal on the job rec, as read.
func (s *Service) signal(ctx context.Context, rec *driver.Record, name string, payload json.RawMessage) (*SignalResult, error) {
	id := rec.ID
	k, ok := s.reg.lookup(rec.Kind)
	if !ok {
		return nil, errUnknownSignal // a kind this instance does not register
	}
	t, declared := k.signals[name]
	if !declared {
		return nil, errUnknownSignal
	}
	if _, err := decodeSignal(payload, t); err != nil {
		return nil, err
	}
	if s.sealer == nil {
		return nil, fmt.Errorf("%w: signals are stored sealed: configure a Sealer", ErrUnavailable)
	}
	sealed, err := s.sealer.Seal(payload, signalAAD(id, name))
	if err != nil {
		return nil, fmt.Errorf("%w: seal the signal: %w", ErrUnavailable, err)
	}
	return s.eng.signal(ctx, rec, name, []byte(sealed))
}

// signal stores the signal name, data, on the job rec (as read), and
// wakes the job when it waits for it (Service.Signal; a child's end,
// notifyParent): reading it again when it moved between the read and
// the write.
func (e *engine) signal(ctx context.Context, rec *driver.Record, name string, data []byte) (*SignalResult, error) {
	id := rec.ID
	for try := 0; ; try++ {
		switch {
		case rec.Signals[name] != nil:
			return &SignalResult{Duplicate: true}, nil
		case rec.Status != StatusQueued && rec.Status != StatusRunning:
			return nil, ErrAlreadyFinal
		case !driver.IsChildSignal(name) && driver.CountedSignals(rec.Signals) >= maxSignals:
			return nil, errSignalLimit
		}
		now := e.now()
		sg := driver.Signal{Name: name, Data: data, At: now, Max: maxSignals}
		wake := rec.Status == StatusQueued && rec.WaitingOn == driver.WaitSignalOn(name)
		d := e.deliveryAt(now, now, rec.Lane)
		// Kept apart, it lasts as the job's payload would from here; the
		// claims that read it make it last longer (loadPayload).
		sg.Until = e.payloadUntil(rec, now, rec.RunAt)
		if wake {
			sg.Wake, sg.RunAt, sg.SweepAt = true, now, d.sweepAt
		}
		// A write of ours that landed and whose answer was lost (the SDK
		// tried it again) is no conflict (driver.Signaller).
		err := e.signaller.Signal(ctx, id, sg)
		var ce *driver.ConflictError
		switch {
		case err == nil && wake:
			if err := e.deliver(ctx, rec, d); err != nil {
				// Its sweep time is its safety net.
				e.log.LogAttrs(ctx, slog.LevelWarn, "signalled job not sent; the sweeper will send it", slog.String("job_id", id),
					slog.String("err_types", errtypes.Of(err)))
			}
			return &SignalResult{Woke: true}, nil
		case err == nil:
			return &SignalResult{}, nil
		case errors.As(err, &ce) && ce.Current != nil && try < 3:
			// It moved between the read and the write (a claim, a park):
			// decide again on the job as it is.
			rec = ce.Current
		case errors.Is(err, ErrNotFound):
			return nil, ErrNotFound
		case errors.As(err, &ce):
			return nil, fmt.Errorf("%w: the job kept changing", ErrUnavailable)
		default:
			return nil, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
		}
	}
}

// signalled is park's answer to a park for a signal that did not land
// because the signal came while the run ran: cur is the job as it is.
func signalled(err error, token, on string) bool {
	var ce *driver.ConflictError
	name, ok := driver.SignalWaitedOn(on)
	return ok && errors.As(err, &ce) && ce.Current != nil && ce.Current.Status == StatusRunning &&
		ce.Current.ClaimToken == token && !ce.Current.CancelRequested && ce.Current.Signals[name] != nil
}
