// Package schedulerapi is driver.Scheduler over EventBridge Scheduler: the
// runtime schedules' Scheduler schedules, in one group, each sending its
// fires to the jobs queue with the role the CDK construct made for it.
package schedulerapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// API is the part of the Scheduler client used. The schedules function's
// role needs scheduler:CreateSchedule, GetSchedule, UpdateSchedule and
// DeleteSchedule on the runtime group's schedules, and iam:PassRole on
// the role given to Scheduler (the CDK construct grants them).
type API interface {
	CreateSchedule(ctx context.Context, in *scheduler.CreateScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error)
	GetSchedule(ctx context.Context, in *scheduler.GetScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.GetScheduleOutput, error)
	UpdateSchedule(ctx context.Context, in *scheduler.UpdateScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.UpdateScheduleOutput, error)
	DeleteSchedule(ctx context.Context, in *scheduler.DeleteScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error)
}

// Config names the group and the target of every schedule.
type Config struct {
	Group    string // the runtime schedules' group
	QueueARN string // the jobs queue
	RoleARN  string // the role Scheduler sends with
	DLQARN   string // the fires' dead-letter queue
	// MaxEventAge bounds Scheduler's retries of a fire (1 minute to 24
	// hours; default DefaultMaxEventAge).
	MaxEventAge time.Duration
}

// DefaultMaxEventAge is how long Scheduler retries a fire when
// Config.MaxEventAge is zero.
const DefaultMaxEventAge = time.Hour

// Scheduler implements driver.Scheduler.
type Scheduler struct {
	api API
	cfg Config
}

var _ driver.Scheduler = (*Scheduler)(nil)

// New returns a Scheduler.
func New(api API, cfg Config) (*Scheduler, error) {
	if cfg.Group == "" || cfg.QueueARN == "" || cfg.RoleARN == "" || cfg.DLQARN == "" {
		return nil, errors.New("schedulerapi: the group, queue, role and dead-letter queue are required")
	}
	if cfg.MaxEventAge == 0 {
		cfg.MaxEventAge = DefaultMaxEventAge
	}
	return &Scheduler{api: api, cfg: cfg}, nil
}

// CreateSchedule creates a schedule as the construct creates the declared
// ones: flexible window off, retries up to MaxEventAge, then the DLQ.
func (s *Scheduler) CreateSchedule(ctx context.Context, id string, sc jobs.Schedule, message string) error {
	_, err := s.api.CreateSchedule(ctx, &scheduler.CreateScheduleInput{
		Name:                       aws.String(id),
		GroupName:                  aws.String(s.cfg.Group),
		ScheduleExpression:         aws.String(sc.Expression),
		ScheduleExpressionTimezone: aws.String(sc.TimeZone),
		FlexibleTimeWindow:         s.window(),
		State:                      types.ScheduleStateEnabled,
		Description:                description(sc),
		ActionAfterCompletion:      types.ActionAfterCompletionNone,
		Target:                     s.target(message),
	})
	var conflict *types.ConflictException
	if errors.As(err, &conflict) {
		return driver.ErrExists
	}
	if err != nil {
		return fmt.Errorf("schedulerapi: create %s: %w", id, err)
	}
	return nil
}

// UpdateSchedule replaces a schedule with the one CreateSchedule creates
// (Scheduler's update replaces every field); jobs.ErrNotFound when there
// is none.
func (s *Scheduler) UpdateSchedule(ctx context.Context, id string, sc jobs.Schedule, message string) error {
	_, err := s.api.UpdateSchedule(ctx, &scheduler.UpdateScheduleInput{
		Name:                       aws.String(id),
		GroupName:                  aws.String(s.cfg.Group),
		ScheduleExpression:         aws.String(sc.Expression),
		ScheduleExpressionTimezone: aws.String(sc.TimeZone),
		FlexibleTimeWindow:         s.window(),
		State:                      types.ScheduleStateEnabled,
		Description:                description(sc),
		ActionAfterCompletion:      types.ActionAfterCompletionNone,
		Target:                     s.target(message),
	})
	var missing *types.ResourceNotFoundException
	if errors.As(err, &missing) {
		return jobs.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("schedulerapi: update %s: %w", id, err)
	}
	return nil
}

// GetSchedule reads a schedule: what it does, compared with what
// CreateSchedule sets (driver.HeldSchedule); jobs.ErrNotFound when there is
// none.
func (s *Scheduler) GetSchedule(ctx context.Context, id string) (*driver.HeldSchedule, error) {
	out, err := s.api.GetSchedule(ctx, &scheduler.GetScheduleInput{Name: aws.String(id), GroupName: aws.String(s.cfg.Group)})
	var missing *types.ResourceNotFoundException
	if errors.As(err, &missing) {
		return nil, jobs.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("schedulerapi: get %s: %w", id, err)
	}
	h := &driver.HeldSchedule{
		Expression: aws.ToString(out.ScheduleExpression),
		TimeZone:   aws.ToString(out.ScheduleExpressionTimezone),
	}
	if h.TimeZone == "" {
		h.TimeZone = "UTC"
	}
	if out.Target != nil {
		h.Message = aws.ToString(out.Target.Input)
	}
	h.TargetMatches = out.State == types.ScheduleStateEnabled && out.FlexibleTimeWindow != nil &&
		out.FlexibleTimeWindow.Mode == types.FlexibleTimeWindowModeOff && sameTarget(out.Target, s.target(""))
	return h, nil
}

// window is the flexible time window of every schedule: off.
func (s *Scheduler) window() *types.FlexibleTimeWindow {
	return &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff}
}

// target is the target of a schedule firing message.
func (s *Scheduler) target(message string) *types.Target {
	return &types.Target{
		Arn:              aws.String(s.cfg.QueueARN),
		RoleArn:          aws.String(s.cfg.RoleARN),
		Input:            aws.String(message),
		DeadLetterConfig: &types.DeadLetterConfig{Arn: aws.String(s.cfg.DLQARN)},
		RetryPolicy: &types.RetryPolicy{
			MaximumEventAgeInSeconds: aws.Int32(int32(s.cfg.MaxEventAge / time.Second)),
			MaximumRetryAttempts:     aws.Int32(maxRetryAttempts),
		},
	}
}

// maxRetryAttempts is Scheduler's most: MaxEventAge bounds them first.
const maxRetryAttempts = 185

func description(sc jobs.Schedule) *string {
	return aws.String("lambdajobs runtime schedule: enqueues a " + sc.Kind + " job")
}

// sameTarget compares what a target does (its queue, role, dead-letter
// queue and retries), not its input (compared on its own).
func sameTarget(got, want *types.Target) bool {
	if got == nil || got.DeadLetterConfig == nil || got.RetryPolicy == nil || got.SqsParameters != nil {
		return false
	}
	return aws.ToString(got.Arn) == aws.ToString(want.Arn) &&
		aws.ToString(got.RoleArn) == aws.ToString(want.RoleArn) &&
		aws.ToString(got.DeadLetterConfig.Arn) == aws.ToString(want.DeadLetterConfig.Arn) &&
		aws.ToInt32(got.RetryPolicy.MaximumEventAgeInSeconds) == aws.ToInt32(want.RetryPolicy.MaximumEventAgeInSeconds) &&
		aws.ToInt32(got.RetryPolicy.MaximumRetryAttempts) == aws.ToInt32(want.RetryPolicy.MaximumRetryAttempts)
}

// DeleteSchedule deletes a schedule; one already gone is no error.
func (s *Scheduler) DeleteSchedule(ctx context.Context, id string) error {
	_, err := s.api.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{Name: aws.String(id), GroupName: aws.String(s.cfg.Group)})
	var missing *types.ResourceNotFoundException
	if err != nil && !errors.As(err, &missing) {
		return fmt.Errorf("schedulerapi: delete %s: %w", id, err)
	}
	return nil
}
