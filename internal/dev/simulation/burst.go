package simulation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// A caller over its enqueue rate (Config.EnqueueRatePerOwner): an
// owner of its own that sends bursts of plain jobs through two enqueue
// instances, under the store's faults. The invariant: however the
// requests interleave, fail or lose their answers, the owner's accepted
// requests never pass its rate.

const (
	burstOwner = "sim-burst"
	// burstRate is the burst owner's requests a second (its bucket holds
	// a second's worth).
	burstRate = 2
)

// grant is an accepted request of the burst owner: its token was taken
// at some time within [start, end].
type grant struct{ start, end time.Time }

// burster sends one to three bursts of 3 to 10 requests at seeded times
// within span.
func (w *world) burster(ctx context.Context, span time.Duration) {
	rng := rand.New(rand.NewPCG(w.seed, 99))
	var svcs []*jobs.Service
	for i := range 2 {
		a, st, q, b := w.newActor(fmt.Sprintf("burster%d", i), false)
		svc, err := testroles.Service(jobs.Config{Registry: w.regOld, Store: st, Queue: q, Bus: b, Sealer: w.sealer, DispatchGrace: w.grace,
			LaneDispatchGrace: w.laneGraces(), Rand: newSimRand(w.seed, a.name), EnqueueRatePerOwner: burstRate,
			MessageFirst: w.messageFirst, Logger: w.logger})
		if err != nil {
			panic(err)
		}
		svcs = append(svcs, svc)
	}
	for b := range 1 + rng.IntN(3) {
		if !sleep(ctx, time.Duration(rng.Int64N(int64(span)/3))) {
			return
		}
		for i := range 3 + rng.IntN(8) {
			raw, _ := json.Marshal(script(rng, 90_000+b*100+i))
			octx, cancel := context.WithTimeout(ctx, apiTimeout)
			start := time.Now()
			res, err := svcs[rng.IntN(len(svcs))].Enqueue(octx, jobs.EnqueueRequest{Owner: burstOwner, Kind: kindPlain, Payload: raw})
			end := time.Now()
			cancel()
			var re *jobs.RequestError
			switch {
			case err == nil:
				w.cover("client", "enqueue within a rate")
				w.accept(res.Job.ID, "burst")
				w.mu.Lock()
				w.grants = append(w.grants, grant{start, end})
				w.mu.Unlock()
			case errors.As(err, &re) && re.Code == "rate_limited":
				w.cover("client", "enqueue over a rate (refused)")
			default:
				w.cover("client", "enqueue within a rate (refused)")
			}
			if rng.IntN(3) == 0 && !sleep(ctx, time.Duration(rng.IntN(1500))*time.Millisecond) {
				return
			}
		}
	}
}

// checkRate checks the burst owner's grants: those whose requests started
// at or after s and ended by e took their tokens within [s, e], so at most
// a second's worth plus the rate for e-s of them may be there.
func (w *world) checkRate() {
	g := w.grants
	sort.Slice(g, func(i, j int) bool { return g[i].start.Before(g[j].start) })
	for i := range g {
		for j := range g {
			if g[j].end.Before(g[i].start) {
				continue
			}
			n := 0
			for _, x := range g {
				if !x.start.Before(g[i].start) && !x.end.After(g[j].end) {
					n++
				}
			}
			allowed := burstRate + burstRate*g[j].end.Sub(g[i].start).Seconds()
			if float64(n) > allowed+1e-9 {
				w.violate("the burst owner had %d requests accepted within %v, over its rate of %d a second (a burst of %d)",
					n, g[j].end.Sub(g[i].start), burstRate, burstRate)
				return
			}
		}
	}
}
