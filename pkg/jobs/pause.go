package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/errtypes"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Pausing. An operator pauses a kind, a lane, or one owner's jobs of a
// kind; an owner may pause its own jobs of a kind. A pause is a row of the
// pause set, one item the store keeps (driver.PauseStore). Each instance
// reads the set at most once every pauseRefresh, and only while it has
// work that asks (a delivery, a claim, a job view), so a pause holds every
// job that starts more than pauseRefresh after it was written, and an idle
// instance reads nothing.
//
// A worker does not claim a job its message says is paused: it sends the
// message again, delayed by pauseWait, and acknowledges this one (no
// write, no receive counted towards the dead-letter queue). A job claimed
// without that hint (a message from before the hint, a routed job, a
// waiter a slot chain takes) is parked instead (waiting_on "paused", one
// write). A resume removes the row; every held job starts within its
// current delay. Time held is left out of the queue-latency metric.
const (
	// pauseRefresh bounds how old an instance's copy of the pause set is.
	pauseRefresh = 5 * time.Second
	// MaxPause is the longest pause: the queues' retention (14 days) less
	// a day, so that neither a held job's message nor its payload's item
	// can expire while it waits.
	MaxPause = 13 * 24 * time.Hour
	// maxPauses bounds the pause set (each row about 200 bytes); owners'
	// own pauses may take maxOwnerPauses of it, maxPausesPerOwner each, so
	// callers cannot fill it and leave an operator no room.
	maxPauses         = 100
	maxOwnerPauses    = 80
	maxPausesPerOwner = 10
	// pauseWaitMin is a held job's first delay; later ones double as the
	// pause goes on, up to SQS's longest delay.
	pauseWaitMin = 30 * time.Second
	// pauseClaimAfter: a job held this long (by its message's count) is
	// claimed and parked instead of handed back once more, so that its
	// payload's item is kept (the park extends it) however the pauses
	// that hold it are renewed; its count then starts again.
	pauseClaimAfter = 7 * 24 * time.Hour
)

// waitPaused: a queued job a pause holds (View.WaitingOn).
const waitPaused = "paused"

// PauseRequest names what Service.Pause holds back, or Service.Resume
// lets go: every job of Kind, every job of Lane ("default" for the default
// lane), or Owner's jobs of Kind; or the fires of Schedule (a declared
// schedule, or with Owner that owner's runtime one).
type PauseRequest struct {
	Schedule string
	Kind     string
	Lane     string
	Owner    string
	// For is how long the pause lasts unless resumed sooner (0: MaxPause;
	// a schedule's: MaxDelay, its longest).
	For time.Duration
}

// PauseInfo is a pause as Service.Pauses lists it.
type PauseInfo struct {
	ID string `json:"id"`
	driver.Pause
}

var (
	errPauseScope   = refuse(codeInvalidRequest, "a pause names a kind, or a lane, or an owner and a kind")
	errPauseFor     = refuse(codeInvalidRequest, fmt.Sprintf("a pause lasts from 1 s to %s (the queue's retention less a day)", MaxPause))
	errPauseLimit   = refuse("pause_limit", fmt.Sprintf("the deployment has %d pauses in force; resume one first", maxPauses))
	errPauseByOther = refuse("paused_by_operator", "an operator paused these jobs; only an operator resumes that pause")
	errNoPauses     = refuse("unavailable", "this deployment's store does not keep pauses")
)

// Pause holds back the jobs req names for req.For. by is the caller: ""
// for an operator, who may pause anything; an owner may pause only its
// own jobs of a kind or its own schedules (req.Owner is by, or empty),
// for at most MaxPause. A pause of the same jobs by the same hand is
// replaced (a new For). An operator's pause of one owner's jobs is a row
// apart from the owner's own, which the owner cannot touch.
func (s *Service) Pause(ctx context.Context, by string, req PauseRequest) (*PauseInfo, error) {
	p, err := s.pauseOf(ctx, by, req, false)
	if err != nil {
		return nil, err
	}
	// Owners' own pauses take at most maxOwnerPauses rows of the set, as
	// one condition of the write (an operator always has the rest), and
	// maxPausesPerOwner each, as read before it.
	limit := maxPauses
	if by != "" {
		limit = maxOwnerPauses
		if err := s.ownerHasRoom(ctx, p); err != nil {
			return nil, err
		}
	}
	ps := s.eng.pauses.store
	err = ps.SetPause(ctx, p, limit)
	if asConflict(err) != nil && s.dropEnded(ctx) {
		err = ps.SetPause(ctx, p, limit)
	}
	switch {
	case asConflict(err) != nil:
		return nil, errPauseLimit
	case err != nil:
		return nil, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	s.eng.pauses.forget()
	s.log.LogAttrs(ctx, slog.LevelInfo, "paused", slog.String("pause", p.ID()), slog.Time("until", p.Until), slog.String("by", p.By))
	return &PauseInfo{ID: p.ID(), Pause: p}, nil
}

// Resume ends the pause of the jobs req names: an owner's own, or an
// operator's (and, when an operator has none of one owner's jobs, the
// owner's own). ErrNotFound when there is none; an owner whose jobs only
// an operator's pause holds gets paused_by_operator.
func (s *Service) Resume(ctx context.Context, by string, req PauseRequest) error {
	p, err := s.pauseOf(ctx, by, req, true)
	if err != nil {
		return err
	}
	ps := s.eng.pauses.store
	err = ps.RemovePause(ctx, p.ID())
	if errors.Is(err, ErrNotFound) && p.OwnerKey != "" {
		other := p // the other hand's row of the same jobs
		other.By = "owner"
		if by != "" {
			other.By = "operator"
		}
		switch {
		case by == "":
			err = ps.RemovePause(ctx, other.ID()) // an operator ends the owner's own
		case s.pauseInForce(ctx, other.ID()):
			return errPauseByOther
		}
	}
	switch {
	case errors.Is(err, ErrNotFound):
		return ErrNotFound
	case err != nil:
		return fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	s.eng.pauses.forget()
	s.log.LogAttrs(ctx, slog.LevelInfo, "resumed", slog.String("pause", p.ID()))
	return nil
}

// Pauses lists the pauses in force: every one for an operator (by ""),
// else those that hold back by's jobs (of a kind, of a lane, and its own).
func (s *Service) Pauses(ctx context.Context, by string) ([]PauseInfo, error) {
	if s.eng.pauses.store == nil {
		return nil, errNoPauses
	}
	if by != "" {
		if err := checkOwner(by); err != nil {
			return nil, err
		}
	}
	list, err := s.eng.pauses.store.Pauses(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	now := s.clock.Now()
	out := []PauseInfo{}
	for _, p := range list {
		theirs := p.OwnerKey != "" && p.OwnerKey != wire.OwnerKey(by)
		declared := p.Schedule != "" && p.OwnerKey == "" // an operator's schedule
		_, known := s.reg.lookupFor(p.Kind, s.callers)
		internal := p.Kind != "" && !known // a kind callers do not see
		if !now.Before(p.Until) || (by != "" && (theirs || declared || internal)) {
			continue
		}
		out = append(out, PauseInfo{ID: p.ID(), Pause: p})
	}
	return out, nil
}

// pauseOf checks req as by asks it and returns the pause it writes (a
// resume's names the pause only).
func (s *Service) pauseOf(ctx context.Context, by string, req PauseRequest, resume bool) (driver.Pause, error) {
	if s.eng.pauses.store == nil {
		return driver.Pause{}, errNoPauses
	}
	if req.Schedule != "" {
		return s.schedulePause(ctx, by, req, resume)
	}
	who := "operator"
	if by != "" {
		if err := checkOwner(by); err != nil {
			return driver.Pause{}, err
		}
		if req.Owner != "" && req.Owner != by || req.Lane != "" || req.Kind == "" {
			return driver.Pause{}, refuse(codeInvalidRequest, "an owner pauses its own jobs of a kind only")
		}
		req.Owner, who = by, "owner"
	}
	switch {
	case (req.Kind == "") == (req.Lane == ""), req.Owner != "" && req.Kind == "":
		return driver.Pause{}, errPauseScope
	case req.For == 0:
		req.For = MaxPause
	case req.For < time.Second || req.For > MaxPause:
		return driver.Pause{}, errPauseFor
	}
	now := s.clock.Now().Truncate(time.Millisecond)
	p := driver.Pause{Kind: req.Kind, Lane: req.Lane, Since: now, Until: now.Add(req.For), By: who}
	if req.Owner != "" {
		if err := checkOwner(req.Owner); err != nil {
			return driver.Pause{}, err
		}
		p.OwnerKey = wire.OwnerKey(req.Owner)
	}
	if req.Kind != "" {
		if _, ok := s.reg.lookupFor(req.Kind, s.callers && by != ""); !ok {
			return driver.Pause{}, errUnknownKind
		}
	}
	if req.Lane != "" && req.Lane != driver.DefaultLaneName && !slices.Contains(s.reg.Lanes(), req.Lane) {
		return driver.Pause{}, refuse(codeInvalidRequest, "no kind runs in a lane of that name")
	}
	return p, nil
}

// ownerHasRoom refuses an owner's new pause when it has
// maxPausesPerOwner in force already (read before the write: parallel
// requests may pass it by a few; maxOwnerPauses, in the write's
// condition, holds for all owners).
func (s *Service) ownerHasRoom(ctx context.Context, p driver.Pause) error {
	list, err := s.eng.pauses.store.Pauses(ctx)
	if err != nil {
		return fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	now, mine := s.clock.Now(), 0
	for _, q := range list {
		if q.ID() == p.ID() {
			return nil // a replacement
		}
		if q.By == "owner" && q.OwnerKey == p.OwnerKey && now.Before(q.Until) {
			mine++
		}
	}
	if mine >= maxPausesPerOwner {
		return refuse("pause_limit", fmt.Sprintf("you have %d pauses in force; resume one first", maxPausesPerOwner))
	}
	return nil
}

// pauseInForce reports whether the pause named id is in force (a fresh
// read; false when it cannot be read).
func (s *Service) pauseInForce(ctx context.Context, id string) bool {
	list, err := s.eng.pauses.store.Pauses(ctx)
	if err != nil {
		return false
	}
	now := s.clock.Now()
	return slices.ContainsFunc(list, func(q driver.Pause) bool { return q.ID() == id && now.Before(q.Until) })
}

// dropEnded removes the pauses that ended by themselves, making room in
// the set: whether it removed any.
func (s *Service) dropEnded(ctx context.Context) bool {
	list, err := s.eng.pauses.store.Pauses(ctx)
	if err != nil {
		return false
	}
	now, dropped := s.clock.Now(), false
	for _, p := range list {
		if !now.Before(p.Until) && s.eng.pauses.store.RemovePause(ctx, p.ID()) == nil {
			dropped = true
		}
	}
	return dropped
}

// pausesOf is the pause set of store, empty if it keeps none.
func pausesOf(store driver.Store) *pauseSet {
	ps, _ := store.(driver.PauseStore)
	return &pauseSet{store: ps}
}

// pauseSet is an instance's copy of the pause set, read again when it is
// older than pauseRefresh and something asks.
type pauseSet struct {
	store driver.PauseStore // nil: the store keeps no pauses
	clock Clock
	log   *slog.Logger
	mu    sync.Mutex
	list  []driver.Pause
	// readAt is when the copy was asked for (before the read), so every
	// pause written before readAt is in it; zero: never read. failedAt
	// and failed: the last read's failure, which answers every look for
	// pauseRetry without another read (one hot item under a throttle).
	readAt   time.Time
	failedAt time.Time
	failed   error
}

// pauseRetry is how long after a failed read of the pause set the next
// read waits.
const pauseRetry = time.Second

// current returns the pause set, read again if the copy is older than
// pauseRefresh. When that read fails it returns the old copy and the
// error: a worker then parks the job it claimed rather than start it on
// a copy that may miss a pause (waiting_on "store"), and the next look
// reads again.
func (p *pauseSet) current(ctx context.Context) ([]driver.Pause, error) {
	if p == nil || p.store == nil {
		return nil, nil
	}
	// One look at a time reads; the others wait for its copy.
	p.mu.Lock()
	defer p.mu.Unlock()
	if list, fresh, err := p.cachedLocked(); fresh {
		return list, err
	}
	now := p.clock.Now()
	list, err := p.store.Pauses(ctx)
	if err != nil {
		p.log.LogAttrs(ctx, slog.LevelWarn, "pause set not read", slog.String("err_types", errtypes.Of(err)))
		p.failedAt, p.failed = now, err
		return p.list, err
	}
	p.list, p.readAt, p.failed = list, now, nil
	return list, nil
}

// cachedLocked returns the copy when it may answer a look without a read
// (it is fresh, or the last read failed within pauseRetry). p.mu is held.
func (p *pauseSet) cachedLocked() ([]driver.Pause, bool, error) {
	now := p.clock.Now()
	switch {
	case !p.readAt.IsZero() && now.Sub(p.readAt) < pauseRefresh:
		return p.list, true, nil
	case p.failed != nil && now.Sub(p.failedAt) < pauseRetry:
		return p.list, true, p.failed
	}
	return nil, false, nil
}

// forget makes the next look read the set: this instance wrote it.
func (p *pauseSet) forget() {
	p.mu.Lock()
	p.readAt = time.Time{}
	p.mu.Unlock()
}

// holding returns the pause that holds back a job of kind ("" unknown) in
// lane ("" the default) owned by ownerKey, or nil; and the error of a
// read of the set that failed (see current).
func (p *pauseSet) holding(ctx context.Context, kind, lane, ownerKey string) (*driver.Pause, error) {
	list, err := p.current(ctx)
	now := p.clock.Now()
	for i := range list {
		if list[i].Covers(kind, lane, ownerKey, now) {
			return &list[i], err
		}
	}
	return nil, err
}

// holdingIn returns the pause of list in force at now that holds back
// rec, or nil.
func holdingIn(list []driver.Pause, rec *driver.Record, now time.Time) *driver.Pause {
	for i := range list {
		if list[i].Covers(rec.Kind, rec.Lane, ownerKeyOf(rec.Owner), now) {
			return &list[i]
		}
	}
	return nil
}

// holds is holding for the job rec.
func (p *pauseSet) holds(ctx context.Context, rec *driver.Record) (*driver.Pause, error) {
	return p.holding(ctx, rec.Kind, rec.Lane, ownerKeyOf(rec.Owner))
}

// pauseWait is how long a job p holds waits before it is delivered again:
// as long as the pause has lasted (so the delays double), from
// pauseWaitMin to SQS's longest delay, jittered, and never past the
// pause's end.
func (e *engine) pauseWait(p *driver.Pause, now time.Time) time.Duration {
	d := min(e.jitter(min(max(now.Sub(p.Since), pauseWaitMin), driver.MaxQueueDelay)), driver.MaxQueueDelay)
	if left := p.Until.Sub(now); left < d {
		d = max(left, time.Second)
	}
	return d
}
