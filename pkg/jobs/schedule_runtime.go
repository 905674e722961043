package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/errtypes"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Runtime schedules are the recurring schedules callers create through the
// API (POST /v1/schedules), each owned by its caller like a job. Their
// definitions are in the store (one item per owner); each has an
// EventBridge Scheduler schedule in the environment's runtime group, named
// SchedulerName(owner key, name), whose fires carry the owner key, so the
// worker finds the definition (one read per fire) and derives one job per
// fire as for declared schedules.

// defaultSchedulesPerOwner bounds each owner's runtime schedules.
const defaultSchedulesPerOwner = 20

// maxSchedulePayloadBytes bounds a runtime schedule's payload: an owner's
// schedules share one store item (DynamoDB's 400 KB), so 20 of them fit.
const maxSchedulePayloadBytes = 8 << 10

// runtimeName is a runtime schedule's name: short enough for Scheduler's
// 64 characters once prefixed with 16 characters of owner key and '-'.
// (Its length is checked apart: see codePattern.)
var runtimeName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// ScheduleRequest asks for a runtime schedule.
type ScheduleRequest struct {
	Owner      string
	Name       string
	Expression string
	TimeZone   string
	Kind       string
	Payload    json.RawMessage
	Overlap    Overlap
}

// ScheduleService serves the caller's own runtime schedules.
type ScheduleService struct {
	reg      *Registry
	store    driver.Store
	sched    driver.Scheduler
	perOwner int
	clock    Clock
	log      *slog.Logger
	// callers: the service answers API callers (ForCallers).
	callers bool
}

// ForCallers returns the service as API callers reach it (package httpapi
// uses it): a schedule of an internal kind (KindOpts.Internal) is refused
// as one of an unregistered kind.
func (s *ScheduleService) ForCallers() *ScheduleService {
	c := *s
	c.callers = true
	return &c
}

// newScheduleService returns the ScheduleService of cfg (see NewClient).
func newScheduleService(cfg Config, eng *engine) *ScheduleService {
	perOwner := cfg.SchedulesPerOwner
	if perOwner <= 0 {
		perOwner = defaultSchedulesPerOwner
	}
	return &ScheduleService{reg: cfg.Registry, store: eng.store, sched: cfg.Scheduler, perOwner: perOwner, clock: eng.clock, log: eng.log}
}

// Create validates req like a declaration (expression, time zone, kind,
// payload, no secret fields) and creates the schedule: an error matching
// ErrInvalidRequest for bad input or past the owner's limit (a
// *RequestError with Code "schedule_limit"), ErrScheduleExists for a
// name the owner has with another definition (the same request again
// answers the schedule: creation is idempotent), ErrUnavailable when Scheduler did not take it (with
// ErrScheduleUnconfirmed when the definition is kept).
//
// The store's definitions are what the API lists and deletes, so Create
// never leaves a Scheduler schedule that no definition names:
//
//   - a create whose answer is lost is asked after (GetSchedule): a
//     schedule there with this definition is adopted (201), nothing
//     there means nothing was made (503, nothing kept);
//   - a schedule under the name with another definition, which no
//     definition names (left by an earlier create whose answer was lost,
//     or by a create racing a delete), is updated to this one: never
//     adopted as it is, and never a 409 for a name the caller cannot see;
//   - when Scheduler cannot be asked either, the schedule is deleted
//     there and the definition removed (503, nothing kept); if even that
//     delete fails, the definition is kept (503, ErrScheduleUnconfirmed),
//     so the schedule is listed and its DELETE reaches Scheduler, and the
//     same request again completes it.
//
// A definition the owner already had (the same request again) is never
// removed by a failure: its schedule stands.
func (s *ScheduleService) Create(ctx context.Context, req ScheduleRequest) (*Schedule, error) {
	if s.sched == nil {
		return nil, errNoScheduler
	}
	if err := checkOwner(req.Owner); err != nil {
		return nil, err
	}
	if len(req.Name) > 47 || !runtimeName.MatchString(req.Name) {
		return nil, refuse(codeInvalidRequest, fmt.Sprintf("schedule %q: the name must be 1 to 47 letters, digits, '-', '_' or '.'", req.Name))
	}
	sc := Schedule{Name: req.Name, Expression: req.Expression, TimeZone: req.TimeZone, Kind: req.Kind, Payload: req.Payload, Overlap: req.Overlap, Owner: req.Owner}
	if err := sc.Check(); err != nil {
		return nil, refuse(codeInvalidRequest, err.Error())
	}
	if sc.TimeZone == "" {
		sc.TimeZone = "UTC"
	}
	if sc.Overlap == "" {
		sc.Overlap = OverlapAllow
	}
	k, ok := s.reg.lookupFor(sc.Kind, s.callers)
	if !ok {
		return nil, errUnknownKind
	}
	if len(k.secrets) > 0 {
		return nil, refuse(codeInvalidRequest, fmt.Sprintf("schedule %q: kind %q has jobs:\"secret\" payload fields, which a schedule would keep in clear", sc.Name, sc.Kind))
	}
	if len(sc.Payload) == 0 {
		sc.Payload = []byte("null")
	}
	if err := k.validate(sc.Payload); err != nil {
		return nil, err
	}
	canonical, err := k.canonical(sc.Payload)
	if err != nil {
		return nil, err
	}
	if len(canonical) > maxSchedulePayloadBytes {
		return nil, refuse(codeInvalidRequest, fmt.Sprintf("schedule %q: a schedule's payload is at most %d bytes", sc.Name, maxSchedulePayloadBytes))
	}
	sc.Payload = canonical
	sc.CreatedAt = s.clock.Now().UTC().Truncate(time.Second)
	key := wire.OwnerKey(sc.Owner)
	added := true
	if err := s.store.AddOwnerSchedule(ctx, key, sc, s.perOwner); err != nil {
		switch {
		case errors.Is(err, ErrScheduleExists):
			// The same request again (its answer lost): the schedule it made.
			old, gerr := s.Get(ctx, sc.Owner, sc.Name)
			if gerr != nil {
				return nil, gerr
			}
			if !sameDefinition(*old, sc) {
				return nil, err
			}
			sc, added = *old, false
		case errors.Is(err, errScheduleLimit):
			return nil, refuse("schedule_limit", "you have as many schedules as allowed; delete one first")
		default:
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	id := wire.SchedulerName(key, sc.Name)
	err = s.place(ctx, id, sc, wire.RuntimeFireMessage(key, sc.Name, wire.ScheduledTimeAttribute))
	if err == nil {
		return &sc, nil
	}
	if added && s.withdraw(context.WithoutCancel(ctx), key, id, sc.Name, errors.Is(err, errNotHeld)) {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil, fmt.Errorf("%w: %w: %w", ErrUnavailable, ErrScheduleUnconfirmed, err)
}

var (
	// errNotHeld: Scheduler certainly holds no schedule under the name.
	errNotHeld = errors.New("jobs: Scheduler holds no such schedule")
	// errHeldName: Scheduler's create met a schedule of the name.
	errHeldName = errors.New("jobs: Scheduler holds a schedule of that name")
)

// place makes Scheduler hold sc firing message under id: it creates it,
// adopts the schedule there when it is this one (a create whose answer was
// lost), and updates one that is not. Its error wraps errNotHeld when
// Scheduler certainly holds nothing under id.
func (s *ScheduleService) place(ctx context.Context, id string, sc Schedule, message string) error {
	cerr := s.sched.CreateSchedule(ctx, id, sc, message)
	if cerr == nil {
		return nil
	}
	if errors.Is(cerr, driver.ErrExists) {
		cerr = errHeldName // not the caller's 409: no definition of theirs clashes
	}
	// Made or not? A lost answer looks like a failure, or like a conflict
	// with itself once the SDK retried it: ask.
	held, err := s.sched.GetSchedule(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return fmt.Errorf("%w: %w", errNotHeld, cerr)
	case err != nil:
		return errors.Join(cerr, err)
	case held.Is(sc, message):
		if !errors.Is(cerr, errHeldName) {
			s.log.LogAttrs(ctx, slog.LevelInfo, "a schedule whose creation answered an error is there as asked; adopted",
				slog.String("schedule", sc.Name), slog.String("err_types", errtypes.Of(cerr)))
		}
		return nil
	}
	// Another definition that no stored definition names: make it ours.
	if err := s.sched.UpdateSchedule(ctx, id, sc, message); err != nil {
		if errors.Is(err, ErrNotFound) {
			err = fmt.Errorf("%w: %w", errNotHeld, err)
		}
		return err
	}
	s.log.LogAttrs(ctx, slog.LevelWarn, "Scheduler held another definition under this schedule's name, which no stored definition named; updated",
		slog.String("schedule", sc.Name))
	return nil
}

// withdraw undoes a definition this Create added, after Scheduler did not
// take it: it deletes Scheduler's schedule unless Scheduler certainly
// holds none, then removes the definition, and reports whether it did. If
// the delete fails the definition stays, so the schedule is listed and
// can be deleted.
func (s *ScheduleService) withdraw(ctx context.Context, key, id, name string, notHeld bool) bool {
	if !notHeld {
		if err := s.sched.DeleteSchedule(ctx, id); err != nil {
			s.log.LogAttrs(ctx, slog.LevelWarn, "Scheduler may hold a schedule it did not confirm; its definition is kept so that it is listed and can be deleted",
				slog.String("schedule", name), slog.String("err_types", errtypes.Of(err)))
			return false
		}
	}
	if err := s.store.RemoveOwnerSchedule(ctx, key, name); err != nil && !errors.Is(err, ErrNotFound) {
		s.log.LogAttrs(ctx, slog.LevelError, "a schedule Scheduler does not hold is still stored; delete it, or repeat its request",
			slog.String("schedule", name), slog.String("err_types", errtypes.Of(err)))
		return false
	}
	return true
}

// sameDefinition reports whether a and b define the same schedule (when
// they were created aside).
func sameDefinition(a, b Schedule) bool {
	a.CreatedAt, b.CreatedAt = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

// List returns the owner's runtime schedules, by name.
func (s *ScheduleService) List(ctx context.Context, owner string) ([]Schedule, error) {
	if err := checkOwner(owner); err != nil {
		return nil, err
	}
	list, err := s.store.OwnerSchedules(ctx, wire.OwnerKey(owner))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return list, nil
}

// Get returns the owner's schedule name, or ErrNotFound (also for
// another owner's).
func (s *ScheduleService) Get(ctx context.Context, owner, name string) (*Schedule, error) {
	list, err := s.List(ctx, owner)
	if err != nil {
		return nil, err
	}
	for _, sc := range list {
		if sc.Name == name {
			return &sc, nil
		}
	}
	return nil, ErrNotFound
}

// Delete deletes the owner's schedule name: first in Scheduler (no more
// fires), then its definition. ErrNotFound when the owner has none of
// that name; ErrUnavailable when Scheduler may still hold it (the
// definition stays: delete again). It is idempotent: a delete whose
// answer was lost is found done (GetSchedule). A fire already on the
// queue finds no definition and makes no job.
func (s *ScheduleService) Delete(ctx context.Context, owner, name string) error {
	if s.sched == nil {
		return errNoScheduler
	}
	if _, err := s.Get(ctx, owner, name); err != nil {
		return err
	}
	key := wire.OwnerKey(owner)
	id := wire.SchedulerName(key, name)
	if err := s.sched.DeleteSchedule(ctx, id); err != nil {
		// Its answer may be lost: is it gone?
		if _, gerr := s.sched.GetSchedule(ctx, id); !errors.Is(gerr, ErrNotFound) {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	if err := s.store.RemoveOwnerSchedule(ctx, key, name); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// runtimeSchedule finds the definition a runtime fire names.
func (w *Worker) runtimeSchedule(ctx context.Context, f wire.Fire) (Schedule, bool, error) {
	list, err := w.eng.store.OwnerSchedules(ctx, f.OwnerKey)
	if err != nil {
		return Schedule{}, false, err
	}
	for _, sc := range list {
		if sc.Name == f.Schedule {
			return sc, true, nil
		}
	}
	return Schedule{}, false, nil
}
