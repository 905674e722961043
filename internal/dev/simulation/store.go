package simulation

import (
	"context"
	"errors"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// gatedStore is the Store an actor sees: every call waits for the
// scheduler, which may inject a fault into it.
type gatedStore struct {
	a  *actor
	st *jobstest.MemStore
}

var (
	_ driver.Store        = (*gatedStore)(nil)
	_ driver.QueueCounter = (*gatedStore)(nil)
	_ driver.WaiterPopper = (*gatedStore)(nil)
	_ driver.PauseStore   = (*gatedStore)(nil)
	_ driver.ResultStager = (*gatedStore)(nil)
	_ driver.ManyGetter   = (*gatedStore)(nil)
)

// finish is Finish, with the planted defect when the world has one: every
// plantEvery-th final write drops its token condition (it lands on a job
// running under another claim), which the invariants must catch.
func (s *gatedStore) finish(ctx context.Context, id, token string, o driver.Outcome) error {
	w, orig := s.a.w, token
	if cur, err := s.st.Get(ctx, id); err == nil && (cur.Status != driver.StatusRunning || cur.ClaimToken != token) {
		w.cover("stale", "final write on a job not running under its claim: "+string(cur.Status))
	}
	if w.plant > 0 {
		if cur, err := s.st.Get(ctx, id); err == nil && cur.Status == driver.StatusRunning && cur.ClaimToken != token {
			if w.draw(w.plant) == 0 {
				w.cover("planted", "stale final write")
				token = cur.ClaimToken
			}
		}
	}
	err := s.st.Finish(ctx, id, token, o)
	if err == nil {
		s.a.w.landed("the final write", id, orig)
	}
	return err
}

// claim is Claim, remembering which claim token each instance's run holds.
func (s *gatedStore) claim(ctx context.Context, id string, c driver.Claim) (*driver.Record, error) {
	if w := s.a.w; w.opts.PlantClaimEvery > 0 {
		if cur, err := s.st.Get(ctx, id); err == nil && cur.Status == driver.StatusRunning {
			if w.draw(w.opts.PlantClaimEvery) == 0 {
				// The planted defect: the claim lands on a running job.
				// Emulated on the MemStore by ending the holder's run first.
				w.cover("planted", "claim of a running job")
				_ = s.st.Requeue(ctx, id, cur.ClaimToken, driver.Requeue{At: c.At, RunAt: c.At, SweepAt: cur.SweepAt})
			}
		}
	}
	rec, err := s.st.Claim(ctx, id, c)
	if err == nil {
		s.a.w.track.claimed(s.a, id, c.Token)
	}
	return rec, err
}

// requeue is Requeue, checked as a final write is.
func (s *gatedStore) requeue(ctx context.Context, id, token string, r driver.Requeue) error {
	err := s.st.Requeue(ctx, id, token, r)
	_, signal := driver.SignalWaitedOn(r.WaitingOn)
	switch {
	case err == nil:
		s.a.w.landed("a requeue", id, token)
		if r.WaitingOn != "" {
			s.a.w.cover("mechanism", "waits on "+r.WaitingOn)
		}
	case signal && errors.As(err, new(*driver.ConflictError)):
		s.a.w.cover("mechanism", "a park for a signal found it come")
	}
	return err
}

// readPart is ReadPart, which finds a payload's item not there yet one in
// lateEvery times in the first minute of its job when the world says so
// (a replica of the table that has the job before its payload): the job
// must wait and run, not fail.
func (s *gatedStore) readPart(ctx context.Context, rec *driver.Record, p driver.Part) ([]byte, time.Time, error) {
	if w := s.a.w; p == driver.PartPayload && w.lateEvery > 0 && time.Since(rec.CreatedAt) < time.Minute && w.draw(w.lateEvery) == 0 {
		w.cover("fault", "payload late")
		return nil, time.Time{}, driver.ErrPartMissing
	}
	return s.st.ReadPart(ctx, rec, p)
}
