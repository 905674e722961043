package simulation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Waits. An owner of its own enqueues a few plain jobs (some publishing
// partial results) and follows them with waits for their changes
// (Service.Wait), more at once than its open waits allow, each wait in a
// function instance of its own that a kill fault may end mid-wait (its
// slot's release never made), all under the store's faults. The
// invariants, at the end:
//   - a wait that answered "unchanged" answered the version it was given,
//     and not before its whole timeout; one that answered "changed"
//     answered another version;
//   - a wait refused too_many_waits was refused while the owner's other
//     waits could hold every slot: each counts from its start until its
//     lease could end (its end, its timeout and the lease's slack after
//     it), so a slot never outlives its lease.

const (
	waitOwner     = "sim-waits"
	waitsPerOwner = 2
	waitFollowers = 4
	// waitSlack is the lease a wait's slot has beyond the wait (jobs'
	// own, unexported).
	waitSlack = 5 * time.Second
)

// waitRun is one wait, for the checks.
type waitRun struct {
	job        string
	start, end time.Time
	d          time.Duration
	seen, got  string // the versions given and answered
	changed    bool
	refused    bool // too_many_waits
	err        bool // another error, or its instance was killed
}

// waiter is the waits owner (random stream 95; its followers 950 and
// on): it enqueues its jobs, then runs its followers.
func (w *world) waiter(ctx context.Context, span time.Duration) {
	rng := rand.New(rand.NewPCG(w.seed, 95))
	a, st, q, b := w.newActor("waiter", false)
	svc, err := testroles.Service(jobs.Config{Registry: w.regOld, Store: st, Queue: q, Bus: b, Sealer: w.sealer, DispatchGrace: w.grace,
		LaneDispatchGrace: w.laneGraces(), Rand: newSimRand(w.seed, a.name), MessageFirst: w.messageFirst, Logger: w.logger})
	if err != nil {
		panic(err)
	}
	var ids []string
	for i := range 3 {
		if !sleep(ctx, time.Duration(rng.Int64N(int64(span)/8))) {
			return
		}
		p := script(rng, 90_000+i)
		p.Publish = 1 + rng.IntN(3)
		raw, _ := json.Marshal(p)
		octx, cancel := context.WithTimeout(ctx, apiTimeout)
		res, err := svc.Enqueue(octx, jobs.EnqueueRequest{Owner: waitOwner, Kind: kindPlain, Payload: raw})
		cancel()
		w.cover("waits", "enqueue"+outcome(err))
		if err == nil {
			w.accept(res.Job.ID, "waited on")
			ids = append(ids, res.Job.ID)
		}
	}
	if len(ids) == 0 {
		return
	}
	var followers sync.WaitGroup
	for f := range waitFollowers {
		frng := rand.New(rand.NewPCG(w.seed, 950+uint64(f)))
		followers.Go(func() { w.follow(ctx, frng, f, ids[f%len(ids)], span/2) })
	}
	followers.Wait()
}

// waitService is a service of the waits owner's, acting as a.
func (w *world) waitService(a *actor, st *gatedStore, q gatedQueue, b gatedBus) *jobs.Service {
	svc, err := testroles.Service(jobs.Config{Registry: w.regOld, Store: st, Queue: q, Bus: b, Sealer: w.sealer,
		Rand: newSimRand(w.seed, a.name), MessageFirst: w.messageFirst, Logger: w.logger, WaitsPerOwner: waitsPerOwner})
	if err != nil {
		panic(err)
	}
	return svc
}

// follow follows job with waits, each in an instance of its own, until
// the job ends or span passes. Each goroutine has services of its own
// (a service's pause set is one instance's).
func (w *world) follow(ctx context.Context, rng *rand.Rand, f int, job string, span time.Duration) {
	reader := w.waitService(w.newActor(fmt.Sprintf("follower%d", f), false))
	until := time.Now().Add(span)
	seen := ""
	for n := 0; time.Now().Before(until); n++ {
		if seen == "" {
			octx, cancel := context.WithTimeout(ctx, apiTimeout)
			v, err := reader.Get(octx, waitOwner, job)
			cancel()
			if err != nil {
				if !sleep(ctx, time.Second) {
					return
				}
				continue
			}
			if v.Status.Final() {
				return
			}
			seen = v.Version()
		}
		a, st, q, b := w.newActor(fmt.Sprintf("wait%d/%d", f, n), true)
		svc := w.waitService(a, st, q, b)
		d := time.Duration(1+rng.IntN(int(jobs.MaxWait/time.Second))) * time.Second
		run := waitRun{job: job, start: time.Now(), d: d, seen: seen}
		// The function's own timeout: the wait's and 5 s.
		wctx, cancel := context.WithTimeout(ctx, jobs.MaxWait+5*time.Second)
		v, changed, err := svc.Wait(wctx, waitOwner, job, seen, d)
		cancel()
		run.end = time.Now()
		var re *jobs.RequestError
		switch {
		case a.killed():
			run.err = true
			w.cover("waits", "a wait's instance killed")
		case errors.As(err, &re) && re.Code == "too_many_waits":
			run.refused = true
			w.cover("waits", "a wait refused: too many open")
		case err != nil:
			run.err = true
			w.cover("waits", "a wait failed")
		case changed:
			run.got, run.changed = v.Version(), true
			w.cover("waits", "a wait answered at a change")
			if v.Status.Final() {
				w.cover("waits", "a wait answered the job's end")
			}
		default:
			run.got = v.Version()
			w.cover("waits", "a wait answered at its timeout")
		}
		w.mu.Lock()
		w.waits = append(w.waits, run)
		w.mu.Unlock()
		switch {
		case run.changed && v.Status.Final():
			return
		case run.changed:
			seen = run.got
		case run.refused || run.err:
			seen = ""
			if !sleep(ctx, time.Second) {
				return
			}
		}
	}
}

// checkWaits checks the waits owner's waits against what each answered.
func (w *world) checkWaits() {
	for i, r := range w.waits {
		switch {
		case r.refused:
			busy := 0
			for j, o := range w.waits {
				if j != i && !o.refused && !o.start.After(r.end) && !o.end.Add(o.d+waitSlack).Before(r.start) {
					busy++
				}
			}
			if busy < waitsPerOwner {
				w.violate("a wait on job %s at %v was refused too_many_waits while at most %d of the owner's waits could hold a slot (of %d): a slot outlived its lease",
					r.job, r.start, busy, waitsPerOwner)
			}
		case r.err:
		case r.changed && r.got == r.seen:
			w.violate("a wait on job %s answered a change, but the version it was given (%s)", r.job, r.seen)
		case !r.changed && r.got != r.seen:
			w.violate("a wait on job %s answered version %s as unchanged from %s", r.job, r.got, r.seen)
		case !r.changed && r.end.Sub(r.start) < r.d:
			w.violate("a wait on job %s answered unchanged after %v, before its %v", r.job, r.end.Sub(r.start), r.d)
		}
	}
	if len(w.waits) > 0 {
		w.cover("invariant", "every wait answered a change, or its timeout, and no slot outlived its lease")
	}
}
