package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Operating schedules: a pause of a schedule (a row of the pause set, as
// a kind's: PauseRequest.Schedule) makes a worker acknowledge its fires
// without a job, declared and runtime schedules alike, so a deploy does
// not undo it and no Scheduler call or grant is involved. RunNow makes one
// job of a schedule by hand.

// RunNowRequest asks Service.RunNow for a job of a schedule, now.
type RunNowRequest struct {
	// Schedule names a declared schedule (operators), or with Owner that
	// owner's runtime schedule; a caller's own runtime schedule otherwise.
	Schedule string
	Owner    string
	// IdempotencyKey makes the job's id: the same key gives the same job
	// (empty: a new job each time).
	IdempotencyKey string
}

var errScheduleNotFound = refuse("not_found", "no such schedule")

// RunNow makes one job of the schedule req names, as a fire would (its
// kind, payload and owner), but marked as run by hand (View.ManualRunOf):
// its id derives from the schedule, "manual" and the idempotency key, so
// a call repeated with the key returns the first job (Replayed). It obeys
// the schedule's overlap policy: with OverlapSkip, while the job of its
// last fire (or run) is unfinished it refuses (409 schedule_overlap) and
// makes nothing. by is as for Pause: "" for an operator.
func (s *Service) RunNow(ctx context.Context, by string, req RunNowRequest) (*EnqueueResult, error) {
	if err := checkIdempotencyKey(req.IdempotencyKey); err != nil {
		return nil, err
	}
	sc, ownerKey, err := s.scheduleOf(ctx, by, req.Schedule, req.Owner)
	if err != nil {
		return nil, err
	}
	stateKey := sc.Name
	if ownerKey != "" {
		stateKey = ownerKey + "/" + sc.Name // as the worker's fires key it
	}
	key := req.IdempotencyKey
	if key == "" {
		key = s.eng.newID()
	}
	id := wire.DerivedID("schedule-manual", stateKey, key)
	// A repeat of a run that made its job answers with it, whatever the
	// schedule's turn became since.
	if prev, err := s.store.Get(ctx, id); err == nil && prev.Owner == sc.Owner {
		v, err := s.eng.viewRead(ctx, prev)
		if err != nil {
			return nil, err
		}
		return &EnqueueResult{Job: v, Replayed: true}, nil
	}
	if sc.Overlap == OverlapSkip {
		if err := s.takeTurn(ctx, stateKey, id); err != nil {
			return nil, err
		}
	}
	// An operator runs a declared schedule of an internal kind (what
	// routes and schedules feed) as a fire would; a caller's runtime
	// schedule is of a kind it may enqueue. The key also makes a repeat
	// racing this one an idempotent replay of the first job.
	svc := s
	if by == "" {
		op := *s
		op.callers = false
		svc = &op
	}
	rec, created, err := svc.enqueue(ctx, EnqueueRequest{Owner: sc.Owner, Kind: sc.Kind, Payload: sc.Payload, manualRunOf: sc.Name, id: id,
		EnqueueOpts: EnqueueOpts{IdempotencyKey: req.IdempotencyKey}})
	if err != nil {
		return nil, err
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "schedule run by hand", slog.String("schedule", sc.Name), slog.String("job_id", rec.ID), slog.Bool("replayed", !created))
	v, err := s.eng.viewRead(ctx, rec)
	if err != nil {
		return nil, err
	}
	return &EnqueueResult{Job: v, Replayed: !created}, nil
}

// takeTurn records id as the job of the schedule's last run (its state
// under stateKey) unless the last one is unfinished: OverlapSkip's rule,
// as runFire applies it.
func (s *Service) takeTurn(ctx context.Context, stateKey, id string) error {
	last, err := s.store.LastFire(ctx, stateKey)
	if err != nil {
		return fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	if last == id {
		return nil // this call's repeat: the turn is its job's
	}
	if last != "" {
		prev, err := s.store.Get(ctx, last)
		switch {
		case err == nil && !prev.Status.Final():
			return refuse("schedule_overlap", "the schedule skips a run while its last one is unfinished (job "+last+")")
		case err != nil && !errors.Is(err, ErrNotFound):
			return fmt.Errorf("%w: store: %w", ErrUnavailable, err)
		}
	}
	if err := s.store.SetLastFire(ctx, stateKey, last, id); err != nil {
		if asConflict(err) != nil {
			return refuse("schedule_overlap", "a fire of the schedule took its turn meanwhile")
		}
		return fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	return nil
}

// scheduleOf finds the schedule name as by may act on it: a caller (by
// set) its own runtime schedule; an operator a declared one, or with
// owner that owner's runtime one. It returns the schedule and the owner's
// key ("" for a declared schedule).
func (s *Service) scheduleOf(ctx context.Context, by, name, owner string) (Schedule, string, error) {
	if by != "" {
		if err := checkOwner(by); err != nil {
			return Schedule{}, "", err
		}
		if owner != "" && owner != by {
			return Schedule{}, "", refuse(codeInvalidRequest, "a caller acts on its own schedules only")
		}
		owner = by
	}
	if owner == "" {
		sc, ok := s.reg.schedule(name)
		if !ok {
			return Schedule{}, "", errScheduleNotFound
		}
		return sc, "", nil
	}
	if err := checkOwner(owner); err != nil {
		return Schedule{}, "", err
	}
	key := wire.OwnerKey(owner)
	list, err := s.store.OwnerSchedules(ctx, key)
	if err != nil {
		return Schedule{}, "", fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	for _, sc := range list {
		if sc.Name == name {
			sc.Owner = owner
			return sc, key, nil
		}
	}
	return Schedule{}, "", errScheduleNotFound
}

// schedulePause is the pause of req.Schedule that by asks for (checked:
// the schedule exists unless resume).
func (s *Service) schedulePause(ctx context.Context, by string, req PauseRequest, resume bool) (driver.Pause, error) {
	if req.Kind != "" || req.Lane != "" {
		return driver.Pause{}, errPauseScope
	}
	// An operator's pause of a schedule lasts up to a year; an owner's as
	// long as any owner's pause, so owners cannot hold the set's rows
	// longer.
	longest := MaxDelay
	if by != "" {
		longest = MaxPause
	}
	switch {
	case req.For == 0:
		req.For = longest
	case req.For < time.Second || req.For > longest:
		return driver.Pause{}, refuse(codeInvalidRequest, fmt.Sprintf("a schedule's pause lasts from 1 s to %s", longest))
	}
	p := driver.Pause{Schedule: req.Schedule, By: "operator"}
	if by != "" {
		p.By = "owner"
	}
	if resume {
		owner := req.Owner
		if by != "" {
			if err := checkOwner(by); err != nil || (owner != "" && owner != by) {
				return driver.Pause{}, refuse(codeInvalidRequest, "a caller acts on its own schedules only")
			}
			owner = by
		}
		if owner != "" {
			p.OwnerKey = wire.OwnerKey(owner)
		}
		return p, nil
	}
	_, key, err := s.scheduleOf(ctx, by, req.Schedule, req.Owner)
	if err != nil {
		return driver.Pause{}, err
	}
	now := s.clock.Now().Truncate(time.Millisecond)
	p.OwnerKey, p.Since, p.Until = key, now, now.Add(req.For)
	return p, nil
}

// holdingFire returns the pause that holds back the fires of schedule
// (ownerKey "" for a declared one), or nil; and the error of a read of
// the set that failed (see current).
func (p *pauseSet) holdingFire(ctx context.Context, schedule, ownerKey string) (*driver.Pause, error) {
	list, err := p.current(ctx)
	now := p.clock.Now()
	for i := range list {
		if list[i].HoldsFire(schedule, ownerKey, now) {
			return &list[i], err
		}
	}
	return nil, err
}

// manualRequest is the part of a job's request hash that says it was run
// by hand of schedule.
func manualRequest(schedule string) []byte {
	if schedule == "" {
		return nil
	}
	return []byte("manual_run_of=" + schedule)
}
