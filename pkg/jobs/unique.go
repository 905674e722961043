package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/metricnames"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Unique jobs. An enqueue with EnqueueOpts.UniqueKey first takes the key
// (Store.ClaimUnique: one conditional write, so concurrent enqueues with
// one key make exactly one job), then stores its job, which holds the key
// until Unique says: its final write (a post-outcome step, so a dead
// worker's is run by the sweeper), its start (the worker frees it when it
// claims the job; the final step again if that failed), or a time. An
// enqueue that finds the key held answers with the holding job; under
// UniqueDebounce it first rewrites that job's payload and run time while
// it still waits.

func checkUnique(o EnqueueOpts) error {
	switch o.Unique {
	case "", UniqueUntilFinished, UniqueUntilStarted:
	case UniqueForPeriod, UniqueDebounce:
		if o.UniqueFor <= 0 || o.UniqueFor > MaxDelay {
			return refuse(codeInvalidRequest, fmt.Sprintf("unique %q needs a unique_for of more than 0 and at most 365 days", o.Unique))
		}
	default:
		return refuse(codeInvalidRequest, fmt.Sprintf("unique %q: want until_finished, until_started, period or debounce", o.Unique))
	}
	if o.Unique != "" && o.UniqueKey == "" {
		return refuse(codeInvalidRequest, "unique needs a unique_key")
	}
	if len(o.UniqueKey) > wire.MaxIdempotencyKeyBytes || !wire.PrintableASCII(o.UniqueKey) {
		return refuse(codeInvalidRequest, fmt.Sprintf("unique_key: at most %d printable ASCII characters", wire.MaxIdempotencyKeyBytes))
	}
	if o.UniqueKey != "" && o.IdempotencyKey != "" {
		return refuse(codeInvalidRequest, "give an idempotency key or a unique key, not both")
	}
	return nil
}

// enqueueUnique enqueues req, whose UniqueKey is set.
func (s *Service) enqueueUnique(ctx context.Context, req EnqueueRequest) (*EnqueueResult, error) {
	j, _, err := s.prepare(req)
	if err != nil {
		return nil, err
	}
	if err := s.checkEnqueueRate(ctx, req.Owner); err != nil {
		return nil, err
	}
	mode := req.Unique
	if mode == "" {
		mode = UniqueUntilFinished
	}
	j.uniqueKey = uniqueKeyOf(req.Owner, req.Kind, req.UniqueKey)
	claim := driver.UniqueClaim{JobID: j.id, At: j.at}
	switch mode {
	case UniqueUntilFinished:
		j.uniqueUntil = "finished"
	case UniqueUntilStarted:
		j.uniqueUntil = "started"
	case UniqueForPeriod:
		claim.Until = j.at.Add(req.UniqueFor) // frees itself: no release
	case UniqueDebounce:
		j.uniqueUntil = "started"
		if j.runAt.Before(j.at.Add(req.UniqueFor)) {
			j.runAt = j.at.Add(req.UniqueFor)
		}
	}
	for try := range 5 {
		holder, err := s.store.ClaimUnique(ctx, j.uniqueKey, claim)
		if err != nil {
			return nil, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
		}
		if holder == j.id {
			k, _ := s.reg.lookup(req.Kind)
			if err := s.checkCaps(ctx, k, req.Owner, 1); err != nil {
				// Refused at a cap: the key is not this job's after all.
				_ = s.store.ReleaseUnique(ctx, j.uniqueKey, j.id)
				return nil, err
			}
			rec, sent, err := s.createSent(ctx, j)
			if err != nil {
				// The job may be stored though the answer was lost: the key
				// stays its. If it is not, the next enqueue with the key
				// finds the holder missing and frees it (holderOf).
				return nil, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
			}
			if !sent {
				s.dispatch(ctx, rec)
			}
			s.count(rec.Kind, metricnames.JobsEnqueued, 1)
			s.noteQueued(k, req.Owner, 1)
			return &EnqueueResult{Job: viewOf(rec)}, nil
		}
		cur, err := s.holderOf(ctx, holder)
		switch {
		case errors.Is(err, errHolderGone):
			// Its enqueue failed before storing it, or it expired: free the
			// key and take it.
			_ = s.store.ReleaseUnique(ctx, j.uniqueKey, holder)
			continue
		case err != nil:
			return nil, err
		case cur.Status.Final() && cur.UniqueUntil != "":
			// Finished, its key not freed yet (its post-outcome step is
			// pending): free it now.
			_ = s.store.ReleaseUnique(ctx, j.uniqueKey, holder)
			continue
		}
		if mode != UniqueDebounce {
			v, err := s.eng.viewRead(ctx, cur)
			if err != nil {
				return nil, err
			}
			return &EnqueueResult{Job: v, Replayed: true, Duplicate: "unique"}, nil
		}
		again, _, err := s.prepareAs(req, holder, j.at) // the payload sealed for the holder's id
		if err != nil {
			return nil, err
		}
		d := s.eng.deliveryAt(j.at, j.runAt, cur.Lane)
		err = s.store.Debounce(ctx, holder, driver.Debounce{Payload: again.payload, RequestHash: again.requestHash,
			RunAt: j.runAt.Truncate(time.Millisecond), SweepAt: d.sweepAt, At: j.at,
			PayloadUntil: s.eng.payloadUntil(cur, j.at, j.runAt)})
		switch {
		case errors.Is(err, errNotQueued):
			// A worker has it: either it starts, and its start frees the
			// key (the next try takes it: a new job), or it is parked back
			// to wait (the next try debounces it). Freeing the key here
			// would make a second job beside one that is only waiting.
			if !sleepCtx(ctx, time.Duration(50<<try)*time.Millisecond) {
				return nil, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
			}
			continue
		case err != nil:
			return nil, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
		}
		cur.Payload, cur.PayloadRef, cur.PayloadBytes, cur.RunAt = again.payload, "", 0, j.runAt.Truncate(time.Millisecond)
		return &EnqueueResult{Job: viewOf(cur), Replayed: true, Duplicate: "debounced"}, nil
	}
	return nil, fmt.Errorf("%w: the unique key kept changing hands", ErrUnavailable)
}

// uniqueClaimGrace is how long a unique key's holder may be missing
// from the store because its enqueue, which took the key, is still
// storing it: an enqueue's whole time, with margin. A holder missing for
// longer is gone (its enqueue failed, or it expired) and frees the key.
const uniqueClaimGrace = time.Minute

var errHolderGone = errors.New("jobs: the unique key's holder is gone")

// holderOf reads the job holder that holds a unique key. A holder not in
// the store may be an enqueue that took the key a moment ago and is
// storing its job: holderOf waits a little for it, and answers
// ErrUnavailable (retry) while it is younger than uniqueClaimGrace, and
// errHolderGone after.
func (s *Service) holderOf(ctx context.Context, holder string) (*driver.Record, error) {
	for wait := 20 * time.Millisecond; ; wait *= 2 {
		cur, err := s.store.Get(ctx, holder)
		switch {
		case err == nil:
			return cur, nil
		case !errors.Is(err, ErrNotFound):
			return nil, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
		}
		born, ok := wire.IDTime(holder)
		if !ok || time.Since(born) > uniqueClaimGrace { // ids carry the wall clock's time
			return nil, errHolderGone
		}
		if wait > time.Second {
			return nil, fmt.Errorf("%w: the job holding the unique key is still being stored", ErrUnavailable)
		}
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
		}
	}
}

// releaseUniqueAtStart frees the unique key of a job that holds it until
// it starts (best effort: its final write's post-outcome step frees it if
// this fails), within the invocation's call bound like any worker call.
func (w *Worker) releaseUniqueAtStart(ctx context.Context, inv invocation, rec *driver.Record) {
	if rec.UniqueKey == "" || rec.UniqueUntil != "started" {
		return
	}
	cctx, cancel := inv.callContext(ctx)
	defer cancel()
	_ = w.eng.store.ReleaseUnique(cctx, rec.UniqueKey, rec.ID)
}

// codeUniqueKeyHeld refuses a retry of a job whose unique key another job
// of the owner took meanwhile (HTTP 409 unique_key_held).
const codeUniqueKeyHeld = "unique_key_held"

// retakeUnique takes again the unique key of rec, a failed or cancelled
// job unique until it finished (its final write freed the key), before it
// is retried: a retry is the job again, and it holds its key again until
// it finishes. Another live job of the owner holding the key refuses the
// retry. Keys held until a start or for a period are not taken again:
// their jobs gave them up when they started (docs/guide/FLOW_CONTROL.md).
func (s *Service) retakeUnique(ctx context.Context, rec *driver.Record) error {
	if rec.UniqueKey == "" || rec.UniqueUntil != "finished" {
		return nil
	}
	for range 5 {
		holder, err := s.store.ClaimUnique(ctx, rec.UniqueKey, driver.UniqueClaim{JobID: rec.ID, At: s.eng.now()})
		if err != nil {
			return fmt.Errorf("%w: store: %w", ErrUnavailable, err)
		}
		if holder == rec.ID {
			return nil
		}
		cur, err := s.holderOf(ctx, holder)
		switch {
		case errors.Is(err, errHolderGone), err == nil && cur.Status.Final():
			// Its holder never stored, or finished without freeing it.
			_ = s.store.ReleaseUnique(ctx, rec.UniqueKey, holder)
			continue
		case err != nil:
			return err
		}
		return refuse(codeUniqueKeyHeld, fmt.Sprintf("job %s holds this job's unique key until it finishes: retry this one after it", holder))
	}
	return fmt.Errorf("%w: the unique key changed hands too often", ErrUnavailable)
}
