package jobs

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/internal/cron"
)

// Schedule is a periodic job: EventBridge Scheduler fires it at each time
// its expression names, and the worker turns each fire into one job whose
// id is derived from the schedule's name and the fire's scheduled time, so
// Scheduler's retries and SQS's duplicate deliveries of a fire create one
// job. Declare schedules with Kind.Every next to the kinds; the CDK
// construct creates one Scheduler schedule per declaration
// (JobsProps.Schedules: Registry.Schedules), and `make run` fires them
// locally. See docs/SCHEDULES.md.
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

// ScheduleOpts are a schedule's options; nil means UTC, OverlapAllow and
// DefaultScheduleOwner.
type ScheduleOpts struct {
	TimeZone string
	Overlap  Overlap
	Owner    string
}

// ErrInvalidSchedule is returned for a schedule that cannot be declared.
var ErrInvalidSchedule = errors.New("jobs: invalid schedule")

var scheduleName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Every declares a schedule in reg that enqueues a job of this kind with
// payload at each time expression names. It refuses (ErrInvalidSchedule)
// a bad name or a name already declared, an expression or time zone
// Scheduler would refuse, a payload the kind does not accept, a kind with
// jobs:"secret" fields (the payload would sit in the schedule's
// definition in clear), and a registry already in use.
func (k Kind[P]) Every(reg *Registry, name, expression string, payload P, opts *ScheduleOpts) error {
	raw, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("%w %q: encode payload: %v", ErrInvalidSchedule, name, err)
	}
	s := Schedule{Name: name, Expression: expression, Kind: k.name, Payload: raw}
	if opts != nil {
		s.TimeZone, s.Overlap, s.Owner = opts.TimeZone, opts.Overlap, opts.Owner
	}
	return reg.AddSchedule(s)
}

// Check checks what a schedule says on its own (name, expression, time
// zone, overlap, owner), as AddSchedule does before checking its kind and
// payload against the registry; the CDK construct checks the schedules it
// is given with it. Empty TimeZone, Overlap and Owner are accepted (their
// defaults).
func (s Schedule) Check() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w %q: %s", ErrInvalidSchedule, s.Name, fmt.Sprintf(format, a...))
	}
	if !scheduleName.MatchString(s.Name) {
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
	if s.Owner != "" && checkOwner(s.Owner) != nil {
		return bad("owner %q is not a valid owner", s.Owner)
	}
	return nil
}

// AddSchedule declares s (see Kind.Every, the typed way).
func (reg *Registry) AddSchedule(s Schedule) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w %q: %s", ErrInvalidSchedule, s.Name, fmt.Sprintf(format, a...))
	}
	if err := s.Check(); err != nil {
		return err
	}
	if s.TimeZone == "" {
		s.TimeZone = "UTC"
	}
	if s.Overlap == "" {
		s.Overlap = OverlapAllow
	}
	if s.Owner == "" {
		s.Owner = DefaultScheduleOwner
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if reg.frozen {
		return bad("%v", ErrRegistryFrozen)
	}
	k, ok := reg.kinds[s.Kind]
	if !ok {
		return bad("kind %q is not registered", s.Kind)
	}
	if len(k.secrets) > 0 {
		return bad("kind %q has jobs:\"secret\" payload fields, which a schedule would keep in clear", s.Kind)
	}
	if len(s.Payload) == 0 {
		s.Payload = []byte("null")
	}
	if err := k.validate(s.Payload); err != nil {
		return bad("the payload does not fit kind %q: %v", s.Kind, err)
	}
	canonical, err := k.canonical(s.Payload)
	if err != nil {
		return bad("the payload does not fit kind %q: %v", s.Kind, err)
	}
	s.Payload = canonical
	if _, dup := reg.schedules[s.Name]; dup {
		return bad("a schedule with this name is already declared")
	}
	if reg.schedules == nil {
		reg.schedules = map[string]Schedule{}
	}
	reg.schedules[s.Name] = s
	return nil
}

// Schedules returns the declared schedules, by name.
func (reg *Registry) Schedules() []Schedule {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	out := make([]Schedule, 0, len(reg.schedules))
	for _, s := range reg.schedules {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (reg *Registry) schedule(name string) (Schedule, bool) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	s, ok := reg.schedules[name]
	return s, ok
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

// Fire is the message a schedule's fire puts on the queue. Scheduler
// fills ScheduledTime from its context attribute
// <aws.scheduler.scheduled-time>.
type Fire struct {
	Schedule string `json:"lambdajobs_schedule"`
	// OwnerKey is set for a runtime schedule (see OwnerKey).
	OwnerKey      string `json:"owner_key,omitempty"`
	ScheduledTime string `json:"scheduled_time"`
}

// ScheduledTimeAttribute is Scheduler's context attribute for the time a
// fire was scheduled for.
const ScheduledTimeAttribute = "<aws.scheduler.scheduled-time>"

// FireMessage is the body a fire of schedule name at scheduledTime sends
// (scheduledTime is ScheduledTimeAttribute in Scheduler's target input).
func FireMessage(name, scheduledTime string) string {
	return fireMessage(Fire{Schedule: name, ScheduledTime: scheduledTime})
}

// fireMessage encodes f without HTML escaping: Scheduler replaces the
// literal "<aws.scheduler.scheduled-time>", not "\u003caws...".
func fireMessage(f Fire) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(f)
	return strings.TrimSuffix(b.String(), "\n")
}

// decodeFire recognises a fire message.
func decodeFire(body string) (Fire, bool) {
	var f Fire
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if dec.Decode(&f) != nil || f.Schedule == "" {
		return Fire{}, false
	}
	return f, true
}

// FireJobID is the id of the job a fire of the declared schedule name at
// t creates.
func FireJobID(name string, t time.Time) string {
	return DerivedID("schedule", name, t.UTC().Format(time.RFC3339))
}

// RuntimeFireJobID is the id of the job a fire of an owner's runtime
// schedule name at t creates.
func RuntimeFireJobID(ownerKey, name string, t time.Time) string {
	return DerivedID("runtime-schedule", ownerKey, name, t.UTC().Format(time.RFC3339))
}
