package jobs

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// ScheduleOpts are a schedule's options; nil means UTC, OverlapAllow and
// DefaultScheduleOwner.
type ScheduleOpts struct {
	TimeZone string
	Overlap  Overlap
	Owner    string
}

// errInvalidSchedule: a schedule that cannot be declared.
var errInvalidSchedule = errors.New("jobs: invalid schedule")

// Every declares a schedule in reg that enqueues a job of this kind with
// payload at each time expression names. It refuses a bad name or a name already declared, an expression or time zone
// Scheduler would refuse, a payload the kind does not accept, a kind with
// jobs:"secret" fields (the payload would sit in the schedule's
// definition in clear), and a registry already in use.
func (k Kind[P]) Every(reg *Registry, name, expression string, payload P, opts *ScheduleOpts) error {
	raw, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("%w %q: encode payload: %v", errInvalidSchedule, name, err)
	}
	s := Schedule{Name: name, Expression: expression, Kind: k.name, Payload: raw}
	if opts != nil {
		s.TimeZone, s.Overlap, s.Owner = opts.TimeZone, opts.Overlap, opts.Owner
	}
	return reg.addSchedule(s)
}

// addSchedule declares s (Kind.Every, the one way to declare one).
func (reg *Registry) addSchedule(s Schedule) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w %q: %s", errInvalidSchedule, s.Name, fmt.Sprintf(format, a...))
	}
	if err := s.Check(); err != nil {
		return fmt.Errorf("%w: %v", errInvalidSchedule, err)
	}
	if s.TimeZone == "" {
		s.TimeZone = "UTC"
	}
	if s.Overlap == "" {
		s.Overlap = OverlapAllow
	}
	if s.Owner == "" {
		s.Owner = driver.DefaultScheduleOwner
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if reg.frozen {
		return bad("%v", errRegistryFrozen)
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
