package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Kind is the typed handle of a registered kind, returned by Register: it
// enqueues jobs of the kind from Go with a payload of the kind's type P,
// through the same validation, limits, owners and idempotency as POST
// /v1/jobs.
//
//	receipts := jobs.MustRegister(reg, "receipt.send", sendReceipt, nil)
//	...
//	res, err := receipts.Enqueue(ctx, svc, owner, ReceiptPayload{OrderID: id},
//		&jobs.EnqueueOpts{IdempotencyKey: "receipt-" + id})
type Kind[P any] struct{ name string }

// Name is the kind's name.
func (k Kind[P]) Name() string { return k.name }

// EnqueueOpts are the options of an enqueue, from Go (Kind.Enqueue: nil
// means none) or HTTP (EnqueueRequest). Each option a later feature brings
// is a field here, so enqueueing keeps its shape.
type EnqueueOpts struct {
	// IdempotencyKey, when set, makes a retried request return the first
	// job instead of enqueuing another: the job id is derived from the
	// owner and the key. The same key with another kind or payload is
	// refused with ErrIdempotencyConflict. At most 255 printable ASCII
	// characters.
	IdempotencyKey string
	// RunAt delays the job: it runs at RunAt, not before (zero or past:
	// now). Up to 15 minutes the queue holds it back; beyond, it waits in
	// the sweep index and the sweeper sends it when it is due. At most
	// MaxDelay away.
	RunAt time.Time
	// Delay delays the job by this long from when it is accepted (give
	// RunAt or Delay, not both). An idempotent retry with the same Delay is
	// the same request, though it comes later.
	Delay time.Duration
	// Lane runs this job in another lane than its kind's (one of
	// Registry.Lanes: a lane the deployment has).
	Lane string
	// Tenant names who the job is for when it is not its owner: a service
	// that enqueues for its own customers names each customer. Every
	// message of the job carries the tenant's group id, which SQS fair
	// queues serve fairly (docs/guide/FLOW_CONTROL.md); per-tenant limits key on
	// it. Default: the owner. At most 512 printable ASCII characters.
	Tenant string
	// UniqueKey makes the job unique among the owner's jobs of its kind:
	// while a job holds the key (Unique says until when), an enqueue with
	// the same key makes no job and answers with the one holding it
	// (EnqueueResult.Duplicate says so); concurrent enqueues with one key
	// make exactly one job. UniqueFor is the period of UniqueForPeriod and
	// the window of UniqueDebounce.
	UniqueKey string
	Unique    Unique
	UniqueFor time.Duration
	// StartBy, when set, is when a job that has not started ends
	// cancelled, code expired, instead of running late.
	StartBy time.Time
	// After names jobs of the owner's (at most 100, each with at
	// most 100 jobs after it) that must all succeed before this one runs:
	// it waits until then (View.WaitingOn "parents"), spending no attempt.
	// If one fails or is cancelled, this job ends cancelled, code
	// dependency_failed, and so do the jobs after it; retried and
	// succeeded, that job brings them back. Not with UniqueKey, nor in a
	// transactional enqueue (Prepare).
	After []string
	// Tags label the job for the listing and the bulk actions
	// (ListRequest.Tag, BulkRequest.Tag): at most 3, each key 1 to 32 of
	// a-z 0-9 _ - . (starting with a letter or a digit), each value 1 to
	// 64 of A-Z a-z 0-9 _ - . : / @ +. Plain text that anyone who reads
	// the job sees: never a secret. Set at creation and never changed (a
	// debounced enqueue keeps the tags of the job it joins). Each costs
	// one write unit, once (docs/evidence/CAPACITY.md).
	Tags map[string]string
}

// Unique is how long an enqueue's unique key holds (EnqueueOpts.Unique).
type Unique string

// The uniqueness modes.
const (
	// UniqueUntilFinished: until the job finishes (the default).
	UniqueUntilFinished Unique = "until_finished"
	// UniqueUntilStarted: until it starts, so at most one job waits while
	// another runs.
	UniqueUntilStarted Unique = "until_started"
	// UniqueForPeriod: for UniqueFor from the enqueue, whatever the job
	// does.
	UniqueForPeriod Unique = "period"
	// UniqueDebounce: while the job waits to start, an enqueue with the
	// key replaces its payload and pushes its start out to UniqueFor from
	// now; the job runs once, with the last payload. Until it starts.
	UniqueDebounce Unique = "debounce"
)

// EnqueueResult is what an enqueue did.
type EnqueueResult struct {
	// Job is the job as stored: the new one, or the first one when an
	// idempotent retry found it.
	Job View
	// Replayed is set when an idempotent retry returned the first job
	// instead of enqueuing another, or a unique key the job holding it;
	// Duplicate then says which ("unique", or "debounced" when the
	// enqueue rewrote the waiting job); "" for an idempotent retry.
	Replayed  bool
	Duplicate string
}

// errPayloadType  the service's registry has the kind with another payload
// type than the handle's (the handle came from another registry).
var errPayloadType = errors.New("jobs: payload value is not of the kind's payload type")

// Enqueue validates payload, stores the job as queued and sends its
// reference (Service.Enqueue). owner names the caller (an IAM principal ARN
// or a JWT subject); only the owner can read the job.
func (k Kind[P]) Enqueue(ctx context.Context, svc *Service, owner string, payload P, opts *EnqueueOpts) (*EnqueueResult, error) {
	req, err := k.request(svc, owner, payload, opts)
	if err != nil {
		return nil, err
	}
	return svc.Enqueue(ctx, req)
}

// Prepare validates payload exactly as Enqueue does and returns the job
// record Enqueue would store, without storing or sending anything: the
// first half of a transactional enqueue (see Service.Prepare).
func (k Kind[P]) Prepare(svc *Service, owner string, payload P, opts *EnqueueOpts) (*driver.Record, error) {
	req, err := k.request(svc, owner, payload, opts)
	if err != nil {
		return nil, err
	}
	return svc.Prepare(req)
}

func (k Kind[P]) request(svc *Service, owner string, payload P, opts *EnqueueOpts) (EnqueueRequest, error) {
	def, ok := svc.reg.lookup(k.name)
	if !ok {
		return EnqueueRequest{}, errUnknownKind
	}
	if def.payloadType != reflect.TypeFor[P]() {
		return EnqueueRequest{}, fmt.Errorf("%w: kind %q takes %v, the handle %v", errPayloadType, k.name, def.payloadType, reflect.TypeFor[P]())
	}
	raw, err := json.Marshal(payload)
	if err != nil {
		return EnqueueRequest{}, fmt.Errorf("jobs: encode payload: %w", err)
	}
	req := EnqueueRequest{Owner: owner, Kind: k.name, Payload: raw}
	if opts != nil {
		req.EnqueueOpts = *opts
	}
	return req, nil
}
