package jobsinfra

import (
	"fmt"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// schedules creates the environment's two schedule groups (declared, and
// runtime: the only one the schedules function may change) and one
// EventBridge Scheduler schedule per declared periodic job
// (JobsProps.Schedules):
// flexible time window off, a role that may only send to the queue (and
// to the schedules' own dead-letter queue), Scheduler's retries up to
// Config.ScheduleMaxEventAge, then that DLQ, which has an alarm. Each
// schedule's target input is wire.FireMessage with Scheduler's
// scheduled-time context attribute, so the worker derives one job per fire.
func (s *Jobs) schedules(list []jobs.Schedule) {
	checkSchedules(list)
	s.ScheduleGroup = awsscheduler.NewCfnScheduleGroup(s.Construct, jsii.String("ScheduleGroup"), &awsscheduler.CfnScheduleGroupProps{
		Name: jsii.String(s.Names.ScheduleGroup),
	})
	s.RuntimeScheduleGroup = awsscheduler.NewCfnScheduleGroup(s.Construct, jsii.String("RuntimeScheduleGroup"), &awsscheduler.CfnScheduleGroupProps{
		Name: jsii.String(s.Names.RuntimeScheduleGroup),
	})
	s.ScheduleDLQ = s.queue("ScheduleDeadLetters", "schedule-dead-letters", &awssqs.QueueProps{
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
	}, nil)
	cdknag.NagSuppressions_AddResourceSuppressions(s.ScheduleDLQ, &[]*cdknag.NagPackSuppression{{
		Id:     jsii.String("AwsSolutions-SQS3"),
		Reason: jsii.String("This queue is the dead-letter queue of the environment's EventBridge Scheduler schedules."),
	}}, jsii.Bool(true))
	s.schedulerRole()
	s.declaredSchedules(list)
}

// checkSchedules panics if a declared schedule does not hold or two share
// a name.
func checkSchedules(list []jobs.Schedule) {
	seen := map[string]bool{}
	for _, sc := range list {
		if err := sc.Check(); err != nil {
			panic("jobsinfra: " + err.Error())
		}
		if seen[sc.Name] {
			panic(fmt.Sprintf("jobsinfra: schedule %q is declared twice", sc.Name))
		}
		seen[sc.Name] = true
	}
}

// scheduleARN is the ARN of a Scheduler resource of this stack's account
// and region ("schedule", "GROUP/NAME").
func (s *Jobs) scheduleARN(kind, name string) *string {
	stack := awscdk.Stack_Of(s.Construct)
	return awscdk.Fn_Join(jsii.String(""), &[]*string{jsii.String("arn:"), awscdk.Aws_PARTITION(), jsii.String(":scheduler:"),
		stack.Region(), jsii.String(":"), stack.Account(), jsii.String(":" + kind + "/" + name)})
}

// schedulerRole is the role Scheduler sends fires with. Scheduler assumes
// it only for this account's schedules of the environment's groups (the
// confused-deputy guard AWS recommends); it sends fires to the queue (one
// of its known senders), and those it cannot deliver to the schedules' DLQ.
func (s *Jobs) schedulerRole() {
	role := awsiam.NewRole(s.Construct, jsii.String("SchedulerRole"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("scheduler.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]any{
				"StringEquals": map[string]any{"aws:SourceAccount": awscdk.Stack_Of(s.Construct).Account()},
				"ArnLike": map[string]any{"aws:SourceArn": &[]*string{
					s.scheduleARN("schedule", s.Names.ScheduleGroup+"/*"), s.scheduleARN("schedule", s.Names.RuntimeScheduleGroup+"/*"),
				}},
			},
		}),
		Description: jsii.String("lambdajobs " + s.cfg.Name + ": EventBridge Scheduler sends schedule fires to the queue"),
	})
	s.SchedulerRole = role
	// What it may do is its grants in internal/deploy.
	s.grant(grantee{principal: role, role: deploy.Scheduler})
}

// declaredSchedules creates one schedule per declared periodic job, in
// the declared group.
func (s *Jobs) declaredSchedules(list []jobs.Schedule) {
	for i, sc := range list {
		awsscheduler.NewCfnSchedule(s.Construct, jsii.String(fmt.Sprintf("Schedule%d", i)), &awsscheduler.CfnScheduleProps{
			Name:                       jsii.String(sc.Name),
			GroupName:                  s.ScheduleGroup.Ref(), // the group's name, and a dependency on it
			Description:                jsii.String(fmt.Sprintf("lambdajobs %s: enqueues a %s job", s.cfg.Name, sc.Kind)),
			ScheduleExpression:         jsii.String(sc.Expression),
			ScheduleExpressionTimezone: jsii.String(sc.TimeZone),
			FlexibleTimeWindow:         &awsscheduler.CfnSchedule_FlexibleTimeWindowProperty{Mode: jsii.String("OFF")},
			State:                      jsii.String("ENABLED"),
			Target: &awsscheduler.CfnSchedule_TargetProperty{
				Arn:              s.Queue.QueueArn(),
				RoleArn:          s.SchedulerRole.RoleArn(),
				Input:            jsii.String(wire.FireMessage(sc.Name, wire.ScheduledTimeAttribute)),
				DeadLetterConfig: &awsscheduler.CfnSchedule_DeadLetterConfigProperty{Arn: s.ScheduleDLQ.QueueArn()},
				RetryPolicy: &awsscheduler.CfnSchedule_RetryPolicyProperty{
					MaximumEventAgeInSeconds: jsii.Number(s.cfg.ScheduleMaxEventAge.Seconds()),
					MaximumRetryAttempts:     jsii.Number(185),
				},
			},
		})
	}
}

// scheduleAlarm watches the schedules' dead-letter queue.
func (s *Jobs) scheduleAlarm() {
	if s.ScheduleDLQ == nil {
		return
	}
	s.add(alarm{id: "ScheduleDeadLettersAlarm", description: "EventBridge Scheduler could not deliver a schedule's fire to the queue within " +
		s.cfg.ScheduleMaxEventAge.String() + ": that fire's job was never enqueued.",
		metric: dlqGrowth(s.ScheduleDLQ, time.Minute), threshold: 1})
}

// defaultScheduleMaxEventAge is how long Scheduler retries a fire.
var defaultScheduleMaxEventAge = deploy.EnvScheduleMaxEventAge.DefaultValue()
