package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
)

// eventBusPath is the local stack's event bus (localstack.EventBusPath).
const eventBusPath = "/_local/eventbus"

// busEvent is an event the local bus got, its detail a job event.
type busEvent struct {
	ID     string          `json:"id"`
	Detail json.RawMessage `json:"detail"`
	Time   time.Time       `json:"time"`
}

// jobEvent is what ljob events shows of a job event (jobs.Event).
type jobEvent struct {
	ID         string    `json:"id"`
	JobID      string    `json:"job_id"`
	Kind       string    `json:"kind"`
	Status     string    `json:"status"`
	Code       string    `json:"code"`
	Attempt    int       `json:"attempt"`
	FinishedAt time.Time `json:"finished_at"`
}

// eventsElsewhere says where a deployed environment's events are.
const eventsElsewhere = "a deployed environment's go to its EventBridge bus (the stack's event bus): a rule sends them on (docs/reference/EVENTS.md)"

// events prints the job events the local stack's bus received, newest
// first, with -kind, -status and -limit; with -follow it prints the last
// -limit of them oldest first, then each new one as it arrives, until
// interrupted. With -json, each is a line of the bus's JSON.
func (c *client) events(ctx context.Context) int {
	q := url.Values{"limit": {strconv.Itoa(c.opts.limit)}}
	if c.opts.kind != "" {
		q.Set("kind", c.opts.kind)
	}
	if c.opts.status != "" {
		q.Set("status", c.opts.status)
	}
	evs, ok := c.readEvents(ctx, q)
	if !ok {
		return 1
	}
	if !c.opts.follow {
		slices.Reverse(evs)
		c.printEvents(evs, true)
		if len(evs) == 0 && !c.jsonOut {
			fmt.Fprintf(c.stdout, "(no event yet: a kind announces its outcomes with KindOpts.Events, or every kind with %s=%s)\n", deploy.EnvEvents.Name, deploy.EnvEvents.Format(true))
		}
		return 0
	}
	c.printEvents(evs, true)
	q.Del("limit")
	for {
		if len(evs) > 0 {
			q.Set("after", evs[len(evs)-1].ID)
		}
		select {
		case <-ctx.Done():
			return 0
		case <-time.After(c.interval):
		}
		next, ok := c.readEvents(ctx, q)
		if !ok {
			if ctx.Err() != nil {
				return 0
			}
			return 1
		}
		if len(next) > 0 {
			evs = next
			c.printEvents(evs, false)
		}
	}
}

// readEvents reads the local bus's events for the query q, oldest first.
func (c *client) readEvents(ctx context.Context, q url.Values) ([]busEvent, bool) {
	body, ok := c.local(ctx, "events", eventBusPath+"?"+q.Encode(), eventsElsewhere)
	if !ok {
		return nil, false
	}
	var evs []busEvent
	if err := json.Unmarshal(body, &evs); err != nil {
		fmt.Fprintln(c.stderr, "ljob: events:", err)
		return nil, false
	}
	return evs, true
}

// eventLine is the format of one event's line (and of the header): fixed
// widths, so the lines of -follow line up with the first ones.
const eventLine = "%-24s  %-40s  %-20s  %-9s  %-16s  %-7s  %s\n"

// printEvents prints evs in their order, as lines of a table (after its
// header when head), or one JSON object a line with -json.
func (c *client) printEvents(evs []busEvent, head bool) {
	if c.jsonOut {
		for _, ev := range evs {
			b, _ := json.Marshal(ev)
			fmt.Fprintln(c.stdout, string(b))
		}
		return
	}
	const stamp = "2006-01-02T15:04:05.000Z07:00"
	if head {
		fmt.Fprintf(c.stdout, eventLine, "received", "event id", "kind", "status", "code", "attempt", "finished")
	}
	for _, ev := range evs {
		var d jobEvent
		_ = json.Unmarshal(ev.Detail, &d) // a detail of another shape shows dashes
		finished := "-"
		if !d.FinishedAt.IsZero() {
			finished = d.FinishedAt.UTC().Format(stamp)
		}
		fmt.Fprintf(c.stdout, eventLine, ev.Time.UTC().Format(stamp), orDash(d.ID), orDash(d.Kind), orDash(d.Status), orDash(d.Code),
			strconv.Itoa(d.Attempt), finished)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
