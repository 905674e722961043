package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// What a store's conflict means.
//
// A Store says only that a conditional write did not apply (a
// *driver.ConflictError, with the job as it found it when it can say); the
// engine reads what that means from the operation it asked for and from
// the job: conflicts wraps the Client's store so that every role gets the
// same reading. A conflict it returns still matches *driver.ConflictError
// (errors.As), with Current set whenever the job could be read.
//
//	operation                                         conflict means
//	Create                                            driver.ErrExists
//	Claim, Debounce, CancelQueued, CountParents,      errNotQueued
//	ReleaseParents
//	Publish, Heartbeat, Checkpoint, Finish, Requeue   errCancelRequested if Current runs under
//	                                                  the run's token with a cancel requested,
//	                                                  else ErrLostClaim
//	Reschedule                                        ErrLostClaim
//	RequestCancel                                     errNotRunning
//	AddDependent                                      errFinished if Current succeeded, else
//	                                                  errDependentsFull
//	Resubmit                                          ErrNotResubmittable
//	SetLastFire                                       errFireRaced
//	AddOwnerSchedule                                  errScheduleLimit (ErrExists: ErrScheduleExists)
//	OpenBatch                                         errBatchOpened
//	EndBatch                                          errBatchNotDone
//
// A conflict of a job's write without Current is read again with Get
// (one read, only on a conflict): a Get that finds no job makes it
// ErrNotFound, as a store that returned the job expired would have said.
// The other writes (a schedule's, a batch's) are not of a job and mean
// the same whatever the item holds.
var (
	errNotQueued       = errors.New("jobs: job is not queued")
	errCancelRequested = errors.New("jobs: cancel requested")
	errNotRunning      = errors.New("jobs: job is not running")
	errFireRaced       = errors.New("jobs: another fire of the schedule came first")
	errFinished        = errors.New("jobs: job has finished")
	errDependentsFull  = errors.New("jobs: the job has the most dependents allowed")
	errScheduleLimit   = errors.New("jobs: the owner has the most schedules allowed")
	errBatchNotDone    = errors.New("jobs: batch not ready to end")
	errBatchOpened     = errors.New("jobs: batch already opened")
)

// conflict is a store's conflict as the engine read it: it matches
// meaning and the store's *driver.ConflictError.
type conflict struct {
	meaning error
	ce      *driver.ConflictError
}

func (c *conflict) Error() string {
	if c.ce.Current != nil {
		return c.meaning.Error() + " (status " + string(c.ce.Current.Status) + ")"
	}
	return c.meaning.Error()
}

func (c *conflict) Unwrap() []error { return []error{c.meaning, c.ce} }

// conflicts is a driver.Store whose conflicts say what they mean (see
// above). Its other answers are the store's.
type conflicts struct {
	driver.Store
}

// readConflicts wraps s, once.
func readConflicts(s driver.Store) driver.Store {
	if _, ok := s.(conflicts); ok {
		return s
	}
	return conflicts{s}
}

// asConflict returns err's *driver.ConflictError, or nil.
func asConflict(err error) *driver.ConflictError {
	var ce *driver.ConflictError
	if errors.As(err, &ce) {
		return ce
	}
	return nil
}

// of reads err, the answer of a write that is not a job's: a conflict
// means meaning.
func of(err, meaning error) error {
	if ce := asConflict(err); ce != nil {
		return &conflict{meaning: meaning, ce: ce}
	}
	return err
}

// job reads err, the answer of a write of job id: a conflict means what
// mean says from the job as it is, read again when the store did not say.
func (s conflicts) job(ctx context.Context, id string, err error, mean func(cur *driver.Record) error) error {
	ce := asConflict(err)
	if ce == nil {
		return err
	}
	if ce.Current == nil {
		cur, gerr := s.Get(ctx, id)
		if gerr != nil {
			return gerr
		}
		ce = &driver.ConflictError{Current: cur}
	}
	return &conflict{meaning: mean(ce.Current), ce: ce}
}

// always is a reading that does not depend on the job.
func always(meaning error) func(*driver.Record) error {
	return func(*driver.Record) error { return meaning }
}

// runOf reads a conflict of a write by the run named token: the run's
// cancel was requested, or it no longer owns the job.
func runOf(token string) func(*driver.Record) error {
	return func(cur *driver.Record) error {
		if cur.Status == StatusRunning && cur.ClaimToken == token && cur.CancelRequested {
			return errCancelRequested
		}
		return ErrLostClaim
	}
}

func (s conflicts) Create(ctx context.Context, rec *driver.Record) error {
	err := s.Store.Create(ctx, rec)
	if ce := asConflict(err); ce != nil {
		// The job exists: Current, when the store could say, is it (no
		// read again: a job that exists but expired is replaced by Create).
		return &conflict{meaning: driver.ErrExists, ce: ce}
	}
	return err
}

func (s conflicts) Claim(ctx context.Context, id string, c driver.Claim) (*driver.Record, error) {
	rec, err := s.Store.Claim(ctx, id, c)
	if err != nil {
		return nil, s.job(ctx, id, err, always(errNotQueued))
	}
	return rec, nil
}

func (s conflicts) Publish(ctx context.Context, id, token string, result []byte, at time.Time) error {
	return s.job(ctx, id, s.Store.Publish(ctx, id, token, result, at), runOf(token))
}

func (s conflicts) Heartbeat(ctx context.Context, id, token string, hb driver.Heartbeat) error {
	return s.job(ctx, id, s.Store.Heartbeat(ctx, id, token, hb), runOf(token))
}

func (s conflicts) Checkpoint(ctx context.Context, id, token string, c driver.Checkpoint) error {
	return s.job(ctx, id, s.Store.Checkpoint(ctx, id, token, c), runOf(token))
}

func (s conflicts) Finish(ctx context.Context, id, token string, o driver.Outcome) error {
	return s.job(ctx, id, s.Store.Finish(ctx, id, token, o), runOf(token))
}

func (s conflicts) Requeue(ctx context.Context, id, token string, r driver.Requeue) error {
	return s.job(ctx, id, s.Store.Requeue(ctx, id, token, r), runOf(token))
}

func (s conflicts) Reschedule(ctx context.Context, id string, expect driver.Expect, at time.Time) error {
	return s.job(ctx, id, s.Store.Reschedule(ctx, id, expect, at), always(ErrLostClaim))
}

func (s conflicts) Debounce(ctx context.Context, id string, d driver.Debounce) error {
	return s.job(ctx, id, s.Store.Debounce(ctx, id, d), always(errNotQueued))
}

func (s conflicts) CancelQueued(ctx context.Context, id string, c driver.CancelQueued) error {
	return s.job(ctx, id, s.Store.CancelQueued(ctx, id, c), always(errNotQueued))
}

func (s conflicts) RequestCancel(ctx context.Context, id string, at time.Time) error {
	return s.job(ctx, id, s.Store.RequestCancel(ctx, id, at), always(errNotRunning))
}

func (s conflicts) CountParents(ctx context.Context, id string, c driver.ParentCount) (*driver.Record, error) {
	rec, err := s.Store.CountParents(ctx, id, c)
	if err != nil {
		return nil, s.job(ctx, id, err, always(errNotQueued))
	}
	return rec, nil
}

func (s conflicts) ReleaseParents(ctx context.Context, id string, r driver.ReleaseParents) error {
	return s.job(ctx, id, s.Store.ReleaseParents(ctx, id, r), always(errNotQueued))
}

func (s conflicts) AddDependent(ctx context.Context, parentID string, d driver.DependentOf) (*driver.Record, error) {
	rec, err := s.Store.AddDependent(ctx, parentID, d)
	if err == nil {
		return rec, nil
	}
	err = s.job(ctx, parentID, err, func(cur *driver.Record) error {
		if cur.Status == StatusSucceeded {
			return errFinished
		}
		return errDependentsFull
	})
	if ce := asConflict(err); ce != nil && ce.Current.Owner != d.Owner {
		return nil, ErrNotFound // another owner's job, as if absent
	}
	return nil, err
}

func (s conflicts) Resubmit(ctx context.Context, id string, r driver.Resubmit) error {
	return s.job(ctx, id, s.Store.Resubmit(ctx, id, r), always(ErrNotResubmittable))
}

func (s conflicts) SetLastFire(ctx context.Context, schedule, prev, id string) error {
	return of(s.Store.SetLastFire(ctx, schedule, prev, id), errFireRaced)
}

func (s conflicts) AddOwnerSchedule(ctx context.Context, ownerKey string, sc driver.Schedule, max int) error {
	err := s.Store.AddOwnerSchedule(ctx, ownerKey, sc, max)
	if errors.Is(err, driver.ErrExists) {
		return ErrScheduleExists
	}
	return of(err, errScheduleLimit)
}

func (s conflicts) OpenBatch(ctx context.Context, id string) error {
	return of(s.Store.OpenBatch(ctx, id), errBatchOpened)
}

func (s conflicts) EndBatch(ctx context.Context, id string, status Status, at, expiresAt time.Time) error {
	return of(s.Store.EndBatch(ctx, id, status, at, expiresAt), errBatchNotDone)
}
