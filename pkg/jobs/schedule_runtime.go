package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/internal/errtypes"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/internal/wallclock"
)

// Runtime schedules are the recurring schedules callers create through the
// API (POST /v1/schedules), each owned by its caller like a job. Their
// definitions are in the store (one item per owner); each has an
// EventBridge Scheduler schedule in the environment's runtime group, named
// SchedulerName(owner key, name), whose fires carry the owner key, so the
// worker finds the definition (one read per fire) and derives one job per
// fire as for declared schedules.

// Scheduler creates and deletes the runtime schedules' EventBridge
// Scheduler schedules (package schedulerapi is the AWS one; the local
// stack has its own).
type Scheduler interface {
	// CreateSchedule creates the schedule named id firing message, or
	// returns ErrScheduleExists when one of that name exists.
	CreateSchedule(ctx context.Context, id string, s Schedule, message string) error
	// DeleteSchedule deletes it; deleting one that is not there is no
	// error.
	DeleteSchedule(ctx context.Context, id string) error
}

// DefaultSchedulesPerOwner bounds each owner's runtime schedules.
const DefaultSchedulesPerOwner = 20

// MaxSchedulePayloadBytes bounds a runtime schedule's payload: an owner's
// schedules share one store item (DynamoDB's 400 KB), so 20 of them fit.
const MaxSchedulePayloadBytes = 8 << 10

// runtimeName is a runtime schedule's name: short enough for Scheduler's
// 64 characters once prefixed with 16 characters of owner key and '-'.
var runtimeName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,47}$`)

// OwnerKey is the store's and Scheduler's key for an owner: a hash, so an
// owner (an ARN, a subject) never appears in a schedule's name.
func OwnerKey(owner string) string {
	h := sha256.Sum256([]byte("lambdajobs-owner\x00" + owner))
	return hex.EncodeToString(h[:16])
}

// SchedulerName is the Scheduler schedule of an owner's runtime schedule.
func SchedulerName(ownerKey, name string) string { return ownerKey[:16] + "-" + name }

// RuntimeFireMessage is the body a runtime schedule's fires send.
func RuntimeFireMessage(ownerKey, name, scheduledTime string) string {
	return fireMessage(Fire{Schedule: name, OwnerKey: ownerKey, ScheduledTime: scheduledTime})
}

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
	store    Store
	sched    Scheduler
	perOwner int
	clock    Clock
	log      *slog.Logger
}

// ScheduleServiceConfig configures a ScheduleService; Registry, Store and
// Scheduler are required.
type ScheduleServiceConfig struct {
	Registry  *Registry
	Store     Store
	Scheduler Scheduler
	// PerOwner bounds each owner's schedules (DefaultSchedulesPerOwner).
	PerOwner int
	Clock    Clock
	Logger   *slog.Logger
}

// NewScheduleService returns a ScheduleService.
func NewScheduleService(cfg ScheduleServiceConfig) (*ScheduleService, error) {
	if cfg.Registry == nil || cfg.Store == nil || cfg.Scheduler == nil {
		return nil, errors.New("jobs: NewScheduleService needs a Registry, a Store and a Scheduler")
	}
	if cfg.PerOwner <= 0 {
		cfg.PerOwner = DefaultSchedulesPerOwner
	}
	if cfg.Clock == nil {
		cfg.Clock = wallclock.Clock{}
	}
	return &ScheduleService{reg: cfg.Registry, store: cfg.Store, sched: cfg.Scheduler, perOwner: cfg.PerOwner, clock: cfg.Clock, log: orLogger(cfg.Logger)}, nil
}

// Create validates req like a declaration (expression, time zone, kind,
// payload, no secret fields) and creates the schedule: ErrInvalidSchedule,
// ErrUnknownKind or a *PayloadError for bad input, ErrScheduleExists for a
// name the owner has with another definition (the same request again
// answers the schedule: creation is idempotent), ErrScheduleLimit past
// the owner's limit, ErrUnavailable when Scheduler did not take it (then
// nothing is kept).
func (s *ScheduleService) Create(ctx context.Context, req ScheduleRequest) (*Schedule, error) {
	if err := checkOwner(req.Owner); err != nil {
		return nil, err
	}
	if !runtimeName.MatchString(req.Name) {
		return nil, fmt.Errorf("%w %q: the name must be 1 to 47 letters, digits, '-', '_' or '.'", ErrInvalidSchedule, req.Name)
	}
	sc := Schedule{Name: req.Name, Expression: req.Expression, TimeZone: req.TimeZone, Kind: req.Kind, Payload: req.Payload, Overlap: req.Overlap, Owner: req.Owner}
	if err := sc.Check(); err != nil {
		return nil, err
	}
	if sc.TimeZone == "" {
		sc.TimeZone = "UTC"
	}
	if sc.Overlap == "" {
		sc.Overlap = OverlapAllow
	}
	k, ok := s.reg.lookup(sc.Kind)
	if !ok {
		return nil, ErrUnknownKind
	}
	if len(k.secrets) > 0 {
		return nil, fmt.Errorf("%w %q: kind %q has jobs:\"secret\" payload fields, which a schedule would keep in clear", ErrInvalidSchedule, sc.Name, sc.Kind)
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
	if len(canonical) > MaxSchedulePayloadBytes {
		return nil, fmt.Errorf("%w %q: a schedule's payload is at most %d bytes", ErrInvalidSchedule, sc.Name, MaxSchedulePayloadBytes)
	}
	sc.Payload = canonical
	sc.CreatedAt = s.clock.Now().UTC().Truncate(time.Second)
	key := OwnerKey(sc.Owner)
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
			sc = *old
		case errors.Is(err, ErrScheduleLimit):
			return nil, err
		default:
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
	}
	err = s.sched.CreateSchedule(ctx, SchedulerName(key, sc.Name), sc, RuntimeFireMessage(key, sc.Name, ScheduledTimeAttribute))
	if err != nil && !errors.Is(err, ErrScheduleExists) {
		// Keep nothing Scheduler does not have: a retry starts afresh.
		if rerr := s.store.RemoveOwnerSchedule(context.WithoutCancel(ctx), key, sc.Name); rerr != nil && !errors.Is(rerr, ErrNotFound) {
			s.log.LogAttrs(ctx, slog.LevelError, "a schedule Scheduler refused is still stored; delete it to retry",
				slog.String("schedule", sc.Name), slog.String("err_types", errtypes.Of(rerr)))
		}
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return &sc, nil
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
	list, err := s.store.OwnerSchedules(ctx, OwnerKey(owner))
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
// that name. A fire already on the queue finds no definition and makes
// no job.
func (s *ScheduleService) Delete(ctx context.Context, owner, name string) error {
	if _, err := s.Get(ctx, owner, name); err != nil {
		return err
	}
	key := OwnerKey(owner)
	if err := s.sched.DeleteSchedule(ctx, SchedulerName(key, name)); err != nil {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if err := s.store.RemoveOwnerSchedule(ctx, key, name); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return nil
}

// runtimeSchedule finds the definition a runtime fire names.
func (w *Worker) runtimeSchedule(ctx context.Context, f Fire) (Schedule, bool, error) {
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
