package jobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/errtypes"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/internal/metricnames"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Worker runs the jobs referenced by an SQS batch. It is the worker Lambda's
// handler: see HandleSQS.
type Worker struct {
	// holds: kind -> this worker's moving average of its runs' holds of
	// their slots (see overflowWait).
	holds sync.Map
	// busy: the slot keys this worker last found full (see busyHints);
	// popper: the store, when its slots pass from run to run.
	busy   busyHints
	popper driver.WaiterPopper
	eng    *engine
	// children enqueues the jobs handlers start (Kind.EnqueueChild).
	children    *Service
	reg         *Registry
	log         *slog.Logger
	concurrency int
	deadlines   Deadlines
	sealer      Sealer
	hasher      requestHasher
	routes      *Routes
	cancelCheck time.Duration
	metrics     *Metrics
	tracer      Tracer
	lane        string
	// slow lists the kinds whose minimum run time is above the default,
	// slowest first.
	slow []kindMin
	// abandoned counts handlers abandoned at their deadline that have not
	// returned yet.
	abandoned atomic.Int64
}

type kindMin struct {
	kind string
	min  time.Duration
}

// newWorker returns the Worker of cfg (see NewClient).
func newWorker(cfg Config, eng *engine) (*Worker, error) {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	cfg.Deadlines = cfg.Deadlines.withDefaults()
	if err := cfg.Deadlines.Validate(0); err != nil {
		return nil, err
	}
	if err := cfg.Deadlines.checkKinds(cfg.Registry, cfg.Lane, cfg.WorkerTimeout); err != nil {
		return nil, err
	}
	if err := cfg.Routes.check(cfg.Registry); err != nil {
		return nil, err
	}
	w := &Worker{
		eng: eng,
		reg: cfg.Registry, log: orLogger(cfg.Logger), concurrency: cfg.Concurrency, deadlines: cfg.Deadlines,
		sealer: cfg.Sealer, hasher: newRequestHasher(cfg.Sealer), routes: cfg.Routes, cancelCheck: cfg.CancelCheck,
		metrics: cfg.Metrics, tracer: cfg.Tracer, lane: cfg.Lane,
	}
	if !driver.ValidLane(cfg.Lane) {
		return nil, fmt.Errorf("jobs: lane %q: want a lower-case letter, then up to 15 lower-case letters, digits or '-', not \"default\"", cfg.Lane)
	}
	if w.cancelCheck == 0 {
		w.cancelCheck = 5 * time.Second
	}
	w.popper, _ = cfg.Store.(driver.WaiterPopper)
	for _, name := range cfg.Registry.Kinds() {
		if k, _ := cfg.Registry.lookup(name); k.minRun > cfg.Deadlines.MinRun {
			w.slow = append(w.slow, kindMin{name, k.minRun})
		}
	}
	slices.SortFunc(w.slow, func(a, b kindMin) int { return cmp.Compare(b.min, a.min) })
	return w, nil
}

// Abandoned returns how many handlers this worker abandoned at their
// deadline that are still running: their goroutines live on until they
// return, beyond the worker's control.
func (w *Worker) Abandoned() int { return int(w.abandoned.Load()) }

// HandleSQS runs the batch's jobs, up to the configured concurrency at once,
// and returns the ids of the messages that must come back: those whose job
// could not be claimed or settled because of a transient error or a call
// that did not answer in time, whose job is not visible yet, that are not
// job messages at all (they reach the dead-letter queue after
// maxReceiveCount), and those it did not start because too little time was
// left (no attempt spent). A job recorded as failed is never listed: handler
// failures are final. It never returns an error, so one record cannot fail
// the whole batch, and it answers before the Lambda deadline whatever
// DynamoDB and SQS do (see Deadlines).
func (w *Worker) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	inv := w.deadlines.plan(ctx)
	m := w.metrics.batch()
	ctx = withMetrics(ctx, m)
	defer func() { w.metrics.flush(m, w.eng.clock.Now()) }()
	ctx, ob := withOutbox(ctx)
	ctx = context.WithValue(ctx, batchJobsKey{}, &batchJobs{locks: map[string]*sync.Mutex{}})
	var (
		mu       sync.Mutex
		failures []events.SQSBatchItemFailure
		wg       sync.WaitGroup
		sem      = make(chan struct{}, w.concurrency)
	)
	run := func(msg *events.SQSMessage) {
		defer func() { <-sem }()
		if retry := w.handleRecord(ctx, inv, msg); retry {
			mu.Lock()
			failures = append(failures, events.SQSBatchItemFailure{ItemIdentifier: msg.MessageId})
			mu.Unlock()
		}
	}
	for i := range ev.Records {
		msg := &ev.Records[i]
		sem <- struct{}{}
		if i == len(ev.Records)-1 {
			// The last record runs on this goroutine, whose stack earlier
			// invocations grew: a fresh goroutine's grows again on each
			// record's SDK calls.
			run(msg)
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			run(msg)
		}()
	}
	wg.Wait()
	// The batch's job events, in as few requests as the bus takes; those
	// not sent stay pending on their jobs, for the sweeper.
	if !ob.empty() {
		ectx, cancel := inv.callContext(context.WithoutCancel(ctx))
		_ = w.eng.flushEvents(ectx, ob) // those left stay pending, for the sweeper
		cancel()
	}
	return events.SQSEventResponse{BatchItemFailures: failures}, nil
}

// handleRecord processes one message and reports whether it must come back.
func (w *Worker) handleRecord(ctx context.Context, inv invocation, msg *events.SQSMessage) (retry bool) {
	ctx, span := w.startRecord(ctx, msg)
	defer span.End()
	defer func() {
		// A bug here must not take the batch down: the message comes back.
		if p := recover(); p != nil {
			w.log.LogAttrs(ctx, slog.LevelError, "worker panicked on a record",
				slog.String("message_id", msg.MessageId), slog.String("stack", stackFrames(3)))
			retry = true
		}
	}()
	if id, sent, err := message.DecodeSent(msg.Body); err == nil {
		return w.runJobOnce(ctx, inv, pickup{m: withHints(driver.Message{JobID: id, Lane: w.lane, Group: msg.Attributes["MessageGroupId"], SentAt: sent}, msg),
			receipt: msg.ReceiptHandle, again: msg.Attributes["ApproximateReceiveCount"] > "1"})
	}
	if f, ok := wire.DecodeFire(msg.Body); ok {
		return w.runFire(ctx, inv, msg, f)
	}
	res := w.routes.route(msg.Body, msg.MessageId)
	switch {
	case res.ack != "":
		w.log.LogAttrs(ctx, slog.LevelInfo, "message acknowledged without a job", slog.String("message_id", msg.MessageId), slog.String("event", res.ack))
		return false
	case res.shape != "":
		w.log.LogAttrs(ctx, slog.LevelError, "no route accepts this message; it will reach the dead-letter queue",
			slog.String("message_id", msg.MessageId), slog.String("shape", res.shape))
		return true
	}
	for _, j := range res.jobs {
		if w.runRouted(ctx, inv, msg, j) {
			retry = true
		}
	}
	return retry
}

// runRouted creates the job a foreign message msg describes (once: its id
// is derived from the message) and runs it like any other. The job keeps
// a sweep entry, message first or not: a foreign message that reaches the
// dead-letter queue (its job's claim or its send to another lane failing
// ten times) names no job the sweeper's drain could settle.
func (w *Worker) runRouted(ctx context.Context, inv invocation, msg *events.SQSMessage, j routedJob) (retry bool) {
	messageID := msg.MessageId
	now := w.eng.now()
	payload := j.Payload
	if len(payload) > MaxPayloadBytes || checkJSON(payload, MaxPayloadBytes) != nil {
		payload = []byte("null") // fails invalid_payload when run
	}
	// A kind this worker does not register (a runtime schedule's, whose
	// kind left the code) still makes its job, which fails unknown_kind
	// when claimed below: its owner sees why, and the fire is settled.
	var secrets []string
	if k, ok := w.reg.lookup(j.Kind); ok {
		if canonical, err := k.canonical(payload); err == nil {
			payload = canonical
		}
		secrets = k.secrets
	}
	stored, err := sealPayload(w.sealer, j.ID, secrets, payload)
	if err != nil {
		stored = []byte("null")
	}
	cctx, cancel := inv.callContext(ctx)
	rec, err := w.eng.create(cctx, newJob{id: j.ID, kind: j.Kind, owner: j.Owner, payload: stored,
		requestHash: w.hasher.sum(jobRequest(j.Kind, payload, time.Time{}, 0)), at: now})
	cancel()
	switch {
	case err == nil:
		// At DEBUG: the run's own line follows; its id derives from the
		// message's, so the message is found from the job.
		w.log.LogAttrs(ctx, slog.LevelDebug, "job created from a message", slog.String("job_id", j.ID), slog.String("kind", j.Kind),
			slog.String("source", j.Source), slog.String("message_id", messageID))
	case errors.Is(err, driver.ErrExists):
		// Delivered before: the claim below tells a finished job from one
		// still to run.
	default:
		w.log.LogAttrs(ctx, slog.LevelError, "could not create a job from a message; it will come back",
			slog.String("job_id", j.ID), slog.String("source", j.Source), slog.String("err_types", errtypes.Of(err)))
		return true
	}
	if rec.Lane != w.lane {
		// Its kind runs in another lane (foreign messages and fires reach
		// the default lane's queue): its lane's workers run it.
		return w.sendToLane(ctx, inv, rec)
	}
	// The job exists (in the sweep index too): from here on a lack of time
	// sends its own message again; the foreign message is done with.
	return w.runJobOnce(ctx, inv, pickup{m: driver.Message{JobID: j.ID, Lane: w.lane, Group: wire.GroupID(j.Owner), Kind: j.Kind, OwnerKey: ownerKeyOf(j.Owner)},
		receipt: msg.ReceiptHandle})
}

// sendToLane sends rec, made here from a foreign message or a fire, to its
// own lane's queue instead of running it, and reports whether the message
// that made it must come back (the send failed: its next delivery sends
// again; a duplicate is harmless, as the job is claimed once).
func (w *Worker) sendToLane(ctx context.Context, inv invocation, rec *driver.Record) (retry bool) {
	cctx, cancel := inv.callContext(ctx)
	err := w.eng.deliver(cctx, rec, w.eng.deliveryAt(w.eng.now(), time.Time{}, rec.Lane))
	cancel()
	if err != nil {
		w.log.LogAttrs(ctx, slog.LevelWarn, "job made from a message not sent to its lane; the message will come back",
			slog.String("job_id", rec.ID), slog.String("lane", rec.Lane), slog.String("err_types", errtypes.Of(err)))
		return true
	}
	return false
}

// runFire turns a schedule's fire into its job (once per fire: the id is
// derived from the schedule and the scheduled time) and runs it. With
// OverlapSkip, a fire while the last enqueued fire's job is unfinished is
// acknowledged without a job.
func (w *Worker) runFire(ctx context.Context, inv invocation, msg *events.SQSMessage, f wire.Fire) (retry bool) {
	messageID := msg.MessageId
	s, ok := w.reg.schedule(f.Schedule)
	stateKey := f.Schedule
	if f.OwnerKey != "" {
		cctx, cancel := inv.callContext(ctx)
		var err error
		s, ok, err = w.runtimeSchedule(cctx, f)
		cancel()
		if err != nil {
			w.log.LogAttrs(ctx, slog.LevelWarn, "runtime schedule not read; the fire will come back",
				slog.String("schedule", f.Schedule), slog.String("err_types", errtypes.Of(err)))
			return true
		}
		// Declared names have no '/': the state keys never meet.
		stateKey = f.OwnerKey + "/" + f.Schedule
	}
	if !ok {
		// A schedule removed from the code (or deleted through the API)
		// whose fire was already on its way: nothing to run.
		w.log.LogAttrs(ctx, slog.LevelWarn, "fire of a schedule that is not declared or was deleted; acknowledged without a job",
			slog.String("schedule", f.Schedule), slog.String("message_id", messageID))
		return false
	}
	cctx, cancel := inv.callContext(ctx)
	pause, err := w.eng.pauses.holdingFire(cctx, f.Schedule, f.OwnerKey)
	cancel()
	if err != nil {
		// The copy may miss a pause written since: the fire comes back.
		w.log.LogAttrs(ctx, slog.LevelWarn, "pause set not read; the fire will come back",
			slog.String("schedule", f.Schedule), slog.String("err_types", errtypes.Of(err)))
		return true
	}
	if pause != nil {
		made, err := w.fireMadeItsJob(ctx, inv, msg, s.Name, f)
		if err != nil {
			w.log.LogAttrs(ctx, slog.LevelWarn, "fire's job not read; the fire will come back",
				slog.String("schedule", f.Schedule), slog.String("err_types", errtypes.Of(err)))
			return true
		}
		if !made {
			// Paused (in the table, so a deploy does not undo it): the
			// fire is acknowledged without a job.
			w.log.LogAttrs(ctx, slog.LevelInfo, "fire of a paused schedule; acknowledged without a job",
				slog.String("schedule", f.Schedule), slog.String("pause", pause.ID()), slog.String("scheduled_time", f.ScheduledTime))
			count(ctx, s.Kind, metricnames.FiresPaused)
			return false
		}
		// An earlier delivery made its job before the pause, and came back
		// (its run died, or its final write failed): the fire is that
		// job's net until it ends, so it goes on to it, making nothing new.
	}
	at, err := time.Parse(time.RFC3339, f.ScheduledTime)
	if err != nil {
		w.log.LogAttrs(ctx, slog.LevelError, "fire without a valid scheduled time; it will reach the dead-letter queue",
			slog.String("schedule", s.Name), slog.String("message_id", messageID))
		return true
	}
	id := wire.FireJobID(s.Name, at)
	if f.OwnerKey != "" {
		id = wire.RuntimeFireJobID(f.OwnerKey, s.Name, at)
	}
	log := w.log.With(slog.String("schedule", s.Name), slog.String("job_id", id), slog.Time("scheduled_time", at))
	if s.Overlap == OverlapSkip {
		cctx, cancel := inv.callContext(ctx)
		defer cancel()
		last, err := w.eng.store.LastFire(cctx, stateKey)
		if err != nil {
			log.LogAttrs(ctx, slog.LevelWarn, "schedule state not read; the fire will come back", slog.String("err_types", errtypes.Of(err)))
			return true
		}
		if last != id { // else: a duplicate delivery of the fire that holds the turn
			if last != "" {
				prev, err := w.eng.store.Get(cctx, last)
				switch {
				case err == nil && !prev.Status.Final():
					log.LogAttrs(ctx, slog.LevelInfo, "fire skipped: the previous run is unfinished", slog.String("previous_job_id", last))
					count(ctx, s.Kind, metricnames.FiresSkipped)
					return false
				case err != nil && !errors.Is(err, ErrNotFound):
					log.LogAttrs(ctx, slog.LevelWarn, "previous run not read; the fire will come back", slog.String("err_types", errtypes.Of(err)))
					return true
				}
			}
			if err := w.eng.store.SetLastFire(cctx, stateKey, last, id); err != nil {
				// A conflict (errFireRaced): another fire took the turn; this one comes
				// back and sees it.
				log.LogAttrs(ctx, slog.LevelWarn, "schedule state not moved; the fire will come back", slog.String("err_types", errtypes.Of(err)))
				return true
			}
		}
	}
	if _, ok := w.reg.lookup(s.Kind); !ok {
		log.LogAttrs(ctx, slog.LevelWarn, "fire of a runtime schedule whose kind this worker does not register; its job waits for a worker that does (30 minutes), then fails unknown_kind",
			slog.String("kind", s.Kind))
	}
	count(ctx, s.Kind, metricnames.FiresEnqueued)
	return w.runRouted(ctx, inv, msg, routedJob{ID: id, Kind: s.Kind, Owner: s.Owner, Payload: s.Payload, Source: "schedule"})
}

// fireMadeItsJob reports whether an earlier delivery of the fire msg
// (of the schedule named name) made its job. A message received for the
// first time made none (a copy of it that did is the one that comes
// back): the job is not read.
func (w *Worker) fireMadeItsJob(ctx context.Context, inv invocation, msg *events.SQSMessage, name string, f wire.Fire) (bool, error) {
	at, err := time.Parse(time.RFC3339, f.ScheduledTime)
	if msg.Attributes["ApproximateReceiveCount"] == "1" || err != nil {
		return false, nil
	}
	id := wire.FireJobID(name, at)
	if f.OwnerKey != "" {
		id = wire.RuntimeFireJobID(f.OwnerKey, name, at)
	}
	cctx, cancel := inv.callContext(ctx)
	defer cancel()
	_, err = w.eng.store.Get(cctx, id)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// skipKinds returns the kinds that need more handler time than left.
func (w *Worker) skipKinds(left time.Duration) []string {
	var skip []string
	for _, km := range w.slow {
		if km.min <= left {
			break
		}
		skip = append(skip, km.kind)
	}
	return skip
}

// handBack gives a job whose run cannot start now (too little of the
// invocation is left for it) to a later invocation, unclaimed, no attempt
// spent: it sends the job's message again, delivered after handBackDelay,
// and acknowledges this one, so a message handed back any number of times
// never nears the dead-letter queue (each receive counts towards
// maxReceiveCount) nor waits out a visibility timeout. If that send fails
// (or there is no queue) the message comes back as it is: the job's net
// is a message or its sweep entry either way.
func (w *Worker) handBack(ctx context.Context, inv invocation, m driver.Message, kind string) bool {
	return w.handBackAfter(ctx, inv, m, kind, handBackDelay)
}

// handBackAfter is handBack with the new message delivered after delay.
func (w *Worker) handBackAfter(ctx context.Context, inv invocation, m driver.Message, kind string, delay time.Duration) bool {
	now := w.eng.clock.Now()
	attrs := []slog.Attr{slog.String("job_id", m.JobID)}
	if kind != "" {
		attrs = append(attrs, slog.String("kind", kind))
	}
	if d := w.eng.deliveryAt(now, now.Add(delay), m.Lane); d.send {
		cctx, cancel := inv.callContext(ctx)
		err := w.eng.deliverMessage(cctx, m, d)
		cancel()
		if err == nil {
			if kind != "" {
				count(ctx, kind, metricnames.JobsHandedBack)
			}
			w.log.LogAttrs(ctx, slog.LevelInfo, "too little time left to start this job; sent again for a later invocation", attrs...)
			return false
		}
		attrs = append(attrs, slog.String("err_types", errtypes.Of(err)))
	}
	w.log.LogAttrs(ctx, slog.LevelInfo, "too little time left to start this job; the message will come back unclaimed", attrs...)
	return true
}

// holdPaused hands back the job of m, which pause holds, unclaimed: its
// message is sent again after pauseWait (jittered, counted in Paused) and
// this one acknowledged, as handBack does.
func (w *Worker) holdPaused(ctx context.Context, inv invocation, m driver.Message, pause *driver.Pause) bool {
	now := w.eng.clock.Now()
	delay := w.eng.pauseWait(pause, now)
	m.Paused += delay
	if m.Kind != "" {
		count(ctx, m.Kind, metricnames.JobsPauseHeld)
	}
	if d := w.eng.deliveryAt(now, now.Add(delay), m.Lane); d.send {
		cctx, cancel := inv.callContext(ctx)
		err := w.eng.deliverMessage(cctx, m, d)
		cancel()
		if err == nil {
			w.log.LogAttrs(ctx, slog.LevelDebug, "paused; sent again for later", slog.String("job_id", m.JobID), slog.String("pause", pause.ID()),
				slog.Int64("delay_ms", delay.Milliseconds()))
			return false
		}
		w.log.LogAttrs(ctx, slog.LevelWarn, "paused, and not sent again; the message will come back", slog.String("job_id", m.JobID),
			slog.String("err_types", errtypes.Of(err)))
	}
	return true
}

// withHints is m with the hints msg's attributes carry (message.AttrKind
// and the others); a malformed one is left out.
func withHints(m driver.Message, msg *events.SQSMessage) driver.Message {
	str := func(name string) string {
		if a, ok := msg.MessageAttributes[name]; ok && a.StringValue != nil {
			return *a.StringValue
		}
		return ""
	}
	m.Kind, m.OwnerKey = str(message.AttrKind), str(message.AttrOwner)
	if ms, err := strconv.ParseInt(str(message.AttrPaused), 10, 64); err == nil && ms > 0 {
		m.Paused = time.Duration(ms) * time.Millisecond
	}
	return m
}

// handBackDelay is how long a handed-back job's new message waits: a
// moment, so that another invocation (with its whole time) picks it up.
const handBackDelay = time.Second

// batchJobs holds a lock per job of an SQS batch: two records of one job
// in a batch (SQS's duplicate deliveries, two copies of a fire or of a
// foreign message) run one after the other, so the second finds the job
// as the first left it (ended: acknowledged) rather than running (which
// it must not acknowledge: see claimFailed).
type batchJobs struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

type batchJobsKey struct{}

// runJobOnce is runJob, after any other record of the batch for the same
// job.
func (w *Worker) runJobOnce(ctx context.Context, inv invocation, p pickup) (retry bool) {
	if b, ok := ctx.Value(batchJobsKey{}).(*batchJobs); ok {
		b.mu.Lock()
		l := b.locks[p.m.JobID]
		if l == nil {
			l = &sync.Mutex{}
			b.locks[p.m.JobID] = l
		}
		b.mu.Unlock()
		l.Lock()
		defer l.Unlock()
	}
	return w.runJob(ctx, inv, p)
}

// runJob claims the job of the message p.m, runs its handler and records
// the outcome. A run that releases a concurrency slot with waiters then
// runs the first of them on this goroutine, and so on while waiters are
// left (see slotChain and runNext); each run's final write lands
// meanwhile, and all have landed when it returns.
func (w *Worker) runJob(ctx context.Context, inv invocation, p pickup) (retry bool) {
	m := p.m
	id := m.JobID
	left := inv.handlerTimeLeft()
	p.left = left
	if !inv.canStart(0) {
		return w.handBack(ctx, inv, m, "")
	}
	pctx, pcancel := inv.callContext(ctx)
	pause, _ := w.eng.pauses.holding(pctx, m.Kind, m.Lane, m.OwnerKey)
	pcancel()
	// A message received again (its run's worker died, or its hand-back
	// failed) is claimed rather than handed back: its job may be running
	// under a dead run, which the claim's failure settles (claimFailed);
	// a queued one is parked, held all the same.
	if pause != nil && !p.again && m.Paused < pauseClaimAfter {
		return w.holdPaused(ctx, inv, m, pause)
	}
	now := w.eng.now()
	token := w.eng.newID()
	cctx, cancel := inv.callContext(ctx)
	rec, err := w.eng.claim(cctx, id, driver.Claim{Token: token, At: now, LeaseUntil: inv.leaseUntil(now), SkipKinds: w.skipKinds(left)})
	cancel()
	if err != nil {
		return w.claimFailed(ctx, inv, p, err)
	}
	first, next := w.runClaimed(ctx, inv, claimed{rec: rec, token: token, at: now, held: true, paused: m.Paused})
	var woken []<-chan bool
	until := time.Now().Add(chainFor)
	for next.any() {
		var done <-chan bool
		done, next = w.runNext(ctx, inv, next, until)
		if done != nil {
			woken = append(woken, done)
		}
	}
	for _, done := range woken {
		<-done
	}
	return <-first
}

// claimed is a job a worker claimed: the record as the claim returned it,
// the run's claim token, when it was claimed, and the slot chain the run
// goes on under (nil: it takes all its slots).
type claimed struct {
	rec   *driver.Record
	token string
	at    time.Time
	chain *slotChain
	// held: claimed from a message this worker holds until the run ends
	// (run.held); a waiter a chain runs holds none.
	held bool
	// paused is how long pauses held the job back (driver.Message.Paused).
	paused time.Duration
}

// runClaimed runs the claimed job cl.rec, claimed under cl.token at cl.at,
// under the slot chain cl.chain (nil: it takes all its slots), and
// records its outcome. It answers on
// the channel whether the run is unsettled (its message must come back),
// and returns what the goroutine runs next (see successor): then the
// run's final write goes on beside that next run instead of before it, so
// a busy limit's slot passes from run to run without waiting for the
// bookkeeping.
func (w *Worker) runClaimed(ctx context.Context, inv invocation, cl claimed) (<-chan bool, successor) {
	rec, token, now, c := cl.rec, cl.token, cl.at, cl.chain
	held := cl.held
	count(ctx, rec.Kind, metricnames.JobsStarted)
	traceJob(ctx, rec)
	if since := rec.CreatedAt; !since.IsZero() {
		if rec.RunAt.After(since) {
			since = rec.RunAt
		}
		measure(ctx, rec.Kind, metricnames.QueueLatency, max(0, now.Sub(since)-cl.paused))
	}
	done := make(chan bool, 1)
	var ex execution
	// A chain's slot this run does not use (it ends before its handler,
	// or waits) passes to the next waiter.
	next := successor{chain: c}
	pctx, pcancel := inv.callContext(ctx)
	if rec.PayloadBytes > 0 {
		pcancel()
		pctx, pcancel = inv.partContext(ctx)
	}
	perr := w.eng.loadPayload(pctx, rec, now)
	paused, pauseErr := w.eng.pauses.holds(pctx, rec)
	pcancel()
	k, ok := w.reg.lookup(rec.Kind)
	switch {
	case perr != nil && (!errors.Is(perr, driver.ErrPartMissing) || now.Sub(rec.CreatedAt) < unknownKindGrace):
		// Its payload's or checkpoint's own item could not be read, or is
		// not there yet (a replica of the table that has the job before
		// it): it goes back, no attempt spent, to try again (waiting_on
		// "store").
		w.log.LogAttrs(ctx, slog.LevelWarn, "payload or checkpoint not read; the job waits and tries again", slog.String("job_id", rec.ID),
			slog.String("err_types", errtypes.Of(perr)))
		wait := slotWait
		if errors.Is(perr, driver.ErrPartMissing) {
			wait = unknownKindWait
		}
		wctx, cancel := inv.finalWriteContext(ctx)
		defer cancel()
		done <- w.eng.park(wctx, run{rec: rec, token: token, started: now}, &admission{on: waitStore, runAt: now, delay: w.eng.jitter(wait)}).res == unsettled
		return done, next
	case perr != nil:
		// Gone: it outlived what its item was kept for (a dependent whose
		// parents ended more than MaxDelay after it was enqueued). The
		// reserved code says the payload (or the run's state) cannot be
		// read.
		ex = execution{Status: StatusFailed, Code: CodePayloadUnreadable, Cause: "payload_missing"}
	case !ok && now.Sub(rec.CreatedAt) < unknownKindGrace:
		// A kind that a deploy added reached a worker still on the old
		// code: it goes back, no attempt spent, for a worker that knows
		// it (waiting_on "kind").
		wctx, cancel := inv.finalWriteContext(ctx)
		defer cancel()
		done <- w.eng.park(wctx, run{rec: rec, token: token, started: now}, &admission{on: waitKind, runAt: now, delay: w.eng.jitter(unknownKindWait)}).res == unsettled
		return done, next
	case !ok:
		ex = execution{Status: StatusFailed, Code: CodeUnknownKind, Cause: "unknown_kind"}
	case len(k.secrets) > 0 && now.Sub(rec.CreatedAt) < unknownKindGrace && sealedWithUnknownKey(w.sealer, rec, k):
		// Sealed with a key this instance does not hold yet (a rotation's
		// new key reached other instances first): it goes back, no attempt
		// spent, for an instance that holds it (waiting_on "key").
		wctx, cancel := inv.finalWriteContext(ctx)
		defer cancel()
		done <- w.eng.park(wctx, run{rec: rec, token: token, started: now}, &admission{on: waitKey, runAt: now, delay: w.eng.jitter(unknownKindWait)}).res == unsettled
		return done, next
	case paused != nil || pauseErr != nil:
		// Paused, and its message did not say so (a message from before
		// the hint, a waiter a slot chain took): it waits out the pause
		// parked, no attempt spent (waiting_on "paused"). A pause set that
		// could not be read may hold a pause written since the last
		// read: the job waits on the store and tries again.
		a := &admission{on: waitStore, runAt: now, delay: w.eng.jitter(slotWait)}
		if pauseErr == nil {
			a = &admission{on: waitPaused, runAt: now, delay: w.eng.pauseWait(paused, w.eng.clock.Now())}
			count(ctx, rec.Kind, metricnames.JobsPauseHeld)
		}
		wctx, cancel := inv.finalWriteContext(ctx)
		defer cancel()
		done <- w.eng.park(wctx, run{rec: rec, token: token, started: now}, a).res == unsettled
		return done, next
	case k.maxRun > 0 && !rec.FirstStartedAt.IsZero() && now.Sub(rec.FirstStartedAt)-cl.paused >= k.maxRun:
		// Past the kind's longest run, continuations and retries included.
		ex = execution{Status: StatusFailed, Code: CodeTimedOut, Cause: "max_run_time"}
	case !rec.StartBy.IsZero() && now.After(rec.StartBy) && rec.FirstStartedAt.Equal(rec.StartedAt) && rec.AttemptBase == 0:
		// Its first start, late (a retry or continuation of a job that
		// started in time runs, and so does a job its owner resubmitted).
		ex = execution{Status: StatusCancelled, Code: CodeExpired, Cause: "expired"}
	default:
		if a := w.admit(ctx, inv, k, claimed{rec: rec, token: token, chain: c}); a != nil {
			wctx, cancel := inv.finalWriteContext(ctx)
			defer cancel()
			done <- w.eng.park(wctx, run{rec: rec, token: token, started: now}, a).res == unsettled
			return done, next
		}
		w.releaseUniqueAtStart(ctx, inv, rec)
		c = w.chainOf(k, rec, token, c)
		// While the handler runs, the chain takes its next waiter off the
		// slot's list, so the slot passes on with one write (the waiter's
		// claim) when the handler returns.
		var ahead <-chan string
		if c != nil && c.pop {
			ahead = w.popAhead(ctx, inv, c)
		}
		ex = w.execute(ctx, inv, k, cl)
		popped := ""
		if ahead != nil {
			popped = <-ahead
		}
		switch {
		case ex.Abandoned:
			// A handler abandoned at its deadline may still be running (in
			// this process on managed instances, or when the environment
			// thaws): its slots, a chain's included, stay held until the
			// run's lease, as its job does, so the limit is not exceeded.
			// A waiter taken off for it is woken by its message.
			if popped != "" {
				wctx, cancel := inv.callContext(context.WithoutCancel(ctx))
				w.wake(wctx, popped)
				cancel()
			}
			next = successor{}
		case k.limits.concurrency > 0 || k.limits.perKey > 0:
			w.noteHold(k.name, w.eng.now().Sub(now))
			next = w.afterRun(ctx, inv, k, claimed{rec: rec, token: token, chain: c})
			if popped != "" {
				next.id = popped
			}
		}
	}
	end := func() {
		sctx, scancel := inv.partContext(ctx)
		w.eng.stageResult(sctx, rec, &ex, inv.write)
		scancel()
		wctx, cancel := inv.finalWriteContext(ctx)
		defer cancel()
		done <- w.eng.end(wctx, run{rec: rec, token: token, started: now, held: held}, ex).comesBack()
	}
	if !next.any() {
		end()
		return done, next
	}
	next.settle = end
	return done, next
}

// chainFor bounds how long a goroutine goes on running the waiters its
// runs woke (see runNext): past it, the next waiter is sent its message
// and the slot released, so a busy limit's chains hand their invocations
// back (a chain keeps its invocation going, and with it the handler slots
// of its batch, which sit idle) and other messages are received.
const chainFor = 10 * time.Second

// runNext runs what a run left its goroutine (next): a waiter it woke, or
// the waiter its chain takes off the chain's slot's list (passOn), here
// instead of through a message (its message, the park's backstop, finds
// it claimed and is dropped). It answers as runClaimed does, nil when
// nothing ran. A waiter that cannot run here is sent its message
// (wakeRec): one still parking, not due yet, or when the invocation has
// too little time left or the goroutine has run waiters until until (the
// chain's slot is then released); one that ended is left alone. A woken
// job runs on the worker that woke it whatever its lane (its kind's
// minimum run time is checked, as at any claim).
func (w *Worker) runNext(ctx context.Context, inv invocation, next successor, until time.Time) (<-chan bool, successor) {
	// The previous run's final write starts once this run is claimed: the
	// claim, which the slot waits for, goes first.
	settle := func() {
		if next.settle != nil {
			go next.settle()
			next.settle = nil
		}
	}
	defer settle()
	id, c := next.id, next.chain
	if id == "" {
		if id, c = w.passOn(ctx, inv, c); id == "" {
			return nil, successor{}
		}
	}
	if !inv.canStart(0) || !time.Now().Before(until) {
		wctx, cancel := inv.callContext(ctx)
		defer cancel()
		if c != nil {
			if other := w.release(ctx, inv, c.holder, []slotKey{{key: c.key}}, true); other != "" {
				w.wake(wctx, other)
			}
		}
		w.wake(wctx, id)
		return nil, successor{}
	}
	ctx, span := w.startRecord(ctx, &events.SQSMessage{})
	defer span.End()
	now := w.eng.now()
	token := w.eng.newID()
	cctx, cancel := inv.callContext(ctx)
	defer cancel()
	rec, err := w.eng.claim(cctx, id, driver.Claim{Token: token, At: now, LeaseUntil: inv.leaseUntil(now), SkipKinds: w.skipKinds(inv.handlerTimeLeft())})
	settle()
	var ce *driver.ConflictError
	switch {
	case err == nil:
	case errors.As(err, &ce) && ce.Current != nil && !ce.Current.Status.Final():
		w.wakeRec(cctx, ce.Current)
		return nil, successor{chain: c}
	default:
		if !errors.As(err, &ce) && !errors.Is(err, ErrNotFound) {
			w.log.LogAttrs(ctx, slog.LevelWarn, "waiter not claimed; it looks again at its backstop", slog.String("job_id", id),
				slog.String("err_types", errtypes.Of(err)))
		}
		return nil, successor{chain: c}
	}
	if rec.Lane != w.lane {
		// Another lane's waiter (a job enqueued into another lane than its
		// kind's): that lane's workers run it, under their own deadline.
		// It goes back to its lane, no attempt spent, and the slot is
		// freed for it there.
		if c != nil {
			w.release(ctx, inv, c.holder, []slotKey{{key: c.key}}, false)
		}
		wctx, cancel := inv.finalWriteContext(ctx)
		defer cancel()
		w.eng.park(wctx, run{rec: rec, token: token, started: now}, &admission{on: waitConcurrency, runAt: now})
		return nil, successor{}
	}
	count(ctx, rec.Kind, metricnames.JobsWoken)
	return w.runClaimed(ctx, inv, claimed{rec: rec, token: token, at: now, chain: c})
}

// execute runs the handler with a context that ends at the invocation's
// handler deadline, and abandons it there if it does not return. A cancel
// requested by the job's owner, noticed at a Publish or by a check every
// CancelCheck, cancels the handler's context and ends the run cancelled
// once the handler has returned (or was abandoned at its deadline: then
// the job keeps its lease, so a retry cannot start a second run of it while
// the first may still be going).
func (w *Worker) execute(ctx context.Context, inv invocation, k *kindDef, cl claimed) execution {
	rec, token := cl.rec, cl.token
	hctx, cancel := context.WithDeadline(ctx, inv.handler)
	defer cancel()
	noticed := make(chan struct{})
	notice := sync.OnceFunc(func() { close(noticed); cancel() })
	// cancelled maps a write refused for a cancel to ErrCancelled, and
	// cancels the handler's context.
	cancelled := func(err error) error {
		if errors.Is(err, errCancelRequested) {
			notice()
			return ErrCancelled
		}
		return err
	}
	keeper := &leaseKeeper{}
	h, err := w.handle(ctx, inv, k, run{rec: rec, token: token, keeper: keeper}, cancelled)
	if h != nil && k.maxRun > 0 && !rec.FirstStartedAt.IsZero() {
		// The kind's longest run ends here (pauses give their time back):
		// a sleep past it is refused when asked for.
		h.runEnd = rec.FirstStartedAt.Add(k.maxRun + cl.paused)
	}
	if err != nil {
		return execution{Status: StatusFailed, Code: CodeInternal, Cause: "checkpoint", ErrTypes: errtypes.Of(err)}
	}
	if k.heartbeat > 0 {
		// Kept until the handler returns or is abandoned at its deadline.
		defer w.keepLease(ctx, inv, k, run{rec: rec, token: token, keeper: keeper}, func(takenOver bool) {
			if takenOver {
				cancel() // its work is no longer the job's
			} else {
				notice() // a cancel request
			}
		})()
	}
	done := make(chan execution, 1)
	go k.runHandler(hctx, rec, w.sealer, h, done)
	var tick <-chan time.Time
	if w.cancelCheck > 0 {
		t := time.NewTicker(w.cancelCheck)
		defer t.Stop()
		tick = t.C
	}
	cancelledRun := execution{Status: StatusCancelled, Cause: "cancelled"}
	// stopped waits for a cancelled handler to return, until its deadline.
	stopped := func() execution {
		deadline := time.NewTimer(time.Until(inv.handler) + abandonGrace)
		defer deadline.Stop()
		select {
		case <-done:
			return cancelledRun
		case <-deadline.C:
			w.abandon(ctx, rec, done)
			return execution{Status: StatusCancelled, Cause: "cancelled", Abandoned: true}
		}
	}
	returned := func(ex execution) execution {
		select {
		case <-noticed:
			return cancelledRun
		default:
			return ex
		}
	}
	for {
		select {
		case ex := <-done:
			return returned(ex)
		case <-noticed:
			return stopped()
		case <-tick:
			// A tick as the handler returns: select picks at random
			// between ready cases, and a check then is wasted.
			select {
			case ex := <-done:
				return returned(ex)
			default:
			}
			// The light check: is a cancel requested? Has another run
			// taken the job over (this one's lease lapsed)? Then the
			// handler's context ends: its work is no longer this run's.
			cctx, ccancel := inv.callContext(hctx)
			cur, err := w.eng.store.Get(cctx, rec.ID)
			ccancel()
			switch {
			case err != nil:
			case cur.Status != StatusRunning || cur.ClaimToken != token:
				cancel()
			case cur.CancelRequested:
				notice()
			}
		case <-hctx.Done():
			// A handler that honours its context returns within moments:
			// give it those before calling it abandoned (they come out of
			// the final write's budget, which still ends by D - Safety).
			grace := time.NewTimer(abandonGrace)
			select {
			case ex := <-done: // it returned as the deadline hit, or noticed a cancel
				grace.Stop()
				return returned(ex)
			case <-noticed:
				grace.Stop()
				return stopped()
			case <-grace.C:
			}
			w.abandon(ctx, rec, done)
			return execution{Status: StatusFailed, Code: CodeTimedOut, Cause: "abandoned", Abandoned: true}
		}
	}
}

// handle returns what the run's Job reaches the system through: Publish,
// and for work longer than one invocation Heartbeat and Checkpoint (each a
// write conditional on token, which also renews the lease of a kind with
// KindOpts.Heartbeat) and the checkpoint to resume from. A kind with
// heartbeats starts its run with one: its lease shrinks from the
// invocation's deadline to one heartbeat. r is the run (its job and claim
// token; its times are not read).
func (w *Worker) handle(ctx context.Context, inv invocation, k *kindDef, r run, cancelled func(error) error) (*runHandle, error) {
	rec, token := r.rec, r.token
	plain, err := openCheckpoint(w.sealer, rec)
	if err != nil {
		return nil, err
	}
	st, err := decodeState(plain)
	if err != nil {
		return nil, err
	}
	lease := func() time.Time { return leaseOf(inv, k, w.eng.now()) }
	// renewed tells the run's keeper of a write that renewed its lease (a
	// heartbeat or checkpoint that landed: a cancel request does not stop
	// a heartbeat's renewal).
	renewed := func(err error) error {
		if r.keeper != nil && (err == nil || errors.Is(err, errCancelRequested)) {
			r.keeper.renewed(w.eng.now())
		}
		return err
	}
	h := &runHandle{
		resume: st.V, steps: st.Steps, now: w.eng.now, signals: rec.Signals, signalTypes: k.signals,
		publish: func(pctx context.Context, body []byte) error {
			return cancelled(w.eng.publish(pctx, rec.ID, token, body))
		},
		seal: func(raw []byte) ([]byte, error) { return sealCheckpoint(w.sealer, rec.ID, raw) },
		checkpoint: func(pctx context.Context, raw []byte) error {
			sealed, err := sealCheckpoint(w.sealer, rec.ID, raw)
			if err != nil {
				return err
			}
			now := w.eng.now()
			st, _ := decodeState(raw) // its own encoding
			return cancelled(renewed(w.eng.store.Checkpoint(pctx, rec.ID, token, driver.Checkpoint{Data: sealed, LeaseUntil: lease(), At: now,
				Until: w.eng.payloadKeep(rec.Kind, now, time.Time{}), Marks: marksOf(st.Steps, now)})))
		},
	}
	if w.sealer != nil {
		h.sealToken = func(raw []byte) (string, error) { return w.sealer.Seal(raw, callbackAAD) }
		h.open = func(name string, sealed []byte) ([]byte, error) {
			return w.sealer.Open(string(sealed), signalAAD(rec.ID, name))
		}
	}
	if w.children != nil {
		h.child = func(cctx context.Context, name string, build func(*Service) (EnqueueRequest, error)) (*EnqueueResult, error) {
			return w.children.enqueueChild(cctx, rec, name, build)
		}
		h.readChild = func(cctx context.Context, name string) (*driver.Record, error) {
			return w.eng.readChild(cctx, rec, name)
		}
		h.fanOut = func(cctx context.Context, key string, build func(*Service, string) (BatchRequest, error)) (*driver.Batch, error) {
			return w.children.enqueueMapWave(cctx, rec, key, build)
		}
		h.readJobs = func(cctx context.Context, ids []string) (map[string]*driver.Record, error) {
			return w.eng.readJobs(cctx, ids)
		}
	}
	if k.name == uploadKind && w.eng.uploads != nil {
		h.uploads = &uploadEnv{uploads: w.eng.uploads, stager: w.eng.staging, reg: w.eng.reg, sealer: w.sealer, maxPart: w.eng.maxPart}
	}
	if k.heartbeat > 0 {
		h.heartbeat = func(pctx context.Context) error {
			return cancelled(renewed(w.eng.store.Heartbeat(pctx, rec.ID, token, driver.Heartbeat{LeaseUntil: lease(), At: w.eng.now()})))
		}
		// The first also moves the sweep time to the lease's end, so a dead
		// worker's run is found one lease later, not one dispatch grace.
		cctx, cancel := inv.callContext(ctx)
		defer cancel()
		l := lease()
		err := cancelled(renewed(w.eng.store.Heartbeat(cctx, rec.ID, token, driver.Heartbeat{LeaseUntil: l, At: w.eng.now(), SweepAt: l})))
		if err != nil && !errors.Is(err, ErrCancelled) {
			// The lease stays the invocation's deadline: only slower to
			// notice a dead worker.
			w.log.LogAttrs(ctx, slog.LevelWarn, "first heartbeat failed; the run keeps its invocation's lease", slog.String("job_id", rec.ID),
				slog.String("err_types", errtypes.Of(err)))
		}
	}
	return h, nil
}

// abandon counts a handler that did not return by its deadline; its
// goroutine lives on until it returns, beyond the worker's control.
func (w *Worker) abandon(ctx context.Context, rec *driver.Record, done <-chan execution) {
	count(ctx, rec.Kind, metricnames.HandlersAbandoned)
	n := w.abandoned.Add(1)
	go func() { <-done; w.abandoned.Add(-1) }()
	w.log.LogAttrs(ctx, slog.LevelWarn, "handler ignored its deadline and was abandoned", slog.String("job_id", rec.ID),
		slog.String("kind", rec.Kind), slog.Int64("abandoned_running", n))
}

// abandonGrace is how long a handler whose context ended may take to
// return before the worker abandons it.
const abandonGrace = 50 * time.Millisecond

// pickup is a message whose job the worker tries to claim: the message
// and its receipt handle, the handler time left when it tried, whether it
// had already waited for the job's run time (it does once), and whether
// it had already looked again for a job not stored yet (once).
type pickup struct {
	m       driver.Message
	receipt string
	// again: SQS received the message before (ApproximateReceiveCount).
	again  bool
	left   time.Duration
	waited bool
	looked bool
}

// claimFailed decides what to do with p, whose job could not be claimed
// (err), and reports whether the message must come back.
func (w *Worker) claimFailed(ctx context.Context, inv invocation, p pickup, err error) bool {
	m, left, waited := p.m, p.left, p.waited
	id := m.JobID
	log := w.log.With(slog.String("job_id", id))
	var ce *driver.ConflictError
	switch {
	case errors.Is(err, ErrNotFound) && !m.SentAt.IsZero():
		return w.notStoredYet(ctx, inv, p)
	case errors.Is(err, ErrNotFound):
		// Expired, or stored by nobody: let SQS retry; after
		// maxReceiveCount the message goes to the dead-letter queue, which
		// the sweeper drains.
		log.LogAttrs(ctx, slog.LevelWarn, "job not found; the message will come back")
		return true
	case errors.As(err, &ce) && ce.Current != nil:
		cur := ce.Current
		now := w.eng.clock.Now()
		switch {
		case cur.Status.Final() && len(cur.After) > 0:
			// Its worker died after the final write, or its steps failed:
			// run them now rather than at the sweeper's look (the job
			// keeps its sweep entry until they are done, whatever
			// becomes of this try).
			wctx, cancel := inv.finalWriteContext(ctx)
			defer cancel()
			done := w.eng.after(wctx, cur)
			log.LogAttrs(ctx, slog.LevelInfo, "delivery of a finished job with post-outcome steps pending", slog.String("status", string(cur.Status)),
				slog.Bool("steps_done", done))
			return false
		case cur.Status.Final():
			log.LogAttrs(ctx, slog.LevelInfo, "duplicate delivery of a finished job", slog.String("status", string(cur.Status)))
			return false
		case cur.Status == StatusQueued && cur.WaitingOn == driver.WaitParents:
			// Its parents send it when the last of them succeeded.
			log.LogAttrs(ctx, slog.LevelInfo, "delivery of a job that waits on its parents; they send it")
			return false
		case cur.Status == StatusQueued && cur.RunAt.After(now) && cur.RunAt.Sub(now) <= time.Second && !waited &&
			inv.canStart(cur.RunAt.Sub(now)) && sleepCtx(ctx, cur.RunAt.Sub(now)):
			// Up to a second early (SQS delays are whole seconds; a rate's
			// reservation is delivered early on purpose): wait it out and
			// claim again, so the start is on time.
			p.waited = true
			return w.runJob(ctx, inv, p)
		case cur.Status == StatusQueued && cur.RunAt.After(now):
			// Delivered before its run time (a retry or a delayed job): send
			// it again for then; beyond 15 minutes the sweeper does.
			if d := w.eng.deliveryAt(now, cur.RunAt, cur.Lane); d.send {
				cctx, cancel := inv.callContext(ctx)
				err := w.eng.deliver(cctx, cur, d)
				cancel()
				if err != nil {
					log.LogAttrs(ctx, slog.LevelWarn, "early delivery not re-sent; the message will come back", slog.String("err_types", errtypes.Of(err)))
					return true
				}
			}
			log.LogAttrs(ctx, slog.LevelInfo, "early delivery of a job that runs later", slog.Time("run_at", cur.RunAt))
			return false
		case cur.Status == StatusQueued && slices.Contains(w.skipKinds(left), cur.Kind):
			return w.handBack(ctx, inv, messageOf(cur), cur.Kind)
		case cur.Status == StatusQueued:
			// Due, but not at the claim's time (its run time fell between
			// the claim's clock reading and now): run it from a fresh
			// message rather than leave it to the sweeper.
			return w.handBack(ctx, inv, messageOf(cur), cur.Kind)
		case cur.Status == StatusRunning && !cur.LeaseUntil.After(now):
			// Its worker died or lost its final write: settle it now.
			wctx, cancel := inv.finalWriteContext(ctx)
			defer cancel()
			return w.eng.interrupt(wctx, cur, true).comesBack()
		default:
			// Never acknowledged while the run's lease lives: SQS deletes
			// a message with its latest receipt handle, so acknowledging a
			// second delivery of the message the run holds would delete
			// the run's net. It comes back at the lease's end (or, without
			// a way to say so, after its visibility timeout, which is
			// longer than any run's lease).
			until := cur.LeaseUntil
			if !cur.SweepAt.IsZero() {
				// In the sweep index (a kind with heartbeats, whose lease is
				// short and renewed; a parked waiter a chain runs): the
				// sweeper settles it if its worker dies, so this copy need
				// not come back every lease, nearing the dead-letter queue.
				until = latest(until, w.eng.clock.Now().Add(duplicateHide))
			}
			w.hideUntil(ctx, inv, p, until)
			log.LogAttrs(ctx, slog.LevelInfo, "duplicate delivery of a running job; it comes back at the run's lease end",
				slog.Time("lease_until", cur.LeaseUntil))
			return true
		}
	default:
		log.LogAttrs(ctx, slog.LevelError, "claim failed; the message will come back", slog.String("err_types", errtypes.Of(err)))
		return true
	}
}

// lookAgain is how long a worker that found no job for a message sent
// before its job was stored waits before it claims once more: the put
// follows the send by a round trip.
const lookAgain = 100 * time.Millisecond

// sendToPut bounds, with message first, how long after its message is
// sent an enqueue's put may land: the put runs under it, and is not
// retried past it (the caller is answered that the job was not stored).
// orphanAge is how old a message of a job that was never stored gets
// before a worker drops it: SendToPut and two minutes for clocks and
// SQS's delivery.
const (
	sendToPut = 30 * time.Second
	orphanAge = sendToPut + 2*time.Minute
)

// notStoredYet handles a message sent before its job was stored (message
// first) whose job the claim did not find: its put may not have landed
// yet. The worker looks once more after lookAgain, with a consistent read
// (a failed claim is a billed write on AWS, and puts fail most when
// DynamoDB throttles), and claims if the job is there; else it hands the
// message back after 1 s, 15 s and then every 2 minutes of its age, and
// drops it once it is older than orphanAge: its enqueue failed (its
// caller was told so) or died before its put.
func (w *Worker) notStoredYet(ctx context.Context, inv invocation, p pickup) bool {
	if !p.looked && inv.canStart(lookAgain) && sleepCtx(ctx, lookAgain) {
		p.looked = true
		cctx, cancel := inv.callContext(ctx)
		_, err := w.eng.store.Get(cctx, p.m.JobID)
		cancel()
		switch {
		case err == nil:
			return w.runJob(ctx, inv, p)
		case !errors.Is(err, ErrNotFound):
			return true // the read failed: the message comes back as it is
		}
	}
	age := w.eng.clock.Now().Sub(p.m.SentAt)
	if age > orphanAge {
		w.log.LogAttrs(ctx, slog.LevelWarn, "message of a job that was never stored; dropped", slog.String("job_id", p.m.JobID),
			slog.Int64("age_ms", age.Milliseconds()))
		return false
	}
	delay := 2 * time.Minute
	switch {
	case age < time.Second:
		delay = time.Second
	case age < 15*time.Second:
		delay = 15 * time.Second
	}
	return w.handBackAfter(ctx, inv, p.m, "", delay)
}

// duplicateHide is how long at least a second delivery of a running job in
// the sweep index is hidden.
const duplicateHide = 15 * time.Minute

// latest is the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// hideUntil makes the message of p, which must come back, invisible
// until until (at most SQS's 12 hours), when the queue can say so; else
// it comes back after its visibility timeout.
func (w *Worker) hideUntil(ctx context.Context, inv invocation, p pickup, until time.Time) {
	v, ok := w.eng.queue.(driver.Visibility)
	if !ok || p.receipt == "" {
		return
	}
	d := min(max(until.Sub(w.eng.clock.Now()), time.Second), 12*time.Hour)
	cctx, cancel := inv.callContext(ctx)
	defer cancel()
	if err := v.Hide(cctx, p.m.Lane, p.receipt, d); err != nil {
		w.log.LogAttrs(ctx, slog.LevelWarn, "duplicate delivery not hidden until the lease end; it comes back after its visibility timeout",
			slog.String("job_id", p.m.JobID), slog.String("err_types", errtypes.Of(err)))
	}
}
