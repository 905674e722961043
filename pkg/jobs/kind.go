package jobs

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"sync"
	"time"
)

// Handler runs jobs of one kind: it gets the decoded payload P and returns a
// result R, or an error. Return a [Failure] (see [Fail]) to fail the job with
// a code the kind declared; any other error fails it with [CodeInternal].
// The error's text is never stored, returned or logged.
//
// ctx ends a reserve before the worker's Lambda deadline; a handler that
// keeps running past it is abandoned and its job fails with [CodeTimedOut].
type Handler[P any, R Result] interface {
	Work(ctx context.Context, job *Job[P]) (R, error)
}

// HandlerFunc adapts a plain function to a [Handler].
type HandlerFunc[P any, R Result] func(ctx context.Context, job *Job[P]) (R, error)

// Work calls f.
func (f HandlerFunc[P, R]) Work(ctx context.Context, job *Job[P]) (R, error) { return f(ctx, job) }

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

	publish func(context.Context, []byte) error
}

// Publish stores partial as the job's latest result, which GET returns while
// the job runs. Each call is one conditional write (one write unit for a
// small result). It fails with ErrLostClaim when this run no longer owns the
// job (it timed out, or a sweeper failed it): the handler should stop.
func (j *Job[P]) Publish(ctx context.Context, partial Result) error {
	if j.publish == nil {
		return nil // a Job built by hand, as in a user's unit test
	}
	body, code := publicJSON(partial)
	if code != "" {
		return fmt.Errorf("jobs: partial result refused (%s)", code)
	}
	return j.publish(ctx, body)
}

// NewTestJob returns a Job for calling a handler directly in a unit test;
// Publish on it calls publish (which may be nil to drop partial results).
func NewTestJob[P any](id string, payload P, publish func(ctx context.Context, partial []byte) error) *Job[P] {
	return &Job[P]{ID: id, Kind: "test", Owner: "test", Attempt: 1, Payload: payload, publish: publish}
}

// KindOption configures a kind at registration.
type KindOption func(*kindConfig) error

type kindConfig struct {
	codes  map[string]bool
	retry  RetryPolicy
	minRun time.Duration
}

// WithMinRunTime states the handler time a run of the kind needs: a worker
// does not claim a job of the kind when less than d is left before its
// handler deadline; the message comes back (no attempt spent) and a fresh
// invocation runs it. Without it the worker's Deadlines.MinRun applies
// (2s by default). A d above the worker's whole handler time (its Lambda
// timeout less Deadlines.Reserve) means the kind never starts: a worker
// that knows its timeout (WorkerConfig.Timeout; lambdafn's
// JOBS_WORKER_TIMEOUT, set by the CDK construct) refuses to be built with
// such a kind; one that does not hands its jobs' messages back at every
// delivery, no attempt spent: they stay queued, never run and never end.
func WithMinRunTime(d time.Duration) KindOption {
	return func(c *kindConfig) error {
		if d <= 0 || d > 15*time.Minute {
			return fmt.Errorf("minimum run time %v: want more than 0 and at most 15m", d)
		}
		c.minRun = d
		return nil
	}
}

// WithFailureCodes declares the failure codes the kind's handler may return
// in a [Failure]. Each must be lower-case snake case and not reserved.
func WithFailureCodes(codes ...string) KindOption {
	return func(c *kindConfig) error {
		for _, code := range codes {
			if err := checkCode(code); err != nil {
				return err
			}
			c.codes[code] = true
		}
		return nil
	}
}

// kindDef is a registered kind with its types erased.
type kindDef struct {
	name    string
	codes   map[string]bool
	secrets []string // JSON names of payload fields tagged jobs:"secret"
	retry   RetryPolicy
	minRun  time.Duration // 0: the worker's default
	// payloadType is P, so routes can check what they deliver.
	payloadType reflect.Type
	validate    func(raw []byte) error
	// canonical re-encodes a valid payload through P, so every path stores
	// the same bytes for the same value.
	canonical func(raw []byte) ([]byte, error)
	run       func(ctx context.Context, rec *Record, payload []byte, publish func(context.Context, []byte) error) (Result, error)
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

// Register adds the kind named kind, run by h, to reg. It refuses an
// invalid or empty name ([ErrInvalidKind]), a nil handler ([ErrNilHandler]),
// a payload type with a jobs:"secret" tag that sealing would miss
// ([ErrSecretTag]),
// a name already registered ([ErrDuplicateKind]), an invalid or reserved
// failure code ([ErrInvalidCode]), and any registration after reg was put to
// use ([ErrRegistryFrozen]).
//
// It returns the kind's typed handle, which enqueues jobs of the kind with a
// payload of type P (Kind.Enqueue, Kind.Prepare).
func Register[P any, R Result](reg *Registry, kind string, h Handler[P, R], opts ...KindOption) (Kind[P], error) {
	if !ValidKind(kind) {
		return Kind[P]{}, fmt.Errorf("%w: %q", ErrInvalidKind, kind)
	}
	if isNil(h) {
		return Kind[P]{}, fmt.Errorf("%w for kind %q", ErrNilHandler, kind)
	}
	secrets, err := secretFields[P]()
	if err != nil {
		return Kind[P]{}, fmt.Errorf("kind %q: %w", kind, err)
	}
	cfg := kindConfig{codes: map[string]bool{}}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return Kind[P]{}, fmt.Errorf("kind %q: %w", kind, err)
		}
	}
	def := &kindDef{
		name:        kind,
		codes:       cfg.codes,
		secrets:     secrets,
		payloadType: reflect.TypeFor[P](),
		retry:       cfg.retry,
		minRun:      cfg.minRun,
		validate: func(raw []byte) error {
			_, err := DecodePayload[P](raw)
			return err
		},
		canonical: canonicalPayload[P],
		run: func(ctx context.Context, rec *Record, payload []byte, publish func(context.Context, []byte) error) (Result, error) {
			p, err := DecodePayload[P](payload)
			if err != nil {
				return nil, errPayload
			}
			job := &Job[P]{
				ID: rec.ID, Kind: rec.Kind, Owner: rec.Owner, Attempt: rec.Attempt,
				CreatedAt: rec.CreatedAt, Payload: p, Batch: rec.BatchCounts, publish: publish,
			}
			r, err := h.Work(ctx, job)
			if err != nil {
				return nil, err
			}
			if isNil(r) {
				return nil, errNilResult
			}
			return r, nil
		},
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if reg.frozen {
		return Kind[P]{}, fmt.Errorf("%w (kind %q)", ErrRegistryFrozen, kind)
	}
	if _, dup := reg.kinds[kind]; dup {
		return Kind[P]{}, fmt.Errorf("%w: %q", ErrDuplicateKind, kind)
	}
	reg.kinds[kind] = def
	return Kind[P]{name: kind}, nil
}

// MustRegister is like [Register] but panics on error; for start-up code.
func MustRegister[P any, R Result](reg *Registry, kind string, h Handler[P, R], opts ...KindOption) Kind[P] {
	k, err := Register(reg, kind, h, opts...)
	if err != nil {
		panic(err)
	}
	return k
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

// Codes returns the failure codes kind declared, sorted, or ErrUnknownKind.
func (reg *Registry) Codes(kind string) ([]string, error) {
	k, ok := reg.lookup(kind)
	if !ok {
		return nil, ErrUnknownKind
	}
	codes := make([]string, 0, len(k.codes))
	for c := range k.codes {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	return codes, nil
}

// Validate checks that kind is registered and that payload decodes strictly
// into its payload type, as enqueue does. It returns ErrUnknownKind or a
// *PayloadError. Calling it puts the registry to use.
func (reg *Registry) Validate(kind string, payload []byte) error {
	k, ok := reg.lookup(kind)
	if !ok {
		return ErrUnknownKind
	}
	return k.validate(payload)
}

// lookup returns the kind and freezes the registry.
func (reg *Registry) lookup(kind string) (*kindDef, bool) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	reg.frozen = true
	k, ok := reg.kinds[kind]
	return k, ok
}

// freeze marks the registry as in use. It refuses a registry with secret
// payload fields when there is no sealer.
func (reg *Registry) freeze(sealer Sealer) error {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	reg.frozen = true
	for _, k := range reg.kinds {
		switch {
		case len(k.secrets) == 0:
		case sealer == nil:
			return fmt.Errorf("%w (kind %q)", ErrNoSealer, k.name)
		case !keyed(sealer):
			return fmt.Errorf("%w: kind %q has secret fields, and the Sealer does not key request hashes (implement jobs.HashKeyer with a key of 32 bytes or more)", ErrNoSealer, k.name)
		}
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
