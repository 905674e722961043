package jobs

import (
	"errors"
	"time"
)

// RetryPolicy says how a kind retries. The zero policy never retries: a
// failure is final, as it was before retries existed.
type RetryPolicy struct {
	// MaxAttempts is the most runs a job gets, the first included
	// (0 or 1: no retry).
	MaxAttempts int
	// BaseDelay is the backoff before the second attempt (default 5s); it
	// doubles for each further attempt, with jitter, up to MaxDelay
	// (default 15 minutes).
	BaseDelay time.Duration
	MaxDelay  time.Duration
	// RetryErrors also retries plain errors and panics (internal_error),
	// not only errors the handler marks with Retry. Timed-out and
	// interrupted runs are always retried while attempts remain.
	RetryErrors bool
}

// check checks p's bounds.
func (p RetryPolicy) check() error {
	if p.MaxAttempts < 0 || p.MaxAttempts > 100 {
		return errors.New("retry policy: MaxAttempts must be 0..100")
	}
	if p.BaseDelay < 0 || p.MaxDelay < 0 {
		return errors.New("retry policy: delays must not be negative")
	}
	return nil
}

// backoff returns the wait before the attempt after attempt (1-based):
// BaseDelay * 2^(attempt-1), capped at MaxDelay, with "equal jitter" (half
// fixed, half random) so that retries of many jobs spread out.
func (p RetryPolicy) backoff(attempt int, r Rand) time.Duration {
	base, max := p.BaseDelay, p.MaxDelay
	if base <= 0 {
		base = 5 * time.Second
	}
	if max <= 0 {
		max = 15 * time.Minute
	}
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	d = min(d, max)
	half := d / 2
	return half + time.Duration(r.Int64N(int64(half)+1))
}

// RetryableError marks a handler error as worth another attempt (see Retry
// and RetryAfter). If it wraps a *Failure, the Failure's code is what the
// job fails with once its attempts are exhausted (internal_error otherwise).
type RetryableError struct {
	Err   error
	Delay time.Duration // 0: the policy's backoff
}

func (e *RetryableError) Error() string { return "retryable: " + errorCodeOf(e.Err) }
func (e *RetryableError) Unwrap() error { return e.Err }

func errorCodeOf(err error) string {
	var f *Failure
	if errors.As(err, &f) {
		return f.Code
	}
	return CodeInternal
}

// Retry marks err as retryable after the kind's backoff. Without a retry
// policy allowing another attempt, the job fails as if err were returned.
func Retry(err error) error { return &RetryableError{Err: err} }

// RetryAfter marks err as retryable after d (for example a rate limit's
// Retry-After).
func RetryAfter(d time.Duration, err error) error { return &RetryableError{Err: err, Delay: d} }

// shouldRetry reports whether a failed run gets another attempt.
func shouldRetry(p RetryPolicy, ex execution, attempt int) bool {
	if p.MaxAttempts <= 1 || attempt >= p.MaxAttempts {
		return false
	}
	switch {
	case ex.Retryable:
		return true
	case ex.Cause == "max_run_time":
		return false // past the kind's longest run: another attempt would be too
	case ex.Code == CodeTimedOut || ex.Code == CodeInterrupted:
		return true
	case p.RetryErrors && ex.Code == CodeInternal && (ex.Cause == "error" || ex.Cause == "panic"):
		return true
	}
	return false
}
