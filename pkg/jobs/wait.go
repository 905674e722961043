package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Waiting for a change (Service.Wait, GET /v1/jobs/{id}/wait): the
// request reads the job every 250 ms (waitPoll) until its version (Version) differs
// from the one the caller saw, or until its wait ends, and answers the job
// as it then is. Each owner's open waits hold a slot of one leased slot
// item (driver.Store.AcquireSlot, the flow-control limits' own
// mechanism), so a wait killed with its function frees its slot when its
// lease ends, never later than the function's timeout.

const (
	// MaxWait is the longest wait a request may ask for: API Gateway
	// ends an integration at 30 s, and the wait function's timeout
	// (internal/deploy) is MaxWait and 5 s more, for the last read, the
	// answer and the slot's release.
	MaxWait = 20 * time.Second
	// waitSlack is how long a wait's slot outlives the wait: its lease,
	// for a wait whose function died before releasing it.
	waitSlack = 5 * time.Second
	// waitPoll is how often a wait reads the job.
	waitPoll = 250 * time.Millisecond
	// DefaultWaitsPerOwner bounds each owner's open waits when
	// Config.WaitsPerOwner is 0.
	DefaultWaitsPerOwner = 20
)

// codeTooManyWaits is the problem code of a wait over its owner's open
// waits.
const codeTooManyWaits = "too_many_waits"

// waitsKeyPrefix prefixes the owners' wait slot items: no kind's
// limit key starts with it (a kind starts with a letter).
const waitsKeyPrefix = "~waits#"

// Version is a short digest of what a caller waits to see change in the
// job: its status, result (partial or final), failure code, attempt, what
// it waits on, its steps and its cancel request, not its payload nor the
// times its writes alone move. GET /v1/jobs/{id} answers it as the ETag;
// Wait compares it.
func (v *View) Version() string {
	c := *v
	c.Payload, c.ResultURL, c.UpdatedAt = nil, "", time.Time{}
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// Wait answers owner's job id as soon as its Version differs from seen
// (the version the caller last saw; "" for the job as Wait first reads
// it), or when d has passed, with the job as it then is; changed says
// which. d is from 1 ms to MaxWait. A job whose version already differs
// is answered at once, at the cost of a read alone.
//
// The owner's open waits are at most Config.WaitsPerOwner: one more is
// refused with a *RequestError of code too_many_waits (HTTP 429,
// Retry-After 1), and the caller reads the job with Get instead. Another
// owner's job and an unknown id give ErrNotFound, as Get does.
func (s *Service) Wait(ctx context.Context, owner, id, seen string, d time.Duration) (_ *View, changed bool, err error) {
	if d <= 0 || d > MaxWait {
		return nil, false, &RequestError{Code: "invalid_request", Detail: fmt.Sprintf("a wait lasts from 1 to %d seconds", int(MaxWait/time.Second))}
	}
	end := time.Now().Add(d)
	rec, err := s.get(ctx, owner, id)
	if err != nil {
		return nil, false, err
	}
	// A result kept in an item of its own is read as Get reads it,
	// before the view (its version covers it), and once per change of
	// it: a poll that finds the same one reuses it.
	results := resultCache{}
	if err := results.fill(ctx, s.eng, rec); err != nil {
		return nil, false, err
	}
	v := s.viewPaused(ctx, rec)
	if seen == "" {
		seen = v.Version()
	}
	if v.Version() != seen {
		return s.full(ctx, rec, v, true)
	}
	release, err := s.holdWait(ctx, owner, d)
	if err != nil {
		return nil, false, err
	}
	defer release()
	t := time.NewTimer(waitPoll)
	defer t.Stop()
	for {
		left := time.Until(end)
		if left <= 0 {
			return s.full(ctx, rec, v, false)
		}
		t.Reset(min(waitPoll, left))
		select {
		case <-ctx.Done():
			return s.full(context.WithoutCancel(ctx), rec, v, false)
		case <-t.C:
		}
		// A slow read ends with the wait: its answer is then the job as
		// last read, on time.
		next, err := s.poll(ctx, owner, id, end, &results)
		if errors.Is(err, ErrNotFound) {
			// Its retention ended while the caller waited.
			return nil, false, err
		}
		if err != nil {
			// One read lost: the next poll reads again.
			continue
		}
		rec, v = next, s.viewPaused(ctx, next)
		if v.Version() != seen {
			return s.full(ctx, rec, v, true)
		}
	}
}

// poll reads owner's job id for a wait that ends at end, with its result
// (results): a slow read ends with the wait.
func (s *Service) poll(ctx context.Context, owner, id string, end time.Time, results *resultCache) (*driver.Record, error) {
	rctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	rec, err := s.get(rctx, owner, id)
	if err != nil {
		return nil, err
	}
	return rec, results.fill(rctx, s.eng, rec)
}

// resultCache is the last result a wait read from its own item, by ref.
type resultCache struct {
	ref    string
	result []byte
}

// fill fills rec's result kept in an item of its own (engine.withResult),
// from the cache when its ref is the one read last.
func (c *resultCache) fill(ctx context.Context, e *engine, rec *driver.Record) error {
	if rec.ResultRef == "" || rec.Result != nil || rec.ResultBytes > 0 {
		return nil
	}
	if rec.ResultRef == c.ref {
		rec.Result = c.result
		return nil
	}
	if err := e.withResult(ctx, rec); err != nil {
		return fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	c.ref, c.result = rec.ResultRef, rec.Result
	return nil
}

// full completes a waited job's view as Get does: its payload and its
// result's link.
func (s *Service) full(ctx context.Context, rec *driver.Record, v View, changed bool) (*View, bool, error) {
	if err := s.eng.withPayload(ctx, rec); err != nil {
		return nil, false, err
	}
	v.Payload = s.payloadView(rec)
	v.ResultURL = s.eng.resultURL(ctx, rec)
	return &v, changed, nil
}

// holdWait takes a slot of owner's open waits for d (and waitSlack
// more: its lease), and returns what frees it.
func (s *Service) holdWait(ctx context.Context, owner string, d time.Duration) (func(), error) {
	key, holder, now := waitsKeyPrefix+wire.OwnerKey(owner), s.eng.newID(), s.clock.Now()
	state, err := s.store.AcquireSlot(ctx, key, driver.SlotClaim{Holder: holder, Max: s.waitsPerOwner, LeaseUntil: now.Add(d + waitSlack), At: now})
	if err != nil {
		return nil, fmt.Errorf("%w: open waits: %w", ErrUnavailable, err)
	}
	if state != driver.SlotHeld {
		return nil, &RequestError{Code: codeTooManyWaits, Detail: fmt.Sprintf("you have %d waits open, this deployment's most per caller; read the job instead, or wait again after the Retry-After seconds", s.waitsPerOwner),
			retryAfter: time.Second}
	}
	return func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		// A release that fails leaves the slot to its lease.
		_, _ = s.store.ReleaseSlot(rctx, key, holder)
	}, nil
}
