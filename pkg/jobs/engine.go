package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/errtypes"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// engine is the one owner of a job's transitions. The Service, the Worker
// and the Sweeper decide nothing about a job's state themselves: they ask
// the engine to create (record, create), claim, publish, end (succeed,
// fail, retry, interrupt), cancel and resubmit a job, and to settle or
// abort a batch; and the engine's delivery rule (deliveryAt) says whether
// the queue or the sweeper brings a job to a worker. docs/reference/STATE_MACHINE.md
// draws what it does.
//
// Every transition is one conditional write in the Store. The engine also
// tells a condition that failed because of our own write (the SDK retried a
// request whose answer was lost; the retry found the job as the write left
// it) from one that failed because someone else got there first: the first
// counts as done, the second leaves the stored outcome alone.
type engine struct {
	// uploads and staging: the store's (uploadsOf); nil when it takes no
	// uploads.
	uploads driver.Uploads
	staging driver.PayloadStager
	reg     *Registry // nil: no kind's retry policy applies (a sweeper without kinds)
	store   driver.Store
	queue   driver.Queue // nil: retries and early deliveries wait for the sweeper
	clock   Clock
	log     *slog.Logger
	grace   time.Duration
	// laneGrace is the dispatch grace of each lane whose worker runs
	// longer than the default lane's (its timeout, plus the same margin);
	// a lane not in it has grace.
	laneGrace map[string]time.Duration
	retention time.Duration
	// bus publishes job events (nil: this role leaves them pending, to a
	// role with a bus); allEvents announces every kind's outcomes.
	bus       driver.Bus
	allEvents bool
	// rand draws ids, claim tokens and jitter (see Rand).
	rand Rand
	// messageFirst: Config.MessageFirst.
	messageFirst bool
	// pauses is this instance's copy of the pause set.
	pauses *pauseSet
	// links links parts kept as objects, and stager writes a large result
	// ahead of its final write, when the store can (driver.PartLinker,
	// ResultStager; store is wrapped, so asked once at the start).
	links  driver.PartLinker
	stager driver.ResultStager
	// signaller stores signals (driver.Signaller; nil: the store keeps
	// none, and no kind declares any).
	signaller driver.Signaller
	// many reads several jobs at once (driver.ManyGetter; nil: the
	// store cannot, and they are read one by one).
	many driver.ManyGetter
	// maxPart is the largest payload or result the store keeps, when it
	// says (driver.ObjectKeeper; 0: it does not).
	maxPart int
}

// newID returns a fresh job id, batch id or claim token.
func (e *engine) newID() string { return e.rand.NewID() }

// jitter returns a duration between d/2 and 3d/2.
func (e *engine) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return d/2 + time.Duration(e.rand.Int64N(int64(d)))
}

// graceOf is the dispatch grace of the lane's jobs.
func (e *engine) graceOf(lane string) time.Duration {
	if g, ok := e.laneGrace[lane]; ok && g > 0 {
		return g
	}
	return e.grace
}

// newEngine returns e with its defaults filled in: the wall clock, the
// default logger, DefaultDispatchGrace and DefaultRetention.
func newEngine(e engine) *engine {
	if e.grace <= 0 {
		e.grace = DefaultDispatchGrace
	}
	if e.retention <= 0 {
		e.retention = DefaultRetention
	}
	e.clock, e.log, e.rand = orClock(e.clock), orLogger(e.log), orRand(e.rand)
	if e.pauses == nil {
		e.pauses = &pauseSet{}
	}
	e.pauses.clock, e.pauses.log = e.clock, e.log
	return &e
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
	// continued: sent back to the queue to go on (a continuation); parked:
	// sent back to wait for a slot or a rate
	continued, parked bool
	res               result
	// keep: the job went back to the queue without a sweep entry but its
	// new message was not sent: the held message must come back (it
	// brings the job to a worker after its visibility timeout).
	keep bool
}

// comesBack reports whether the message that brought the run must come
// back rather than be acknowledged.
func (e ending) comesBack() bool { return e.res == unsettled || e.keep }

// netOf returns the sweep time d gives a job going back to the queue in
// run r: none when, with message first, r holds the job's message and d
// sends a new one (the held message is its net until that send).
func (e *engine) netOf(r run, d delivery) time.Time {
	if e.messageFirst && r.held && d.send {
		return time.Time{}
	}
	return d.sweepAt
}

// sent handles the send of the new message of a job that a run sent back
// to the queue (what, in the log) and reports whether the held message must
// come back: the send failed and the job has no sweep entry.
func (e *engine) sent(ctx context.Context, log *slog.Logger, sweepAt time.Time, what string, err error) (keep bool) {
	switch {
	case err == nil:
		return false
	case sweepAt.IsZero():
		log.LogAttrs(ctx, slog.LevelWarn, what+" not sent; the message that brought it comes back", slog.String("err_types", errtypes.Of(err)))
		return true
	default:
		log.LogAttrs(ctx, slog.LevelWarn, what+" not sent; the sweeper will send it", slog.String("err_types", errtypes.Of(err)))
		return false
	}
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
	return errors.Is(err, ErrLostClaim) || errors.Is(err, errNotQueued) || errors.Is(err, ErrNotFound) ||
		errors.Is(err, errCancelRequested) || errors.Is(err, errNotRunning)
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

// run is a run of a job that end settles: the job as its claim returned it
// (or as read, for a run whose lease ended), the claim token every write of
// the run is conditional on, and when it started. leaseBy, when set, makes
// the final write also conditional on the lease having ended by then (an
// interrupted run, settled by the sweeper or by a redelivery).
type run struct {
	rec              *driver.Record
	token            string
	started, leaseBy time.Time
	// keeper, for a kind with heartbeats, learns of each renewal of the
	// run's lease (see leaseKeeper).
	keeper *leaseKeeper
	// held: the caller holds a message of the job (the one it claimed the
	// job from) that it acknowledges only after end returns. With message
	// first, a retry or continuation whose new message is sent then needs
	// no sweep entry: until the send, the held message is the job's net.
	held bool
}

// end records how run r ended: a failed run whose kind allows another
// attempt goes back to the queue, anything else is final. A run whose
// owner cancelled it ends cancelled. ctx bounds every call (the
// final-write budget).
func (e *engine) end(ctx context.Context, r run, ex execution) ending {
	end := e.decide(ctx, r, ex)
	recordEnding(ctx, r.rec, end, r.started, e.now())
	return end
}

func (e *engine) decide(ctx context.Context, r run, ex execution) ending {
	rec := r.rec
	// A run's lines name its attempt only when it is not the first.
	attrs := []any{slog.String("job_id", rec.ID), slog.String("kind", rec.Kind)}
	if rec.Attempt > 1 {
		attrs = append(attrs, slog.Int("attempt", rec.Attempt))
	}
	log := e.log.With(attrs...)
	if rec.CancelRequested {
		ex = execution{Status: StatusCancelled, Cause: "cancelled"}
	}
	if ex.Continue {
		return e.continueRun(ctx, log, r, ex)
	}
	if ex.WaitOn != "" {
		// Its handler suspended (Sleep): the job waits, holding nothing.
		return e.park(ctx, r, &admission{on: ex.WaitOn, runAt: ex.WaitUntil, delay: ex.WaitUntil.Sub(e.now()), ran: true, state: ex.Checkpoint, marks: ex.Marks})
	}
	if ex.Status == StatusFailed && e.reg != nil {
		if k, ok := e.reg.lookup(rec.Kind); ok && shouldRetry(k.retry, ex, rec.Attempt-rec.AttemptBase) {
			return e.requeue(ctx, log, k, r, ex)
		}
	}
	return e.finish(ctx, log, r, ex)
}

// retentionOf is how long a finished job of kind stays readable: its
// kind's KindOpts.Retention, else the deployment's. Every final write of a
// job takes its expiry from here.
func (e *engine) retentionOf(kind string) time.Duration {
	if e.reg != nil {
		if k, ok := e.reg.lookup(kind); ok && k.retention > 0 {
			return k.retention
		}
	}
	return e.retention
}

// interrupt settles a running job whose lease has ended (its worker died
// or never landed its final write): a retry if its kind allows one, else
// failed as interrupted; cancelled if its owner cancelled it. held says
// the caller holds a message of the job (a redelivery; see run.held).
// Conditional on
// its claim token and its lease, so a late worker or another sweeper racing
// it cannot produce a second outcome.
func (e *engine) interrupt(ctx context.Context, cur *driver.Record, held bool) ending {
	return e.end(ctx, run{rec: cur, token: cur.ClaimToken, started: cur.StartedAt, leaseBy: e.now(), held: held},
		execution{Status: StatusFailed, Code: CodeInterrupted, Cause: "lease_expired"})
}

// finish writes a run's final outcome.
func (e *engine) finish(ctx context.Context, log *slog.Logger, r run, ex execution) ending {
	rec := r.rec
	at := e.now()
	retention := e.retentionOf(rec.Kind)
	var out driver.Outcome
	write := func(ex execution) error {
		// The post-outcome steps follow the marks the write stores (a
		// cancelled parent's wait for a child: afterChildren).
		for try := 0; ; try++ {
			arec := rec
			if ex.Marks != "" {
				c := *rec
				c.StepMarks = ex.Marks
				arec = &c
			}
			out = driver.Outcome{Status: ex.Status, Result: ex.Result, Staged: ex.Staged, ResultUntil: at.Add(retention), Code: ex.Code, At: at, ExpiresAt: at.Add(retention), Marks: ex.Marks,
				LeaseExpiredBy: r.leaseBy, KeepLease: ex.Abandoned, After: afterSteps(arec, ex.Status), Seq: outcomeSeq(rec),
				Dependents: len(rec.Dependents)}
			if ex.Status == StatusCancelled {
				out.Result = nil
				if ex.Code != CodeExpired {
					out.Code = ""
				}
			}
			err := e.store.Finish(ctx, rec.ID, r.token, out)
			if ownWrite(err, out.Status, at) {
				return nil
			}
			if cur := dependentsChanged(err, rec); cur != nil {
				if try > hardMaxDependents || ctx.Err() != nil {
					// Not superseded: the outcome is still this run's to
					// write; the job stays running for the redelivery.
					return fmt.Errorf("jobs: dependents kept arriving during the final write: %w", ctx.Err())
				}
				// A job that runs after this one was enqueued while it ran:
				// write again with it among the steps' dependents (each
				// try, another landed; a job takes a bounded number).
				fresh := *rec
				fresh.Dependents = cur.Dependents
				rec = &fresh
				continue
			}
			return err
		}
	}
	err := write(ex)
	if errors.Is(err, errCancelRequested) {
		// Cancelled while it ran, unnoticed: no other outcome may land.
		ex = execution{Status: StatusCancelled, Cause: "cancelled"}
		err = write(ex)
	}
	switch {
	case err == nil:
		// The run's one line: its status is in the message ("job
		// succeeded", "job failed", "job cancelled").
		var attrs []slog.Attr
		if !r.started.IsZero() {
			attrs = append(attrs, slog.Int64("duration_ms", at.Sub(r.started).Milliseconds()))
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
		log.LogAttrs(ctx, level, "job "+string(ex.Status), attrs...)
		if len(out.After) > 0 {
			done := *rec
			done.Status, done.After, done.ErrorCode, done.FinishedAt = out.Status, out.After, out.Code, at
			if out.Seq > 0 {
				done.Outcomes = out.Seq
			}
			if out.Result != nil {
				done.Result = out.Result
			}
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

// requeue sends a failed run back to the queue for another attempt at
// run_at, after the backoff, delivered as the delivery rule says (by the
// queue's delay up to 15 minutes, beyond that by the sweeper).
func (e *engine) requeue(ctx context.Context, log *slog.Logger, k *kindDef, r run, ex execution) ending {
	rec := r.rec
	now := e.now()
	delay := ex.RetryDelay
	if delay <= 0 {
		delay = k.retry.backoff(rec.Attempt-rec.AttemptBase, e.rand)
	}
	runAt := now.Add(delay).Truncate(time.Millisecond)
	if ex.Abandoned && rec.LeaseUntil.After(runAt) {
		// Its handler may still be running until the lease ends: no second
		// run of the job before then.
		runAt = rec.LeaseUntil
	}
	d := e.deliveryAt(now, runAt, rec.Lane)
	sweepAt := e.netOf(r, d)
	e.keepPayloadUntil(ctx, rec, now, runAt)
	err := e.store.Requeue(ctx, rec.ID, r.token, driver.Requeue{At: now, RunAt: runAt, SweepAt: sweepAt, LastError: ex.Code, LeaseExpiredBy: r.leaseBy})
	if ownWrite(err, StatusQueued, now) {
		err = nil // our requeue landed; its answer was lost
	}
	switch {
	case errors.Is(err, errCancelRequested):
		return e.finish(ctx, log, r, execution{Status: StatusCancelled, Cause: "cancelled"})
	case isConflict(err):
		log.LogAttrs(ctx, slog.LevelWarn, "job was settled by someone else before this write", slog.String("outcome_dropped", "retry"))
		return ending{ex: ex, res: superseded}
	case err != nil:
		log.LogAttrs(ctx, slog.LevelError, "retry write failed; the job stays running until a redelivery or the sweeper settles it",
			slog.String("err_types", errtypes.Of(err)))
		return ending{ex: ex, res: unsettled}
	}
	keep := e.sent(ctx, log, sweepAt, "retry", e.deliver(ctx, rec, d))
	log.LogAttrs(ctx, slog.LevelWarn, "job will retry", slog.String("code", ex.Code), slog.String("cause", ex.Cause),
		slog.Int("max_attempts", k.retry.MaxAttempts), slog.Time("run_at", runAt))
	return ending{ex: ex, retried: true, res: landed, keep: keep}
}

// continueRun ends run r in a continuation: the job goes back to its queue
// at once, the attempt its claim counted given back, with the checkpoint
// the run ended with (if any), and is sent now.
func (e *engine) continueRun(ctx context.Context, log *slog.Logger, r run, ex execution) ending {
	rec := r.rec
	now := e.now()
	d := e.deliveryAt(now, now, rec.Lane)
	sweepAt := e.netOf(r, d)
	err := e.store.Requeue(ctx, rec.ID, r.token, driver.Requeue{At: now, RunAt: now, SweepAt: sweepAt, LeaseExpiredBy: r.leaseBy,
		Continue: true, Checkpoint: ex.Checkpoint, CheckpointUntil: e.payloadKeep(rec.Kind, now, now), Marks: ex.Marks})
	if ownWrite(err, StatusQueued, now) {
		err = nil
	}
	switch {
	case errors.Is(err, errCancelRequested):
		return e.finish(ctx, log, r, execution{Status: StatusCancelled, Cause: "cancelled"})
	case isConflict(err):
		log.LogAttrs(ctx, slog.LevelWarn, "job was settled by someone else before this write", slog.String("outcome_dropped", "continue"))
		return ending{ex: ex, res: superseded}
	case err != nil:
		log.LogAttrs(ctx, slog.LevelError, "continuation write failed; the job stays running until a redelivery or the sweeper settles it",
			slog.String("err_types", errtypes.Of(err)))
		return ending{ex: ex, res: unsettled}
	}
	keep := e.sent(ctx, log, sweepAt, "continuation", e.deliver(ctx, rec, d))
	log.LogAttrs(ctx, slog.LevelInfo, "job continues", slog.Int("continuations", rec.Continuations+1), slog.String("cause", ex.Cause))
	return ending{ex: ex, continued: true, res: landed, keep: keep}
}

// Creating a job. Every path that makes one (an enqueue and a batch's
// jobs, a foreign message, a schedule's fire, a batch's completion job)
// says what it knows in a newJob; record builds the queued record from it
// and create stores it, so the rules of a new job are written once: queued,
// created and updated at its creation time, its run time at the store's
// precision, its sweep time the delivery rule's, and created once even when
// the answer to its put is lost.

// newJob is a job to create.
type newJob struct {
	id, kind, owner string
	payload         []byte // as stored: canonical, its secret fields sealed
	// staged names the payload when it was written before (an upload's).
	staged      driver.Staged
	requestHash string
	// at is its creation time (engine.now); runAt when it may run (zero,
	// or not after at: at once).
	at, runAt time.Time
	// fresh: its id was drawn for it (wire.NewID), so a job already under
	// that id is this very write, retried by the SDK after its answer was
	// lost. A derived id (an idempotency key, a message, a fire, a batch)
	// may be another request's.
	fresh bool
	// batch and index place a batch's job in its batch; counts are the
	// counts a batch's completion job reports.
	batch  *driver.Batch
	index  int
	counts *BatchCounts
	// lane, when set, overrides the kind's lane (EnqueueOpts.Lane);
	// tenant is EnqueueOpts.Tenant.
	lane, tenant string
	// uniqueKey, uniqueUntil: the unique key the job holds and when it is
	// released (see driver.Record); startBy: EnqueueOpts.StartBy.
	uniqueKey, uniqueUntil string
	startBy                time.Time
	// parents: EnqueueOpts.After (the job waits on them); replayOf: the
	// job a replay replays.
	parents  []string
	replayOf string
	// manualRunOf: the schedule Service.RunNow ran by hand; childOf: the
	// job whose handler enqueued it (Kind.EnqueueChild).
	manualRunOf, childOf string
	// awaitedAs: the name the parent that waits for it gave it (Invoke).
	awaitedAs string
	// tags: EnqueueOpts.Tags.
	tags map[string]string
	// sentFirst: its message was sent before it is stored (sendFirst):
	// with message first, a job due within the queue's delay that waits on
	// no parent then needs no sweep entry.
	sentFirst bool
}

// record returns the queued record of j.
func (e *engine) record(j newJob) *driver.Record {
	runAt := time.Time{}
	if j.runAt.After(j.at) {
		runAt = j.runAt.Truncate(time.Millisecond)
	}
	rec := &driver.Record{
		ID: j.id, Kind: j.kind, Owner: j.owner, Status: StatusQueued, Payload: j.payload, RequestHash: j.requestHash,
		CreatedAt: j.at, UpdatedAt: j.at, RunAt: runAt, BatchCounts: j.counts,
	}
	if j.staged.Ref != "" {
		rec.PayloadRef, rec.PayloadBytes = j.staged.Ref, j.staged.Bytes
	}
	if b := j.batch; b != nil {
		rec.BatchID, rec.BatchIndex, rec.BatchSize, rec.BatchShards = b.ID, j.index, b.Total, b.Shards
	}
	rec.Lane, rec.Tenant = j.lane, j.tenant
	rec.UniqueKey, rec.UniqueUntil, rec.StartBy = j.uniqueKey, j.uniqueUntil, j.startBy
	if len(j.parents) > 0 {
		rec.Parents, rec.WaitingOn = j.parents, driver.WaitParents
	}
	rec.ReplayOf, rec.ManualRunOf, rec.ChildOf, rec.AwaitedAs = j.replayOf, j.manualRunOf, j.childOf, j.awaitedAs
	if len(j.tags) > 0 {
		rec.Tags = maps.Clone(j.tags)
	}
	rec.Events = e.allEvents
	if e.reg != nil {
		if k, ok := e.reg.lookup(j.kind); ok {
			if rec.Lane == "" {
				rec.Lane = k.lane
			}
			rec.Events = rec.Events || k.events
			rec.OnFailure = k.onFailure
			rec.QueueCapped = k.caps.kind > 0
		}
	}
	d := e.deliveryAt(j.at, runAt, rec.Lane)
	rec.SweepAt = d.sweepAt
	if e.messageFirst && j.sentFirst && d.send {
		rec.SweepAt = time.Time{}
	}
	if len(rec.Parents) > 0 {
		// Until it has registered on its parents, the sweeper looks at it
		// the grace after its creation, however far its run time.
		rec.SweepAt = j.at.Add(e.graceOf(rec.Lane))
	}
	rec.PayloadUntil = e.payloadUntil(rec, j.at, runAt)
	return rec
}

// create stores j's record and returns it. The error is nil when the
// record is stored: by this write, or by this write's earlier try whose
// answer was lost (the job under a fresh id with j's owner, request and
// creation time). When a job was already stored under the id (an earlier
// request with the same idempotency key, an earlier delivery of the same
// message or fire), it is a *driver.ConflictError matching
// driver.ErrExists that carries that job when the store read it: whether
// it is the same job is the caller's to judge. Any other error: nothing is
// known to be stored.
func (e *engine) create(ctx context.Context, j newJob) (*driver.Record, error) {
	rec := e.record(j)
	err := e.store.Create(ctx, rec)
	var ce *driver.ConflictError
	if j.fresh && errors.As(err, &ce) && errors.Is(err, driver.ErrExists) && ce.Current != nil &&
		ce.Current.Owner == rec.Owner && ce.Current.RequestHash == rec.RequestHash && ce.Current.CreatedAt.Equal(rec.CreatedAt) {
		return rec, nil // our own put, retried by the SDK after its answer was lost
	}
	return rec, err
}

// The delivery rule: who brings a queued job to a worker, the queue or the
// sweeper. A job due now is sent at once; one due within the queue's
// longest delay (driver.MaxQueueDelay, SQS's 15 minutes) is sent delayed
// until then; either way the sweeper looks at it the dispatch grace after
// it is due, in case its message never arrives. A job due later, or any
// delayed job when there is no queue, is not sent: its sweep time is its
// run time, and the sweeper sends it then. Creation, a retry, a resubmit,
// an early delivery sent again, a hand-back and the sweeper's sends all
// follow it (deliveryAt, then deliver).

// delivery is what the rule decided for one job.
type delivery struct {
	send    bool          // send its reference to the queue now...
	delay   time.Duration // ...to be delivered after this (0: at once)
	sweepAt time.Time     // when the sweeper looks at it
}

// deliveryAt applies the delivery rule at now to a job of lane due at
// runAt (zero: now), with the lane's grace.
func (e *engine) deliveryAt(now, runAt time.Time, lane string) delivery {
	grace := e.graceOf(lane)
	switch wait := runAt.Sub(now); {
	case runAt.IsZero() || wait <= 0:
		return delivery{send: e.queue != nil, sweepAt: now.Add(grace)}
	case e.queue != nil && wait <= driver.MaxQueueDelay:
		return delivery{send: true, delay: wait, sweepAt: runAt.Add(grace)}
	default:
		return delivery{sweepAt: runAt}
	}
}

// deliver sends rec's reference as d says: nothing when the sweeper
// delivers it.
func (e *engine) deliver(ctx context.Context, rec *driver.Record, d delivery) error {
	return e.deliverMessage(ctx, messageOf(rec), d)
}

// deliverMessage sends m as d says (its delay d's).
func (e *engine) deliverMessage(ctx context.Context, m driver.Message, d delivery) error {
	if !d.send {
		return nil
	}
	m.Delay = d.delay
	return e.queue.Send(ctx, m)
}

// messageOf is rec's message: its lane's queue, its tenant's group.
func messageOf(rec *driver.Record) driver.Message {
	return driver.Message{JobID: rec.ID, Lane: rec.Lane, Group: groupOf(rec), Kind: rec.Kind, OwnerKey: ownerKeyOf(rec.Owner)}
}

// ownerKeyOf is owner's key (wire.OwnerKey), "" for no owner.
func ownerKeyOf(owner string) string {
	if owner == "" {
		return ""
	}
	return wire.OwnerKey(owner)
}

// groupOf is the message group of rec's tenant, within its owner's
// (wire.TenantOf: the owner's own group by default).
func groupOf(rec *driver.Record) string {
	if rec.Owner == "" {
		return ""
	}
	return wire.GroupID(wire.TenantOf(rec.Owner, rec.Tenant))
}

// deliverAll delivers the jobs recs, each as the delivery rule says at
// now, those due at once in as few requests as the queue can.
func (e *engine) deliverAll(ctx context.Context, now time.Time, recs []*driver.Record) error {
	var msgs []driver.Message
	for _, rec := range recs {
		if d := e.deliveryAt(now, rec.RunAt, rec.Lane); d.send {
			m := messageOf(rec)
			m.Delay = d.delay
			msgs = append(msgs, m)
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return e.queue.Send(ctx, msgs...)
}

// cancel cancels rec, as read a moment ago: a queued job at once, a running
// one by marking its run (its worker ends it cancelled). It returns
// errNotQueued or errNotRunning when the job moved meanwhile.
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
	if len(rec.After) > 0 {
		// The last outcome's steps (its event, its follow-up) first: the
		// store refuses a resubmit while they are pending.
		e.after(ctx, rec)
	}
	if len(rec.Parents) > 0 {
		// A job whose parent failed waits for that parent's retry: it
		// comes back when the parent succeeds.
		i, err := e.failedParent(ctx, rec)
		if err != nil {
			return err
		}
		if i >= 0 {
			return refuse(CodeDependencyFailed, fmt.Sprintf(`"after"[%d] failed or was cancelled: retry that job; this one comes back when it succeeds`, i))
		}
	}
	_, err := e.resubmitAs(ctx, rec)
	return err
}

// resubmitAs puts the failed or cancelled rec back in the queue and sends
// it; a job with parents waits on them again instead (awaitParents). It
// returns the job as it then is.
func (e *engine) resubmitAs(ctx context.Context, rec *driver.Record) (*driver.Record, error) {
	now := e.now()
	d := e.deliveryAt(now, time.Time{}, rec.Lane)
	rs := driver.Resubmit{At: now, SweepAt: d.sweepAt}
	if len(rec.Parents) > 0 {
		rs.WaitingOn = driver.WaitParents
	}
	err := e.store.Resubmit(ctx, rec.ID, rs)
	if ownWrite(err, StatusQueued, now) {
		err = nil // our write landed; its answer was lost
	}
	if err != nil {
		return nil, err
	}
	if len(rec.Parents) > 0 {
		// In the sweep schedule until it waits: the sweeper finishes what
		// this does not.
		cur, err := e.store.Get(ctx, rec.ID)
		if err == nil {
			cur, err = e.awaitParents(ctx, cur)
		}
		if err != nil {
			e.log.LogAttrs(ctx, slog.LevelWarn, "retried job's parents not all read; the sweeper finishes it",
				slog.String("job_id", rec.ID), slog.String("err_types", errtypes.Of(err)))
		}
		return cur, nil
	}
	if serr := e.deliver(ctx, rec, d); serr != nil {
		e.log.LogAttrs(ctx, slog.LevelWarn, "retried job not sent; the sweeper will send it",
			slog.String("job_id", rec.ID), slog.String("err_types", errtypes.Of(serr)))
	}
	return rec, nil
}

// cancelQueued moves a queued job to cancelled, then runs its
// post-outcome steps (its count in its batch).
func (e *engine) cancelQueued(ctx context.Context, rec *driver.Record) error {
	_, err := e.cancelQueuedAs(ctx, rec, "", "")
	return err
}

// cancelQueuedAs is cancelQueued with the cancelled job's code and the
// parent whose failure cancelled it (dependency_failed) when set; it
// returns the job as cancelled.
func (e *engine) cancelQueuedAs(ctx context.Context, rec *driver.Record, code, by string) (*driver.Record, error) {
	now := e.now()
	var steps []string
	var seq int
	var err error
	for try := 0; ; try++ {
		steps, seq = afterSteps(rec, StatusCancelled), outcomeSeq(rec)
		err = e.store.CancelQueued(ctx, rec.ID, driver.CancelQueued{At: now, ExpiresAt: now.Add(e.retentionOf(rec.Kind)), After: steps, Seq: seq,
			Code: code, CancelledBy: by, Dependents: len(rec.Dependents)})
		if ownWrite(err, StatusCancelled, now) {
			err = nil // our cancel landed; its answer was lost
		}
		if cur := dependentsChanged(err, rec); cur != nil && try <= hardMaxDependents && ctx.Err() == nil {
			rec = cur
			continue
		}
		break
	}
	if err != nil {
		return rec, err
	}
	done := *rec
	done.Status, done.After, done.ErrorCode, done.CancelledBy, done.FinishedAt, done.WaitingOn = StatusCancelled, steps, code, by, now, ""
	if seq > 0 {
		done.Outcomes = seq
	}
	if len(steps) > 0 && inlineSteps(ctx) {
		e.after(ctx, &done)
	}
	return &done, nil
}

// dependentsChanged returns the job as the store found it when a final
// write of rec failed only because a dependent was recorded since rec was
// read (nil otherwise): the write goes again with it.
func dependentsChanged(err error, rec *driver.Record) *driver.Record {
	var ce *driver.ConflictError
	if !errors.As(err, &ce) || ce.Current == nil {
		return nil
	}
	cur := ce.Current
	if cur.Status != rec.Status || cur.ClaimToken != rec.ClaimToken || len(cur.Dependents) == len(rec.Dependents) {
		return nil
	}
	return cur
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
	// afterUnique frees the unique key the job held (a uniqueness until
	// the job finished, or a start that could not free it).
	afterUnique = "unique"
	// afterFollowUp and afterEvent: see events.go; afterDependents:
	// parents.go; afterParent and afterChildren: invoke.go. The event runs last, once every other step has: it is
	// batched (announce).
)

// afterSteps returns the post-outcome steps of rec's outcome st; none for
// a plain job, which pays nothing for the mechanism.
func afterSteps(rec *driver.Record, st Status) []string {
	var steps []string
	if rec.BatchID != "" && rec.BatchShards > 0 {
		steps = append(steps, afterBatch)
	}
	if rec.UniqueKey != "" && rec.UniqueUntil != "" {
		steps = append(steps, afterUnique)
	}
	if rec.OnFailure != "" && st == StatusFailed {
		steps = append(steps, afterFollowUp)
	}
	if len(rec.Dependents) > 0 {
		steps = append(steps, afterDependents)
	}
	if rec.ChildOf != "" && rec.AwaitedAs != "" {
		steps = append(steps, afterParent)
	}
	if _, waits := awaitedChild(rec.StepMarks); waits && st == StatusCancelled {
		steps = append(steps, afterChildren)
	}
	if rec.Events {
		steps = append(steps, afterEvent)
	}
	return steps
}

// after runs the pending post-outcome steps of the final job rec and, if
// all of them ran, clears them. It reports whether they are done (or, for
// an event, handed to ctx's outbox, which clears them when it is sent);
// if not, the sweeper runs them again later.
func (e *engine) after(ctx context.Context, rec *driver.Record) bool {
	event := false
	for _, step := range rec.After {
		var err error
		switch step {
		case afterBatch:
			err = e.countInBatch(ctx, rec)
		case afterUnique:
			err = e.store.ReleaseUnique(ctx, rec.UniqueKey, rec.ID)
		case afterFollowUp:
			err = e.followUp(ctx, rec)
		case afterDependents:
			err = e.settleDependents(ctx, rec)
		case afterParent:
			err = e.notifyParent(ctx, rec)
		case afterChildren:
			err = e.cancelChildren(ctx, rec)
		case afterEvent:
			event = true
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
	if event {
		// A succeeded job's result in an item of its own, on a record
		// read back (the sweeper's): read for the event, which carries it
		// up to 8 KiB (eventOf names where to read it otherwise).
		if rec.Status == StatusSucceeded {
			if err := e.withResult(ctx, rec); err != nil {
				e.log.LogAttrs(ctx, slog.LevelWarn, "post-outcome step failed; the sweeper runs it again", slog.String("job_id", rec.ID),
					slog.String("step", afterEvent), slog.String("err_types", errtypes.Of(err)))
				return false
			}
		}
		if ob, ok := ctx.Value(outboxKey{}).(*outbox); ok && e.bus != nil {
			ob.add(rec)
			return true
		}
		return len(e.announce(ctx, []*driver.Record{rec})) == 0
	}
	if err := e.store.DoneAfter(ctx, rec.ID, driver.AfterOfRecord(rec)); err != nil {
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
	var completion *driver.Record
	if b.CompletionKind == driver.WakesParent {
		// Before the end is recorded: a crash in between leaves the batch
		// to the sweeper, which wakes the job again (a duplicate signal
		// changes nothing). The job takes a batch whose shards are all
		// done as ended.
		if err := e.wakeParent(ctx, b); err != nil {
			e.log.LogAttrs(ctx, slog.LevelWarn, "batch's job not woken; the sweeper will", slog.String("batch_id", b.ID), slog.String("err_types", errtypes.Of(err)))
			return false
		}
	}
	if id := b.CompletionJobID(); id != "" {
		counts := BatchCounts{BatchID: b.ID, Total: b.Total, Succeeded: b.Succeeded, Failed: b.Failed, Cancelled: b.Cancelled}
		// Created once: its id is derived from the batch's.
		completion, err = e.create(ctx, newJob{id: id, kind: b.CompletionKind, owner: b.Owner, payload: b.CompletionPayload,
			requestHash: "completion-" + b.ID, at: now, counts: &counts})
		if err != nil && !errors.Is(err, driver.ErrExists) {
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
	case errors.Is(err, errBatchNotDone):
		return true // someone else ended it
	default:
		e.log.LogAttrs(ctx, slog.LevelWarn, "batch end not recorded; the sweeper will", slog.String("batch_id", b.ID), slog.String("err_types", errtypes.Of(err)))
		return false
	}
	if completion != nil {
		_ = e.deliver(ctx, completion, e.deliveryAt(now, completion.RunAt, completion.Lane)) // if lost, the sweeper sends the queued completion job
	}
	return true
}

// abortWorkers bounds the jobs an abandoned batch's abort handles at once.
const abortWorkers = 16

// abortJob ends the i-th job of the abandoned batch b: counted cancelled if
// it was never stored (it reports 1), cancelled if still queued, left to
// its run otherwise.
func (e *engine) abortJob(ctx context.Context, b *driver.Batch, i int) (missing int, err error) {
	id := wire.BatchJobID(b.ID, i)
	rec, err := e.store.Get(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		// Never stored: counted as cancelled, as its job would be.
		gone := &driver.Record{ID: id, Status: StatusCancelled, BatchID: b.ID, BatchIndex: i, BatchSize: b.Total, BatchShards: b.Shards}
		return 1, e.countInBatch(ctx, gone)
	case err != nil:
		return 0, err
	case rec.BatchID != b.ID || rec.Status != StatusQueued:
		return 0, nil
	}
	if err := e.cancelQueued(ctx, rec); err != nil && !isConflict(err) {
		return 0, err
	}
	return 0, nil
}

// abortBatch ends the creation of a batch that never finished it (the
// enqueue that stored it failed or died before storing every job): each of
// its jobs that is still queued is cancelled and counted, each that was
// never stored is counted as cancelled, and the batch is opened so that it
// ends like any other. Jobs that ran meanwhile counted themselves. It costs
// a read or write per job of the batch, once, and is safe to repeat.
func (e *engine) abortBatch(ctx context.Context, b *driver.Batch) error {
	// abortWorkers jobs at once: a 10,000-job batch is aborted within a
	// sweep or two, not restarted from its first job by every sweep. A
	// job already cancelled costs its read on a later sweep, nothing more.
	var (
		mu      sync.Mutex
		missing int
		failed  error
		wg      sync.WaitGroup
		next    = make(chan int)
	)
	for range min(abortWorkers, b.Total) {
		wg.Go(func() {
			for i := range next {
				n, err := e.abortJob(ctx, b, i)
				mu.Lock()
				missing += n
				if err != nil && failed == nil {
					failed = err
				}
				mu.Unlock()
			}
		})
	}
	for i := range b.Total {
		mu.Lock()
		stop := failed != nil
		mu.Unlock()
		if stop || ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if failed != nil {
		return failed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := e.store.OpenBatch(ctx, b.ID); err != nil {
		if errors.Is(err, errBatchOpened) {
			return nil // a retry of its enqueue finished it, or another sweep aborted it
		}
		return err
	}
	e.log.LogAttrs(ctx, slog.LevelWarn, "batch creation abandoned; its stored jobs that had not started are cancelled",
		slog.String("batch_id", b.ID), slog.Int("total", b.Total), slog.Int("never_stored", missing))
	e.settleBatchOf(ctx, b.ID)
	return nil
}
