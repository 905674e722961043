package simulation

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

var errBusDown = errors.New("simulation: EventBridge is unavailable")

// bus is a simulated EventBridge: it accepts events except during its
// outage, when every PutEvents fails; it remembers every accepted event.
type bus struct {
	w                       *world
	downFrom, downUntil     time.Time
	accepted                map[string]int // event id -> deliveries
	statusOf                map[string]string
	partialEvery, partialAt int
}

type busEvent struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

type gatedBus struct {
	a *actor
	b *bus
}

func (g gatedBus) Put(ctx context.Context, evs []driver.Event) ([]bool, error) {
	var ok []bool
	key := ""
	if len(evs) > 0 {
		var e busEvent
		_ = json.Unmarshal(evs[0].Detail, &e)
		key = e.ID
	}
	err := g.a.do(ctx, "PutEvents", key, func() error {
		now := time.Now()
		if !now.Before(g.b.downFrom) && now.Before(g.b.downUntil) {
			g.b.w.cover("fault", "EventBridge outage")
			return errBusDown
		}
		ok = make([]bool, len(evs))
		for i, ev := range evs {
			// A partial failure now and then: the entry is refused and
			// must be put again.
			g.b.partialAt++
			if g.b.partialEvery > 0 && g.b.partialAt%g.b.partialEvery == 0 {
				g.b.w.cover("fault", "PutEvents entry refused")
				continue
			}
			var e busEvent
			if json.Unmarshal(ev.Detail, &e) != nil || e.ID == "" {
				g.b.w.violate("an event without an id: %s", ev.Detail)
				continue
			}
			g.b.accepted[e.ID]++
			g.b.statusOf[e.ID] = e.Status
			ok[i] = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ok, nil
}
