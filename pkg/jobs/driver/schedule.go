package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/cron"
	"github.com/lambdajobs/lambdajobs/internal/wire"
)

// Schedule is a periodic job: EventBridge Scheduler fires it at each time
// its expression names, and the worker turns each fire into one job whose
// id is derived from the schedule's name and the fire's scheduled time, so
// Scheduler's retries and SQS's duplicate deliveries of a fire create one
// job. Declare schedules with Kind.Every next to the kinds; the CDK
// construct creates one Scheduler schedule per declaration
// (JobsProps.Schedules: Registry.Schedules), and `make run` fires them
// locally. See docs/guide/SCHEDULES.md.
type Schedule struct {
	// Name identifies the schedule: 1 to 64 letters, digits, '-', '_' or
	// '.' (Scheduler's limit), unique in the registry.
	Name string `json:"name"`
	// Expression is Scheduler's: "cron(0 2 * * ? *)" or "rate(5 minutes)"
	// (see package cron for what is supported).
	Expression string `json:"expression"`
	// TimeZone is the IANA zone a cron expression is read in ("UTC" when
	// empty).
	TimeZone string `json:"time_zone"`
	// Kind and Payload are the job each fire enqueues; the payload was
	// validated against the kind when declared.
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload"`
	// Overlap says what a fire does while the job of this schedule's
	// previous fire is unfinished.
	Overlap Overlap `json:"overlap"`
	// Owner owns the jobs (DefaultScheduleOwner when empty): set it to
	// the identity that reads them through the API.
	Owner string `json:"owner"`
	// CreatedAt is when a runtime schedule was created (Scheduler counts
	// a rate from then); zero for declared schedules.
	CreatedAt time.Time `json:"created_at,omitzero"`
}

// Overlap is a schedule's policy for a fire that comes while the previous
// fire's job is unfinished.
type Overlap string

const (
	// OverlapAllow enqueues every fire (the default).
	OverlapAllow Overlap = "allow"
	// OverlapSkip skips a fire while the job of the schedule's last
	// enqueued fire is queued or running; the next fire after it finishes
	// enqueues again. Each fire then costs one more read (two while a
	// job is unfinished) and one write when it enqueues.
	OverlapSkip Overlap = "skip"
)

// DefaultScheduleOwner owns the jobs of a schedule that names no Owner.
const DefaultScheduleOwner = "scheduler"

// validScheduleName reports whether name is 1 to 64 letters, digits, '-',
// '_' or '.' (a loop, not a pattern: a package's patterns compile at every
// cold start).
func validScheduleName(name string) bool {
	if name == "" || len(name) > 64 {
		return false
	}
	for _, c := range []byte(name) {
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

// Check checks what a schedule says on its own (name, expression, time
// zone, overlap, owner), as Kind.Every does before checking its kind and
// payload against the registry; the CDK construct checks the schedules it
// is given with it. Empty TimeZone, Overlap and Owner are accepted (their
// defaults).
func (s Schedule) Check() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("schedule %q: %s", s.Name, fmt.Sprintf(format, a...))
	}
	if !validScheduleName(s.Name) {
		return bad("the name must be 1 to 64 letters, digits, '-', '_' or '.'")
	}
	if _, err := cron.Parse(s.Expression); err != nil {
		return bad("%v", err)
	}
	if s.TimeZone != "" {
		if _, err := time.LoadLocation(s.TimeZone); err != nil {
			return bad("time zone %q: %v", s.TimeZone, err)
		}
	}
	switch s.Overlap {
	case "", OverlapAllow, OverlapSkip:
	default:
		return bad("overlap %q: want allow or skip", s.Overlap)
	}
	if s.Owner != "" && !wire.ValidOwner(s.Owner) {
		return bad("owner %q is not a valid owner", s.Owner)
	}
	return nil
}

// NextFire returns the first time after t at which s fires (for a rate,
// counted from start, as Scheduler counts from the schedule's creation).
func (s Schedule) NextFire(t, start time.Time) time.Time {
	spec, err := cron.Parse(s.Expression)
	if err != nil {
		return time.Time{}
	}
	loc, err := time.LoadLocation(s.TimeZone)
	if err != nil {
		loc = time.UTC
	}
	return spec.Next(t, loc, start)
}

// Scheduler creates, reads, updates and deletes the runtime schedules'
// EventBridge Scheduler schedules (package schedulerapi is the AWS one;
// the local stack has its own). ScheduleService keeps them and the store's
// definitions in step (see ScheduleService.Create).
type Scheduler interface {
	// CreateSchedule creates the schedule named id firing message, or
	// returns ErrExists when one of that name exists (after a
	// lost answer that the SDK retried, the one this call created).
	CreateSchedule(ctx context.Context, id string, s Schedule, message string) error
	// GetSchedule returns what Scheduler holds under id, or ErrNotFound
	// when it holds nothing.
	GetSchedule(ctx context.Context, id string) (*HeldSchedule, error)
	// UpdateSchedule replaces the schedule named id with the one
	// CreateSchedule(ctx, id, s, message) would create, or returns
	// ErrNotFound when there is none.
	UpdateSchedule(ctx context.Context, id string, s Schedule, message string) error
	// DeleteSchedule deletes it; deleting one that is not there is no
	// error.
	DeleteSchedule(ctx context.Context, id string) error
}

// HeldSchedule is what Scheduler holds under a name, as ScheduleService
// compares it with what it asked for: what the schedule does, never when
// it was created or changed.
type HeldSchedule struct {
	Expression string
	// TimeZone is the cron's zone ("UTC" when Scheduler has none).
	TimeZone string
	// Message is the target's input: the fire message.
	Message string
	// TargetMatches reports whether the rest of what it does is what the
	// Scheduler's CreateSchedule sets: the target (the jobs queue), the
	// role it sends with, the dead-letter queue, the retries' maximum
	// event age, the flexible window off and the state enabled.
	TargetMatches bool
}

// Is reports whether h is the schedule CreateSchedule(id, s, message)
// creates.
func (h *HeldSchedule) Is(s Schedule, message string) bool {
	tz := s.TimeZone
	if tz == "" {
		tz = "UTC"
	}
	return h.TargetMatches && h.Expression == s.Expression && h.TimeZone == tz && h.Message == message
}
