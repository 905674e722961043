package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/errtypes"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

var (
	errPayload   = errors.New("payload does not decode")
	errNilResult = errors.New("handler returned a nil result")
)

// execution is the outcome of running a handler once, before it is written.
type execution struct {
	Status Status // succeeded or failed
	Result []byte // public JSON of the result (succeeded only)
	// Staged names Result's object when it was written ahead of the final
	// write (engine.stageResult).
	Staged driver.Staged
	Code   string // failure code (failed only)
	// Cause and ErrTypes say why, for logs. They never carry error text:
	// Cause is one of a fixed set of words, ErrTypes lists the Go types of
	// the error chain, Stack the function names of a panic.
	Cause    string
	ErrTypes string
	Stack    string
	// Retryable is set when the handler marked its error with Retry;
	// RetryDelay is the delay it asked for (0: the policy's backoff).
	Retryable  bool
	RetryDelay time.Duration
	// Abandoned is set when the handler did not return by its deadline:
	// it may still be running until the run's lease ends, so no other run
	// of the job may start before then.
	Abandoned bool
	// Continue is set when the run asked to go on in a new invocation
	// (Continue, or KindOpts.AutoContinue); Checkpoint is the sealed
	// checkpoint to store with it (nil: keep the last).
	Continue   bool
	Checkpoint []byte
	// WaitOn is set when the handler suspended (Sleep): the job waits on
	// it until WaitUntil, with Checkpoint (nil: keep the last), no
	// attempt spent.
	WaitOn    string
	WaitUntil time.Time
	// Marks are the run's steps as the job's views show them, to store
	// with its outcome, park or continuation ("" without steps).
	Marks string
}

// runHandler runs the kind's handler for rec (execute) in the calling
// goroutine and sends its execution on done, however the handler's
// goroutine ends: a handler that suspended (Sleep ends its goroutine with
// runtime.Goexit once the suspension is recorded in h) is sent its park;
// one that called runtime.Goexit itself fails CodeInternal, and so does
// one that returned after a Sleep suspended on another of its goroutines
// (the park's state would not be the run's).
func (k *kindDef) runHandler(ctx context.Context, rec *driver.Record, sealer Sealer, h *runHandle, done chan<- execution) {
	var ex execution
	returned := false
	defer func() {
		s := h.suspension()
		switch {
		case s != nil && !returned:
			ex = s.execution()
		case s != nil && (ex.Status != StatusFailed || ex.Cause != "panic"):
			ex = execution{Status: StatusFailed, Code: CodeInternal, Cause: "sleep_off_goroutine"}
		case !returned:
			ex = execution{Status: StatusFailed, Code: CodeInternal, Cause: "goexit"}
		}
		ex.Marks = h.marks()
		done <- ex
	}()
	ex = k.execute(ctx, rec, sealer, h)
	returned = true
}

// execute runs the kind's handler for rec and maps what it returns to an
// outcome. A panic becomes CodeInternal with the stack's function names
// (never the panic value).
func (k *kindDef) execute(ctx context.Context, rec *driver.Record, sealer Sealer, h *runHandle) (ex execution) {
	defer func() {
		if p := recover(); p != nil {
			ex = execution{Status: StatusFailed, Code: CodeInternal, Cause: "panic", Stack: stackFrames(3)}
		}
	}()
	payload, err := openPayload(sealer, rec.ID, k.secrets, rec.Payload)
	if err != nil {
		return execution{Status: StatusFailed, Code: CodePayloadUnreadable, Cause: "unseal"}
	}
	r, err := k.run(ctx, rec, payload, h)
	var cont *continuation
	switch {
	case h != nil && h.nondeterministic, errors.Is(err, errNondeterministic):
		// Whatever the handler made of it: never a silent success.
		return execution{Status: StatusFailed, Code: CodeNondeterministic, Cause: "nondeterministic"}
	case h != nil && h.unreadable:
		// A signal it waited for could not be opened.
		return execution{Status: StatusFailed, Code: CodePayloadUnreadable, Cause: "unseal"}
	case errors.As(err, &cont):
		ex := execution{Continue: true, Cause: "continue"}
		if cont.v != nil {
			raw, err := json.Marshal(cont.v)
			if err == nil {
				st := jobState{V: raw}
				if h != nil {
					st.Steps = h.steps
				}
				ex.Checkpoint, err = sealCheckpoint(sealer, rec.ID, encodeState(st))
			}
			if err != nil {
				return execution{Status: StatusFailed, Code: CodeInternal, Cause: "checkpoint", ErrTypes: errtypes.Of(err)}
			}
		}
		return ex
	case err != nil && k.autoContinue && ctx.Err() == context.DeadlineExceeded && errors.Is(err, context.DeadlineExceeded):
		return execution{Continue: true, Cause: "auto_continue"}
	case err != nil:
		return k.classify(ctx, err)
	}
	body, code := publicJSON(r, k.maxResult)
	if code != "" {
		return execution{Status: StatusFailed, Code: code, Cause: "bad_result"}
	}
	return execution{Status: StatusSucceeded, Result: body, Cause: "ok"}
}

func (k *kindDef) classify(ctx context.Context, err error) execution {
	var re *RetryableError
	if errors.As(err, &re) {
		ex := k.classify(ctx, re.Err)
		if ex.Code == CodeInternal && ex.Cause == "error" && re.Err == nil {
			ex.Cause = "retry"
		}
		ex.Retryable, ex.RetryDelay = true, re.Delay
		return ex
	}
	if err == nil {
		return execution{Status: StatusFailed, Code: CodeInternal, Cause: "retry"}
	}
	switch {
	case errors.Is(err, errPayload):
		return execution{Status: StatusFailed, Code: CodeInvalidPayload, Cause: "payload"}
	case errors.Is(err, errNilResult):
		return execution{Status: StatusFailed, Code: CodeInternal, Cause: "nil_result"}
	}
	var f *Failure
	if errors.As(err, &f) {
		if k.codes[f.Code] {
			return execution{Status: StatusFailed, Code: f.Code, Cause: "declared"}
		}
		return execution{Status: StatusFailed, Code: CodeInternal, Cause: "undeclared_code", ErrTypes: errtypes.Of(err)}
	}
	if ctx.Err() != nil && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		return execution{Status: StatusFailed, Code: CodeTimedOut, Cause: "deadline"}
	}
	return execution{Status: StatusFailed, Code: CodeInternal, Cause: "error", ErrTypes: errtypes.Of(err)}
}

// publicJSON returns r's public JSON, compacted, or the reserved code that
// refuses it: past maxBytes, CodeResultTooLarge.
func publicJSON(r Result, maxBytes int) (body []byte, code string) {
	defer func() {
		if recover() != nil {
			body, code = nil, CodeInternal
		}
	}()
	if isNil(r) {
		return nil, CodeInternal
	}
	raw, err := r.PublicJSON()
	if err != nil {
		return nil, CodeInternal
	}
	if len(raw) > 4*maxBytes {
		return nil, CodeResultTooLarge
	}
	if !json.Valid(raw) {
		return nil, CodeInternal
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, CodeInternal
	}
	if buf.Len() > maxBytes {
		return nil, CodeResultTooLarge
	}
	return buf.Bytes(), ""
}

// stackFrames returns the function names and lines of the current stack,
// skipping skip frames: a panic's location without its value.
func stackFrames(skip int) string {
	pcs := make([]uintptr, 32)
	n := runtime.Callers(skip, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	var b strings.Builder
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, "runtime.") {
			if b.Len() > 0 {
				b.WriteString(" < ")
			}
			fmt.Fprintf(&b, "%s:%d", f.Function, f.Line)
		}
		if !more || b.Len() > 2000 {
			break
		}
	}
	return b.String()
}
