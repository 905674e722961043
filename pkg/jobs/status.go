package jobs

import (
	"fmt"
	"regexp"
)

// Status is where a job is in its life: queued -> running (a claim), then
// succeeded, failed or cancelled (the final write), or back to queued for a
// retry; a queued job can also be cancelled. Each transition is one
// conditional write in the [Store]; docs/STATE_MACHINE.md draws them.
type Status string

// The statuses a job can have.
const (
	StatusQueued    Status = "queued"
	StatusRunning   Status = "running"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
)

// Final reports whether s is a final status: nothing changes a job after it.
func (s Status) Final() bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusCancelled
}

// Valid reports whether s is one of the statuses above.
func (s Status) Valid() bool {
	switch s {
	case StatusQueued, StatusRunning, StatusSucceeded, StatusFailed, StatusCancelled:
		return true
	}
	return false
}

// Reserved failure codes. The runner records these itself; a kind cannot
// declare them, and a handler returning one is an internal error.
const (
	// CodeInternal: the handler returned an error that is not a declared
	// [Failure], panicked, returned an undeclared code, or returned a result
	// whose public JSON is invalid.
	CodeInternal = "internal_error"
	// CodeUnknownKind: no handler is registered for the job's kind.
	CodeUnknownKind = "unknown_kind"
	// CodeInvalidPayload: the stored payload no longer decodes into the
	// kind's payload type (the type changed after the job was enqueued).
	CodeInvalidPayload = "invalid_payload"
	// CodeTimedOut: the handler did not return before its deadline.
	CodeTimedOut = "timed_out"
	// CodeInterrupted: the worker running the job died or lost its lease
	// before recording an outcome.
	CodeInterrupted = "interrupted"
	// CodeResultTooLarge: the result's public JSON exceeds [MaxResultBytes].
	CodeResultTooLarge = "result_too_large"
)

var reservedCodes = map[string]bool{
	CodeInternal:       true,
	CodeUnknownKind:    true,
	CodeInvalidPayload: true,
	CodeTimedOut:       true,
	CodeInterrupted:    true,
	CodeResultTooLarge: true,
}

// IsReservedCode reports whether code is one of the runner's own codes.
func IsReservedCode(code string) bool { return reservedCodes[code] }

// ReservedCodes returns the runner's reserved failure codes.
func ReservedCodes() []string {
	return []string{CodeInternal, CodeUnknownKind, CodeInvalidPayload, CodeTimedOut, CodeInterrupted, CodeResultTooLarge}
}

var codePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// ValidCode reports whether code has the shape of a failure code:
// lower-case snake case, at most 64 characters.
func ValidCode(code string) bool { return codePattern.MatchString(code) }

var kindPattern = regexp.MustCompile(`^[a-z][a-z0-9_.\-]{0,99}$`)

// ValidKind reports whether name can name a job kind: a lower-case letter,
// then up to 99 lower-case letters, digits, '.', '_' or '-'
// (for example "email.send" or "report_build").
func ValidKind(name string) bool { return kindPattern.MatchString(name) }

func checkCode(code string) error {
	if !ValidCode(code) {
		return fmt.Errorf("%w: %q is not lower-case snake case (^[a-z][a-z0-9_]{0,63}$)", ErrInvalidCode, code)
	}
	if IsReservedCode(code) {
		return fmt.Errorf("%w: %q is reserved for the runner", ErrInvalidCode, code)
	}
	return nil
}
