package jobs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/metricnames"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Caps on queued jobs (KindOpts.MaxQueued, MaxQueuedPerOwner): an enqueue
// of a capped kind counts the kind's queued jobs, and the owner's, from
// indexes that hold only queued jobs (driver.QueueCounter), and refuses
// jobs that would pass a cap with a *QueueFullError before it stores
// anything. A count is kept for capWindow and what this instance accepts
// meanwhile is added to it, so an instance reads each count about once a
// second however many jobs it enqueues, and a cap holds within what the
// other instances accept in that window (and the indexes' lag, usually
// well under a second). A kind without a cap counts nothing and writes
// nothing more.

// queueCaps are a kind's caps on its queued jobs (0: none).
type queueCaps struct{ kind, perOwner int }

func (c queueCaps) any() bool { return c.kind > 0 || c.perOwner > 0 }

// capWindow is how long an instance uses a count of queued jobs before
// it reads it again: how approximate a cap is.
const capWindow = time.Second

// maxCapCounts bounds the counts an instance keeps (one per capped kind,
// and one per owner of a kind capped per owner); past it, it forgets
// them all.
const maxCapCounts = 4096

// capCounts are an instance's counts of queued jobs, by kind and owner.
type capCounts struct {
	mu sync.Mutex
	m  map[string]*capCount
}

type capCount struct {
	n  int       // queued when counted, and what this instance accepted since
	at time.Time // when counted
}

func capKey(kind, ownerKey string) string { return kind + "\x00" + ownerKey }

// checkCaps refuses n more queued jobs of k for owner when they would pass
// one of k's caps, with a *QueueFullError; ErrUnavailable when a count
// could not be read.
func (s *Service) checkCaps(ctx context.Context, k *kindDef, owner string, n int) error {
	if k.caps.kind > 0 {
		if err := s.checkCap(ctx, k.name, "", k.caps.kind, n); err != nil {
			return err
		}
	}
	if k.caps.perOwner > 0 {
		if err := s.checkCap(ctx, k.name, wire.OwnerKey(owner), k.caps.perOwner, n); err != nil {
			return err
		}
	}
	return nil
}

// checkCap refuses n more of kind's queued jobs (the owner's whose key is
// ownerKey, "" for every owner's) when they would pass limit.
func (s *Service) checkCap(ctx context.Context, kind, ownerKey string, limit, n int) error {
	key := capKey(kind, ownerKey)
	now := s.clock.Now()
	s.capCounts.mu.Lock()
	c := s.capCounts.m[key]
	fresh := c != nil && !now.Before(c.at) && now.Sub(c.at) < capWindow
	var queued int
	var at time.Time
	if fresh {
		queued, at = c.n, c.at
	}
	s.capCounts.mu.Unlock()
	if !fresh {
		got, err := s.counter.CountQueued(ctx, driver.QueueCount{Kind: kind, OwnerKey: ownerKey, Limit: limit})
		if err != nil {
			return fmt.Errorf("%w: store: %w", ErrUnavailable, err)
		}
		queued, at = got, now
		s.capCounts.mu.Lock()
		if s.capCounts.m == nil || len(s.capCounts.m) >= maxCapCounts {
			s.capCounts.m = map[string]*capCount{}
		}
		s.capCounts.m[key] = &capCount{n: got, at: now}
		s.capCounts.mu.Unlock()
	}
	if queued+n <= limit {
		return nil
	}
	s.count(kind, metricnames.JobsRefused, n)
	retry := max(time.Second, (capWindow - now.Sub(at)).Round(time.Second))
	return &QueueFullError{Kind: kind, Cap: limit, PerOwner: ownerKey != "", RetryAfter: retry}
}

// noteQueued adds n jobs of k this instance stored for owner to its
// counts, so its next enqueues within the window see them.
func (s *Service) noteQueued(k *kindDef, owner string, n int) {
	if !k.caps.any() {
		return
	}
	s.capCounts.mu.Lock()
	defer s.capCounts.mu.Unlock()
	for _, key := range []string{capKey(k.name, ""), capKey(k.name, wire.OwnerKey(owner))} {
		if c := s.capCounts.m[key]; c != nil {
			c.n += n
		}
	}
}

// replaysAtCap reports whether an enqueue refused at a cap (err) is the
// retry of one that was accepted: with an idempotency key, its job (id)
// is stored already, and the enqueue answers with it rather than 429.
// One read, on the refusal only.
func (s *Service) replaysAtCap(ctx context.Context, err error, key, id string) bool {
	if key == "" || !errors.Is(err, ErrQueueFull) {
		return false
	}
	_, gerr := s.store.Get(ctx, id)
	return gerr == nil
}

// capsNeedCounter refuses a registry with a capped kind over a store
// that cannot count queued jobs.
func capsNeedCounter(reg *Registry, store driver.Store) (driver.QueueCounter, error) {
	counter, ok := store.(driver.QueueCounter)
	for _, name := range reg.Kinds() {
		if k, _ := reg.lookup(name); k.caps.any() && !ok {
			return nil, fmt.Errorf("jobs: kind %q caps its queued jobs (KindOpts.MaxQueued, MaxQueuedPerOwner), and the store cannot count them (driver.QueueCounter)", name)
		}
	}
	return counter, nil
}
