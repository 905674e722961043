package jobs

import (
	"errors"
	"fmt"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// The errors a caller can branch on, with errors.Is. Every other error is
// descriptive only: a registration mistake names itself, and a failure of
// DynamoDB or SQS matches ErrUnavailable.
var (
	// ErrNotFound: no such job (or batch, or schedule) for this owner, or
	// it expired.
	ErrNotFound = driver.ErrNotFound
	// ErrInvalidRequest matches every error caused by the request itself:
	// a *RequestError or a *PayloadError. Nothing was stored.
	ErrInvalidRequest = errors.New("jobs: invalid request")
	// ErrInvalidPayload matches every *PayloadError: the payload does not
	// decode into the kind's payload type, or breaks a limit.
	ErrInvalidPayload = errors.New("jobs: invalid payload")
	// ErrIdempotencyConflict: the idempotency key was used before for a
	// different request.
	ErrIdempotencyConflict = errors.New("jobs: idempotency key reused with a different request")
	// ErrAlreadyFinal: Cancel found the job already finished.
	ErrAlreadyFinal = errors.New("jobs: job already finished")
	// ErrNotResubmittable: Resubmit found the job neither failed nor
	// cancelled, part of a batch, or with a handler of its last run that
	// may still be running.
	ErrNotResubmittable = errors.New("jobs: only a failed or cancelled job outside a batch can be retried")
	// ErrUnavailable wraps a failure of DynamoDB, SQS or Scheduler: the
	// caller may retry (with the same idempotency key).
	ErrUnavailable = errors.New("jobs: a dependency is unavailable")
	// ErrCancelled is what Job.Publish returns once the job's owner
	// cancelled it; the handler's context is cancelled at the same time.
	ErrCancelled = errors.New("jobs: job cancelled by its owner")
	// ErrLostClaim is what Job.Publish returns when this run no longer owns
	// its job (it timed out, or a sweeper failed it): the handler should
	// stop.
	ErrLostClaim = errors.New("jobs: claim lost")
	// ErrScheduleExists: the owner has a schedule of that name with
	// another definition.
	ErrScheduleExists = errors.New("jobs: a schedule of that name exists")
	// ErrQueueFull matches every *QueueFullError: the kind's queued jobs
	// (or the owner's of the kind) are at its cap (KindOpts.MaxQueued,
	// MaxQueuedPerOwner). Nothing was stored; retry later.
	ErrQueueFull = errors.New("jobs: the kind's queue is at its cap")
	// ErrScheduleUnconfirmed comes with ErrUnavailable from
	// ScheduleService.Create when Scheduler did not confirm the schedule
	// and its definition is kept: the schedule is listed, the same request
	// again completes it, and Delete removes it wherever it is. Without it,
	// an ErrUnavailable from Create kept nothing.
	ErrScheduleUnconfirmed = errors.New("jobs: Scheduler did not confirm the schedule; its definition is kept")
)

// RequestError is a request refused for what it says. It matches
// ErrInvalidRequest. Detail describes only the caller's own input, so it is
// safe to return to the caller.
type RequestError struct {
	// Code is stable: "invalid_request", "unknown_kind",
	// "invalid_idempotency_key", "schedule_limit" or "rate_limited" (the
	// HTTP API's problem codes).
	Code   string
	Detail string
	// retryAfter is when to try again, for a refusal that passes
	// (rate_limited).
	retryAfter time.Duration
}

func (e *RequestError) Error() string { return "jobs: " + e.Code + ": " + e.Detail }

// RetryAfter is how long until the same request may be accepted, for a
// refusal that passes ("rate_limited": the caller is over
// Config.EnqueueRatePerOwner); 0 for any other.
func (e *RequestError) RetryAfter() time.Duration { return e.retryAfter }

// Is reports whether target is ErrInvalidRequest.
func (e *RequestError) Is(target error) bool { return target == ErrInvalidRequest }

const (
	codeInvalidRequest = "invalid_request"
	codeUnknownKind    = "unknown_kind"
)

// refuse returns a *RequestError.
func refuse(code, detail string) error { return &RequestError{Code: code, Detail: detail} }

// errUnknownKind is the error of a request naming a kind nobody registered.
var errUnknownKind = refuse(codeUnknownKind, "no job kind of that name is registered")

var (
	errOwner     = refuse(codeInvalidRequest, "the caller identity cannot name a job owner")
	errPageToken = refuse(codeInvalidRequest, "the page token is malformed, or was given for another caller, another filter or another batch")
)

// QueueFullError is an enqueue refused because the kind's queued jobs
// are at a cap: KindOpts.MaxQueued (every owner's) or, with PerOwner,
// MaxQueuedPerOwner (the caller's). It matches ErrQueueFull; nothing was
// stored. RetryAfter is when the count is read again (at least a second).
type QueueFullError struct {
	Kind       string
	Cap        int
	PerOwner   bool
	RetryAfter time.Duration
}

func (e *QueueFullError) Error() string {
	if e.PerOwner {
		return fmt.Sprintf("jobs: the owner's queued jobs of kind %q are at the kind's cap of %d per owner", e.Kind, e.Cap)
	}
	return fmt.Sprintf("jobs: the queued jobs of kind %q are at the kind's cap", e.Kind)
}

// Is reports whether target is ErrQueueFull.
func (e *QueueFullError) Is(target error) bool { return target == ErrQueueFull }
