package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Sweeper settles jobs nobody else will: it fails as interrupted the
// running jobs whose lease ended (their worker died, or its final write never
// landed), and re-sends the queued jobs whose message never reached the
// queue. It finds them through the store's sweep index (Store.Due), so a
// sweep costs in proportion to the unfinished jobs past their sweep time,
// never to the table. Every change it makes is conditional: overlapping
// sweeps and late workers cannot give a job two outcomes.
type Sweeper struct {
	store     Store
	queue     Queue
	clock     Clock
	log       *slog.Logger
	grace     time.Duration
	retention time.Duration
	limit     int
	reserve   time.Duration
	reg       *Registry
}

// SweeperConfig configures a Sweeper. Store and Queue are required.
type SweeperConfig struct {
	Store  Store
	Queue  Queue
	Clock  Clock
	Logger *slog.Logger
	// DispatchGrace is the first wait before a queued job is re-sent; each
	// further re-send waits twice as long, up to 64 times (default
	// DefaultDispatchGrace). Use the service's value.
	DispatchGrace time.Duration
	// Retention of finished jobs (default DefaultRetention).
	Retention time.Duration
	// PageSize is how many due jobs are read per index query (default 200).
	PageSize int
	// Reserve is how long before its deadline a sweep stops starting work
	// (default 5s); what is left is picked up by the next sweep.
	Reserve time.Duration
	// Registry, when set, gives the kinds' retry policies: an interrupted
	// run of a kind with attempts left is retried rather than failed.
	Registry *Registry
}

// NewSweeper returns a Sweeper.
func NewSweeper(cfg SweeperConfig) (*Sweeper, error) {
	if cfg.Store == nil || cfg.Queue == nil {
		return nil, errors.New("jobs: NewSweeper needs a Store and a Queue")
	}
	s := &Sweeper{store: cfg.Store, queue: cfg.Queue, clock: orClock(cfg.Clock), log: orLogger(cfg.Logger),
		grace: cfg.DispatchGrace, retention: cfg.Retention, limit: cfg.PageSize, reserve: cfg.Reserve, reg: cfg.Registry}
	if s.grace <= 0 {
		s.grace = DefaultDispatchGrace
	}
	if s.retention <= 0 {
		s.retention = DefaultRetention
	}
	if s.limit <= 0 {
		s.limit = 200
	}
	if s.reserve <= 0 {
		s.reserve = 5 * time.Second
	}
	return s, nil
}

// SweepReport counts what one sweep did.
type SweepReport struct {
	Due         int  `json:"due"`         // jobs read from the index
	Interrupted int  `json:"interrupted"` // running jobs failed as interrupted
	Resent      int  `json:"resent"`      // queued jobs whose reference was sent again
	Retried     int  `json:"retried"`     // interrupted runs sent back for another attempt
	Cancelled   int  `json:"cancelled"`   // abandoned runs whose owner had cancelled them
	Batches     int  `json:"batches"`     // batches whose end the sweeper recorded
	Deferred    int  `json:"deferred"`    // running jobs whose lease had not ended: looked at again after it
	Skipped     int  `json:"skipped"`     // settled meanwhile by someone else
	Errors      int  `json:"errors"`      // left for the next sweep
	Complete    bool `json:"complete"`    // false if it stopped for its deadline
}

// Sweep runs until no due job is left or its deadline (less the reserve)
// comes, and reports what it did. It returns an error only if it could not
// read the index at all.
func (s *Sweeper) Sweep(ctx context.Context) (SweepReport, error) {
	var rep SweepReport
	stopAt := time.Now().Add(15 * time.Minute)
	if dl, ok := ctx.Deadline(); ok {
		stopAt = dl.Add(-s.reserve)
	}
	seen := map[string]bool{}
	for time.Now().Before(stopAt) {
		now := s.clock.Now()
		ids, err := s.store.Due(ctx, now, s.limit)
		if err != nil {
			s.log.LogAttrs(ctx, slog.LevelError, "sweep could not read the index", slog.String("err_types", ErrorTypes(err)))
			return rep, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		var fresh []string
		for _, id := range ids {
			if !seen[id] {
				seen[id] = true
				fresh = append(fresh, id)
			}
		}
		if len(fresh) == 0 {
			rep.Complete = true
			break
		}
		rep.Due += len(fresh)
		s.sweepPage(ctx, now, fresh, &rep)
		if len(ids) < s.limit {
			rep.Complete = true
			break
		}
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "sweep done",
		slog.Int("due", rep.Due), slog.Int("interrupted", rep.Interrupted), slog.Int("resent", rep.Resent),
		slog.Int("retried", rep.Retried), slog.Int("cancelled", rep.Cancelled),
		slog.Int("deferred", rep.Deferred), slog.Int("skipped", rep.Skipped), slog.Int("errors", rep.Errors),
		slog.Bool("complete", rep.Complete))
	return rep, nil
}

func (s *Sweeper) sweepPage(ctx context.Context, now time.Time, ids []string, rep *SweepReport) {
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		sem    = make(chan struct{}, 8)
		resend []*Record
	)
	count := func(f func()) { mu.Lock(); f(); mu.Unlock() }
	for _, id := range ids {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if isBatchKey(id) {
				s.sweepBatch(ctx, now, strings.TrimPrefix(id, BatchPrefix), rep, count)
				return
			}
			rec, err := s.store.Get(ctx, id)
			switch {
			case errors.Is(err, ErrNotFound):
				count(func() { rep.Skipped++ })
				return
			case err != nil:
				count(func() { rep.Errors++ })
				return
			}
			switch rec.Status {
			case StatusQueued:
				if rec.RunAt.After(now) {
					s.sweepDelayed(ctx, now, rec, rep, count)
					return
				}
				count(func() { resend = append(resend, rec) })
			case StatusRunning:
				s.sweepRunning(ctx, now, rec, rep, count)
			default:
				count(func() { rep.Skipped++ })
			}
		}()
	}
	wg.Wait()
	if len(resend) == 0 {
		return
	}
	ids = ids[:0]
	for _, r := range resend {
		ids = append(ids, r.ID)
	}
	if err := s.queue.SendBatch(ctx, ids); err != nil {
		s.log.LogAttrs(ctx, slog.LevelError, "sweep could not re-send queued jobs", slog.Int("jobs", len(ids)), slog.String("err_types", ErrorTypes(err)))
		rep.Errors += len(ids)
		return
	}
	for _, r := range resend {
		// Back off: grace, 2x, 4x ... 64x grace after each re-send.
		next := now.Add(s.grace << min(r.Dispatches+1, 6))
		if err := s.store.Reschedule(ctx, r.ID, Expect{Status: StatusQueued}, next); err != nil && !isConflict(err) {
			rep.Errors++
			continue
		}
		rep.Resent++
		s.log.LogAttrs(ctx, slog.LevelWarn, "queued job re-sent", slog.String("job_id", r.ID), slog.String("kind", r.Kind), slog.Int("dispatches", r.Dispatches+1))
	}
}

// sweepDelayed handles a queued job that runs later: within SQS's delay
// limit it is sent with the remaining delay; beyond, its sweep time moves to
// its run time.
func (s *Sweeper) sweepDelayed(ctx context.Context, now time.Time, rec *Record, rep *SweepReport, count func(func())) {
	wait := rec.RunAt.Sub(now)
	next := rec.RunAt
	if wait <= MaxQueueDelay {
		if err := s.queue.SendDelayed(ctx, rec.ID, wait); err != nil {
			count(func() { rep.Errors++ })
			return
		}
		next = rec.RunAt.Add(s.grace)
	}
	switch err := s.store.Reschedule(ctx, rec.ID, Expect{Status: StatusQueued}, next); {
	case err == nil && wait <= MaxQueueDelay:
		count(func() { rep.Resent++ })
	case err == nil:
		count(func() { rep.Deferred++ })
	case isConflict(err):
		count(func() { rep.Skipped++ })
	default:
		count(func() { rep.Errors++ })
	}
}

func (s *Sweeper) sweepRunning(ctx context.Context, now time.Time, rec *Record, rep *SweepReport, count func(func())) {
	if rec.LeaseUntil.After(now) {
		// Still within its lease: look again just after it ends.
		err := s.store.Reschedule(ctx, rec.ID, Expect{Status: StatusRunning, Token: rec.ClaimToken}, rec.LeaseUntil.Add(time.Second))
		switch {
		case err == nil:
			count(func() { rep.Deferred++ })
		case isConflict(err):
			count(func() { rep.Skipped++ })
		default:
			count(func() { rep.Errors++ })
		}
		return
	}
	if s.reg != nil && !rec.CancelRequested {
		if k, ok := s.reg.lookup(rec.Kind); ok && shouldRetry(k.retry, execution{Status: StatusFailed, Code: CodeInterrupted}, rec.Attempt) {
			s.retryInterrupted(ctx, now, k, rec, rep, count)
			return
		}
	}
	out := Outcome{Status: StatusFailed, Code: CodeInterrupted, At: now, ExpiresAt: now.Add(s.retention), LeaseExpiredBy: now, BatchID: rec.BatchID}
	if rec.CancelRequested {
		out.Status, out.Code = StatusCancelled, ""
	}
	err := s.store.Finish(ctx, rec.ID, rec.ClaimToken, out)
	if err == nil && rec.BatchID != "" {
		if b, err := s.store.GetBatch(ctx, rec.BatchID); err == nil {
			settleBatch(ctx, s.store, s.queue, s.log, b, s.grace, s.retention)
		}
	}
	switch {
	case err == nil && out.Status == StatusCancelled:
		count(func() { rep.Cancelled++ })
		s.log.LogAttrs(ctx, slog.LevelWarn, "job finished", slog.String("job_id", rec.ID), slog.String("kind", rec.Kind),
			slog.Int("attempt", rec.Attempt), slog.String("status", string(StatusCancelled)), slog.String("cause", "lease_expired"))
	case err == nil:
		count(func() { rep.Interrupted++ })
		s.log.LogAttrs(ctx, slog.LevelWarn, "job finished", slog.String("job_id", rec.ID), slog.String("kind", rec.Kind),
			slog.Int("attempt", rec.Attempt), slog.String("status", string(StatusFailed)), slog.String("code", CodeInterrupted), slog.String("cause", "lease_expired"))
	case isConflict(err):
		count(func() { rep.Skipped++ })
	default:
		count(func() { rep.Errors++ })
	}
}

// sweepBatch settles a batch whose jobs have all ended but whose end was
// never recorded, and looks again later at one still running.
func (s *Sweeper) sweepBatch(ctx context.Context, now time.Time, id string, rep *SweepReport, count func(func())) {
	b, err := s.store.GetBatch(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		count(func() { rep.Skipped++ })
		return
	case err != nil:
		count(func() { rep.Errors++ })
		return
	}
	if b.Status != StatusRunning {
		count(func() { rep.Skipped++ })
		return
	}
	if b.Remaining <= 0 {
		settleBatch(ctx, s.store, s.queue, s.log, b, s.grace, s.retention)
		count(func() { rep.Batches++ })
		return
	}
	if err := s.store.RescheduleBatch(ctx, id, now.Add(s.grace)); err != nil {
		count(func() { rep.Errors++ })
		return
	}
	count(func() { rep.Deferred++ })
}

// retryInterrupted sends an interrupted run back to the queue, as the
// worker would have had it failed with a retryable error.
func (s *Sweeper) retryInterrupted(ctx context.Context, now time.Time, k *kindDef, rec *Record, rep *SweepReport, count func(func())) {
	delay := k.retry.backoff(rec.Attempt)
	runAt := now.Add(delay).Truncate(time.Millisecond)
	sweepAt := runAt
	if delay <= MaxQueueDelay {
		sweepAt = runAt.Add(s.grace)
	}
	err := s.store.Requeue(ctx, rec.ID, rec.ClaimToken, Requeue{At: now, RunAt: runAt, SweepAt: sweepAt, LastError: CodeInterrupted, LeaseExpiredBy: now})
	switch {
	case err == nil:
		if delay <= MaxQueueDelay {
			_ = s.queue.SendDelayed(ctx, rec.ID, delay) // if lost, the next sweep after sweepAt sends it
		}
		count(func() { rep.Retried++ })
		s.log.LogAttrs(ctx, slog.LevelWarn, "job will retry", slog.String("job_id", rec.ID), slog.String("kind", rec.Kind),
			slog.Int("attempt", rec.Attempt), slog.String("code", CodeInterrupted), slog.Time("run_at", runAt))
	case isConflict(err):
		count(func() { rep.Skipped++ })
	default:
		count(func() { rep.Errors++ })
	}
}

func isConflict(err error) bool {
	return errors.Is(err, ErrLostClaim) || errors.Is(err, ErrNotQueued) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrCancelRequested)
}
