package jobs

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Parent is the job a handler runs, as Kind.EnqueueChild takes it: any
// *Job the worker passed to a handler.
type Parent interface {
	run() (*runHandle, string)
}

func (j *Job[P]) run() (*runHandle, string) { return j.h, j.ID }

// errNotAWorkersJob: Kind.EnqueueChild was given a Job that no worker runs
// (one built by hand, as in a unit test of a handler).
var errNotAWorkersJob = errors.New("jobs: EnqueueChild needs the job a worker passed to the handler")

// maxChildName bounds a child's name (Kind.EnqueueChild).
const maxChildName = 128

// EnqueueChild enqueues a job of kind k from the handler of parent, for
// parent's owner: once per name, however often the handler runs (a
// retry, a continuation, a redelivery). A later call with the same name
// returns the job the first made (EnqueueResult.Replayed) whatever its
// status; with another kind, payload or options it fails with
// ErrIdempotencyConflict. The name is 1 to 128 printable ASCII
// characters; the job's id is derived from the parent's id and the name.
//
// The child is validated, capped and sent as Kind.Enqueue does, and may
// be of any kind of the registry, internal kinds included (the handler is
// the deployment's own code), in any lane. It takes parent's tenant and
// tags unless opts gives its own; opts may not give an IdempotencyKey or
// a UniqueKey (the name is the child's key). Its view names its parent
// (View.ChildOf). The worker needs no grant beyond its own: a child is
// one more job, at an enqueue's cost, and a later call with its name one
// strongly consistent read (docs/evidence/CAPACITY.md). Once the child has ended
// and its retention passed, a call with its name starts it again.
// Cancelling the
// parent does not cancel its children. Given a Job built by hand (a
// handler's unit test) it fails and starts nothing.
func (k Kind[P]) EnqueueChild(ctx context.Context, parent Parent, name string, payload P, opts *EnqueueOpts) (*EnqueueResult, error) {
	h, _ := parent.run()
	if h == nil || h.child == nil {
		return nil, errNotAWorkersJob
	}
	if !wire.ValidOwner(name) || len(name) > maxChildName {
		return nil, refuse(codeInvalidRequest, fmt.Sprintf("child name %q: 1 to %d printable ASCII characters", name, maxChildName))
	}
	var o EnqueueOpts
	if opts != nil {
		o = *opts
	}
	if o.IdempotencyKey != "" || o.UniqueKey != "" {
		return nil, refuse(codeInvalidRequest, "a child's name is its key: give no IdempotencyKey or UniqueKey")
	}
	return h.child(ctx, name, func(svc *Service) (EnqueueRequest, error) { return k.request(svc, "", payload, &o) })
}

// enqueueChild enqueues the request build makes as the child named name
// of the job parent (Kind.EnqueueChild): for its owner, under an id
// derived from both, as trusted code (internal kinds too).
func (s *Service) enqueueChild(ctx context.Context, parent *driver.Record, name string, build func(*Service) (EnqueueRequest, error)) (*EnqueueResult, error) {
	req, err := build(s)
	if err != nil {
		return nil, err
	}
	parentID, tenant, tags := parent.ID, parent.Tenant, parent.Tags
	req.Owner, req.childOf, req.childName = parent.Owner, parentID, name
	req.id = wire.DerivedID("child", parentID, name)
	if req.Tenant == "" {
		req.Tenant = tenant
	}
	if req.Tags == nil {
		req.Tags = maps.Clone(tags)
	}
	trusted := *s
	trusted.callers = false
	// A rerun finds its child by the derived id first: no send, no cap,
	// rate or parents check, which the child already passed and which
	// would refuse it now (a capped kind at its cap, parents expired).
	_, r, err := trusted.prepare(req)
	if err != nil {
		return nil, err
	}
	cur, err := s.store.Get(ctx, req.id)
	switch {
	case errors.Is(err, ErrNotFound):
		return trusted.enqueueResult(ctx, req)
	case err != nil:
		return nil, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	case cur.Owner != req.Owner || cur.Kind != req.Kind || !s.hasher.matches(cur.RequestHash, r):
		return nil, ErrIdempotencyConflict
	}
	v, err := s.eng.viewRead(ctx, cur)
	if err != nil {
		return nil, err
	}
	return &EnqueueResult{Job: v, Replayed: true}, nil
}

// childRequest is the part of a child's request hash that names its
// parent and name (nil for another job).
func childRequest(parentID, name string, awaited bool) []byte {
	if parentID == "" {
		return nil
	}
	if awaited {
		return []byte("child_of=" + parentID + "\x00" + name + "\x00awaited")
	}
	return []byte("child_of=" + parentID + "\x00" + name)
}

// awaitedAs is the name a parent waits for req's job by ("" none).
func awaitedAs(req EnqueueRequest) string {
	if req.awaited {
		return req.childName
	}
	return ""
}
