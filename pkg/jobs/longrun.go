package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Work longer than one invocation. A run holds its job by a lease: the
// worker's Lambda deadline, or, for a kind with KindOpts.Heartbeat, a
// shorter lease the handler renews (Job.Heartbeat, Job.Checkpoint), so a
// run whose worker died is interrupted one lease after its last sign of
// life rather than one deadline later. A handler stores its progress with
// Job.Checkpoint (sealed, private: never returned by the API) and ends its
// invocation with Continue: the job goes back to the queue at once, no
// attempt spent, and its next run reads the checkpoint with Job.Resume (so
// does a retry after an interruption). KindOpts.MaxRunTime bounds the whole
// run, continuations included; KindOpts.AutoContinue continues a run whose
// handler time ran out. docs/guide/LONG_RUNS.md has the details and the costs.

// runHandle is how a running Job reaches the system: nil for a Job built by
// hand, whose Publish, Heartbeat and Checkpoint then do nothing.
type runHandle struct {
	// uploads: what an upload's run needs (the upload kind's alone).
	uploads    *uploadEnv
	publish    func(ctx context.Context, body []byte) error
	heartbeat  func(ctx context.Context) error
	checkpoint func(ctx context.Context, raw []byte) error
	// child enqueues req as a child of the run's job, named name
	// (Kind.EnqueueChild).
	child func(ctx context.Context, name string, build func(*Service) (EnqueueRequest, error)) (*EnqueueResult, error)
	// readChild reads the run's job's child named name, with its result
	// (Invoke).
	readChild func(ctx context.Context, name string) (*driver.Record, error)
	// fanOut creates (build nil: reads) the batch of a Map's wave by its
	// key, and readJobs reads jobs with their results (Map).
	fanOut   func(ctx context.Context, key string, build func(svc *Service, parentID string) (BatchRequest, error)) (*driver.Batch, error)
	readJobs func(ctx context.Context, ids []string) (map[string]*driver.Record, error)
	// resume is the job's last stored checkpoint, opened (JSON); nil when
	// it has none.
	resume []byte
	// steps are the job's completed steps (Step), the stored ones first;
	// nextStep is the place of the handler's next Step call in them;
	// nondeterministic is set once a step came out of order.
	// stepMu guards them, and inStep is set while a step's function runs.
	steps            []stepResult
	nextStep         int
	nondeterministic bool
	stepMu           sync.Mutex
	inStep           bool
	// runEnd is when the kind's KindOpts.MaxRunTime ends the job (zero:
	// never).
	runEnd time.Time
	// now is the engine's clock (nil: time.Now); seal seals a state for
	// the job (as checkpoint does before it writes); suspend is set, under
	// stepMu, by a Sleep that suspends the run, before it ends the
	// handler's goroutine.
	now     func() time.Time
	seal    func(raw []byte) ([]byte, error)
	suspend *suspension
	// signals are the job's signals, sealed, and open opens one
	// (WaitForSignal: only the one it waits for, when it does);
	// signalTypes the kind's declared ones (KindOpts.Signals; nil on a
	// Job built by hand, which checks none). unreadable is set once a
	// signal could not be opened: the job fails payload_unreadable.
	signals     map[string][]byte
	open        func(name string, sealed []byte) ([]byte, error)
	signalTypes map[string]reflect.Type
	unreadable  bool
	// sealToken seals a callback token (Job.CallbackToken; nil on a Job
	// built by hand).
	sealToken func(raw []byte) (string, error)
}

// Heartbeat tells the system this run is alive: for a kind with
// KindOpts.Heartbeat it extends the run's lease by that long (one
// conditional write), so neither the sweeper nor a redelivery interrupts
// it; a run that stops heartbeating is interrupted one lease later. For
// other kinds the lease is the invocation's deadline and Heartbeat does
// nothing. It returns ErrCancelled once the owner cancelled the job and
// ErrLostClaim when this run no longer owns it: the handler should stop.
func (j *Job[P]) Heartbeat(ctx context.Context) error {
	if j.h == nil || j.h.heartbeat == nil {
		return nil
	}
	return j.h.heartbeat(ctx)
}

// Checkpoint stores v, encoded as JSON and sealed, as the job's
// checkpoint: the state a later run of the job resumes from (after a
// Continue, a retry or an interruption; see Resume). It is private: never
// returned by the API or shown by the dashboard, at most 64 KiB sealed
// (over it: an error saying so, nothing stored). Each call is one
// conditional write and a heartbeat; its other errors are Heartbeat's. A Job built by hand keeps the checkpoint in memory, for
// Resume.
func (j *Job[P]) Checkpoint(ctx context.Context, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("jobs: encode checkpoint: %w", err)
	}
	if j.handle().checkpoint == nil {
		j.h.resume = raw
		return nil
	}
	if j.h.suspension() != nil {
		return errSuspended
	}
	if err := j.h.checkpoint(ctx, encodeState(jobState{V: raw, Steps: j.h.steps})); err != nil {
		return err
	}
	j.h.resume = raw
	return nil
}

// Resume decodes the job's last stored checkpoint into v and reports
// whether there was one.
func (j *Job[P]) Resume(v any) (bool, error) {
	if j.h == nil || j.h.resume == nil {
		return false, nil
	}
	if err := json.Unmarshal(j.h.resume, v); err != nil {
		return false, fmt.Errorf("jobs: decode checkpoint: %w", err)
	}
	return true, nil
}

// Continue is what a handler returns to end its invocation and go on in a
// new one: the job goes back to its queue at once with no attempt spent,
// and the next run resumes from checkpoint (stored with the same write; nil
// keeps the last one Checkpoint stored). A kind's KindOpts.MaxRunTime
// bounds how long a job goes on through its continuations.
//
//	if deadline, _ := ctx.Deadline(); time.Until(deadline) < chunkTime {
//		return jobs.NoResult{}, jobs.Continue(progress)
//	}
func Continue(checkpoint any) error { return &continuation{v: checkpoint} }

type continuation struct{ v any }

func (*continuation) Error() string { return "jobs: continue in a new invocation" }

// checkpointAAD binds a sealed checkpoint to its job.
func checkpointAAD(id string) []byte { return []byte(id + "\x00checkpoint") }

// sealCheckpoint seals raw (a checkpoint's JSON) for job id.
func sealCheckpoint(s Sealer, id string, raw []byte) ([]byte, error) {
	if s == nil {
		return nil, errors.New("jobs: a checkpoint is stored sealed: configure a Sealer (the construct gives the worker the payload key ring; locally the payload key of docs/reference/CONFIGURATION.md)")
	}
	sealed, err := s.Seal(raw, checkpointAAD(id))
	if err != nil {
		return nil, fmt.Errorf("jobs: seal checkpoint: %w", err)
	}
	if len(sealed) > driver.MaxCheckpointBytes {
		// A handler's bug, not a condition to branch on: described.
		return nil, fmt.Errorf("jobs: checkpoint too large: %d bytes sealed, over %d", len(sealed), driver.MaxCheckpointBytes)
	}
	return []byte(sealed), nil
}

// openCheckpoint opens rec's checkpoint (nil when it has none).
func openCheckpoint(s Sealer, rec *driver.Record) ([]byte, error) {
	if len(rec.Checkpoint) == 0 {
		return nil, nil
	}
	if s == nil {
		return nil, errNoSealer
	}
	return s.Open(string(rec.Checkpoint), checkpointAAD(rec.ID))
}

// leaseOf is the lease a run of kind k renews at now: one heartbeat, but
// never past the invocation's own lease.
func leaseOf(inv invocation, k *kindDef, now time.Time) time.Time {
	l := inv.leaseUntil(now)
	if hb := now.Add(k.heartbeat); k.heartbeat > 0 && hb.Before(l) {
		l = hb
	}
	return l
}

// leaseKeeper keeps a heartbeat kind's lease while its handler runs. A
// run's lease is one heartbeat long; if it lapsed while the handler still
// ran (a heartbeat that was slow or refused, a handler winding down after
// a cancel), the sweeper would end the run and a retry could start beside
// it. So the worker renews the lease itself whenever the handler has not
// for half a heartbeat, until the handler returns or the invocation's
// deadline: a handler that heartbeats often enough costs no extra write.
type leaseKeeper struct {
	last atomic.Int64 // when a renewal last landed (unix ms)
}

func (lk *leaseKeeper) renewed(at time.Time) { lk.last.Store(at.UnixMilli()) }

// keepLease renews r's lease every quarter heartbeat in which the handler
// has not renewed it for half a heartbeat, until the function it returns
// is called. A renewal that finds a cancel requested (it renews all the
// same) calls stop(false); one that finds the run taken over calls
// stop(true) and ends.
func (w *Worker) keepLease(ctx context.Context, inv invocation, k *kindDef, r run, stop func(takenOver bool)) (done func()) {
	r.keeper.renewed(w.eng.now()) // the claim's first heartbeat, or the claim
	end := make(chan struct{})
	go func() {
		t := time.NewTicker(k.heartbeat / 4)
		defer t.Stop()
		for {
			select {
			case <-end:
				return
			case <-t.C:
			}
			// A tick and the end can both be ready (a slow renewal returns
			// after both): select picks at random, but no renewal may start
			// once the handler has returned.
			select {
			case <-end:
				return
			default:
			}
			now := w.eng.now()
			if now.Sub(time.UnixMilli(r.keeper.last.Load())) < k.heartbeat/2 {
				continue
			}
			cctx, cancel := inv.callContext(ctx)
			err := w.eng.store.Heartbeat(cctx, r.rec.ID, r.token, driver.Heartbeat{LeaseUntil: leaseOf(inv, k, now), At: now})
			cancel()
			switch {
			case err == nil:
				r.keeper.renewed(now)
			case errors.Is(err, errCancelRequested):
				r.keeper.renewed(now)
				stop(false)
			case errors.Is(err, ErrLostClaim), errors.Is(err, ErrNotFound):
				stop(true)
				return
			}
		}
	}()
	return func() { close(end) }
}
