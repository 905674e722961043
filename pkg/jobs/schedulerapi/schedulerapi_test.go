package schedulerapi

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// fakeAPI keeps what CreateSchedule and UpdateSchedule were sent and
// answers GetSchedule with it, stamped with dates, as Scheduler does.
type fakeAPI struct {
	got     map[string]*scheduler.GetScheduleOutput
	updates int
}

func (f *fakeAPI) CreateSchedule(_ context.Context, in *scheduler.CreateScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.CreateScheduleOutput, error) {
	if _, ok := f.got[*in.Name]; ok {
		return nil, &types.ConflictException{Message: aws.String("exists")}
	}
	now := time.Now()
	f.got[*in.Name] = &scheduler.GetScheduleOutput{
		Name: in.Name, GroupName: in.GroupName, ScheduleExpression: in.ScheduleExpression, ScheduleExpressionTimezone: in.ScheduleExpressionTimezone,
		FlexibleTimeWindow: in.FlexibleTimeWindow, State: in.State, Description: in.Description, Target: in.Target,
		CreationDate: &now, LastModificationDate: &now, Arn: aws.String("arn:aws:scheduler:us-east-1:123456789012:schedule/g/" + *in.Name),
	}
	return &scheduler.CreateScheduleOutput{}, nil
}

func (f *fakeAPI) GetSchedule(_ context.Context, in *scheduler.GetScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.GetScheduleOutput, error) {
	out, ok := f.got[*in.Name]
	if !ok {
		return nil, &types.ResourceNotFoundException{Message: aws.String("none")}
	}
	return out, nil
}

func (f *fakeAPI) UpdateSchedule(_ context.Context, in *scheduler.UpdateScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.UpdateScheduleOutput, error) {
	old, ok := f.got[*in.Name]
	if !ok {
		return nil, &types.ResourceNotFoundException{Message: aws.String("none")}
	}
	f.updates++
	later := old.CreationDate.Add(time.Hour)
	f.got[*in.Name] = &scheduler.GetScheduleOutput{
		Name: in.Name, GroupName: in.GroupName, ScheduleExpression: in.ScheduleExpression, ScheduleExpressionTimezone: in.ScheduleExpressionTimezone,
		FlexibleTimeWindow: in.FlexibleTimeWindow, State: in.State, Description: in.Description, Target: in.Target,
		CreationDate: old.CreationDate, LastModificationDate: &later, Arn: old.Arn,
	}
	return &scheduler.UpdateScheduleOutput{}, nil
}

func (f *fakeAPI) DeleteSchedule(_ context.Context, in *scheduler.DeleteScheduleInput, _ ...func(*scheduler.Options)) (*scheduler.DeleteScheduleOutput, error) {
	if _, ok := f.got[*in.Name]; !ok {
		return nil, &types.ResourceNotFoundException{Message: aws.String("none")}
	}
	delete(f.got, *in.Name)
	return &scheduler.DeleteScheduleOutput{}, nil
}

var testConfig = Config{
	Group: "lambdajobs-dev-runtime", QueueARN: "arn:aws:sqs:us-east-1:123456789012:jobs",
	RoleARN: "arn:aws:iam::123456789012:role/scheduler", DLQARN: "arn:aws:sqs:us-east-1:123456789012:schedule-dlq",
}

// GetSchedule tells the schedule CreateSchedule made (whatever its dates)
// from one that differs in anything it does: its expression, time zone,
// input, target queue, role, dead-letter queue, retries, window or state.
func TestGetScheduleComparesWhatTheScheduleDoes(t *testing.T) {
	ctx := context.Background()
	sc := jobs.Schedule{Name: "nightly", Expression: "cron(0 2 * * ? *)", TimeZone: "Europe/Paris", Kind: "report"}
	const msg = `{"lambdajobs_schedule":"nightly","owner_key":"k","scheduled_time":"<aws.scheduler.scheduled-time>"}`
	for name, c := range map[string]struct {
		change func(*scheduler.GetScheduleOutput)
		same   bool
	}{
		"as created": {func(*scheduler.GetScheduleOutput) {}, true},
		"other dates and text": {func(o *scheduler.GetScheduleOutput) {
			o.CreationDate = aws.Time(time.Unix(0, 0))
			o.Description = aws.String("x")
		}, true},
		"another expression": {func(o *scheduler.GetScheduleOutput) { o.ScheduleExpression = aws.String("cron(0 3 * * ? *)") }, false},
		"another time zone":  {func(o *scheduler.GetScheduleOutput) { o.ScheduleExpressionTimezone = aws.String("UTC") }, false},
		"another input":      {func(o *scheduler.GetScheduleOutput) { o.Target.Input = aws.String("{}") }, false},
		"another queue": {func(o *scheduler.GetScheduleOutput) {
			o.Target.Arn = aws.String("arn:aws:sqs:us-east-1:123456789012:other")
		}, false},
		"another role": {func(o *scheduler.GetScheduleOutput) {
			o.Target.RoleArn = aws.String("arn:aws:iam::123456789012:role/other")
		}, false},
		"no dead-letter queue":  {func(o *scheduler.GetScheduleOutput) { o.Target.DeadLetterConfig = nil }, false},
		"another max event age": {func(o *scheduler.GetScheduleOutput) { o.Target.RetryPolicy.MaximumEventAgeInSeconds = aws.Int32(60) }, false},
		"a flexible window":     {func(o *scheduler.GetScheduleOutput) { o.FlexibleTimeWindow.Mode = types.FlexibleTimeWindowModeFlexible }, false},
		"disabled":              {func(o *scheduler.GetScheduleOutput) { o.State = types.ScheduleStateDisabled }, false},
	} {
		t.Run(name, func(t *testing.T) {
			api := &fakeAPI{got: map[string]*scheduler.GetScheduleOutput{}}
			s, err := New(api, testConfig)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.CreateSchedule(ctx, "k-nightly", sc, msg); err != nil {
				t.Fatal(err)
			}
			c.change(api.got["k-nightly"])
			h, err := s.GetSchedule(ctx, "k-nightly")
			if err != nil {
				t.Fatal(err)
			}
			same := h.TargetMatches && h.Expression == sc.Expression && h.TimeZone == sc.TimeZone && h.Message == msg
			if same != c.same {
				t.Fatalf("held %+v: same %v, want %v", h, same, c.same)
			}
		})
	}
}

// Each operation maps Scheduler's answers to the jobs package's: a name
// taken, a schedule missing (an update of none; a delete of none is done).
func TestSchedulerAnswers(t *testing.T) {
	ctx := context.Background()
	api := &fakeAPI{got: map[string]*scheduler.GetScheduleOutput{}}
	s, err := New(api, testConfig)
	if err != nil {
		t.Fatal(err)
	}
	sc := jobs.Schedule{Name: "n", Expression: "rate(1 hour)", TimeZone: "UTC", Kind: "k"}
	if _, err := s.GetSchedule(ctx, "x-n"); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("get of none: %v", err)
	}
	if err := s.UpdateSchedule(ctx, "x-n", sc, "{}"); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("update of none: %v", err)
	}
	if err := s.CreateSchedule(ctx, "x-n", sc, "{}"); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSchedule(ctx, "x-n", sc, "{}"); !errors.Is(err, driver.ErrExists) {
		t.Fatalf("create again: %v", err)
	}
	sc.Expression = "rate(2 hours)"
	if err := s.UpdateSchedule(ctx, "x-n", sc, `{"a":1}`); err != nil || api.updates != 1 {
		t.Fatalf("update: %v (%d updates)", err, api.updates)
	}
	if h, err := s.GetSchedule(ctx, "x-n"); err != nil || h.Expression != "rate(2 hours)" || h.Message != `{"a":1}` || !h.TargetMatches {
		t.Fatalf("after update: %+v %v", h, err)
	}
	for range 2 {
		if err := s.DeleteSchedule(ctx, "x-n"); err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
}
