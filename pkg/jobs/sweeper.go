package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/emf"
	"github.com/lambdajobs/lambdajobs/internal/errtypes"
	"github.com/lambdajobs/lambdajobs/internal/metricnames"
	"github.com/lambdajobs/lambdajobs/internal/storekey"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Sweeper settles jobs nobody else will: it fails as interrupted the
// running jobs whose lease ended (their worker died, or its final write never
// landed), re-sends the queued jobs whose message never reached the
// queue, and runs the post-outcome steps of finished jobs whose worker died
// before it ran them (a batch job's count). With Config.DeadLetters it
// also drains the lanes' dead-letter queues (deadletters.go). It finds them through the store's sweep index (Store.Due), so a
// sweep costs in proportion to the unfinished jobs past their sweep time,
// never to the table. Every change it makes is conditional: overlapping
// sweeps and late workers cannot give a job two outcomes.
type Sweeper struct {
	eng     *engine
	log     *slog.Logger
	limit   int
	reserve time.Duration
	metrics *Metrics
	dead    deadLetterDrain
}

// newSweeper returns the Sweeper of cfg (see NewClient).
func newSweeper(cfg Config, eng *engine) *Sweeper {
	s := &Sweeper{eng: eng, log: eng.log, limit: cfg.SweepPageSize, reserve: cfg.SweepReserve, metrics: cfg.Metrics, dead: newDeadLetterDrain(cfg)}
	if s.limit <= 0 {
		s.limit = 200
	}
	if s.reserve <= 0 {
		s.reserve = 5 * time.Second
	}
	return s
}

// SweepReport counts what one sweep did.
type SweepReport struct {
	Due         int  `json:"due"`         // jobs read from the index
	Interrupted int  `json:"interrupted"` // running jobs failed as interrupted
	Resent      int  `json:"resent"`      // queued jobs whose reference was sent again
	Retried     int  `json:"retried"`     // interrupted runs sent back for another attempt
	Cancelled   int  `json:"cancelled"`   // abandoned runs whose owner had cancelled them
	Batches     int  `json:"batches"`     // batches whose end (or abandoned creation) the sweeper recorded
	After       int  `json:"after"`       // finished jobs whose post-outcome steps the sweeper ran
	Deferred    int  `json:"deferred"`    // running jobs whose lease had not ended: looked at again after it
	Skipped     int  `json:"skipped"`     // settled meanwhile by someone else
	Errors      int  `json:"errors"`      // left for the next sweep
	Complete    bool `json:"complete"`    // false if it stopped for its deadline
	// DeadLettersSettled counts the dead letters it deleted once their
	// job's decision was made (Config.DeadLetters); DeadLettersLeft those
	// it left in their dead-letter queue: messages that name no job, for
	// the operators, and job references whose decision failed, for the
	// next sweep (counted in Errors too).
	DeadLettersSettled int `json:"dead_letters_settled"`
	DeadLettersLeft    int `json:"dead_letters_left"`
}

// Sweep runs until no due job is left or its deadline (less the reserve)
// comes, and reports what it did. Every call it makes ends before the
// deadline less half the reserve. It returns an error only if it could not
// read the index at all.
func (s *Sweeper) Sweep(ctx context.Context) (SweepReport, error) {
	var rep SweepReport
	if s.eng.queue == nil {
		return rep, errSweepNoQueue
	}
	plan := planSweep(ctx, s.reserve)
	m := s.metrics.batch()
	ctx = withMetrics(ctx, m)
	began := s.eng.clock.Now()
	defer func() {
		for name, v := range map[string]int{metricnames.SweepResent: rep.Resent, metricnames.SweepInterrupted: rep.Interrupted, metricnames.SweepRetried: rep.Retried,
			metricnames.SweepBatches: rep.Batches, metricnames.SweepAfter: rep.After, metricnames.SweepErrors: rep.Errors, metricnames.SweepComplete: map[bool]int{true: 1}[rep.Complete]} {
			m.Add(nil, name, emf.Count, float64(v))
		}
		m.Add(nil, metricnames.SweepDuration, emf.Milliseconds, float64(s.eng.clock.Now().Sub(began).Milliseconds()))
		s.metrics.flush(m, s.eng.clock.Now())
	}()
	s.drainDeadLetters(ctx, plan, &rep)
	seen := map[string]bool{}
	// stuck counts the items of the last page that this sweep had read
	// before: still due, since putting them back failed too. The next read
	// asks for that many more, so the sweep reads past them.
	stuck := 0
	for !plan.over() {
		now := s.eng.clock.Now()
		pctx, cancel := plan.context(ctx)
		limit := s.limit + stuck
		ids, err := s.eng.store.Due(pctx, now, limit)
		if err != nil {
			cancel()
			s.log.LogAttrs(ctx, slog.LevelError, "sweep could not read the index", slog.String("err_types", errtypes.Of(err)))
			return rep, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		var fresh []string
		for _, id := range ids {
			if !seen[id] {
				seen[id] = true
				fresh = append(fresh, id)
			}
		}
		stuck = len(ids) - len(fresh)
		if len(fresh) == 0 {
			cancel()
			if len(ids) < limit {
				rep.Complete = true
				break
			}
			// A whole page of items this sweep failed to settle: read
			// past them.
			continue
		}
		rep.Due += len(fresh)
		s.sweepPage(pctx, now, fresh, &rep)
		cancel()
		if len(ids) < limit {
			rep.Complete = !plan.over()
			break
		}
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "sweep done",
		slog.Int("due", rep.Due), slog.Int("interrupted", rep.Interrupted), slog.Int("resent", rep.Resent),
		slog.Int("retried", rep.Retried), slog.Int("cancelled", rep.Cancelled), slog.Int("batches", rep.Batches), slog.Int("after", rep.After),
		slog.Int("deferred", rep.Deferred), slog.Int("skipped", rep.Skipped), slog.Int("errors", rep.Errors),
		slog.Int("dead_letters_settled", rep.DeadLettersSettled), slog.Int("dead_letters_left", rep.DeadLettersLeft),
		slog.Bool("complete", rep.Complete))
	return rep, nil
}

func (s *Sweeper) sweepPage(ctx context.Context, now time.Time, ids []string, rep *SweepReport) {
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		sem    = make(chan struct{}, 8)
		resend []*driver.Record
	)
	count := func(f func()) { mu.Lock(); f(); mu.Unlock() }
	ctx, ob := withOutbox(ctx)
	// The pauses in force, once for the page: a due job they hold is not
	// re-sent. Unread, none is taken to hold (a re-send then is what the
	// sweep did before pauses: the worker holds the job).
	pauses, _ := s.eng.pauses.current(ctx)
	for _, id := range ids {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if storekey.IsBatch(id) {
				s.sweepBatch(ctx, now, strings.TrimPrefix(id, storekey.BatchPrefix), rep, count)
				return
			}
			rec, err := s.eng.store.Get(ctx, id)
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
				if rec.WaitingOn == driver.WaitParents {
					// Its enqueue died before it registered on every parent
					// (or a resubmit or revive did): finish that.
					if _, err := s.eng.awaitParents(ctx, rec); err != nil {
						s.backOff(ctx, now, rec)
						count(func() { rep.Errors++ })
						return
					}
					count(func() { rep.Deferred++ })
					return
				}
				if d := s.eng.deliveryAt(s.eng.clock.Now(), rec.RunAt, rec.Lane); !d.send || d.delay > 0 {
					s.sweepDelayed(ctx, rec, d, rep, count)
					return
				}
				if p := holdingIn(pauses, rec, now); p != nil {
					// Held by a pause: a re-send would add a copy of its
					// message that the workers then keep handing back. It
					// needs none until the pause ends; look again then, or
					// in 15 minutes (to see a resume).
					next := now.Add(driver.MaxQueueDelay)
					if p.Until.Before(next) {
						next = latest(p.Until, now.Add(time.Minute))
					}
					if err := s.eng.store.Reschedule(ctx, rec.ID, driver.Expect{Status: StatusQueued}, next); err != nil && !isConflict(err) {
						count(func() { rep.Errors++ })
						return
					}
					count(func() { rep.Deferred++ })
					return
				}
				count(func() { resend = append(resend, rec) })
			case StatusRunning:
				s.sweepRunning(ctx, now, rec, rep, count)
			default:
				// Final: its post-outcome steps are pending (its worker died
				// after the final write), or were done meanwhile.
				switch {
				case len(rec.After) == 0:
					count(func() { rep.Skipped++ })
				case s.eng.after(ctx, rec):
					count(func() { rep.After++ })
				default:
					s.backOff(ctx, now, rec)
					count(func() { rep.Errors++ })
				}
			}
		}()
	}
	wg.Wait()
	for _, r := range s.eng.flushEvents(ctx, ob) {
		rep.Errors++ // still pending: a later sweep sends it
		s.backOff(ctx, now, r)
	}
	if len(resend) == 0 {
		return
	}
	msgs := make([]driver.Message, len(resend))
	for i, r := range resend {
		msgs[i] = messageOf(r)
	}
	if err := s.eng.queue.Send(ctx, msgs...); err != nil {
		s.log.LogAttrs(ctx, slog.LevelError, "sweep could not re-send queued jobs", slog.Int("jobs", len(msgs)), slog.String("err_types", errtypes.Of(err)))
		rep.Errors += len(msgs)
		for _, r := range resend {
			s.backOff(ctx, now, r)
		}
		return
	}
	for _, r := range resend {
		// Back off: grace, 2x, 4x, then 8x grace after each re-send (a
		// retry or a resubmit counts its re-sends from 0 again).
		next := now.Add(s.eng.graceOf(r.Lane) << min(r.Dispatches+1, maxDispatchShift))
		if err := s.eng.store.Reschedule(ctx, r.ID, driver.Expect{Status: StatusQueued}, next); err != nil && !isConflict(err) {
			rep.Errors++
			continue
		}
		rep.Resent++
		s.log.LogAttrs(ctx, slog.LevelWarn, "queued job re-sent", slog.String("job_id", r.ID), slog.String("kind", r.Kind), slog.Int("dispatches", r.Dispatches+1))
	}
}

// backOff moves the sweep time of rec, which this sweep could not settle,
// later: a queued job's as a re-send backs off (grace, 2x, 4x, then 8x,
// by its dispatches); any other's by the grace, doubled by how long it has
// been due (since its run's lease ended, or its outcome), up to 8 times.
// Items that keep failing (post-outcome steps during an EventBridge
// outage, re-sends SQS refuses) so leave the head of the sweep index: a
// page of them cannot stop the sweep from reaching what is due behind
// them. A reschedule that fails too leaves the item where it is, and
// Sweep reads past it.
func (s *Sweeper) backOff(ctx context.Context, now time.Time, rec *driver.Record) {
	g := s.eng.graceOf(rec.Lane)
	var at time.Time
	switch rec.Status {
	case StatusQueued:
		at = now.Add(g << min(rec.Dispatches+1, maxDispatchShift))
	case StatusRunning:
		at = now.Add(min(max(now.Sub(rec.LeaseUntil), g), g<<maxDispatchShift))
	default:
		at = now.Add(min(max(now.Sub(rec.FinishedAt), g), g<<maxDispatchShift))
	}
	err := s.eng.store.Reschedule(ctx, rec.ID, driver.Expect{Status: rec.Status, Token: rec.ClaimToken}, at)
	if err != nil && !isConflict(err) {
		s.log.LogAttrs(ctx, slog.LevelWarn, "sweep could not put a failing item back", slog.String("job_id", rec.ID), slog.String("err_types", errtypes.Of(err)))
	}
}

// maxDispatchShift caps the sweeper's re-send backoff at 8x the dispatch
// grace: a job whose message keeps getting lost is looked at every 24
// minutes (with the default 3-minute grace), not every few hours.
const maxDispatchShift = 3

// sweepDelayed handles a queued job that runs later, as the delivery rule
// d says: within SQS's delay limit it is sent with the remaining delay and
// looked at again the grace after its run time; beyond, its sweep time
// moves to its run time.
func (s *Sweeper) sweepDelayed(ctx context.Context, rec *driver.Record, d delivery, rep *SweepReport, count func(func())) {
	if err := s.eng.deliver(ctx, rec, d); err != nil {
		s.backOff(ctx, s.eng.clock.Now(), rec)
		count(func() { rep.Errors++ })
		return
	}
	switch err := s.eng.store.Reschedule(ctx, rec.ID, driver.Expect{Status: StatusQueued}, d.sweepAt); {
	case err == nil && d.send:
		count(func() { rep.Resent++ })
	case err == nil:
		count(func() { rep.Deferred++ })
	case isConflict(err):
		count(func() { rep.Skipped++ })
	default:
		count(func() { rep.Errors++ })
	}
}

func (s *Sweeper) sweepRunning(ctx context.Context, now time.Time, rec *driver.Record, rep *SweepReport, count func(func())) {
	if rec.LeaseUntil.After(now) {
		// Still within its lease: look again just after it ends.
		err := s.eng.store.Reschedule(ctx, rec.ID, driver.Expect{Status: StatusRunning, Token: rec.ClaimToken}, rec.LeaseUntil.Add(time.Second))
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
	end := s.eng.interrupt(ctx, rec, false)
	if end.res == unsettled {
		s.backOff(ctx, now, rec)
		count(func() { rep.Errors++ })
		return
	}
	countEnd(end, rep, count)
}

// countEnd counts in rep what an interrupt that did not stay unsettled
// did.
func countEnd(end ending, rep *SweepReport, count func(func())) {
	switch {
	case end.res == superseded:
		count(func() { rep.Skipped++ })
	case end.retried:
		count(func() { rep.Retried++ })
	case end.ex.Status == StatusCancelled:
		count(func() { rep.Cancelled++ })
	default:
		count(func() { rep.Interrupted++ })
	}
}

// sweepBatch settles a batch whose jobs have all ended but whose end was
// never recorded, aborts one whose creation was abandoned, and looks again
// later at one still running.
func (s *Sweeper) sweepBatch(ctx context.Context, now time.Time, id string, rep *SweepReport, count func(func())) {
	b, err := s.eng.store.GetBatch(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		count(func() { rep.Skipped++ })
		return
	case err != nil:
		count(func() { rep.Errors++ })
		return
	}
	switch {
	case b.Status != StatusRunning:
		count(func() { rep.Skipped++ })
		return
	case b.Creating && s.eng.parentLives(ctx, b):
		// A Map's wave whose job's run died while it stored the wave's
		// jobs: the job's next run finishes it (aborting it would answer
		// calls never started as cancelled). Looked at again later, and
		// aborted once the job has ended.
		if err := s.eng.store.RescheduleBatch(ctx, id, now.Add(s.eng.grace)); err != nil {
			count(func() { rep.Errors++ })
			return
		}
		count(func() { rep.Deferred++ })
		return
	case b.Creating:
		// Its sweep time came before its enqueue finished storing its jobs:
		// that enqueue failed or died.
		if err := s.eng.abortBatch(ctx, b); err != nil {
			_ = s.eng.store.RescheduleBatch(ctx, id, now.Add(s.eng.grace)) // off the head of the index
			count(func() { rep.Errors++ })
			return
		}
		count(func() { rep.Batches++ })
		return
	case b.DoneShards >= b.Shards:
		if s.eng.settleBatch(ctx, b) {
			count(func() { rep.Batches++ })
		} else {
			_ = s.eng.store.RescheduleBatch(ctx, id, now.Add(s.eng.grace))
			count(func() { rep.Errors++ })
		}
		return
	}
	if err := s.eng.store.RescheduleBatch(ctx, id, now.Add(s.eng.grace)); err != nil {
		count(func() { rep.Errors++ })
		return
	}
	count(func() { rep.Deferred++ })
}
