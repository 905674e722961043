package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// Worker runs the jobs referenced by an SQS batch. It is the worker Lambda's
// handler: see HandleSQS.
type Worker struct {
	reg         *Registry
	store       Store
	clock       Clock
	log         *slog.Logger
	concurrency int
	deadlines   Deadlines
	retention   time.Duration
	sealer      Sealer
	hkey        []byte
	routes      *Routes
	grace       time.Duration
	queue       Queue
	cancelCheck time.Duration
}

// WorkerConfig configures a Worker. Registry and Store are required.
type WorkerConfig struct {
	Registry *Registry
	Store    Store
	Clock    Clock
	Logger   *slog.Logger
	// Concurrency bounds how many records of one batch run at once
	// (default 8).
	Concurrency int
	// Deadlines divide the invocation's time (default DefaultDeadlines).
	Deadlines Deadlines
	// Retention is how long a finished job stays readable
	// (default DefaultRetention).
	Retention time.Duration
	// Sealer opens secret payload fields; required when a kind has some.
	Sealer Sealer
	// Routes turn messages from other AWS services into jobs (see Routes).
	Routes *Routes
	// DispatchGrace is the sweep delay of jobs made from foreign messages
	// and retries (default DefaultDispatchGrace); use the service's value.
	DispatchGrace time.Duration
	// Queue sends retries and early deliveries back with a delay. Without
	// it they wait for the sweeper.
	Queue Queue
	// CancelCheck is how often a running job is checked for a cancel
	// request while its handler works (default 5s; negative: only at
	// Publish). Each check is one read.
	CancelCheck time.Duration
}

// NewWorker returns a Worker; it puts the registry to use.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	if cfg.Registry == nil || cfg.Store == nil {
		return nil, errors.New("jobs: NewWorker needs a Registry and a Store")
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	if cfg.Deadlines == (Deadlines{}) {
		cfg.Deadlines = DefaultDeadlines
	}
	if cfg.Deadlines.NoDeadline <= 0 {
		cfg.Deadlines.NoDeadline = DefaultDeadlines.NoDeadline
	}
	if err := cfg.Deadlines.Validate(0); err != nil {
		return nil, err
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.DispatchGrace <= 0 {
		cfg.DispatchGrace = DefaultDispatchGrace
	}
	if err := cfg.Registry.freeze(cfg.Sealer); err != nil {
		return nil, err
	}
	if err := cfg.Routes.check(cfg.Registry); err != nil {
		return nil, err
	}
	w := &Worker{
		reg: cfg.Registry, store: cfg.Store, clock: orClock(cfg.Clock), log: orLogger(cfg.Logger),
		concurrency: cfg.Concurrency, deadlines: cfg.Deadlines, retention: cfg.Retention, sealer: cfg.Sealer,
		routes: cfg.Routes, grace: cfg.DispatchGrace, queue: cfg.Queue, cancelCheck: cfg.CancelCheck,
	}
	if w.cancelCheck == 0 {
		w.cancelCheck = 5 * time.Second
	}
	if hk, ok := cfg.Sealer.(interface{ hashKey() []byte }); ok {
		w.hkey = hk.hashKey()
	}
	return w, nil
}

// HandleSQS runs the batch's jobs, up to the configured concurrency at once,
// and returns the ids of the messages that must come back: those whose job
// could not be claimed or settled because of a transient error, whose job is
// not visible yet, or that are not job messages at all (they reach the
// dead-letter queue after maxReceiveCount). A job recorded as failed is
// never listed: handler failures are final. It never returns an error, so
// one record cannot fail the whole batch.
func (w *Worker) HandleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	inv := w.deadlines.plan(ctx, time.Now())
	var (
		mu       sync.Mutex
		failures []events.SQSBatchItemFailure
		wg       sync.WaitGroup
		sem      = make(chan struct{}, w.concurrency)
	)
	for i := range ev.Records {
		msg := &ev.Records[i]
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if retry := w.handleRecord(ctx, inv, msg); retry {
				mu.Lock()
				failures = append(failures, events.SQSBatchItemFailure{ItemIdentifier: msg.MessageId})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return events.SQSEventResponse{BatchItemFailures: failures}, nil
}

// handleRecord processes one message and reports whether it must come back.
func (w *Worker) handleRecord(ctx context.Context, inv invocation, msg *events.SQSMessage) (retry bool) {
	defer func() {
		// A bug here must not take the batch down: the message comes back.
		if p := recover(); p != nil {
			w.log.LogAttrs(ctx, slog.LevelError, "worker panicked on a record",
				slog.String("message_id", msg.MessageId), slog.String("stack", stackFrames(3)))
			retry = true
		}
	}()
	if id, err := DecodeMessage(msg.Body); err == nil {
		return w.runJob(ctx, inv, id)
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
		if w.runRouted(ctx, inv, msg.MessageId, j) {
			retry = true
		}
	}
	return retry
}

// runRouted creates the job a foreign message describes (once: its id is
// derived from the message) and runs it like any other.
func (w *Worker) runRouted(ctx context.Context, inv invocation, messageID string, j routedJob) (retry bool) {
	now := w.clock.Now().Truncate(time.Millisecond)
	payload := j.Payload
	if len(payload) > MaxPayloadBytes || CheckJSON(payload, MaxPayloadBytes) != nil {
		payload = []byte("null") // fails invalid_payload when run
	}
	k, _ := w.reg.lookup(j.Kind)
	if canonical, err := k.canonical(payload); err == nil {
		payload = canonical
	}
	stored, err := sealPayload(w.sealer, j.ID, k.secrets, payload)
	if err != nil {
		stored = []byte("null")
	}
	rec := &Record{
		ID: j.ID, Kind: j.Kind, Owner: j.Owner, Status: StatusQueued, Payload: stored,
		RequestHash: requestHash(w.hkey, j.Kind, payload), CreatedAt: now, UpdatedAt: now, SweepAt: now.Add(w.grace),
	}
	err = w.store.Create(ctx, rec)
	switch {
	case err == nil:
		w.log.LogAttrs(ctx, slog.LevelInfo, "job created from a message", slog.String("job_id", j.ID), slog.String("kind", j.Kind),
			slog.String("source", j.Source), slog.String("message_id", messageID))
	case errors.Is(err, ErrExists):
		// Delivered before: the claim below tells a finished job from one
		// still to run.
	default:
		w.log.LogAttrs(ctx, slog.LevelError, "could not create a job from a message; it will come back",
			slog.String("job_id", j.ID), slog.String("source", j.Source), slog.String("err_types", ErrorTypes(err)))
		return true
	}
	return w.runJob(ctx, inv, j.ID)
}

// runJob claims the job, runs its handler and records the outcome.
func (w *Worker) runJob(ctx context.Context, inv invocation, id string) (retry bool) {
	now := w.clock.Now()
	token := NewID()
	rec, err := w.store.Claim(ctx, id, Claim{Token: token, At: now, LeaseUntil: inv.lambda})
	var ce *ConflictError
	if errors.As(err, &ce) && ce.Current != nil && ce.Current.Status == StatusRunning && ce.Current.ClaimToken == token {
		// Our own claim, retried by the SDK after its answer was lost: it landed.
		rec, err = ce.Current, nil
	}
	if err != nil {
		return w.claimFailed(ctx, inv, id, err)
	}
	log := w.log.With(slog.String("job_id", rec.ID), slog.String("kind", rec.Kind), slog.Int("attempt", rec.Attempt))

	var ex execution
	k, ok := w.reg.lookup(rec.Kind)
	if !ok {
		ex = execution{Status: StatusFailed, Code: CodeUnknownKind, Cause: "unknown_kind"}
	} else {
		ex = w.execute(ctx, inv, k, rec, token)
	}
	wctx, cancel := inv.finalWriteContext(ctx)
	defer cancel()
	if ok && ex.Status == StatusFailed && shouldRetry(k.retry, ex, rec.Attempt) {
		return w.retry(wctx, log, k, rec, token, ex, time.Time{})
	}
	return w.finish(wctx, log, rec, token, ex, now)
}

// finish writes a run's final outcome and reports whether the message
// must come back. A run whose cancel was requested ends cancelled.
func (w *Worker) finish(ctx context.Context, log *slog.Logger, rec *Record, token string, ex execution, started time.Time) bool {
	end := w.clock.Now()
	out := Outcome{Status: ex.Status, Result: ex.Result, Code: ex.Code, At: end, ExpiresAt: end.Add(w.retention), BatchID: rec.BatchID}
	if ex.Status == StatusCancelled {
		out.Result, out.Code = nil, ""
	}
	err := w.store.Finish(ctx, rec.ID, token, out)
	if errors.Is(err, ErrCancelRequested) {
		// Cancelled while it ran, unnoticed: no other outcome may land.
		ex = execution{Status: StatusCancelled, Cause: "cancelled"}
		err = w.store.Finish(ctx, rec.ID, token, Outcome{Status: StatusCancelled, At: end, ExpiresAt: end.Add(w.retention), BatchID: rec.BatchID})
	}
	if err == nil && rec.BatchID != "" {
		defer w.settleBatchOf(ctx, rec.BatchID)
	}
	switch {
	case err == nil:
		attrs := []slog.Attr{slog.String("status", string(ex.Status)), slog.Int64("duration_ms", end.Sub(started).Milliseconds())}
		level := slog.LevelInfo
		if ex.Status == StatusFailed {
			level = slog.LevelWarn
			attrs = append(attrs, slog.String("code", ex.Code), slog.String("cause", ex.Cause))
			if ex.ErrTypes != "" {
				attrs = append(attrs, slog.String("err_types", ex.ErrTypes))
			}
			if ex.Stack != "" {
				attrs = append(attrs, slog.String("stack", ex.Stack))
			}
		}
		log.LogAttrs(ctx, level, "job finished", attrs...)
		return false
	case errors.Is(err, ErrLostClaim), errors.Is(err, ErrNotFound):
		// Someone else settled this run (a sweeper after the lease): the
		// stored outcome stands.
		log.LogAttrs(ctx, slog.LevelWarn, "job was settled by someone else before its final write", slog.String("outcome_dropped", string(ex.Status)))
		return false
	default:
		// The final write did not land in time. The job stays running; the
		// message comes back and the redelivery (or the sweeper) settles it.
		log.LogAttrs(ctx, slog.LevelError, "final write failed; the message will come back",
			slog.String("outcome_lost", string(ex.Status)), slog.String("err_types", ErrorTypes(err)))
		return true
	}
}

// settleBatchOf ends the batch if the job just finished was its last.
func (w *Worker) settleBatchOf(ctx context.Context, batchID string) {
	b, err := w.store.GetBatch(ctx, batchID)
	if err != nil {
		return // the sweeper settles it
	}
	settleBatch(ctx, w.store, w.queue, w.log, b, w.grace, w.retention)
}

// shouldRetry reports whether a failed run gets another attempt.
func shouldRetry(p RetryPolicy, ex execution, attempt int) bool {
	if p.MaxAttempts <= 1 || attempt >= p.MaxAttempts {
		return false
	}
	switch {
	case ex.Retryable:
		return true
	case ex.Code == CodeTimedOut || ex.Code == CodeInterrupted:
		return true
	case p.RetryErrors && ex.Code == CodeInternal && (ex.Cause == "error" || ex.Cause == "panic"):
		return true
	}
	return false
}

// retry sends a failed run back to the queue: run_at after the backoff, the
// message delayed by SQS up to 15 minutes, and beyond that left to the
// sweeper. leaseBy is set when retrying an interrupted run.
func (w *Worker) retry(ctx context.Context, log *slog.Logger, k *kindDef, rec *Record, token string, ex execution, leaseBy time.Time) bool {
	now := w.clock.Now()
	delay := ex.RetryDelay
	if delay <= 0 {
		delay = k.retry.backoff(rec.Attempt)
	}
	runAt := now.Add(delay).Truncate(time.Millisecond)
	sweepAt := runAt
	viaQueue := w.queue != nil && delay <= MaxQueueDelay
	if viaQueue {
		sweepAt = runAt.Add(w.grace)
	}
	err := w.store.Requeue(ctx, rec.ID, token, Requeue{At: now, RunAt: runAt, SweepAt: sweepAt, LastError: ex.Code, LeaseExpiredBy: leaseBy})
	switch {
	case errors.Is(err, ErrCancelRequested):
		return w.finish(ctx, log, rec, token, execution{Status: StatusCancelled, Cause: "cancelled"}, now)
	case errors.Is(err, ErrLostClaim), errors.Is(err, ErrNotFound):
		return false
	case err != nil:
		log.LogAttrs(ctx, slog.LevelError, "retry write failed; the message will come back", slog.String("err_types", ErrorTypes(err)))
		return true
	}
	if viaQueue {
		if err := w.queue.SendDelayed(ctx, rec.ID, delay); err != nil {
			log.LogAttrs(ctx, slog.LevelWarn, "retry not sent; the sweeper will send it", slog.String("err_types", ErrorTypes(err)))
		}
	}
	log.LogAttrs(ctx, slog.LevelWarn, "job will retry", slog.String("code", ex.Code), slog.String("cause", ex.Cause),
		slog.Int("max_attempts", k.retry.MaxAttempts), slog.Time("run_at", runAt))
	return false
}

// execute runs the handler with a context that ends at the invocation's
// handler deadline, and abandons it there if it does not return. A cancel
// requested by the job's owner, noticed at a Publish or by a check every
// CancelCheck, cancels the handler's context and ends the run cancelled
// at once, whether or not the handler returns.
func (w *Worker) execute(ctx context.Context, inv invocation, k *kindDef, rec *Record, token string) execution {
	hctx, cancel := context.WithDeadline(ctx, inv.handler)
	defer cancel()
	noticed := make(chan struct{})
	notice := sync.OnceFunc(func() { close(noticed); cancel() })
	publish := func(pctx context.Context, body []byte) error {
		err := w.store.Publish(pctx, rec.ID, token, body, w.clock.Now())
		if errors.Is(err, ErrCancelRequested) {
			notice()
			return ErrCancelled
		}
		return err
	}
	done := make(chan execution, 1)
	go func() { done <- k.execute(hctx, rec, w.sealer, publish) }()
	var tick <-chan time.Time
	if w.cancelCheck > 0 {
		t := time.NewTicker(w.cancelCheck)
		defer t.Stop()
		tick = t.C
	}
	cancelled := execution{Status: StatusCancelled, Cause: "cancelled"}
	for {
		select {
		case ex := <-done:
			select {
			case <-noticed:
				return cancelled
			default:
				return ex
			}
		case <-noticed:
			return cancelled
		case <-tick:
			// The light check: is a cancel requested?
			if cur, err := w.store.Get(hctx, rec.ID); err == nil && cur.CancelRequested && cur.ClaimToken == token {
				notice()
			}
		case <-hctx.Done():
			select {
			case ex := <-done: // it returned just as the deadline hit
				return ex
			case <-noticed:
				return cancelled
			default:
			}
			return execution{Status: StatusFailed, Code: CodeTimedOut, Cause: "abandoned"}
		}
	}
}

// claimFailed decides what to do with a message whose job could not be
// claimed, and reports whether the message must come back.
func (w *Worker) claimFailed(ctx context.Context, inv invocation, id string, err error) bool {
	log := w.log.With(slog.String("job_id", id))
	var ce *ConflictError
	switch {
	case errors.Is(err, ErrNotFound):
		// Not visible yet, or never stored: let SQS retry; after
		// maxReceiveCount the message goes to the dead-letter queue.
		log.LogAttrs(ctx, slog.LevelWarn, "job not found; the message will come back")
		return true
	case errors.As(err, &ce) && ce.Current != nil:
		cur := ce.Current
		now := w.clock.Now()
		switch {
		case cur.Status.Final():
			log.LogAttrs(ctx, slog.LevelInfo, "duplicate delivery of a finished job", slog.String("status", string(cur.Status)))
			return false
		case cur.Status == StatusQueued && cur.RunAt.After(now):
			// Delivered before its run time (a retry or a delayed job): send
			// it again for then; beyond 15 minutes the sweeper does.
			if wait := cur.RunAt.Sub(now); w.queue != nil && wait <= MaxQueueDelay {
				if err := w.queue.SendDelayed(ctx, cur.ID, wait); err != nil {
					return true
				}
			}
			log.LogAttrs(ctx, slog.LevelInfo, "early delivery of a job that runs later", slog.Time("run_at", cur.RunAt))
			return false
		case cur.Status == StatusRunning && !cur.LeaseUntil.After(now):
			// Its worker died or lost its final write: settle it now.
			return w.interrupt(ctx, inv, cur, now)
		default:
			log.LogAttrs(ctx, slog.LevelInfo, "duplicate delivery of a running job")
			return false
		}
	default:
		log.LogAttrs(ctx, slog.LevelError, "claim failed; the message will come back", slog.String("err_types", ErrorTypes(err)))
		return true
	}
}

// interrupt settles a running job whose lease has ended, conditional on its
// claim token and lease, so a late worker or a sweeper racing it cannot
// produce a second outcome: cancelled if its owner cancelled it, a retry if
// its kind's policy allows one, else failed as interrupted.
func (w *Worker) interrupt(ctx context.Context, inv invocation, cur *Record, now time.Time) bool {
	wctx, cancel := inv.finalWriteContext(ctx)
	defer cancel()
	log := w.log.With(slog.String("job_id", cur.ID), slog.String("kind", cur.Kind), slog.Int("attempt", cur.Attempt))
	ex := execution{Status: StatusFailed, Code: CodeInterrupted, Cause: "lease_expired"}
	if k, ok := w.reg.lookup(cur.Kind); ok && !cur.CancelRequested && shouldRetry(k.retry, ex, cur.Attempt) {
		return w.retry(wctx, log, k, cur, cur.ClaimToken, ex, now)
	}
	if cur.CancelRequested {
		ex = execution{Status: StatusCancelled, Cause: "cancelled"}
	}
	err := w.store.Finish(wctx, cur.ID, cur.ClaimToken, Outcome{
		Status: ex.Status, Code: ex.Code, At: now, ExpiresAt: now.Add(w.retention), LeaseExpiredBy: now, BatchID: cur.BatchID,
	})
	if err == nil && cur.BatchID != "" {
		w.settleBatchOf(wctx, cur.BatchID)
	}
	switch {
	case err == nil:
		attrs := []slog.Attr{slog.String("status", string(ex.Status)), slog.String("cause", ex.Cause)}
		if ex.Code != "" {
			attrs = append(attrs, slog.String("code", ex.Code))
		}
		log.LogAttrs(ctx, slog.LevelWarn, "job finished", attrs...)
		return false
	case errors.Is(err, ErrLostClaim), errors.Is(err, ErrNotFound), errors.Is(err, ErrCancelRequested):
		return false
	default:
		log.LogAttrs(ctx, slog.LevelError, "could not record interruption; the message will come back", slog.String("err_types", ErrorTypes(err)))
		return true
	}
}

// describeShape names the shape of a message body for logs without quoting
// it: its length and, for a JSON object, its top-level keys (at most 8).
func describeShape(body string) string {
	keys, ok := topLevelKeys(body, 8)
	if !ok {
		return fmt.Sprintf("non-JSON body of %d bytes", len(body))
	}
	return fmt.Sprintf("JSON object of %d bytes with keys %v", len(body), keys)
}
