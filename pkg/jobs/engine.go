package jobs

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/errtypes"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// engine is the one owner of a job's transitions. The Service, the Worker
// and the Sweeper decide nothing about a job's state themselves: they ask
// the engine to claim, publish, end (succeed, fail, retry, interrupt),
// cancel, and to settle or abort a batch. docs/STATE_MACHINE.md draws what
// it does.
//
// Every transition is one conditional write in the Store. The engine also
// tells a condition that failed because of our own write (the SDK retried a
// request whose answer was lost; the retry found the job as the write left
// it) from one that failed because someone else got there first: the first
// counts as done, the second leaves the stored outcome alone.
type engine struct {
	reg       *Registry // nil: no kind's retry policy applies (a sweeper without kinds)
	store     driver.Store
	queue     driver.Queue // nil: retries and early deliveries wait for the sweeper
	clock     Clock
	log       *slog.Logger
	grace     time.Duration
	retention time.Duration
}

func newEngine(reg *Registry, store driver.Store, queue driver.Queue, clock Clock, log *slog.Logger, grace, retention time.Duration) *engine {
	if grace <= 0 {
		grace = DefaultDispatchGrace
	}
	if retention <= 0 {
		retention = DefaultRetention
	}
	return &engine{reg: reg, store: store, queue: queue, clock: orClock(clock), log: orLogger(log), grace: grace, retention: retention}
}

// now is the time written to the store: the injected clock, at the store's
// millisecond precision, so a write can recognise itself when read back.
func (e *engine) now() time.Time { return e.clock.Now().Truncate(time.Millisecond) }

// result says what became of a transition.
type result int

const (
	// landed: the write is stored (possibly by an earlier try whose answer
	// was lost).
	landed result = iota
	// superseded: someone else changed the job first (a sweeper after the
	// lease, a duplicate worker, a cancel); their outcome stands.
	superseded
	// unsettled: nothing is known to be stored (a dependency failed or
	// timed out); the message must come back, or the next sweep retries.
	unsettled
)

// ending is what end recorded.
type ending struct {
	ex      execution // the outcome as recorded (cancelled if the owner's cancel won)
	retried bool      // sent back to the queue for another attempt
	res     result
}

// ownWrite reports whether err is a failed condition that found the job as
// a write stamped at would have left it in status st: our own write,
// retried by the SDK after its answer was lost.
func ownWrite(err error, st Status, at time.Time) bool {
	var ce *driver.ConflictError
	return errors.As(err, &ce) && ce.Current != nil && ce.Current.Status == st && ce.Current.UpdatedAt.Equal(at)
}

// isConflict reports whether err says the job is no longer as the write
// expected: someone else moved it.
func isConflict(err error) bool {
	return errors.Is(err, ErrLostClaim) || errors.Is(err, driver.ErrNotQueued) || errors.Is(err, ErrNotFound) ||
		errors.Is(err, driver.ErrCancelRequested) || errors.Is(err, driver.ErrNotRunning)
}

// claim moves a queued job to running under c. A claim whose answer was
// lost and that the SDK retried finds the job running under c.Token: it
// landed.
func (e *engine) claim(ctx context.Context, id string, c driver.Claim) (*driver.Record, error) {
	rec, err := e.store.Claim(ctx, id, c)
	var ce *driver.ConflictError
	if errors.As(err, &ce) && ce.Current != nil && ce.Current.Status == StatusRunning && ce.Current.ClaimToken == c.Token {
		return ce.Current, nil
	}
	return rec, err
}

// publish stores a partial result of the run named by token.
func (e *engine) publish(ctx context.Context, id, token string, body []byte) error {
	return e.store.Publish(ctx, id, token, body, e.now())
}

// end records how the run of rec named by token ended: a failed run whose
// kind allows another attempt goes back to the queue, anything else is
// final. leaseBy, when set, makes the write also conditional on the lease
// having ended by then (an interrupted run, settled by the sweeper or by a
// redelivery). A run whose owner cancelled it ends cancelled. ctx bounds
// every call (the final-write budget).
func (e *engine) end(ctx context.Context, rec *driver.Record, token string, ex execution, started, leaseBy time.Time) ending {
	end := e.decide(ctx, rec, token, ex, started, leaseBy)
	recordEnding(ctx, rec, end, started, e.now())
	return end
}

func (e *engine) decide(ctx context.Context, rec *driver.Record, token string, ex execution, started, leaseBy time.Time) ending {
	// A run's lines name its attempt only when it is not the first.
	attrs := []any{slog.String("job_id", rec.ID), slog.String("kind", rec.Kind)}
	if rec.Attempt > 1 {
		attrs = append(attrs, slog.Int("attempt", rec.Attempt))
	}
	log := e.log.With(attrs...)
	if rec.CancelRequested {
		ex = execution{Status: StatusCancelled, Cause: "cancelled"}
	}
	if ex.Status == StatusFailed && e.reg != nil {
		if k, ok := e.reg.lookup(rec.Kind); ok && shouldRetry(k.retry, ex, rec.Attempt-rec.AttemptBase) {
			return e.requeue(ctx, log, k, rec, token, ex, started, leaseBy)
		}
	}
	return e.finish(ctx, log, rec, token, ex, started, leaseBy)
}

// interrupt settles a running job whose lease has ended (its worker died
// or never landed its final write): a retry if its kind allows one, else
// failed as interrupted; cancelled if its owner cancelled it. Conditional on
// its claim token and its lease, so a late worker or another sweeper racing
// it cannot produce a second outcome.
func (e *engine) interrupt(ctx context.Context, cur *driver.Record) ending {
	now := e.now()
	return e.end(ctx, cur, cur.ClaimToken, execution{Status: StatusFailed, Code: CodeInterrupted, Cause: "lease_expired"}, cur.StartedAt, now)
}

// finish writes a run's final outcome.
func (e *engine) finish(ctx context.Context, log *slog.Logger, rec *driver.Record, token string, ex execution, started, leaseBy time.Time) ending {
	at := e.now()
	write := func(ex execution) error {
		out := driver.Outcome{Status: ex.Status, Result: ex.Result, Code: ex.Code, At: at, ExpiresAt: at.Add(e.retention),
			LeaseExpiredBy: leaseBy, KeepLease: ex.Abandoned, After: afterSteps(rec)}
		if ex.Status == StatusCancelled {
			out.Result, out.Code = nil, ""
		}
		err := e.store.Finish(ctx, rec.ID, token, out)
		if ownWrite(err, out.Status, at) {
			return nil
		}
		return err
	}
	err := write(ex)
	if errors.Is(err, driver.ErrCancelRequested) {
		// Cancelled while it ran, unnoticed: no other outcome may land.
		ex = execution{Status: StatusCancelled, Cause: "cancelled"}
		err = write(ex)
	}
	switch {
	case err == nil:
		attrs := []slog.Attr{slog.String("status", string(ex.Status))}
		if !started.IsZero() {
			attrs = append(attrs, slog.Int64("duration_ms", at.Sub(started).Milliseconds()))
		}
		level := slog.LevelInfo
		if ex.Status != StatusSucceeded {
			level = slog.LevelWarn
			attrs = append(attrs, slog.String("cause", ex.Cause))
		}
		if ex.Code != "" {
			attrs = append(attrs, slog.String("code", ex.Code))
		}
		if ex.ErrTypes != "" {
			attrs = append(attrs, slog.String("err_types", ex.ErrTypes))
		}
		if ex.Stack != "" {
			attrs = append(attrs, slog.String("stack", ex.Stack))
		}
		log.LogAttrs(ctx, level, "job finished", attrs...)
		if steps := afterSteps(rec); len(steps) > 0 {
			done := *rec
			done.Status, done.After = ex.Status, steps
			e.after(ctx, &done)
		}
		return ending{ex: ex, res: landed}
	case isConflict(err):
		// Someone else settled this run (a sweeper after the lease): the
		// stored outcome stands.
		log.LogAttrs(ctx, slog.LevelWarn, "job was settled by someone else before this write", slog.String("outcome_dropped", string(ex.Status)))
		return ending{ex: ex, res: superseded}
	default:
		// The write did not land in time. The job stays running; the message
		// comes back and the redelivery (or the sweeper) settles it.
		log.LogAttrs(ctx, slog.LevelError, "final write failed; the job stays running until a redelivery or the sweeper settles it",
			slog.String("outcome_lost", string(ex.Status)), slog.String("err_types", errtypes.Of(err)))
		return ending{ex: ex, res: unsettled}
	}
}

// requeue sends a failed run back to the queue: run_at after the backoff,
// the message delayed by SQS up to 15 minutes, and beyond that left to the
// sweeper.
func (e *engine) requeue(ctx context.Context, log *slog.Logger, k *kindDef, rec *driver.Record, token string, ex execution, started, leaseBy time.Time) ending {
	now := e.now()
	delay := ex.RetryDelay
	if delay <= 0 {
		delay = k.retry.backoff(rec.Attempt - rec.AttemptBase)
	}
	runAt := now.Add(delay).Truncate(time.Millisecond)
	if ex.Abandoned && rec.LeaseUntil.After(runAt) {
		// Its handler may still be running until the lease ends: no second
		// run of the job before then.
		runAt, delay = rec.LeaseUntil, rec.LeaseUntil.Sub(now)
	}
	sweepAt := runAt
	viaQueue := e.queue != nil && delay <= driver.MaxQueueDelay
	if viaQueue {
		sweepAt = runAt.Add(e.grace)
	}
	err := e.store.Requeue(ctx, rec.ID, token, driver.Requeue{At: now, RunAt: runAt, SweepAt: sweepAt, LastError: ex.Code, LeaseExpiredBy: leaseBy})
	if ownWrite(err, StatusQueued, now) {
		err = nil // our requeue landed; its answer was lost
	}
	switch {
	case errors.Is(err, driver.ErrCancelRequested):
		return e.finish(ctx, log, rec, token, execution{Status: StatusCancelled, Cause: "cancelled"}, started, leaseBy)
	case isConflict(err):
		log.LogAttrs(ctx, slog.LevelWarn, "job was settled by someone else before this write", slog.String("outcome_dropped", "retry"))
		return ending{ex: ex, res: superseded}
	case err != nil:
		log.LogAttrs(ctx, slog.LevelError, "retry write failed; the job stays running until a redelivery or the sweeper settles it",
			slog.String("err_types", errtypes.Of(err)))
		return ending{ex: ex, res: unsettled}
	}
	if viaQueue {
		if err := e.queue.SendDelayed(ctx, rec.ID, delay); err != nil {
			log.LogAttrs(ctx, slog.LevelWarn, "retry not sent; the sweeper will send it", slog.String("err_types", errtypes.Of(err)))
		}
	}
	log.LogAttrs(ctx, slog.LevelWarn, "job will retry", slog.String("code", ex.Code), slog.String("cause", ex.Cause),
		slog.Int("max_attempts", k.retry.MaxAttempts), slog.Time("run_at", runAt))
	return ending{ex: ex, retried: true, res: landed}
}

// sendAt sends id's reference to be delivered at runAt: at once when it is
// due, delayed by the queue up to MaxQueueDelay, and beyond that not at all
// (the sweeper sends it when it is due).
func (e *engine) sendAt(ctx context.Context, id string, runAt time.Time) error {
	switch wait := runAt.Sub(e.clock.Now()); {
	case runAt.IsZero() || wait <= 0:
		return e.queue.Send(ctx, id)
	case wait <= driver.MaxQueueDelay:
		return e.queue.SendDelayed(ctx, id, wait)
	default:
		return nil
	}
}

// cancel cancels rec, as read a moment ago: a queued job at once, a running
// one by marking its run (its worker ends it cancelled). It returns
// ErrNotQueued or ErrNotRunning when the job moved meanwhile.
func (e *engine) cancel(ctx context.Context, rec *driver.Record) error {
	switch rec.Status {
	case StatusQueued:
		return e.cancelQueued(ctx, rec)
	case StatusRunning:
		if rec.CancelRequested {
			return nil
		}
		return e.store.RequestCancel(ctx, rec.ID, e.now())
	default:
		return ErrAlreadyFinal
	}
}

// resubmit puts a failed or cancelled job back in the queue for another
// attempt, and sends it (a send that fails is the sweeper's, after the
// grace).
func (e *engine) resubmit(ctx context.Context, rec *driver.Record) error {
	now := e.now()
	err := e.store.Resubmit(ctx, rec.ID, driver.Resubmit{At: now, SweepAt: now.Add(e.grace)})
	if ownWrite(err, StatusQueued, now) {
		err = nil // our write landed; its answer was lost
	}
	if err != nil {
		return err
	}
	if serr := e.sendAt(ctx, rec.ID, now); serr != nil {
		e.log.LogAttrs(ctx, slog.LevelWarn, "retried job not sent; the sweeper will send it",
			slog.String("job_id", rec.ID), slog.String("err_types", errtypes.Of(serr)))
	}
	return nil
}

// cancelQueued moves a queued job to cancelled, then runs its
// post-outcome steps (its count in its batch).
func (e *engine) cancelQueued(ctx context.Context, rec *driver.Record) error {
	now := e.now()
	steps := afterSteps(rec)
	err := e.store.CancelQueued(ctx, rec.ID, driver.CancelQueued{At: now, ExpiresAt: now.Add(e.retention), After: steps})
	if ownWrite(err, StatusCancelled, now) {
		err = nil // our cancel landed; its answer was lost
	}
	if err == nil && len(steps) > 0 {
		done := *rec
		done.Status, done.After = StatusCancelled, steps
		e.after(ctx, &done)
	}
	return err
}

// The post-outcome steps: what must happen exactly once after a job's
// outcome has landed. The final write names them (Outcome.After) and keeps
// the job in the sweep index while they are pending; the worker (or
// whoever wrote the outcome) runs them right after, and if it dies first,
// the sweeper finds the job and runs them (Sweeper). Each step is
// idempotent, so running them twice does them once; DoneAfter clears them
// when all have run.
const (
	// afterBatch counts the job's outcome in its batch, and ends the batch
	// if it was the last.
	afterBatch = "batch"
)

// afterSteps returns the post-outcome steps of rec's outcome; none for a
// plain job, which pays nothing for the mechanism.
func afterSteps(rec *driver.Record) []string {
	if rec.BatchID != "" && rec.BatchShards > 0 {
		return []string{afterBatch}
	}
	return nil
}

// after runs the pending post-outcome steps of the final job rec and, if
// all of them ran, clears them. It reports whether they are done; if not,
// the sweeper runs them again later.
func (e *engine) after(ctx context.Context, rec *driver.Record) bool {
	for _, step := range rec.After {
		var err error
		switch step {
		case afterBatch:
			err = e.countInBatch(ctx, rec)
		default:
			// Written by a newer version: leave it to one that knows it.
			e.log.LogAttrs(ctx, slog.LevelWarn, "unknown post-outcome step left pending", slog.String("job_id", rec.ID), slog.String("step", step))
			return false
		}
		if err != nil {
			e.log.LogAttrs(ctx, slog.LevelWarn, "post-outcome step failed; the sweeper runs it again", slog.String("job_id", rec.ID),
				slog.String("step", step), slog.String("err_types", errtypes.Of(err)))
			return false
		}
	}
	if err := e.store.DoneAfter(ctx, rec.ID); err != nil {
		e.log.LogAttrs(ctx, slog.LevelWarn, "post-outcome steps not cleared; the sweeper will", slog.String("job_id", rec.ID), slog.String("err_types", errtypes.Of(err)))
		return false
	}
	return true
}

// countInBatch counts the final job rec in its batch's shard; if that
// completes the shard, marks it done, and if that completes the batch,
// settles it.
func (e *engine) countInBatch(ctx context.Context, rec *driver.Record) error {
	b := &driver.Batch{ID: rec.BatchID, Total: rec.BatchSize, Shards: rec.BatchShards}
	shard, err := e.store.CountInBatch(ctx, b, driver.BatchCount{Index: rec.BatchIndex, Status: rec.Status, ExpiresAt: e.now().Add(e.retention)})
	if err != nil || !shard.Done() {
		return err
	}
	return e.shardDone(ctx, rec.BatchID, rec.BatchIndex%rec.BatchShards)
}

// shardDone marks a batch's shard done and settles the batch if it was the
// last.
func (e *engine) shardDone(ctx context.Context, batchID string, shard int) error {
	done, err := e.store.ShardDone(ctx, batchID, shard)
	if err != nil {
		return err
	}
	b, err := e.store.GetBatch(ctx, batchID)
	if err != nil {
		return err
	}
	if done < b.Shards {
		return nil
	}
	e.settleBatch(ctx, b)
	return nil
}

// settleBatchOf ends the batch if all its jobs have been counted.
func (e *engine) settleBatchOf(ctx context.Context, batchID string) {
	b, err := e.store.GetBatch(ctx, batchID)
	if err != nil {
		return // the sweeper settles it
	}
	e.settleBatch(ctx, b)
}

// settleBatch ends a batch whose jobs have all been counted: it sums the
// counts from the shards, creates the completion job (once: its id is
// derived from the batch's), records the end with a write conditional on
// every shard being done, then sends the completion job. Anyone may call it
// any number of times; a crash between the steps is finished by the
// sweeper. It reports whether the batch is ended.
func (e *engine) settleBatch(ctx context.Context, b *driver.Batch) bool {
	if b == nil || b.Status != StatusRunning || b.DoneShards < b.Shards || b.Creating {
		return b != nil && b.Status.Final()
	}
	counted, err := e.store.CountBatch(ctx, b)
	if err != nil {
		e.log.LogAttrs(ctx, slog.LevelWarn, "batch counts not read; the sweeper will end it", slog.String("batch_id", b.ID), slog.String("err_types", errtypes.Of(err)))
		return false
	}
	b = counted
	now := e.now()
	if id := b.CompletionJobID(); id != "" {
		counts := BatchCounts{BatchID: b.ID, Total: b.Total, Succeeded: b.Succeeded, Failed: b.Failed, Cancelled: b.Cancelled}
		rec := &driver.Record{ID: id, Kind: b.CompletionKind, Owner: b.Owner, Status: StatusQueued, Payload: b.CompletionPayload,
			RequestHash: "completion-" + b.ID, BatchCounts: &counts, CreatedAt: now, UpdatedAt: now, SweepAt: now.Add(e.grace)}
		if err := e.store.Create(ctx, rec); err != nil && !errors.Is(err, driver.ErrExists) {
			e.log.LogAttrs(ctx, slog.LevelWarn, "batch completion job not created; the sweeper will", slog.String("batch_id", b.ID), slog.String("err_types", errtypes.Of(err)))
			return false
		}
	}
	status := StatusSucceeded
	if b.Failed > 0 || b.Cancelled > 0 {
		status = StatusFailed
	}
	err = e.store.EndBatch(ctx, b.ID, status, now, now.Add(e.retention))
	switch {
	case err == nil:
		e.log.LogAttrs(ctx, slog.LevelInfo, "batch ended", slog.String("batch_id", b.ID), slog.String("status", string(status)),
			slog.Int("total", b.Total), slog.Int("failed", b.Failed), slog.Int("cancelled", b.Cancelled))
	case errors.Is(err, driver.ErrBatchNotDone):
		return true // someone else ended it
	default:
		e.log.LogAttrs(ctx, slog.LevelWarn, "batch end not recorded; the sweeper will", slog.String("batch_id", b.ID), slog.String("err_types", errtypes.Of(err)))
		return false
	}
	if id := b.CompletionJobID(); id != "" && e.queue != nil {
		_ = e.queue.Send(ctx, id) // if lost, the sweeper sends the queued completion job
	}
	return true
}

// abortBatch ends the creation of a batch that never finished it (the
// enqueue that stored it failed or died before storing every job): each of
// its jobs that is still queued is cancelled and counted, each that was
// never stored is counted as cancelled, and the batch is opened so that it
// ends like any other. Jobs that ran meanwhile counted themselves. It costs
// a read or write per job of the batch, once, and is safe to repeat.
func (e *engine) abortBatch(ctx context.Context, b *driver.Batch) error {
	missing := 0
	for i := range b.Total {
		id := wire.BatchJobID(b.ID, i)
		rec, err := e.store.Get(ctx, id)
		switch {
		case errors.Is(err, ErrNotFound):
			// Never stored: counted as cancelled, as its job would be.
			missing++
			gone := &driver.Record{ID: id, Status: StatusCancelled, BatchID: b.ID, BatchIndex: i, BatchSize: b.Total, BatchShards: b.Shards}
			if err := e.countInBatch(ctx, gone); err != nil {
				return err
			}
			continue
		case err != nil:
			return err
		case rec.BatchID != b.ID || rec.Status != StatusQueued:
			continue
		}
		if err := e.cancelQueued(ctx, rec); err != nil && !isConflict(err) {
			return err
		}
	}
	if err := e.store.OpenBatch(ctx, b.ID); err != nil {
		if errors.Is(err, driver.ErrBatchOpened) {
			return nil // a retry of its enqueue finished it, or another sweep aborted it
		}
		return err
	}
	e.log.LogAttrs(ctx, slog.LevelWarn, "batch creation abandoned; its stored jobs that had not started are cancelled",
		slog.String("batch_id", b.ID), slog.Int("total", b.Total), slog.Int("never_stored", missing))
	e.settleBatchOf(ctx, b.ID)
	return nil
}
