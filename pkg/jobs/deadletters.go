package jobs

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/emf"
	"github.com/lambdajobs/lambdajobs/internal/errtypes"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/internal/metricnames"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// The Sweeper's drain of the lanes' dead-letter queues. A job whose
// message is its only safety net (it holds no sweep entry) has nothing
// else naming it once that message reaches its lane's dead-letter queue
// (after maxReceiveCount receives): so each sweep receives a bounded
// number of dead letters per lane and gives each one that names a job the
// sweeper's own decision for that job, as if the sweep index had named it:
//
//   - running, its lease ended: interrupted through the engine (a retry if
//     its kind allows one, failed interrupted, or cancelled if its owner
//     asked), the dead letter deleted once that landed or was superseded;
//   - running, its lease still live: a fresh message sent, delayed to the
//     lease's end (at most the queue's longest delay), then deleted;
//   - queued and waiting on its parents: deleted (the parents send it, and
//     it keeps a sweep entry meanwhile);
//   - queued otherwise: sent again as the delivery rule says, with a sweep
//     entry backed off as the sweeper's re-sends are, then deleted;
//   - final with pending post-outcome steps: the steps run, and deleted
//     when they are done;
//   - final otherwise, or no such job (expired, or an enqueue whose store
//     never landed): deleted, the reference dropped.
//
// A message that is not a job reference (a foreign message, a schedule's
// fire, an envelope) stays in the dead-letter queue, visible again at
// once, for the operators' routes; so does a job reference whose decision
// failed on a dependency, for the next sweep. Each settled dead letter
// counts DeadLettersSettled by kind and lane.

// deadLetterDrain is the Sweeper's dead-letter queues (nil: none) and how
// many of each lane's a sweep receives.
type deadLetterDrain struct {
	q       driver.DeadLetterQueue
	perLane int
}

// defaultDeadLettersPerLane is Config.DeadLettersPerLane's default.
const defaultDeadLettersPerLane = 100

// noKind is the kind dimension of a dead letter whose job does not exist
// (no kind name can have parentheses).
const noKind = "(none)"

func newDeadLetterDrain(cfg Config) deadLetterDrain {
	d := deadLetterDrain{q: cfg.DeadLetters, perLane: cfg.DeadLettersPerLane}
	if d.perLane <= 0 {
		d.perLane = defaultDeadLettersPerLane
	}
	return d
}

// deadVerdict is what became of one dead letter.
type deadVerdict int

const (
	// deadSettled: its job's decision is made; the dead letter goes.
	deadSettled deadVerdict = iota
	// deadForeign: not a job reference; it stays for the operators.
	deadForeign
	// deadRetry: the decision failed on a dependency; it stays for the
	// next sweep.
	deadRetry
)

// drainDeadLetters settles up to the drain's bound of dead letters of
// each lane, while the sweep's plan leaves time.
func (s *Sweeper) drainDeadLetters(ctx context.Context, plan sweepPlan, rep *SweepReport) {
	if s.dead.q == nil {
		return
	}
	for _, lane := range s.dead.q.Lanes() {
		if plan.over() {
			return
		}
		pctx, cancel := plan.context(ctx)
		s.drainLane(pctx, lane, rep)
		cancel()
	}
}

// drainLane receives up to the bound of lane's dead letters and settles
// each, up to eight at once.
func (s *Sweeper) drainLane(ctx context.Context, lane string, rep *SweepReport) {
	letters, err := s.dead.q.ReceiveDead(ctx, lane, s.dead.perLane)
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelError, "sweep could not receive dead letters", slog.String("lane", lane), slog.String("err_types", errtypes.Of(err)))
		rep.Errors++
		return
	}
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		sem = make(chan struct{}, 8)
	)
	count := func(f func()) { mu.Lock(); f(); mu.Unlock() }
	laneName := lane
	if laneName == "" {
		laneName = driver.DefaultLaneName
	}
	for _, dl := range letters {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			kind, verdict := s.settleDead(ctx, dl.Body, rep, count)
			if verdict == deadSettled {
				if err := s.dead.q.DeleteDead(ctx, lane, dl.Receipt); err != nil {
					// Decided, not deleted: the next sweep finds the job
					// settled and drops the reference.
					s.log.LogAttrs(ctx, slog.LevelWarn, "sweep could not delete a settled dead letter", slog.String("lane", lane), slog.String("err_types", errtypes.Of(err)))
					verdict = deadRetry
				}
			}
			if verdict == deadSettled {
				metricsOf(ctx).Add(map[string]string{metricnames.Kind: kind, metricnames.Lane: laneName}, metricnames.DeadLettersSettled, emf.Count, 1)
				count(func() { rep.DeadLettersSettled++ })
				return
			}
			// Visible again at once: to the operators' routes, and to the
			// next sweep.
			_ = s.dead.q.ReleaseDead(context.WithoutCancel(ctx), lane, dl.Receipt)
			count(func() {
				rep.DeadLettersLeft++
				if verdict == deadRetry {
					rep.Errors++
				}
			})
		}()
	}
	wg.Wait()
}

// settleDead makes the sweeper's decision for the job the dead letter
// body names, and returns the job's kind (noKind when there is none) and
// what to do with the dead letter.
func (s *Sweeper) settleDead(ctx context.Context, body string, rep *SweepReport, count func(func())) (string, deadVerdict) {
	id, err := message.Decode(body)
	if err != nil {
		return "", deadForeign
	}
	e := s.eng
	rec, err := e.store.Get(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return noKind, deadSettled
	case err != nil:
		return "", deadRetry
	}
	now := e.clock.Now()
	switch {
	case rec.Status == StatusRunning && !rec.LeaseUntil.After(now):
		return rec.Kind, s.interruptDead(ctx, rec, rep, count)
	case rec.Status == StatusRunning:
		// Its worker is alive (or its lease not yet over): a message that
		// comes back when the lease ends, for whoever then finds it.
		delay := min(rec.LeaseUntil.Sub(now)+time.Second, driver.MaxQueueDelay)
		if err := e.deliverMessage(ctx, messageOf(rec), delivery{send: true, delay: delay}); err != nil {
			return rec.Kind, deadRetry
		}
		count(func() { rep.Deferred++ })
		return rec.Kind, deadSettled
	case rec.Status == StatusQueued && rec.WaitingOn == driver.WaitParents:
		return rec.Kind, deadSettled
	case rec.Status == StatusQueued:
		return rec.Kind, s.resendDead(ctx, now, rec, rep, count)
	case len(rec.After) == 0:
		return rec.Kind, deadSettled
	case e.after(ctx, rec):
		count(func() { rep.After++ })
		return rec.Kind, deadSettled
	default:
		return rec.Kind, deadRetry
	}
}

// interruptDead settles the running job rec, whose lease ended, as
// sweepRunning does (the dead letter, deleted after, its held message).
func (s *Sweeper) interruptDead(ctx context.Context, rec *driver.Record, rep *SweepReport, count func(func())) deadVerdict {
	// The dead letter is held until this returns: a retry's new message
	// that is sent needs no sweep entry; one not sent keeps it.
	end := s.eng.interrupt(ctx, rec, true)
	if end.comesBack() {
		return deadRetry
	}
	countEnd(end, rep, count)
	return deadSettled
}

// resendDead sends the queued job rec again as the delivery rule says.
// A job in the sweep index (created before message first, or by a path
// that holds no message) keeps its entry, backed off as the sweeper's
// re-sends back it off; one without an entry needs none: the new message
// is its net, as the dead letter was. A job due beyond the queue's longest
// delay is not sent: its sweep entry moves to its run time.
func (s *Sweeper) resendDead(ctx context.Context, now time.Time, rec *driver.Record, rep *SweepReport, count func(func())) deadVerdict {
	e := s.eng
	d := e.deliveryAt(e.clock.Now(), rec.RunAt, rec.Lane)
	if err := e.deliver(ctx, rec, d); err != nil {
		return deadRetry
	}
	if d.send && rec.SweepAt.IsZero() {
		count(func() { rep.Resent++ })
		return deadSettled
	}
	if !d.send {
		switch err := e.store.Reschedule(ctx, rec.ID, driver.Expect{Status: StatusQueued}, d.sweepAt); {
		case err == nil:
			count(func() { rep.Deferred++ })
			return deadSettled
		case isConflict(err) && !rec.SweepAt.IsZero():
			// Claimed, cancelled or moved meanwhile.
			count(func() { rep.Skipped++ })
			return deadSettled
		case isConflict(err):
			// Outside the index and beyond what SQS can time (no path
			// leaves a job so): the dead letter stays its net.
			s.log.LogAttrs(ctx, slog.LevelWarn, "dead letter names a job due beyond the queue's delay and outside the sweep index; left", slog.String("job_id", rec.ID))
		}
		return deadRetry
	}
	at := now.Add(e.graceOf(rec.Lane) << min(rec.Dispatches+1, maxDispatchShift))
	if d.delay > 0 {
		at = d.sweepAt
	}
	if err := e.store.Reschedule(ctx, rec.ID, driver.Expect{Status: StatusQueued}, at); err != nil && !isConflict(err) {
		// Sent: the message is its net whatever became of the entry.
		s.log.LogAttrs(ctx, slog.LevelWarn, "dead letter's job sent again, its sweep entry not moved", slog.String("job_id", rec.ID), slog.String("err_types", errtypes.Of(err)))
	}
	count(func() { rep.Resent++ })
	return deadSettled
}
