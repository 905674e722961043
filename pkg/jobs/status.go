package jobs

import (
	"fmt"
	"regexp"
)

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
	// CodePayloadUnreadable: a secret field of the stored payload cannot
	// be opened with the worker's key ring (the key that sealed it was
	// dropped from the ring too early, or the worker was given another
	// ring): the payload itself may be fine (docs/operations/OPERATIONS.md "The
	// payload key").
	CodePayloadUnreadable = "payload_unreadable"
	// CodeTimedOut: the handler did not return before its deadline.
	CodeTimedOut = "timed_out"
	// CodeInterrupted: the worker running the job died or lost its lease
	// before recording an outcome, or could not store a result kept as an
	// object in the run's time.
	CodeInterrupted = "interrupted"
	// CodeResultTooLarge: the result's public JSON exceeds [MaxResultBytes].
	CodeResultTooLarge = "result_too_large"
	// CodeExpired: the job was cancelled because it had not started by its
	// EnqueueOpts.StartBy.
	CodeExpired = "expired"
	// CodeDependencyFailed: the job was cancelled because a job it runs
	// after (EnqueueOpts.After) failed or was cancelled.
	CodeDependencyFailed = "dependency_failed"
)

var reservedCodes = map[string]bool{
	CodeInternal:          true,
	CodeUnknownKind:       true,
	CodeInvalidPayload:    true,
	CodePayloadUnreadable: true,
	CodeTimedOut:          true,
	CodeInterrupted:       true,
	CodeResultTooLarge:    true,
	CodeExpired:           true,
	CodeDependencyFailed:  true,
	CodeNondeterministic:  true,
}

// The patterns bound their length apart: a counted repetition ({0,63})
// compiles into that many copies, which every cold start paid for.
var codePattern = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// validCode reports whether code has the shape of a failure code:
// lower-case snake case, at most 64 characters.
func validCode(code string) bool { return len(code) <= 64 && codePattern.MatchString(code) }

var kindPattern = regexp.MustCompile(`^[a-z][a-z0-9_.\-]*$`)

// validKind reports whether name can name a job kind: a lower-case letter,
// then up to 99 lower-case letters, digits, '.', '_' or '-'
// (for example "email.send" or "report_build").
func validKind(name string) bool { return len(name) <= 100 && kindPattern.MatchString(name) }

func checkCode(code string) error {
	if !validCode(code) {
		return fmt.Errorf("%w: %q is not lower-case snake case (^[a-z][a-z0-9_]{0,63}$)", errInvalidCode, code)
	}
	if reservedCodes[code] {
		return fmt.Errorf("%w: %q is reserved for the runner", errInvalidCode, code)
	}
	return nil
}
