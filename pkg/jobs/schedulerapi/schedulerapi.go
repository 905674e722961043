// Package schedulerapi is jobs.Scheduler over EventBridge Scheduler: the
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
)

// API is the part of the Scheduler client used.
type API interface {
	CreateSchedule(ctx context.Context, in *scheduler.CreateScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error)
	DeleteSchedule(ctx context.Context, in *scheduler.DeleteScheduleInput, opts ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error)
}

// Config names the group and the target of every schedule.
type Config struct {
	Group    string // the runtime schedules' group
	QueueARN string // the jobs queue
	RoleARN  string // the role Scheduler sends with
	DLQARN   string // the fires' dead-letter queue
	// MaxEventAge bounds Scheduler's retries of a fire (1 minute to 24
	// hours; default one hour).
	MaxEventAge time.Duration
}

// Scheduler implements jobs.Scheduler.
type Scheduler struct {
	api API
	cfg Config
}

var _ jobs.Scheduler = (*Scheduler)(nil)

// New returns a Scheduler.
func New(api API, cfg Config) (*Scheduler, error) {
	if cfg.Group == "" || cfg.QueueARN == "" || cfg.RoleARN == "" || cfg.DLQARN == "" {
		return nil, errors.New("schedulerapi: the group, queue, role and dead-letter queue are required")
	}
	if cfg.MaxEventAge == 0 {
		cfg.MaxEventAge = time.Hour
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
		FlexibleTimeWindow:         &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff},
		State:                      types.ScheduleStateEnabled,
		Description:                aws.String("lambdajobs runtime schedule: enqueues a " + sc.Kind + " job"),
		ActionAfterCompletion:      types.ActionAfterCompletionNone,
		Target: &types.Target{
			Arn:              aws.String(s.cfg.QueueARN),
			RoleArn:          aws.String(s.cfg.RoleARN),
			Input:            aws.String(message),
			DeadLetterConfig: &types.DeadLetterConfig{Arn: aws.String(s.cfg.DLQARN)},
			RetryPolicy: &types.RetryPolicy{
				MaximumEventAgeInSeconds: aws.Int32(int32(s.cfg.MaxEventAge / time.Second)),
				MaximumRetryAttempts:     aws.Int32(185),
			},
		},
	})
	var conflict *types.ConflictException
	if errors.As(err, &conflict) {
		return jobs.ErrScheduleExists
	}
	if err != nil {
		return fmt.Errorf("schedulerapi: create %s: %w", id, err)
	}
	return nil
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
