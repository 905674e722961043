package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Job is what a handler gets: the job's identity and its typed payload.
type Job[P any] struct {
	ID        string
	Kind      string
	Owner     string
	Attempt   int
	CreatedAt time.Time
	Payload   P
	// Batch, for a batch's completion job, is how the batch's jobs ended.
	Batch *BatchCounts

	h *runHandle
}

func init() {
	wire.SetJobPublish = func(job any, publish func(context.Context, []byte) error) {
		job.(interface {
			setPublish(func(context.Context, []byte) error)
		}).setPublish(publish)
	}
}

func (j *Job[P]) setPublish(f func(context.Context, []byte) error) { j.h = &runHandle{publish: f} }

// Publish stores partial as the job's latest result, which GET returns while
// the job runs. Each call is one conditional write (one write unit for a
// small result). It fails with ErrLostClaim when this run no longer owns the
// job (it timed out, or a sweeper failed it): the handler should stop.
func (j *Job[P]) Publish(ctx context.Context, partial Result) error {
	if j.h == nil || j.h.publish == nil {
		return nil // a Job built by hand, as in a user's unit test
	}
	body, code := publicJSON(partial, MaxResultBytes)
	if code != "" {
		return fmt.Errorf("jobs: partial result refused (%s)", code)
	}
	return j.h.publish(ctx, body)
}

// KindOpts are a kind's options at registration; nil means none. Each
// option a later feature brings is a field here, so registration keeps its
// shape.
type KindOpts struct {
	// FailureCodes declares the failure codes the kind's handler may
	// return in a [Failure]. Each must be lower-case snake case, at most
	// 64 characters, and not one of the reserved Code* codes.
	FailureCodes []string
	// Retry is the kind's retry policy; the zero policy never retries.
	Retry RetryPolicy
	// MinRunTime is the handler time a run of the kind needs: a worker does
	// not claim a job of the kind when less is left before its handler
	// deadline; the message comes back (no attempt spent) and a fresh
	// invocation runs it. Zero: the worker's Deadlines.MinRun (2s by
	// default); at most 15 minutes. One above the worker's whole handler
	// time (its Lambda timeout less Deadlines.Reserve) means the kind never
	// starts: a worker that knows its timeout (Config.WorkerTimeout;
	// lambdafn's JOBS_WORKER_TIMEOUT, set by the CDK construct) refuses to
	// be built with such a kind; one that does not hands its jobs' messages
	// back at every delivery, no attempt spent: they stay queued, never run
	// and never end.
	MinRunTime time.Duration
	// Lane is the lane the kind's jobs run in: its own queue, dead-letter
	// queue and workers, so a backlog in one lane never delays another's
	// jobs ("" is the default lane). The CDK construct creates the lanes
	// the registry uses (Registry.Lanes); see docs/guide/LANES.md.
	Lane string
	// Heartbeat makes a run of the kind hold its job by a lease of this
	// length, renewed by Job.Heartbeat and Job.Checkpoint, instead of the
	// worker's whole Lambda deadline: a run whose worker died is then
	// interrupted (and retried, from its last checkpoint) one lease after
	// its last heartbeat. Each heartbeat is one write. 0: no heartbeats;
	// else 1 second to 2 hours.
	Heartbeat time.Duration
	// MaxRunTime is the longest a job of the kind may go on, from its first
	// run's start through its continuations and retries: past it the job
	// ends failed, timed_out, when it is next claimed. 0: no bound.
	MaxRunTime time.Duration
	// AutoContinue continues a run whose handler returned because its
	// context's deadline came (the invocation's handler time ran out)
	// instead of failing it timed_out: a new invocation resumes from the
	// last checkpoint, no attempt spent. A handler that ignores its
	// context is still abandoned and timed out.
	AutoContinue bool
	// Concurrency bounds how many jobs of the kind run at once, across
	// every worker (0: no bound). A job that cannot get a slot waits,
	// queued, no attempt spent, and never reaches the dead-letter queue
	// for waiting; a slot whose worker died frees itself at the run's
	// lease. RateLimit bounds how many start per RatePeriod (1 second
	// when unset); a job over it waits likewise. The per-key bounds do
	// the same for the jobs that share LimitKey's value: "owner",
	// "tenant", or "payload.<field>" (a top-level field of the payload,
	// not jobs:"secret"). docs/guide/FLOW_CONTROL.md has what each costs.
	Concurrency, ConcurrencyPerKey int
	RateLimit, RateLimitPerKey     int
	RatePeriod                     time.Duration
	LimitKey                       string
	// MaxQueued caps the kind's queued jobs across every owner, and
	// MaxQueuedPerOwner each owner's (0: no cap). An enqueue that would
	// pass a cap is refused with ErrQueueFull (HTTP 429 queue_full, with
	// Retry-After) and stores nothing. Queued jobs are counted from indexes
	// that hold only them (delayed jobs, sleeping jobs (Job.Sleep) and
	// jobs waiting on a limit or a retry's backoff included), each instance reading a count again after
	// at most a second: a cap holds within what every instance accepts in
	// that second. It applies to Enqueue and EnqueueBatch (POST /v1/jobs,
	// /v1/batches); Prepare, routed messages, schedule fires, on-failure
	// follow-ups and retries are not refused (their jobs are counted). A
	// kind without a cap pays nothing; with MaxQueued each of its jobs pays
	// 2 write units more (docs/guide/FLOW_CONTROL.md).
	MaxQueued, MaxQueuedPerOwner int
	// Retention is how long the kind's finished jobs stay readable (0:
	// the deployment's).
	Retention time.Duration
	// MaxPayloadBytes and MaxResultBytes bound the kind's payloads and
	// final results (0: MaxPayloadBytes, MaxResultBytes: what an item
	// keeps). Past those, up to 100 MiB, needs a store that keeps large
	// parts as objects (dynamostore with lambdafn.Opts.Objects, which the
	// CDK construct gives a bucket): NewClient refuses the kind on a store
	// that cannot. A payload comes through POST /v1/jobs up to 2 MiB (a
	// Lambda invocation's 6 MB, after JSON escaping); larger ones only
	// from Go (Service.Enqueue, Kind.EnqueueChild). Partial results stay
	// within MaxResultBytes. docs/evidence/CAPACITY.md says where each size rests.
	MaxPayloadBytes, MaxResultBytes int
	// Events announces each outcome of the kind's jobs (succeeded, failed,
	// cancelled) on the deployment's event bus, once per outcome with a
	// stable id (see [Event] and docs/reference/EVENTS.md). Each outcome then costs
	// one PutEvents entry and about one write unit more.
	Events bool
	// OnFailure names a kind that is enqueued, exactly once, each time a
	// job of this kind ends failed (timed out and interrupted included),
	// with a [FailedJob] payload and the failed job's owner. The kind must
	// be registered in the same registry and take a FailedJob payload.
	OnFailure string
	// Internal keeps the kind from API callers: POST /v1/jobs, batches,
	// runtime schedules and replays answer an internal kind exactly as an
	// unregistered one (422 unknown_kind), and GET /v1/kinds omits it. Its
	// jobs come only from Go producers (a Service of one's own, Kind.Enqueue)
	// and from the deployment itself: routes, schedules in the registry,
	// on-failure follow-ups. A kind is internal whatever this says when
	// another kind names it as OnFailure, when its payload is a [FailedJob],
	// or when its payload is a type of github.com/aws/aws-lambda-go/events
	// (an S3 record, an EventBridge event, an SNS message: what routes
	// deliver), so no caller can forge what a handler takes for AWS's word.
	Internal bool
	// Signals declares the signals the kind's handlers wait for
	// (WaitForSignal), by name, each with a zero value of its payload's
	// type: Signals: map[string]any{"approval": Approval{}}. A signal of
	// another name, or whose payload does not decode strictly into its
	// type, is refused when delivered (Service.Signal) and stores nothing.
	// A name is a lower-case letter, then up to 63 lower-case letters,
	// digits, '.', '_' or '-'.
	Signals map[string]any
}

// kindConfig is KindOpts checked.
type kindConfig struct {
	codes  map[string]bool
	retry  RetryPolicy
	minRun time.Duration
	lane   string
	// heartbeat, maxRun and autoContinue: see KindOpts.
	heartbeat, maxRun time.Duration
	autoContinue      bool
	limits            limits
	caps              queueCaps
	retention         time.Duration
	events            bool
	onFailure         string
	internal          bool
	// maxPayload and maxResult: KindOpts's, defaults applied.
	maxPayload, maxResult int
	signals               map[string]reflect.Type
}

// maxPartBytes is the most KindOpts.MaxPayloadBytes and MaxResultBytes
// allow.
const maxPartBytes = 100 << 20

func (o *KindOpts) check() (kindConfig, error) {
	c := kindConfig{codes: map[string]bool{}, maxPayload: MaxPayloadBytes, maxResult: MaxResultBytes, signals: map[string]reflect.Type{}}
	if o == nil {
		return c, nil
	}
	signals, err := checkSignals(o.Signals)
	if err != nil {
		return c, err
	}
	c.signals = signals
	for _, n := range []int{o.MaxPayloadBytes, o.MaxResultBytes} {
		if n < 0 || n > maxPartBytes {
			return c, fmt.Errorf("max payload or result bytes %d: want 0 (%d) to %d", n, MaxPayloadBytes, maxPartBytes)
		}
	}
	if o.MaxPayloadBytes > 0 {
		c.maxPayload = o.MaxPayloadBytes
	}
	if o.MaxResultBytes > 0 {
		c.maxResult = o.MaxResultBytes
	}
	for _, code := range o.FailureCodes {
		if err := checkCode(code); err != nil {
			return c, err
		}
		c.codes[code] = true
	}
	if err := o.Retry.check(); err != nil {
		return c, err
	}
	if o.MinRunTime < 0 || o.MinRunTime > 15*time.Minute {
		return c, fmt.Errorf("minimum run time %v: want 0 to 15m", o.MinRunTime)
	}
	if !driver.ValidLane(o.Lane) {
		return c, fmt.Errorf("lane %q: want a lower-case letter, then up to 15 lower-case letters, digits or '-', not \"default\"", o.Lane)
	}
	if o.Heartbeat != 0 && (o.Heartbeat < time.Second || o.Heartbeat > 2*time.Hour) {
		return c, fmt.Errorf("heartbeat %v: want 0, or 1s to 2h", o.Heartbeat)
	}
	if o.MaxRunTime < 0 {
		return c, fmt.Errorf("max run time %v: want 0 (no bound) or more", o.MaxRunTime)
	}
	c.retry, c.minRun, c.lane = o.Retry, o.MinRunTime, o.Lane
	c.heartbeat, c.maxRun, c.autoContinue = o.Heartbeat, o.MaxRunTime, o.AutoContinue
	l, err := o.limits()
	if err != nil {
		return c, err
	}
	if o.Retention < 0 {
		return c, fmt.Errorf("retention %v: want 0 (the deployment's) or more", o.Retention)
	}
	if o.MaxQueued < 0 || o.MaxQueuedPerOwner < 0 {
		return c, fmt.Errorf("queue caps %d and %d per owner: want 0 (no cap) or more", o.MaxQueued, o.MaxQueuedPerOwner)
	}
	c.limits, c.retention = l, o.Retention
	c.caps = queueCaps{kind: o.MaxQueued, perOwner: o.MaxQueuedPerOwner}
	if o.OnFailure != "" && !validKind(o.OnFailure) {
		return c, fmt.Errorf("on-failure kind %q: not a valid kind name", o.OnFailure)
	}
	c.events, c.onFailure, c.internal = o.Events, o.OnFailure, o.Internal
	return c, nil
}

// kindDef is a registered kind with its types erased.
type kindDef struct {
	name    string
	codes   map[string]bool
	secrets []string // JSON names of payload fields tagged jobs:"secret"
	retry   RetryPolicy
	minRun  time.Duration // 0: the worker's default
	lane    string
	// maxPayload and maxResult: KindOpts.MaxPayloadBytes, MaxResultBytes.
	maxPayload, maxResult int
	// payloadType is P, so routes can check what they deliver;
	// resultType is R; schema their JSON Schemas, once built (schemas).
	payloadType, resultType reflect.Type
	schema                  *kindSchemas
	validate                func(raw []byte) error
	// canonical re-encodes a valid payload through P, so every path stores
	// the same bytes for the same value.
	canonical func(raw []byte) ([]byte, error)
	run       func(ctx context.Context, rec *driver.Record, payload []byte, h *runHandle) (Result, error)
	// heartbeat, maxRun and autoContinue: see KindOpts.
	heartbeat, maxRun time.Duration
	autoContinue      bool
	limits            limits
	caps              queueCaps
	retention         time.Duration
	// events and onFailure: see KindOpts.
	events    bool
	onFailure string
	// internal: see KindOpts.Internal (set for on-failure targets when the
	// registry freezes).
	internal bool
	// signals: KindOpts.Signals, each with its payload's type.
	signals map[string]reflect.Type
}

// Registry holds the job kinds. Register every kind at start-up, before the
// registry is handed to a service or worker; after its first use it refuses
// registrations, so the set of kinds cannot change under a running worker.
// A Registry is safe for concurrent use.
type Registry struct {
	mu        sync.Mutex
	kinds     map[string]*kindDef
	schedules map[string]Schedule
	frozen    bool
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{kinds: map[string]*kindDef{}} }

// Register adds the kind named kind to reg, run by handle: it gets the job
// with its payload decoded into a P and returns a result R, or an error.
// Return a [Failure] (see [Fail]) to fail the job with a code the kind
// declared, or mark an error with [Retry] to ask for another attempt under
// the kind's retry policy; any other error fails the job with
// [CodeInternal]. The error's text is never stored, returned or logged.
// handle's ctx ends a reserve before the worker's Lambda deadline; a
// handler that keeps running past it is abandoned and its job fails with
// [CodeTimedOut].
//
// The kind's name is a lower-case letter, then up to 99 lower-case letters,
// digits, '.', '_' or '-' (for example "email.send"). Register refuses a
// bad name, a nil handle, a payload type with a jobs:"secret" tag that
// sealing would miss, a name already registered, a bad option, and any
// registration after reg was put to use; the error says which.
//
// It returns the kind's typed handle, which enqueues jobs of the kind with a
// payload of type P (Kind.Enqueue, Kind.Prepare). P and R are inferred
// from handle:
//
//	func sendReceipt(ctx context.Context, job *jobs.Job[Receipt]) (jobs.NoResult, error)
//	receipts := jobs.MustRegister(reg, "receipt.send", sendReceipt, nil)
func Register[P any, R Result](reg *Registry, kind string, handle func(ctx context.Context, job *Job[P]) (R, error), opts *KindOpts) (Kind[P], error) {
	def, err := newKindDef(kind, handle, opts)
	if err != nil {
		return Kind[P]{}, err
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if reg.frozen {
		return Kind[P]{}, fmt.Errorf("%w (kind %q)", errRegistryFrozen, kind)
	}
	if _, dup := reg.kinds[kind]; dup {
		return Kind[P]{}, fmt.Errorf("%w: %q", errDuplicateKind, kind)
	}
	reg.kinds[kind] = def
	return Kind[P]{name: kind}, nil
}

// newKindDef is Register's kind, checked, before it joins a registry.
func newKindDef[P any, R Result](kind string, handle func(ctx context.Context, job *Job[P]) (R, error), opts *KindOpts) (*kindDef, error) {
	if !validKind(kind) {
		return nil, fmt.Errorf("%w: %q", errInvalidKind, kind)
	}
	if handle == nil {
		return nil, fmt.Errorf("%w for kind %q", errNilHandler, kind)
	}
	secrets, err := secretFields[P]()
	if err != nil {
		return nil, fmt.Errorf("kind %q: %w", kind, err)
	}
	cfg, err := opts.check()
	if err != nil {
		return nil, fmt.Errorf("jobs: kind %q: %w", kind, err)
	}
	return &kindDef{
		name:        kind,
		codes:       cfg.codes,
		secrets:     secrets,
		payloadType: reflect.TypeFor[P](),
		resultType:  reflect.TypeFor[R](),
		schema:      &kindSchemas{},
		retry:       cfg.retry,
		minRun:      cfg.minRun,
		lane:        cfg.lane,
		heartbeat:   cfg.heartbeat, maxRun: cfg.maxRun, autoContinue: cfg.autoContinue,
		limits: cfg.limits, caps: cfg.caps, retention: cfg.retention, events: cfg.events, onFailure: cfg.onFailure,
		internal:   cfg.internal || internalPayload(reflect.TypeFor[P]()),
		maxPayload: cfg.maxPayload, maxResult: cfg.maxResult, signals: cfg.signals,
		validate: func(raw []byte) error {
			_, err := decodePayload[P](raw, cfg.maxPayload)
			return err
		},
		canonical: func(raw []byte) ([]byte, error) { return canonicalPayload[P](raw, cfg.maxPayload) },
		run: func(ctx context.Context, rec *driver.Record, payload []byte, h *runHandle) (Result, error) {
			p, err := decodePayload[P](payload, cfg.maxPayload)
			if err != nil {
				return nil, errPayload
			}
			job := &Job[P]{
				ID: rec.ID, Kind: rec.Kind, Owner: rec.Owner, Attempt: rec.Attempt,
				CreatedAt: rec.CreatedAt, Payload: p, Batch: rec.BatchCounts, h: h,
			}
			r, err := handle(ctx, job)
			if err != nil {
				return nil, err
			}
			if isNil(r) {
				return nil, errNilResult
			}
			return r, nil
		},
	}, nil
}

// MustRegister is like [Register] but panics on error; for start-up code.
func MustRegister[P any, R Result](reg *Registry, kind string, handle func(ctx context.Context, job *Job[P]) (R, error), opts *KindOpts) Kind[P] {
	k, err := Register(reg, kind, handle, opts)
	if err != nil {
		panic(err)
	}
	return k
}

// Lanes returns the lanes the registry's kinds run in, sorted, the default
// lane ("") first: the CDK construct creates a queue and workers for each
// (JobsProps.Lanes).
func (reg *Registry) Lanes() []string {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	set := map[string]bool{"": true}
	for _, k := range reg.kinds {
		set[k.lane] = true
	}
	out := make([]string, 0, len(set))
	for l := range set {
		out = append(out, l)
	}
	sort.Strings(out)
	return out
}

// EventKinds returns the kinds that announce their outcomes
// (KindOpts.Events), sorted: their workers need an event bus.
func (reg *Registry) EventKinds() []string {
	var out []string
	for _, name := range reg.Kinds() {
		if k, _ := reg.lookup(name); k.events {
			out = append(out, name)
		}
	}
	return out
}

// Kinds returns the registered kind names, sorted.
func (reg *Registry) Kinds() []string {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	names := make([]string, 0, len(reg.kinds))
	for n := range reg.kinds {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Codes returns the failure codes kind declared, sorted, or an error for a kind not registered.
func (reg *Registry) Codes(kind string) ([]string, error) {
	k, ok := reg.lookup(kind)
	if !ok {
		return nil, errUnknownKind
	}
	codes := make([]string, 0, len(k.codes))
	for c := range k.codes {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	return codes, nil
}

// Validate checks that kind is registered and that payload decodes strictly
// into its payload type, as enqueue does. Its error matches
// ErrInvalidRequest: a *RequestError for an unknown kind, or a
// *PayloadError. Calling it puts the registry to use.
func (reg *Registry) Validate(kind string, payload []byte) error {
	k, ok := reg.lookup(kind)
	if !ok {
		return errUnknownKind
	}
	return k.validate(payload)
}

// lookup returns the kind and freezes the registry.
func (reg *Registry) lookup(kind string) (*kindDef, bool) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if !reg.frozen {
		reg.frozen = true
		reg.markInternal()
	}
	k, ok := reg.kinds[kind]
	return k, ok
}

// lookupFor is lookup for a request of an API caller when callers is set:
// an internal kind is not found, as an unregistered one is not.
func (reg *Registry) lookupFor(kind string, callers bool) (*kindDef, bool) {
	k, ok := reg.lookup(kind)
	if ok && callers && k.internal {
		return nil, false
	}
	return k, ok
}

// internalPayload reports whether a kind whose payload is of type t is
// internal whatever its options say: a FailedJob (an on-failure
// follow-up's) or a type of aws-lambda-go's events package (what routes
// deliver).
func internalPayload(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	return t == reflect.TypeFor[FailedJob]() || t.PkgPath() == "github.com/aws/aws-lambda-go/events"
}

// markInternal makes every kind another names as OnFailure internal
// (reg.mu held, as the registry freezes: no kind is added after).
func (reg *Registry) markInternal() {
	for _, k := range reg.kinds {
		if f, ok := reg.kinds[k.onFailure]; ok {
			f.internal = true
		}
	}
}

// freeze marks the registry as in use. It refuses a registry with secret
// payload fields when there is no sealer.
func (reg *Registry) freeze(sealer Sealer) error {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if !reg.frozen {
		reg.frozen = true
		reg.markInternal()
	}
	for _, k := range reg.kinds {
		switch {
		case len(k.secrets) == 0:
		case sealer == nil:
			return fmt.Errorf("%w (kind %q)", errNoSealer, k.name)
		case !keyed(sealer):
			return fmt.Errorf("%w: kind %q has secret fields, and the Sealer does not key request hashes (implement jobs.HashKeyer with a key of 32 bytes or more)", errNoSealer, k.name)
		}
		if err := reg.checkOnFailure(k); err != nil {
			return err
		}
	}
	return nil
}

// LargeParts reports whether a kind allows payloads or results past what
// an item keeps (KindOpts.MaxPayloadBytes, MaxResultBytes): its
// deployment needs the object tier (jobsinfra's JobsProps.LargeParts,
// lambdafn.Opts.Objects).
func (reg *Registry) LargeParts() bool {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	for _, k := range reg.kinds {
		if k.maxPayload > MaxPayloadBytes || k.maxResult > MaxResultBytes {
			return true
		}
	}
	return false
}

// maxPartOf is the largest part store keeps, when it says (0: it does
// not).
func maxPartOf(store driver.Store) int {
	if k, ok := store.(driver.ObjectKeeper); ok {
		return k.MaxPartBytes()
	}
	return 0
}

// checkParts refuses a kind whose payloads or results may be larger than
// store keeps, when it says (driver.ObjectKeeper).
// It refuses a kind that declares signals too, when store keeps none
// (driver.Signaller).
func (reg *Registry) checkParts(store driver.Store) error {
	most := maxPartOf(store)
	_, signals := store.(driver.Signaller)
	reg.mu.Lock()
	defer reg.mu.Unlock()
	for _, k := range reg.kinds {
		if len(k.signals) > 0 && !signals {
			return fmt.Errorf("jobs: kind %q declares signals (KindOpts.Signals), and the store keeps none (driver.Signaller)", k.name)
		}
		if n := max(k.maxPayload, k.maxResult); most > 0 && n > most {
			return fmt.Errorf("jobs: kind %q allows parts of %d bytes, and the store keeps at most %d (give it an object tier: lambdafn.Opts.Objects, dynamostore.Config.Objects)", k.name, n, most)
		}
	}
	return nil
}

// checkOnFailure refuses an on-failure kind that is not registered or
// does not take a FailedJob payload (reg.mu held).
func (reg *Registry) checkOnFailure(k *kindDef) error {
	if k.onFailure == "" {
		return nil
	}
	f, ok := reg.kinds[k.onFailure]
	if !ok {
		return fmt.Errorf("jobs: kind %q: its on-failure kind %q is not registered", k.name, k.onFailure)
	}
	sample, _ := json.Marshal(FailedJob{JobID: "x", Kind: k.name, Code: CodeInternal, Attempt: 1})
	if err := f.validate(sample); err != nil {
		return fmt.Errorf("jobs: kind %q: its on-failure kind %q does not take a jobs.FailedJob payload", k.name, k.onFailure)
	}
	return nil
}

func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Map, reflect.Slice, reflect.Interface, reflect.Chan:
		return rv.IsNil()
	}
	return false
}

// KindInfo is a registered kind as GET /v1/kinds shows it: its lane and
// its flow control (a zero limit or cap is none).
type KindInfo struct {
	Name string `json:"name"`
	// Lane is the kind's lane ("" the default lane).
	Lane string `json:"lane,omitempty"`
	// Concurrency, ConcurrencyPerKey, RateLimit, RateLimitPerKey,
	// RatePeriod (in seconds), LimitKey, MaxQueued and MaxQueuedPerOwner
	// are the kind's KindOpts.
	Concurrency       int     `json:"concurrency,omitempty"`
	ConcurrencyPerKey int     `json:"concurrency_per_key,omitempty"`
	RateLimit         int     `json:"rate_limit,omitempty"`
	RateLimitPerKey   int     `json:"rate_limit_per_key,omitempty"`
	RatePeriod        float64 `json:"rate_period_seconds,omitempty"`
	LimitKey          string  `json:"limit_key,omitempty"`
	MaxQueued         int     `json:"max_queued,omitempty"`
	MaxQueuedPerOwner int     `json:"max_queued_per_owner,omitempty"`
	// FailureCodes are the codes the kind's jobs may fail with
	// (KindOpts.FailureCodes), sorted.
	FailureCodes []string `json:"failure_codes,omitempty"`
	// MaxPayloadBytes and MaxResultBytes are the kind's bounds
	// (KindOpts's, defaults applied).
	MaxPayloadBytes int `json:"max_payload_bytes"`
	MaxResultBytes  int `json:"max_result_bytes"`
	// Signals are the names of the signals the kind's handlers wait for
	// (KindOpts.Signals), sorted.
	Signals []string `json:"signals,omitempty"`
	// PayloadSchema and ResultSchema describe the kind's payload and its
	// public result as JSON Schema (draft 2020-12), generated from the Go
	// types (the result's only for a JSON[T] result: T's): see
	// docs/reference/HTTP.md, "Kinds and their schemas". Set by Service.Kinds only.
	PayloadSchema json.RawMessage `json:"payload_schema,omitempty"`
	ResultSchema  json.RawMessage `json:"result_schema,omitempty"`
}

// MaxPayloadBytes is the largest payload a kind allows
// (KindOpts.MaxPayloadBytes), of the kinds its callers may enqueue: how
// large a request body may be (httpapi).
func (s *Service) MaxPayloadBytes() int {
	most := MaxPayloadBytes
	for _, name := range s.reg.Kinds() {
		if k, ok := s.reg.lookupFor(name, s.callers); ok {
			most = max(most, k.maxPayload)
		}
	}
	return most
}

// Kinds returns the registered kinds with their lanes, flow control,
// failure codes and schemas, sorted by name (for API callers, the kinds
// they may enqueue). A kind's schemas are built the first time they are
// asked for; one whose type cannot be described (a recursive type) is
// left out.
func (s *Service) Kinds() []KindInfo {
	names := s.reg.Kinds()
	out := make([]KindInfo, 0, len(names))
	for _, name := range names {
		k, ok := s.reg.lookupFor(name, s.callers)
		if !ok {
			continue
		}
		info := KindInfo{Name: name, Lane: k.lane, Concurrency: k.limits.concurrency, ConcurrencyPerKey: k.limits.perKey,
			RateLimit: k.limits.rateN, RateLimitPerKey: k.limits.ratePerKeyN, LimitKey: k.limits.key,
			MaxQueued: k.caps.kind, MaxQueuedPerOwner: k.caps.perOwner,
			MaxPayloadBytes: k.maxPayload, MaxResultBytes: k.maxResult, Signals: k.signalNames()}
		if info.RateLimit > 0 || info.RateLimitPerKey > 0 {
			info.RatePeriod = k.limits.period.Seconds()
		}
		for code := range k.codes {
			info.FailureCodes = append(info.FailureCodes, code)
		}
		sort.Strings(info.FailureCodes)
		info.PayloadSchema, info.ResultSchema = k.schemas()
		out = append(out, info)
	}
	return out
}
