package jobs

import "errors"

// Failure is the error a handler returns to fail its job with a code the
// kind declared at registration (see [KindOpts].FailureCodes).
//
// Only Code is stored and returned by the API. Err is for the handler's own
// use (errors.Is/As in tests, say); its text is never stored, returned or
// logged by this package, so it may safely quote URLs, tokens or bodies.
type Failure struct {
	Code string
	Err  error
}

// Fail returns a *Failure with the given code, wrapping err (which may be nil).
func Fail(code string, err error) error { return &Failure{Code: code, Err: err} }

// Error returns the failure code only, never Err's text.
func (f *Failure) Error() string { return "job failed: " + f.Code }

// Unwrap returns the wrapped error.
func (f *Failure) Unwrap() error { return f.Err }

// Registration errors: start-up code does not branch on them, so they are
// descriptive only (their text names what is wrong).
var (
	errInvalidKind    = errors.New("jobs: invalid kind name")
	errDuplicateKind  = errors.New("jobs: kind already registered")
	errNilHandler     = errors.New("jobs: nil handler")
	errInvalidCode    = errors.New("jobs: invalid failure code")
	errRegistryFrozen = errors.New("jobs: registry is in use; register every kind before using it")
)
