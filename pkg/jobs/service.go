package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/emf"
	"github.com/lambdajobs/lambdajobs/internal/errtypes"
	"github.com/lambdajobs/lambdajobs/internal/metricnames"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Defaults for the service, worker and sweeper.
const (
	// DefaultDispatchGrace is how long a job may stay queued before the
	// sweeper looks at it: it re-sends a job whose message never reached the
	// queue, and fails a job whose worker died. Keep it above the worker's
	// Lambda timeout so a job claimed promptly never needs the sweeper.
	DefaultDispatchGrace = 3 * time.Minute
	// DefaultRetention is how long a finished job stays readable.
	DefaultRetention = 7 * 24 * time.Hour
)

// Service enqueues and reads jobs. The HTTP functions and the Go client both
// go through it, so validation, limits, owners and idempotency are the same
// on every path.
type Service struct {
	eng     *engine
	reg     *Registry
	store   driver.Store
	queue   driver.Queue
	clock   Clock
	log     *slog.Logger
	grace   time.Duration
	sealer  Sealer // seals secret payload fields
	hasher  requestHasher
	metrics *Metrics
	pageKey []byte
	// counter counts queued jobs for the caps (nil: no kind has one, or
	// the store cannot); capCounts are this instance's counts.
	counter   driver.QueueCounter
	capCounts *capCounts
	// callers: the service answers API callers (ForCallers).
	callers bool
	// enqueueRate is Config.EnqueueRatePerOwner; refusals are
	// this instance's refused owners.
	enqueueRate float64
	refusals    *rateRefusals
	// waitsPerOwner is Config.WaitsPerOwner, its default applied.
	waitsPerOwner int
	// uploads keeps the callers' uploads (nil: the store takes none).
	uploads driver.Uploads
}

// ForCallers returns the service as API callers reach it (package httpapi
// uses it): the same service, to whose requests an internal kind
// (KindOpts.Internal) is unknown, on enqueue, batches and replays, and
// whose Kinds omits them. Go producers use s itself.
func (s *Service) ForCallers() *Service {
	c := *s
	c.callers = true
	return &c
}

// newService returns the Service of cfg (see NewClient).
func newService(cfg Config, eng *engine) (*Service, error) {
	if cfg.EnqueueRatePerOwner < 0 {
		return nil, errors.New("jobs: EnqueueRatePerOwner must be 0 (none) or more")
	}
	if cfg.WaitsPerOwner < 0 {
		return nil, errors.New("jobs: WaitsPerOwner must be 0 (the default) or more")
	}
	waits := cfg.WaitsPerOwner
	if waits == 0 {
		waits = DefaultWaitsPerOwner
	}
	if cfg.PageTokenKey != nil && len(cfg.PageTokenKey) < 32 {
		return nil, errors.New("jobs: PageTokenKey must be at least 32 bytes")
	}
	counter, err := capsNeedCounter(cfg.Registry, cfg.Store)
	if err != nil {
		return nil, err
	}
	return &Service{eng: eng, reg: cfg.Registry, store: eng.store, queue: cfg.Queue, clock: eng.clock, log: eng.log,
		grace: eng.grace, sealer: cfg.Sealer, hasher: newRequestHasher(cfg.Sealer), metrics: cfg.Metrics, pageKey: cfg.PageTokenKey,
		counter: counter, capCounts: &capCounts{}, enqueueRate: float64(cfg.EnqueueRatePerOwner), refusals: &rateRefusals{}, waitsPerOwner: waits,
		uploads: eng.uploads}, nil
}

// EnqueueRequest is one job to enqueue.
type EnqueueRequest struct {
	// Owner names the caller (an IAM principal ARN or a JWT subject); only
	// the owner can read the job.
	Owner   string
	Kind    string
	Payload json.RawMessage
	// Upload, in place of Payload, names a ready upload of the owner
	// (StartUpload) whose payload the job takes: see [Upload].
	Upload string
	EnqueueOpts
	// fromUpload is Upload resolved (Service.fromUpload); rated: the
	// caller's rate was checked already (StartUpload).
	fromUpload *uploadReady
	rated      bool
	// replayOf names the job a replay replays (Service.Replay);
	// manualRunOf the schedule RunNow runs, as the job id (a derived one);
	// childOf the job whose handler enqueues this one, named childName
	// (Kind.EnqueueChild), the id derived from both.
	replayOf           string
	manualRunOf, id    string
	childOf, childName string
	// awaited: the child's parent waits for it (Invoke).
	awaited bool
}

// Enqueue validates req, stores the job as queued and sends its reference to
// the queue. It returns the job, and Replayed when an idempotent retry
// returned the first job.
//
// Nothing is stored unless the kind is registered and the payload decodes
// strictly into the kind's payload type, nor when the job would pass a cap
// of the kind on queued jobs (a *QueueFullError matching ErrQueueFull; an
// idempotent retry of an accepted job still answers with it, and a unique
// key's holder too). Once the put succeeds the job is
// accepted: if the send then fails (after the SDK's retries), the job stays
// queued and the sweeper sends it after the dispatch grace, so an accepted
// job is never lost. A retry with the same idempotency key re-sends a job
// that is still queued at once.
func (s *Service) Enqueue(ctx context.Context, req EnqueueRequest) (*EnqueueResult, error) {
	if req.Upload != "" {
		if err := s.fromUpload(ctx, &req); err != nil {
			return nil, err
		}
	}
	if req.UniqueKey != "" {
		return s.enqueueUnique(ctx, req)
	}
	return s.enqueueResult(ctx, req)
}

// enqueueResult is enqueue, answered as an EnqueueResult.
func (s *Service) enqueueResult(ctx context.Context, req EnqueueRequest) (*EnqueueResult, error) {
	rec, created, err := s.enqueue(ctx, req)
	if err != nil {
		return nil, err
	}
	v, err := s.eng.viewRead(ctx, rec)
	if err != nil {
		return nil, err
	}
	return &EnqueueResult{Job: v, Replayed: !created}, nil
}

// enqueue is Enqueue, returning the stored record and whether it was
// created now.
func (s *Service) enqueue(ctx context.Context, req EnqueueRequest) (*driver.Record, bool, error) {
	j, r, err := s.prepare(req)
	if err != nil {
		return nil, false, err
	}
	if !req.rated {
		if err := s.checkEnqueueRate(ctx, req.Owner); err != nil {
			return nil, false, err
		}
	}
	k, _ := s.reg.lookup(req.Kind)
	if err := s.checkCaps(ctx, k, req.Owner, 1); err != nil && !s.replaysAtCap(ctx, err, req.IdempotencyKey, j.id) {
		return nil, false, err
	}
	if len(req.After) > 0 && !s.storedBefore(ctx, req, j.id) {
		if err := s.checkParents(ctx, req.Owner, req.After); err != nil {
			return nil, false, err
		}
	}
	rec, sent, err := s.createSent(ctx, j)
	var ce *driver.ConflictError
	switch {
	case err == nil:
	case errors.As(err, &ce) && errors.Is(err, driver.ErrExists) && (req.IdempotencyKey != "" || req.childOf != "" || req.fromUpload != nil) && ce.Current != nil:
		cur := ce.Current
		if cur.Owner != req.Owner || cur.Kind != req.Kind || !s.hasher.matches(cur.RequestHash, r) {
			return nil, false, ErrIdempotencyConflict
		}
		if cur.Status == StatusQueued && !sent {
			// (Sent first, the message just sent is the re-send.)
			cur = s.start(ctx, cur)
		}
		return cur, false, nil
	default:
		return nil, false, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	if !sent {
		rec = s.start(ctx, rec)
	}
	s.count(rec.Kind, metricnames.JobsEnqueued, 1)
	s.noteQueued(k, req.Owner, 1)
	return rec, true, nil
}

// createSent creates j's job, sent first when it can be (sendFirst); it
// reports whether it was. A put that fails after the send leaves a message
// that the workers drop after orphanAge.
func (s *Service) createSent(ctx context.Context, j newJob) (*driver.Record, bool, error) {
	js := []newJob{j}
	if !s.sendFirst(ctx, js) {
		rec, err := s.eng.create(ctx, j)
		return rec, false, err
	}
	pctx, cancel := context.WithTimeout(ctx, sendToPut)
	defer cancel()
	rec, err := s.eng.create(pctx, js[0])
	return rec, true, err
}

// sendFirst sends, with message first, the messages of the jobs js that
// are due within the queue's delay and wait on no parent, before they are
// stored (in one request when the queue can), and marks them sentFirst:
// stored without a sweep entry, as their messages are their net. Their
// puts must then land within sendToPut. A send that fails marks none: they
// are stored with a sweep entry and the sweeper sends them after the
// grace, so the enqueue is answered as before. It reports whether it sent.
func (s *Service) sendFirst(ctx context.Context, js []newJob) bool {
	e := s.eng
	if !e.messageFirst || e.queue == nil {
		return false
	}
	var msgs []driver.Message
	var idx []int
	sent := e.now() // a batch's later chunks are sent well after its creation
	for i, j := range js {
		rec := e.record(j)
		d := e.deliveryAt(j.at, rec.RunAt, rec.Lane)
		if !d.send || len(rec.Parents) > 0 {
			continue
		}
		m := messageOf(rec)
		m.Delay, m.SentAt = d.delay, sent
		msgs, idx = append(msgs, m), append(idx, i)
	}
	if len(msgs) == 0 {
		return false
	}
	if err := e.queue.Send(ctx, msgs...); err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "jobs not sent before their put; stored for the sweeper to send after the grace",
			slog.String("job_id", msgs[0].JobID), slog.Int("jobs", len(msgs)), slog.String("err_types", errtypes.Of(err)))
		return false
	}
	for _, i := range idx {
		js[i].sentFirst = true
	}
	return true
}

// storedBefore reports whether an enqueue with an idempotency key was
// stored before under id (one read): its retry answers with that job as
// the first answer did, whatever its parents became since.
func (s *Service) storedBefore(ctx context.Context, req EnqueueRequest, id string) bool {
	if req.IdempotencyKey == "" {
		return false
	}
	cur, err := s.store.Get(ctx, id)
	return err == nil && cur.Owner == req.Owner
}

// start sends the queued job rec (dispatch), or, when it runs after other
// jobs, registers it on them (awaitParents), and returns it as it then
// is. Either may fail and leave the job to the sweeper, after the grace.
func (s *Service) start(ctx context.Context, rec *driver.Record) *driver.Record {
	if rec.WaitingOn != driver.WaitParents {
		s.dispatch(ctx, rec)
		return rec
	}
	got, err := s.eng.awaitParents(ctx, rec)
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "job stored but not registered on all its parents; the sweeper finishes it",
			slog.String("job_id", rec.ID), slog.String("kind", rec.Kind), slog.String("err_types", errtypes.Of(err)))
	}
	return got
}

// count writes one metric record of the API's transitions (see Metrics).
func (s *Service) count(kind, name string, n int) {
	m := s.metrics.batch()
	if name == metricnames.JobsEnqueued {
		// One record per enqueue, the API job's largest log line: by
		// kind alone (and in all), without the service dimension that
		// the alarms' totals need and nothing reads of it.
		m = s.metrics.bare()
	}
	if m != nil && n > 0 {
		m.Add(map[string]string{metricnames.Kind: kind}, name, emf.Count, float64(n))
		s.metrics.flush(m, s.clock.Now())
	}
}

// Prepare validates req exactly as Enqueue does and returns the job record
// Enqueue would store, without storing or sending anything; it makes no
// call, so it does not count a kind's queued jobs against its caps. It is the first
// half of a transactional enqueue: put the record in your own DynamoDB
// transaction (dynamostore.Store.TransactPut), and after the commit call
// Dispatch. If the dispatch never happens, the sweeper sends the job after
// the dispatch grace, so a committed job always runs.
func (s *Service) Prepare(req EnqueueRequest) (*driver.Record, error) {
	if len(req.After) > 0 {
		return nil, refuse(codeInvalidRequest, `"after" is not supported in a transactional enqueue`)
	}
	if req.Upload != "" {
		return nil, refuse(codeInvalidRequest, "an upload's payload is an object, which a transaction cannot write: enqueue it with Enqueue")
	}
	j, _, err := s.prepare(req)
	if err != nil {
		return nil, err
	}
	return s.eng.record(j), nil
}

// prepare is Prepare, returning the job to create and what its request
// hash covers.
func (s *Service) prepare(req EnqueueRequest) (newJob, request, error) {
	if err := checkIdempotencyKey(req.IdempotencyKey); err != nil {
		return newJob{}, nil, err
	}
	id := s.eng.newID()
	switch {
	case req.id != "":
		id = req.id
	case req.IdempotencyKey != "":
		id = wire.DerivedID("idempotency", req.Owner, req.IdempotencyKey)
	}
	j, r, err := s.prepareAs(req, id, s.eng.now())
	j.fresh = req.IdempotencyKey == "" && req.id == ""
	return j, r, err
}

// prepareAs is prepare with the job's id and creation time given.
func (s *Service) prepareAs(req EnqueueRequest, id string, now time.Time) (newJob, request, error) {
	if err := checkOwner(req.Owner); err != nil {
		return newJob{}, nil, err
	}
	k, ok := s.reg.lookupFor(req.Kind, s.callers)
	if !ok {
		return newJob{}, nil, errUnknownKind
	}
	if req.Upload != "" && req.fromUpload == nil {
		return newJob{}, nil, refuse(codeInvalidRequest, `"upload" is taken by Enqueue alone`)
	}
	var canonical []byte
	if req.fromUpload == nil {
		if err := k.validate(req.Payload); err != nil {
			return newJob{}, nil, err
		}
		var err error
		if canonical, err = k.canonical(req.Payload); err != nil {
			return newJob{}, nil, err
		}
	}
	runAt := req.RunAt
	switch {
	case req.Delay < 0 || (req.Delay > 0 && !req.RunAt.IsZero()):
		return newJob{}, nil, refuse(codeInvalidRequest, `give "run_at" or "delay", not both, and no negative delay`)
	case req.Delay > 0:
		runAt = now.Add(req.Delay)
	}
	if runAt.Sub(now) > MaxDelay {
		return newJob{}, nil, refuse(codeInvalidRequest, `"run_at" is more than 365 days ahead`)
	}
	if req.Tenant != "" && !wire.ValidOwner(req.Tenant) {
		return newJob{}, nil, refuse(codeInvalidRequest, fmt.Sprintf("tenant: 1 to %d printable ASCII characters", wire.MaxOwnerBytes))
	}
	if err := checkUnique(req.EnqueueOpts); err != nil {
		return newJob{}, nil, err
	}
	if err := checkAfter(req.EnqueueOpts); err != nil {
		return newJob{}, nil, err
	}
	if err := checkTags(req.Tags); err != nil {
		return newJob{}, nil, err
	}
	if req.Lane != "" && !slices.Contains(s.reg.Lanes(), req.Lane) {
		return newJob{}, nil, refuse(codeInvalidRequest, fmt.Sprintf("lane %q: this deployment has no such lane", req.Lane))
	}
	var stored []byte
	var staged driver.Staged
	var err error
	if up := req.fromUpload; up != nil {
		// Sealed for this id by the worker that validated it: the hash
		// covers what it sealed.
		staged, canonical = up.staged, []byte("upload:"+up.sha256)
	} else if stored, err = sealPayload(s.sealer, id, k.secrets, canonical); err != nil {
		return newJob{}, nil, fmt.Errorf("jobs: seal payload: %w", err)
	}
	if most := s.eng.maxPart; most > 0 && len(stored) > most {
		// Sealing grows each secret field by a third: within the kind's
		// bound, a payload of large secrets may pass what the store keeps.
		return newJob{}, nil, &PayloadError{Reason: fmt.Sprintf("%d bytes once its secret fields are sealed is more than the %d stored",
			len(stored), most), Limit: k.maxPayload}
	}
	r := jobRequest(req.Kind, canonical, req.RunAt, req.Delay)
	for _, part := range [][]byte{afterRequest(req.After), replayRequest(req.replayOf), manualRequest(req.manualRunOf), tagsRequest(req.Tags),
		childRequest(req.childOf, req.childName, req.awaited)} {
		if part != nil {
			r = append(r, part)
		}
	}
	return newJob{id: id, kind: req.Kind, owner: req.Owner, payload: stored, staged: staged, requestHash: s.hasher.sum(r), at: now, runAt: runAt, lane: req.Lane,
		tenant: req.Tenant, startBy: req.StartBy, parents: slices.Clone(req.After), replayOf: req.replayOf,
		manualRunOf: req.manualRunOf, childOf: req.childOf, awaitedAs: awaitedAs(req), tags: maps.Clone(req.Tags)}, r, nil
}

// Dispatch sends the reference of a job stored by a committed transaction
// (see Prepare). It is the one call after the commit; if it fails, the
// sweeper sends the job after the dispatch grace.
func (s *Service) Dispatch(ctx context.Context, rec *driver.Record) error {
	if err := s.eng.deliver(ctx, rec, s.eng.deliveryAt(s.clock.Now(), rec.RunAt, rec.Lane)); err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "job stored but not sent; the sweeper will send it",
			slog.String("job_id", rec.ID), slog.String("kind", rec.Kind),
			slog.Time("sweep_at", rec.SweepAt), slog.String("err_types", errtypes.Of(err)))
		return fmt.Errorf("%w: queue: %w", ErrUnavailable, err)
	}
	return nil
}

// dispatch sends the job's reference. A failure is logged, not returned: the
// job is stored, and the sweeper re-sends it after the dispatch grace.
func (s *Service) dispatch(ctx context.Context, rec *driver.Record) {
	_ = s.Dispatch(ctx, rec)
}

// MaxDelay is the furthest ahead a job can be scheduled.
const MaxDelay = 365 * 24 * time.Hour

// Cancel cancels the owner's job. A queued job (delayed or waiting for a
// retry included) is cancelled at once. A running job is marked: its
// handler's context is cancelled when the worker notices (at its next
// Publish, or within the worker's CancelCheck), and the run ends cancelled;
// no other outcome can be recorded after Cancel returns. A finished job
// gives ErrAlreadyFinal; another owner's or an unknown job, ErrNotFound.
func (s *Service) Cancel(ctx context.Context, owner, id string) (*View, error) {
	rec, err := s.cancel(ctx, owner, id)
	if rec == nil {
		return nil, err
	}
	v, verr := s.eng.viewRead(ctx, rec)
	if verr != nil {
		v = viewOf(rec) // the cancel's own answer stands; its view without a large result
	}
	return &v, err
}

// cancel is Cancel, returning the record.
func (s *Service) cancel(ctx context.Context, owner, id string) (*driver.Record, error) {
	rec, err := s.get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	rec, err = s.cancelAsRead(ctx, owner, rec)
	switch {
	case errors.Is(err, ErrAlreadyFinal):
		return rec, err
	case err != nil:
		return nil, err
	}
	if rec.Status == StatusQueued {
		s.count(rec.Kind, metricnames.JobsCancelled, 1)
	}
	return s.get(ctx, owner, id)
}

// cancelAsRead cancels the owner's job rec, as read or listed: queued, it
// is cancelled; running, its cancel is requested. A job that moved between
// the read and the write is read again and the cancel tried again (three
// times in all), so a job listed queued but claimed since is asked to
// stop. It returns the job as it was when the cancel landed (its Status
// tells which of the two), or as last read with ErrAlreadyFinal; Cancel
// and Bulk both cancel through it.
func (s *Service) cancelAsRead(ctx context.Context, owner string, rec *driver.Record) (*driver.Record, error) {
	if err := s.callerActs(rec); err != nil {
		return nil, err
	}
	for try := range 3 {
		if try > 0 {
			var err error
			if rec, err = s.get(ctx, owner, rec.ID); err != nil {
				return nil, err
			}
		}
		switch err := s.eng.cancel(ctx, rec); {
		case err == nil:
			return rec, nil
		case errors.Is(err, ErrAlreadyFinal):
			return rec, err
		case errors.Is(err, errNotQueued), errors.Is(err, errNotRunning):
			// It moved between the read and the write: read it again.
		default:
			return nil, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
		}
	}
	return nil, fmt.Errorf("%w: the job kept changing", ErrUnavailable)
}

// secretMask replaces the value of each jobs:"secret" field in the
// payload Get returns.
const secretMask = "[secret]"

// viewPaused is rec's view, waiting on "paused" when it is queued, due
// and held back by a pause in force (from this instance's copy of the
// pause set: see pauseSet).
func (s *Service) viewPaused(ctx context.Context, rec *driver.Record) View {
	v := viewOf(rec)
	// Jobs it runs after, or its handler's sleep or wait for a signal
	// until its end, hold it first: a pause matters once they let it go.
	_, signal := driver.SignalWaitedOn(rec.WaitingOn)
	sleeping := (rec.WaitingOn == waitSleep || signal) && rec.RunAt.After(s.eng.now())
	if rec.Status != StatusQueued || rec.WaitingOn == driver.WaitParents || sleeping {
		return v
	}
	if p, _ := s.eng.pauses.holds(ctx, rec); p != nil {
		v.WaitingOn = waitPaused
	}
	return v
}

// payloadView returns rec's payload as its owner may see it: the fields
// tagged jobs:"secret" replaced by "[secret]" (their sealed values are never
// shown, nor opened), the others as stored. A payload that is not a JSON
// object has no secret fields.
func (s *Service) payloadView(rec *driver.Record) json.RawMessage {
	if len(rec.Payload) == 0 {
		return json.RawMessage("null")
	}
	k, ok := s.reg.lookup(rec.Kind)
	if !ok || len(k.secrets) == 0 {
		return rec.Payload
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(rec.Payload, &obj) != nil {
		return rec.Payload
	}
	for _, f := range k.secrets {
		if _, present := obj[f]; present {
			obj[f] = json.RawMessage(`"` + secretMask + `"`)
		}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// GetAny returns the job with the given id whoever owns it, with its Owner
// and its payload (secret fields masked): for operators (httpapi's admin
// routes). ErrNotFound for an unknown or malformed id.
func (s *Service) GetAny(ctx context.Context, id string) (*View, error) {
	rec, err := s.getAny(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := s.eng.withPayload(ctx, rec); err != nil {
		return nil, err
	}
	v := s.viewPaused(ctx, rec)
	v.Owner, v.Payload = rec.Owner, s.payloadView(rec)
	v.ResultURL = s.eng.resultURL(ctx, rec)
	return &v, nil
}

func (s *Service) getAny(ctx context.Context, id string) (*driver.Record, error) {
	if !wire.ValidID(id) {
		return nil, ErrNotFound
	}
	rec, err := s.store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	return rec, nil
}

// Get returns the job with the given id, with its payload (secret fields
// masked as "[secret]"), if owner owns it. Another owner's job and an
// unknown or malformed id all give ErrNotFound.
func (s *Service) Get(ctx context.Context, owner, id string) (*View, error) {
	rec, err := s.get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if err := s.eng.withPayload(ctx, rec); err != nil {
		return nil, err
	}
	v := s.viewPaused(ctx, rec)
	v.Payload = s.payloadView(rec)
	v.ResultURL = s.eng.resultURL(ctx, rec)
	return &v, nil
}

func (s *Service) get(ctx context.Context, owner, id string) (*driver.Record, error) {
	return ownedRead(ctx, owner, id, s.store.Get, func(r *driver.Record) string { return r.Owner })
}

// ownedRead reads id with get and hands it over only to its owner: another
// owner's item, an unknown and a malformed id all give ErrNotFound, after
// the same single read, so the answer tells a caller nothing about others.
func ownedRead[T any](ctx context.Context, owner, id string, get func(context.Context, string) (T, error), ownerOf func(T) string) (T, error) {
	var zero T
	if !wire.ValidID(id) || checkOwner(owner) != nil {
		return zero, ErrNotFound
	}
	v, err := get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return zero, ErrNotFound
	}
	if err != nil {
		return zero, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	if ownerOf(v) != owner {
		return zero, ErrNotFound
	}
	return v, nil
}

func checkOwner(owner string) error {
	if owner == "" || len(owner) > wire.MaxOwnerBytes || !wire.PrintableASCII(owner) {
		return refuse(codeInvalidRequest, fmt.Sprintf("the caller identity cannot name a job owner (1 to %d printable ASCII characters)", wire.MaxOwnerBytes))
	}
	return nil
}

func checkIdempotencyKey(key string) error {
	if len(key) > wire.MaxIdempotencyKeyBytes || !wire.PrintableASCII(key) {
		return refuse("invalid_idempotency_key", fmt.Sprintf("Idempotency-Key must be at most %d printable ASCII characters", wire.MaxIdempotencyKeyBytes))
	}
	return nil
}
