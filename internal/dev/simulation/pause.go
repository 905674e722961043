package simulation

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Pauses. An operator pauses a kind, the bulk lane, the clients' owner's
// jobs of the limited kind, or the declared schedule whose fires the world
// sends, at seeded times, for up to 5 minutes,
// and sometimes resumes early, while clients enqueue, workers claim and
// release slots and the clients cancel. The invariant: no claim of a job
// a pause holds lands more than pauseBound after the pause's write landed
// (the workers read the pause set at most that long after it changes,
// and check again after the claim; docs/operations/OPERATIONS.md, "Pausing").
const pauseBound = 5 * time.Second

// pauseLog is what the world saw of the pauses: each write that landed,
// and when it ended (a resume that landed, or its own end).
type pauseLog struct {
	mu  sync.Mutex
	log []pauseSeen
	// fires: each fire's job id, and when its messages were received.
	fires map[string][]time.Time
}

// fire records the job id of a fire the world sends.
func (l *pauseLog) fire(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fires == nil {
		l.fires = map[string][]time.Time{}
	}
	if _, ok := l.fires[id]; !ok {
		l.fires[id] = nil
	}
}

// received records a receive of a foreign message that makes the job id.
func (l *pauseLog) received(id string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ats, ok := l.fires[id]; ok {
		l.fires[id] = append(ats, at)
	}
}

// fireReceives are the receives of the messages of the fire that makes
// id (nil: id is no fire's).
func (l *pauseLog) fireReceives(id string) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.fires[id]...)
}

// holdingFire returns the pause of schedule whose write landed more than
// pauseBound before the receive at and that still held its fires at now,
// when the fire's job was made. The worker looks at the pause set as it
// reaches the fire, after the receive (a batch's earlier records run
// first): a pause that ended by itself or was resumed in between lets the
// fire make its job, as it lets a held job go.
func (l *pauseLog) holdingFire(schedule string, at, now time.Time) (pauseSeen, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.log {
		if at.Sub(s.landed) > pauseBound && (s.removed.IsZero() || s.removed.After(now)) && s.p.HoldsFire(schedule, "", now) {
			return s, true
		}
	}
	return pauseSeen{}, false
}

type pauseSeen struct {
	p       driver.Pause
	landed  time.Time
	removed time.Time // zero: never resumed
}

// set records p's write; it replaces the pause of its ID.
func (l *pauseLog) set(p driver.Pause) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.removeLocked(p.ID())
	l.log = append(l.log, pauseSeen{p: p, landed: time.Now()})
}

func (l *pauseLog) remove(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.removeLocked(id)
}

func (l *pauseLog) removeLocked(id string) {
	for i := range l.log {
		if l.log[i].p.ID() == id && l.log[i].removed.IsZero() {
			l.log[i].removed = time.Now()
		}
	}
}

// holding returns the pause whose write landed more than pauseBound
// before at and that held, at at, a job of kind in lane owned by owner.
func (l *pauseLog) holding(kind, lane, owner string, at time.Time) (pauseSeen, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.log {
		if at.Sub(s.landed) > pauseBound && (s.removed.IsZero() || s.removed.After(at)) && s.p.Covers(kind, lane, wire.OwnerKey(owner), at) {
			return s, true
		}
	}
	return pauseSeen{}, false
}

// pauser is the operator: 0 to 3 pauses within span (random stream 97).
func (w *world) pauser(ctx context.Context, span time.Duration) {
	rng := rand.New(rand.NewPCG(w.seed, 97))
	n := rng.IntN(4)
	if n == 0 {
		return
	}
	a, st, q, b := w.newActor("operator", false)
	svc, err := testroles.Service(jobs.Config{Registry: w.reg, Store: st, Queue: q, Bus: b, Sealer: w.sealer, DispatchGrace: w.grace,
		LaneDispatchGrace: w.laneGraces(), Rand: newSimRand(w.seed, a.name), MessageFirst: w.messageFirst, Logger: w.logger})
	if err != nil {
		panic(err)
	}
	for range n {
		if !sleep(ctx, time.Duration(rng.Int64N(int64(span)/int64(n)))) {
			return
		}
		req := jobs.PauseRequest{For: time.Duration(20+rng.IntN(280)) * time.Second}
		what := ""
		switch rng.IntN(5) {
		case 4:
			req.Schedule, what = fireSchedule, "a schedule"
		case 0:
			req.Kind, what = kindPlain, "a kind"
		case 1:
			req.Kind, what = kindLimited, "a limited kind"
		case 2:
			req.Lane, what = laneBulk, "a lane"
		default:
			req.Kind, req.Owner, what = kindLimited, simOwner, "an owner's jobs of a kind"
		}
		octx, cancel := context.WithTimeout(ctx, apiTimeout)
		_, err := svc.Pause(octx, "", req)
		cancel()
		w.cover("operator", "pause "+what+outcome(err))
		if rng.IntN(2) == 0 {
			continue // it ends by itself
		}
		if !sleep(ctx, time.Duration(rng.Int64N(int64(req.For)))) {
			return
		}
		octx, cancel = context.WithTimeout(ctx, apiTimeout)
		err = svc.Resume(octx, "", req)
		cancel()
		w.cover("operator", "resume "+what+outcome(err))
	}
}

// checkFirePaused is the schedule pause's invariant, as the job id is
// created: no job of a fire whose every message so far was received more
// than pauseBound after a pause of its schedule landed, that pause still
// holding as the job is made.
func (w *world) checkFirePaused(id string) {
	receives := w.pauses.fireReceives(id)
	if len(receives) == 0 {
		return
	}
	now := time.Now()
	var held pauseSeen
	for _, at := range receives {
		s, ok := w.pauses.holdingFire(fireSchedule, at, now)
		if !ok {
			w.cover("mechanism", "fire made its job")
			return
		}
		held = s
	}
	w.violate("the fire of job %s, each of its %d receives more than %v after the pause %s landed, made its job", id, len(receives), pauseBound, held.p.ID())
}

// checkPaused is the pause invariant for a claim of job (of kind) that
// landed at at, whose handler starts now: a pause removed in between (the
// worker looks at the pause set after it read the payload, which may take
// the run's time when it is an object) no longer holds it.
func (w *world) checkPaused(job, kind string, at time.Time) {
	rec, err := w.mem.Get(context.Background(), job)
	if err != nil {
		return
	}
	if s, held := w.pauses.holding(kind, rec.Lane, rec.Owner, at); held && (s.removed.IsZero() || s.removed.After(time.Now())) {
		w.violate("job %s (%s) was claimed and ran %v after the pause %s landed, over the bound of %v", job, kind, at.Sub(s.landed), s.p.ID(), pauseBound)
	}
}

func (s *gatedStore) Pauses(ctx context.Context) ([]driver.Pause, error) {
	var r0 []driver.Pause
	err := s.a.do(ctx, "Pauses", "", func() (err error) {
		r0, err = s.st.Pauses(ctx)
		return err
	})
	return r0, err
}

func (s *gatedStore) SetPause(ctx context.Context, p driver.Pause, max int) error {
	return s.a.do(ctx, "SetPause", p.ID(), func() error {
		err := s.st.SetPause(ctx, p, max)
		if err == nil {
			s.a.w.pauses.set(p)
		}
		return err
	})
}

func (s *gatedStore) RemovePause(ctx context.Context, id string) error {
	return s.a.do(ctx, "RemovePause", id, func() error {
		err := s.st.RemovePause(ctx, id)
		if err == nil {
			s.a.w.pauses.remove(id)
		}
		return err
	})
}
