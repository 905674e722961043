package jobs

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// The enqueue rate per owner (Config.EnqueueRatePerOwner): each
// request that makes jobs (Enqueue, EnqueueBatch, Replay) takes a token
// from its owner's token bucket, only when one is due
// (driver.TokenBucket.IfDue: a refusal reserves nothing, so an owner over
// its rate gets its rate, never less). A rate of r is spread over
// ceil(r/startsPerBucket) bucket items, each of its share, and a request
// takes from one at random: no item takes more than startsPerBucket
// granted writes a second however high the rate. A refused owner is
// refused by this instance without a write for refusalWindow (or until
// its token is due, if later), so a flood costs at most one refused
// write per owner per instance a second, not one per request.

// codeRateLimited is the problem code of a request over its owner's rate.
const codeRateLimited = "rate_limited"

// enqueueBucketPrefix prefixes the enqueue buckets' keys: no kind's
// bucket key starts with it (a kind starts with a letter).
const enqueueBucketPrefix = "~enqueue#"

// refusalWindow is how long an instance refuses an owner it was refused
// for without asking the store again: the Retry-After it answers is whole
// seconds anyway.
const refusalWindow = time.Second

// rateRefusals are an instance's refused owners, until when (bounded:
// past maxCapCounts it forgets them all).
type rateRefusals struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// checkEnqueueRate takes a token of owner's enqueue rate, or refuses the
// request with a *RequestError (code rate_limited, RetryAfter set).
func (s *Service) checkEnqueueRate(ctx context.Context, owner string) error {
	if s.enqueueRate <= 0 {
		return nil
	}
	ownerKey, now := wire.OwnerKey(owner), s.clock.Now()
	s.refusals.mu.Lock()
	until, refused := s.refusals.until[ownerKey]
	s.refusals.mu.Unlock()
	if refused && now.Before(until) {
		return rateLimited(until.Sub(now))
	}
	shards := int(math.Ceil(s.enqueueRate / startsPerBucket))
	key := enqueueBucketPrefix + ownerKey + "#" + strconv.Itoa(int(s.eng.rand.Int64N(int64(shards))))
	share := s.enqueueRate / float64(shards)
	wait, err := s.store.TakeToken(ctx, key, driver.TokenBucket{PerSecond: share, Burst: max(1, share), At: now, IfDue: true})
	if err != nil {
		return fmt.Errorf("%w: enqueue rate: %w", ErrUnavailable, err)
	}
	if wait <= 0 {
		return nil
	}
	s.refusals.mu.Lock()
	if s.refusals.until == nil || len(s.refusals.until) >= maxCapCounts {
		s.refusals.until = map[string]time.Time{}
	}
	s.refusals.until[ownerKey] = now.Add(max(wait, refusalWindow))
	s.refusals.mu.Unlock()
	return rateLimited(wait)
}

func rateLimited(wait time.Duration) error {
	return &RequestError{Code: codeRateLimited, Detail: "your requests that make jobs are over this deployment's rate per caller; retry after the Retry-After seconds",
		retryAfter: wait}
}
