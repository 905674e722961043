package examplekinds

import (
	"context"
	"encoding/json"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Tick is the periodic example kind: the schedule TickSchedule enqueues one
// every minute (the local stack and dev fire it; prod creates no Scheduler
// schedule for it).
const (
	Tick         = "example.tick"
	TickSchedule = "example.tick"
)

// TickPayload is example.tick's payload.
type TickPayload struct {
	Note string `json:"note"`
}

// TickResult is example.tick's result.
type TickResult struct {
	Note      string    `json:"note"`
	CreatedAt time.Time `json:"created_at"`
	RanAt     time.Time `json:"ran_at"`
}

// PublicJSON returns the whole result.
func (r TickResult) PublicJSON() ([]byte, error) { return json.Marshal(r) }

// RunTick runs example.tick: it reports when its fire created it and when
// it ran.
func RunTick(_ context.Context, job *jobs.Job[TickPayload]) (TickResult, error) {
	return TickResult{Note: job.Payload.Note, CreatedAt: job.CreatedAt, RanAt: time.Now().UTC().Truncate(time.Millisecond)}, nil
}

// registerTick adds example.tick and its schedule, owned by the local
// stack's default caller so `curl` can read its jobs.
func registerTick(reg *jobs.Registry) error {
	k, err := jobs.Register(reg, Tick, RunTick, nil)
	if err != nil {
		return err
	}
	return k.Every(reg, TickSchedule, "rate(1 minute)", TickPayload{Note: "every minute"},
		&jobs.ScheduleOpts{Overlap: jobs.OverlapSkip, Owner: DefaultRouteOwner})
}
