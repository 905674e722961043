package simulation

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Messages other services drop on the default lane's queue: envelopes
// routed to a kind of the default lane and to one of the bulk lane (the
// worker sends that job on to its lane), fires of a declared schedule
// (Scheduler delivers at least once: sometimes twice), and now and then a
// message no route takes, which reaches the dead-letter queue and must
// stay there for the operators. The worker makes each job from its
// message, without a sweep entry when message first is on: the message,
// acknowledged once the job has run or its own message was sent, is its
// net.

// fireSchedule is the declared schedule whose fires the simulation sends.
const fireSchedule = "sim-tick"

// simRoutes are the workers' routes: envelopes of the plain and the bulk
// kind.
func simRoutes() *jobs.Routes {
	return &jobs.Routes{Envelope: []jobs.EnvelopeRoute{{Kinds: []string{kindPlain, kindBulk}, Owner: simOwner}}}
}

// foreigner sends up to 6 foreign messages at seeded times within span.
func (w *world) foreigner(ctx context.Context, span time.Duration) {
	rng := rand.New(rand.NewPCG(w.seed, 98))
	a, _, _, _ := w.newActor("foreign", false)
	n := rng.IntN(7)
	for i := range n {
		if !sleep(ctx, time.Duration(rng.Int64N(int64(span)/int64(n)))) {
			return
		}
		var (
			body  string
			what  string
			jobOf = func(string) string { return "" }
			twice bool
		)
		switch x := rng.IntN(10); {
		case x < 6:
			kind := kindPlain
			if x >= 4 {
				kind = kindBulk
			}
			raw, _ := json.Marshal(map[string]any{"kind": kind, "payload": script(rng, 5000+i)})
			body, what = string(raw), "envelope "+kind
			jobOf = func(messageID string) string { return wire.DerivedID("sqs", messageID) }
		case x < 9:
			at := time.Now().UTC().Truncate(time.Minute)
			body, what = wire.EncodeFire(wire.Fire{Schedule: fireSchedule, ScheduledTime: at.Format(time.RFC3339)}), "fire"
			id := wire.FireJobID(fireSchedule, at)
			jobOf = func(string) string { return id }
			w.pauses.fire(id)
			twice = rng.IntN(3) == 0
		default:
			body, what = `{"sim":"a message no route takes"}`, "unroutable"
		}
		for range 1 + btoi(twice) {
			err := a.do(ctx, "SendForeign", what, func() error {
				w.sqs.sendForeign(body, jobOf)
				return nil
			})
			w.cover("foreign", what+outcome(err))
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// declareSchedule declares the schedule whose fires foreigner sends.
func declareSchedule(reg *jobs.Registry, plain jobs.Kind[payload]) {
	if err := plain.Every(reg, fireSchedule, "rate(1 minute)", payload{N: 9999, Ms: 700}, nil); err != nil {
		panic(fmt.Sprintf("simulation: %v", err))
	}
}
