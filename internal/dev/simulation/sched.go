package simulation

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing/synctest"
	"time"
)

// The faults the scheduler injects into a call (see verdict).
const (
	faultNone     = ""
	faultThrottle = "throttle"  // refused, nothing applied (DynamoDB/SQS throttling)
	faultConflict = "conflict"  // refused, nothing applied (a transaction conflict)
	faultLost     = "lost"      // applied, the answer lost
	faultSlow     = "slow"      // applied, the answer late (the caller may give up first)
	faultStall    = "stall"     // the request held in flight, applied late (after the caller gave up)
	faultKill     = "kill"      // the caller's instance dies at this call (applied or not)
	faultKillDone = "kill-done" // the same, after the call applied
)

var (
	errThrottled = errors.New("simulation: throttled")
	errConflict  = errors.New("simulation: transaction conflict")
	errLost      = errors.New("simulation: the answer was lost")
	errKilled    = errors.New("simulation: the instance was killed")
)

// verdict is what the scheduler decides for one call.
type verdict struct {
	fault string
	delay time.Duration
}

// call is one pending call of an actor, waiting for its turn.
type call struct {
	actor *actor
	label string
	seq   uint64
	ready chan verdict
}

func (c *call) key() string { return c.actor.name + " " + c.label }

// sched is the one scheduler of a seed's world: every Store, Queue and Bus
// call of every actor waits in pending until every goroutine of the bubble
// is blocked; then exactly one, chosen by the seed, proceeds.
type sched struct {
	w    *world
	rng  *rand.Rand
	mu   sync.Mutex
	seq  uint64
	pend []*call
	wake chan struct{}

	traceMu sync.Mutex
	trace   []string
	steps   int
	start   time.Time
}

func newSched(w *world, seed uint64) *sched {
	return &sched{w: w, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), wake: make(chan struct{}, 1), start: time.Now()}
}

// loop serves pending calls until done is closed and none is left.
func (s *sched) loop(done <-chan struct{}) {
	for {
		synctest.Wait()
		// Between two calls: every goroutine of the bubble is blocked.
		s.w.stepCheck()
		s.mu.Lock()
		if len(s.pend) == 0 {
			s.mu.Unlock()
			select {
			case <-s.wake:
				continue
			case <-done:
				return
			}
		}
		// A stable order before the seeded choice: arrival order depends
		// on the Go scheduler, labels do not.
		slices.SortFunc(s.pend, func(a, b *call) int {
			if c := strings.Compare(a.key(), b.key()); c != 0 {
				return c
			}
			return int(a.seq) - int(b.seq)
		})
		i := s.rng.IntN(len(s.pend))
		c := s.pend[i]
		s.pend = slices.Delete(s.pend, i, i+1)
		s.mu.Unlock()
		v := s.w.decide(s.rng, c)
		s.steps++
		s.tracef("%-14s %s%s", c.actor.name, c.label, verdictText(v))
		c.ready <- v
	}
}

func verdictText(v verdict) string {
	switch {
	case v.fault == faultNone:
		return ""
	case v.delay > 0:
		return fmt.Sprintf(" !%s %v", v.fault, v.delay)
	default:
		return " !" + v.fault
	}
}

// tracef appends a line to the trace, stamped with the simulated time.
func (s *sched) tracef(format string, args ...any) {
	line := fmt.Sprintf("%10.3f ", time.Since(s.start).Seconds()) + fmt.Sprintf(format, args...)
	s.traceMu.Lock()
	s.trace = append(s.trace, line)
	s.traceMu.Unlock()
}

// enqueue parks c until the scheduler chooses it.
func (s *sched) await(a *actor, label string) verdict {
	c := &call{actor: a, label: label, ready: make(chan verdict, 1)}
	s.mu.Lock()
	s.seq++
	c.seq = s.seq
	s.pend = append(s.pend, c)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return <-c.ready
}

// actor is one caller: a function instance, the event source, a client.
// Each has its own Store, Queue and Bus wrappers, so a killed instance's
// later calls fail without effect.
type actor struct {
	w    *world
	name string
	// worker marks a function instance that a kill fault may end.
	worker bool
	mu     sync.Mutex
	dead   bool
	onKill func()
}

func (a *actor) killed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.dead
}

func (a *actor) kill() {
	a.mu.Lock()
	if a.dead {
		a.mu.Unlock()
		return
	}
	a.dead = true
	f := a.onKill
	a.mu.Unlock()
	a.w.cover("fault", "kill")
	if f != nil {
		f()
	}
}

// do runs apply as the scheduler allows: op names the call in the trace
// and the coverage table, key is what it touches.
func (a *actor) do(ctx context.Context, op, key string, apply func() error) error {
	if a.killed() {
		return errKilled
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	a.w.cover("call", op)
	// What the call touches is checked after it (stepCheck).
	inner := apply
	apply = func() error {
		err := inner()
		a.w.touched(key)
		return err
	}
	label := op
	if key != "" {
		label += " " + key
	}
	v := a.w.sched.await(a, label)
	if a.killed() {
		return errKilled
	}
	if v.fault != faultNone {
		a.w.cover("fault", v.fault)
	}
	switch v.fault {
	case faultThrottle:
		return errThrottled
	case faultConflict:
		return errConflict
	case faultKill:
		a.kill()
		return errKilled
	case faultStall:
		// The request is held in the network: it lands later, in its own
		// turn, whether or not its caller still waits.
		res := make(chan error, 1)
		a.w.stragglers.Add(1)
		go func() {
			defer a.w.stragglers.Done()
			time.Sleep(v.delay)
			a.w.sched.await(a.w.net, "late "+label)
			res <- apply()
		}()
		select {
		case err := <-res:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err := apply()
	switch v.fault {
	case faultKillDone:
		a.kill()
		return errKilled
	case faultLost:
		return errLost
	case faultSlow:
		t := time.NewTimer(v.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return err
}
