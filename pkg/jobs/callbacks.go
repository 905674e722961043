package jobs

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
)

// Callback tokens. A third party without AWS credentials (a payment
// provider's webhook, a carrier's shipping notice) delivers a signal with
// a token the handler made (Job.CallbackToken): POST /v1/callbacks/{token}
// with the signal's payload, the API's only route without a caller
// identity. The token is the job's id and creation, the signal's name
// and an expiry, sealed under the payload key ring (AES-GCM: authenticated), so a forged,
// altered or expired token is refused before anything is read; it is
// used once, by the signal's own conditional write (a job keeps the first
// signal of each name). docs/guide/LONG_RUNS.md, "Callback tokens".

// callbackPrefix starts every callback token (its version).
const callbackPrefix = "cb1."

// callbackAAD binds a token's seal to its use.
var callbackAAD = []byte("lambdajobs-callback")

// callback is what a callback token says: the job (its id and when it
// was created, so a later job under the same id, once this one's
// retention ended, does not take it), the signal, the expiry.
type callback struct {
	Job     string `json:"j"`
	Created int64  `json:"c"` // Unix milliseconds
	Name    string `json:"n"`
	Expiry  int64  `json:"e"` // Unix milliseconds
}

var (
	errInvalidToken = refuse("invalid_token", "the callback token is malformed, altered, or not this deployment's")
	errTokenExpired = refuse("token_expired", "the callback token has expired")
	errTokenUsed    = refuse("token_used", "the callback token was used: the job has that signal already")
)

// CallbackToken returns a token that delivers the signal named name (one
// the kind declares in KindOpts.Signals) to this job without AWS
// credentials or a caller identity, through POST /v1/callbacks/{token},
// until ttl (at most MaxDelay) has passed: give it, in a URL, to a third
// party whose answer the handler waits for (WaitForSignal). The token is
// sealed under the payload key ring, never stored, and used once: the
// first delivery of the signal stands, and any later one, by this token
// or another for the same signal, is refused (409 token_used). Make it
// inside the Step that hands it over, so a run that repeats the step
// hands over a token that works as well. On a Job built by hand (a
// handler's unit test), it returns a placeholder that names the signal.
func (j *Job[P]) CallbackToken(name string, ttl time.Duration) (string, error) {
	if ttl <= 0 || ttl > MaxDelay {
		return "", fmt.Errorf("jobs: callback token for %q: ttl %v: want more than 0, at most MaxDelay (%s)", name, ttl, MaxDelay)
	}
	if j.h == nil || j.h.sealToken == nil {
		return "callback-token-for-" + name, nil
	}
	if _, ok := j.h.signalTypes[name]; !ok {
		return "", fmt.Errorf("jobs: callback token for %q: the kind's KindOpts.Signals does not declare it", name)
	}
	now := time.Now()
	if j.h.now != nil {
		now = j.h.now()
	}
	raw, _ := json.Marshal(callback{Job: j.ID, Created: j.CreatedAt.UnixMilli(), Name: name, Expiry: now.Add(ttl).UnixMilli()})
	sealed, err := j.h.sealToken(raw)
	if err != nil {
		return "", fmt.Errorf("jobs: callback token for %q: %w", name, err)
	}
	return callbackPrefix + base64.RawURLEncoding.EncodeToString([]byte(sealed)), nil
}

// openCallback opens a callback token: errInvalidToken for one that is
// not this deployment's, errTokenExpired past its expiry.
func (s *Service) openCallback(token string, now time.Time) (callback, error) {
	var c callback
	rest, ok := strings.CutPrefix(token, callbackPrefix)
	if !ok || s.sealer == nil || len(rest) > 1024 {
		return c, errInvalidToken
	}
	sealed, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return c, errInvalidToken
	}
	plain, err := s.sealer.Open(string(sealed), callbackAAD)
	if errors.Is(err, errUnknownKey) {
		// Sealed by a worker under a key this instance lacks yet (a
		// rotation on its way): a retry later succeeds.
		return c, fmt.Errorf("%w: the token's key is not in this instance's ring yet", ErrUnavailable)
	}
	if err != nil || json.Unmarshal(plain, &c) != nil || !wire.ValidID(c.Job) {
		return c, errInvalidToken
	}
	if now.UnixMilli() >= c.Expiry {
		return c, errTokenExpired
	}
	return c, nil
}

// Callback delivers the signal a callback token names (Job.CallbackToken)
// to its job, as its owner would (Service.Signal), without a caller:
// the token is the authority. It is refused before anything is read when
// the token is not this deployment's (a *RequestError "invalid_token") or
// has expired ("token_expired"), and once its signal was delivered
// ("token_used": the first delivery stands); a job that ended or is gone
// is ErrAlreadyFinal or ErrNotFound; a payload is checked as
// Service.Signal checks it. Nothing is stored for any refusal.
func (s *Service) Callback(ctx context.Context, token string, payload json.RawMessage) (*SignalResult, error) {
	c, err := s.openCallback(token, s.eng.now())
	if err != nil {
		return nil, err
	}
	rec, err := s.store.Get(ctx, c.Job)
	switch {
	case errors.Is(err, ErrNotFound), err == nil && rec.CreatedAt.UnixMilli() != c.Created:
		// Gone, or another job under its id: the token's job is gone.
		return nil, ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	res, err := s.signal(ctx, rec, c.Name, payload)
	if err == nil && res.Duplicate {
		return nil, errTokenUsed
	}
	return res, err
}
