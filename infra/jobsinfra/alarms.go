package jobsinfra

import (
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/lambdajobs/lambdajobs/internal/metricnames"
)

// alarm is one CloudWatch alarm of the construct.
type alarm struct {
	id, description string
	metric          awscloudwatch.IMetric
	threshold       float64
	periods         float64 // evaluation periods (at least 1)
	below           bool    // fires below the threshold, not at or above it
	breached        bool    // missing data counts as breaching (a heartbeat)
}

// add creates the alarm, notifying the alarm topic when it fires and when
// it ends.
func (s *Jobs) add(a alarm) {
	cmp := awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD
	if a.below {
		cmp = awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD
	}
	missing := awscloudwatch.TreatMissingData_NOT_BREACHING
	if a.breached {
		missing = awscloudwatch.TreatMissingData_BREACHING
	}
	cw := awscloudwatch.NewAlarm(s.Construct, jsii.String(a.id), &awscloudwatch.AlarmProps{
		AlarmDescription:   jsii.String(a.description),
		Metric:             a.metric,
		Threshold:          jsii.Number(a.threshold),
		EvaluationPeriods:  jsii.Number(max(a.periods, 1)),
		ComparisonOperator: cmp,
		TreatMissingData:   missing,
	})
	action := awscloudwatchactions.NewSnsAction(s.AlarmTopic)
	cw.AddAlarmAction(action)
	cw.AddOkAction(action)
}

// alarms sends to one topic, with OK actions, so whoever is told of a
// problem is told of its end: the sweeper settled dead letters, or a
// dead-letter queue grows; the oldest queued message is old, or near the
// queue's retention; any function errs; the worker is throttled; the
// sweeper stops running (a dead sweeper means lost dispatches never
// recover); DynamoDB throttles; the API answers 5xx or slowly; jobs fail
// interrupted or timed out (jobAlarms).
func (s *Jobs) alarms() {
	cfg := s.cfg
	if cfg.AlarmTopicARN != "" {
		s.AlarmTopic = awssns.Topic_FromTopicArn(s.Construct, jsii.String("Alarms"), jsii.String(cfg.AlarmTopicARN))
	} else {
		topic := awssns.NewTopic(s.Construct, jsii.String("Alarms"), &awssns.TopicProps{EnforceSSL: jsii.Bool(true)})
		if cfg.AlarmEmail != "" {
			topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(cfg.AlarmEmail), nil))
		}
		s.AlarmTopic = topic
	}
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	five := awscdk.Duration_Minutes(jsii.Number(5))
	sum := &awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Sum")}
	s.laneAlarms()
	for _, name := range FunctionNames {
		s.add(alarm{id: strings.ToUpper(name[:1]) + name[1:] + "ErrorsAlarm", description: "The " + name + " function failed (an invocation, not a job).",
			metric: s.Functions[name].MetricErrors(sum), threshold: 1})
	}
	s.add(alarm{id: "WorkerThrottlesAlarm", description: "The worker function was throttled.", metric: s.Worker.MetricThrottles(sum), threshold: 1})
	s.add(alarm{id: "SweeperHeartbeatAlarm", description: "The sweeper has not run for 5 minutes: lost dispatches and dead workers' jobs are not being recovered.",
		metric:    s.Sweeper.MetricInvocations(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}),
		threshold: 1, below: true, breached: true})
	s.add(alarm{id: "TableThrottlesAlarm", description: "DynamoDB throttled requests to the jobs table.",
		metric: s.Table.MetricThrottledRequestsForOperations(&awsdynamodb.OperationsMetricOptions{Period: minute, Operations: &[]awsdynamodb.Operation{
			awsdynamodb.Operation_PUT_ITEM, awsdynamodb.Operation_GET_ITEM, awsdynamodb.Operation_UPDATE_ITEM,
			awsdynamodb.Operation_QUERY, awsdynamodb.Operation_TRANSACT_WRITE_ITEMS,
		}}), threshold: 1})
	apiMetric := func(name, stat string) awscloudwatch.Metric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String("AWS/ApiGateway"), MetricName: jsii.String(name),
			DimensionsMap: &map[string]*string{"ApiId": s.API.ApiId(), "Stage": jsii.String("$default")},
			Period:        minute, Statistic: jsii.String(stat),
		})
	}
	s.scheduleAlarm()
	s.add(alarm{id: "Api5xxAlarm", description: "The API answered 5xx: a dependency is down or a function fails.", metric: apiMetric("5xx", "Sum"), threshold: 5})
	s.add(alarm{id: "ApiLatencyAlarm", description: "The API's p99 latency was over 2 s for 5 minutes.", metric: apiMetric("Latency", "p99"), threshold: 2000, periods: 5})
	s.jobAlarms()
}

// nearExpiryAge is the age of a queue's oldest message at which its
// MessagesNearExpiryAlarm fires: 4 days before the queue's retention
// (sqsqueue.Spec: 14 days, SQS's maximum) would delete it, and with it the
// only record that its job is due.
const nearExpiryAge = 10 * 24 * time.Hour

// laneAlarms watch each lane's queues (the default lane's alarms keep
// their ids): its dead-letter queue grows over an hour (what the sweeper
// leaves there; the dead letters it settles have their own alarm,
// deadLetterAlarms); its oldest message is older than
// Config.OldestMessageAlarm, plus how much longer the lane's worker runs
// than the default lane's (a long lane's message is in flight for a whole
// run); its oldest message nears the queue's retention (nearExpiryAge);
// and, for the other lanes, its worker errs or is throttled.
func (s *Jobs) laneAlarms() {
	cfg := s.cfg
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	sum := &awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Sum")}
	for _, name := range s.laneOrder {
		lane, id, which := s.Lanes[name], laneID(name), "the"
		if name != "" {
			which = "the " + name + " lane's"
		}
		oldest := cfg.OldestMessageAlarm + max(0, lane.Config.WorkerTimeout-cfg.WorkerTimeout)
		s.add(alarm{id: id + "DeadLettersAlarm", description: "Messages stay in " + which + " dead-letter queue: its depth grew over the last hour. The sweeper settles the job references there; what stays (foreign messages, envelopes, schedule fires) is the operators' to redrive or leave.",
			metric: dlqGrowth(lane.DLQ, time.Hour), threshold: 1})
		s.add(alarm{id: id + "OldestMessageAlarm", description: fmt.Sprintf("The oldest message of %s queue is older than %v: its workers are not keeping up.", which, oldest),
			metric:    lane.Queue.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum")}),
			threshold: oldest.Seconds()})
		s.add(alarm{id: id + "MessagesNearExpiryAlarm", description: fmt.Sprintf("The oldest message of %s queue is older than %d days: at 14 days SQS deletes it, and with it its job's only record of being due.", which, int(nearExpiryAge.Hours()/24)),
			metric:    lane.Queue.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(5)), Statistic: jsii.String("Maximum")}),
			threshold: nearExpiryAge.Seconds()})
		if name == "" {
			continue // the worker's own alarms, with the other functions'
		}
		s.add(alarm{id: id + "WorkerErrorsAlarm", description: "The " + name + " lane's worker failed (an invocation, not a job).",
			metric: lane.Worker.MetricErrors(sum), threshold: 1})
		s.add(alarm{id: id + "WorkerThrottlesAlarm", description: "The " + name + " lane's worker was throttled.", metric: lane.Worker.MetricThrottles(sum), threshold: 1})
	}
}

// jobAlarms watch the functions' own metrics (Embedded Metric Format;
// each also published under the service dimension alone, which alarms
// can watch).
func (s *Jobs) jobAlarms() {
	cfg := s.cfg
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	jobsMetric := func(name, service, stat string) awscloudwatch.Metric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String(s.Names.MetricsNamespace), MetricName: jsii.String(name),
			DimensionsMap: &map[string]*string{metricnames.Service: jsii.String(service)},
			Period:        minute, Statistic: jsii.String(stat),
		})
	}
	s.add(alarm{id: "AbandonedJobsAlarm", description: "Jobs failed or retried as interrupted (their worker died) or timed out (their handler overran).",
		metric: awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String("FILL(wi, 0) + FILL(wt, 0) + FILL(si, 0)"),
			UsingMetrics: &map[string]awscloudwatch.IMetric{
				"wi": jobsMetric(metricnames.JobsInterrupted, "worker", "Sum"), "wt": jobsMetric(metricnames.JobsTimedOut, "worker", "Sum"),
				"si": jobsMetric(metricnames.JobsInterrupted, "sweeper", "Sum"),
			},
			Period: minute, Label: jsii.String("jobs interrupted or timed out per minute"),
		}), threshold: 1})
	s.add(alarm{id: "JobFailuresAlarm", description: fmt.Sprintf("%d or more jobs failed in a minute (any kind, any code).", cfg.FailuresAlarm),
		metric: jobsMetric(metricnames.JobsFailed, "worker", "Sum"), threshold: float64(cfg.FailuresAlarm)})
	s.add(alarm{id: "QueueLatencyAlarm", description: fmt.Sprintf("Jobs waited more than %v from enqueue (or run_at) to start (p99, 5 minutes).", cfg.QueueLatencyAlarm),
		metric: jobsMetric(metricnames.QueueLatency, "worker", "p99"), threshold: float64(cfg.QueueLatencyAlarm.Milliseconds()), periods: 5})
	s.add(alarm{id: "SettledDeadLettersAlarm", description: "The sweeper settled dead letters (any lane): jobs whose message ran out of receives, so a worker could not settle them. See DeadLettersSettled by kind and lane.",
		metric: jobsMetric(metricnames.DeadLettersSettled, "sweeper", "Sum"), threshold: 1})
	s.add(alarm{id: "SweepIncompleteAlarm", description: "Sweeps ran out of time for 5 minutes: more unfinished jobs are due than one sweep can settle.",
		metric: jobsMetric(metricnames.SweepComplete, "sweeper", "Minimum"), threshold: 1, periods: 5, below: true})
}

// DLQGrowthExpression is the metric math of the dead-letter alarms: the
// growth of a dead-letter queue's visible count from one period to the
// next (each period's maximum), an idle queue's missing data points
// counted as 0. SQS publishes a queue's metrics only while the queue is
// active, so after a quiet spell the first data point of a new dead letter
// follows a gap: RATE over the raw metric divides by the gap and may never
// reach one message a period, while this fires. It clears once the queue
// stops growing, rather than staying in ALARM while old messages sit
// there.
//
// A lane's dead-letter queue is watched over an hour: the sweeper drains
// the job references from it every minute, so a depth that grows from
// one hour to the next is what it leaves there (foreign messages), and a
// dead job's reference is seen by SettledDeadLettersAlarm instead, though
// the queue stays near empty. The schedules' dead-letter queue, which
// nothing drains, is watched by the minute.
const DLQGrowthExpression = "DIFF(FILL(dlq, 0))"

// dlqGrowth is DLQGrowthExpression over a queue, by period.
func dlqGrowth(q awssqs.IQueue, period time.Duration) awscloudwatch.IMetric {
	p, per := dur(period), "hour"
	if period < time.Hour {
		per = "minute"
	}
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: jsii.String(DLQGrowthExpression),
		UsingMetrics: &map[string]awscloudwatch.IMetric{
			"dlq": q.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: p, Statistic: jsii.String("Maximum")}),
		},
		Period: p, Label: jsii.String("growth of the DLQ's depth per " + per),
	})
}
