package jobsinfra

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/jsii-runtime-go"

	"github.com/lambdajobs/lambdajobs/internal/metricnames"
)

// dashboard draws an environment on one CloudWatch dashboard: jobs by
// status and kind, run duration and queue latency, flow control (jobs
// waiting and woken, the worker's; jobs refused at a cap, the enqueue's),
// the queue and its DLQ, the functions, the sweeper.
func (s *Jobs) dashboard() {
	ns := s.Names.MetricsNamespace
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	search := func(label, metric, stat string) awscloudwatch.IMetric {
		return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String(fmt.Sprintf(`SEARCH('{%s,kind,service} MetricName="%s" service="worker"', '%s', 60)`, ns, metric, stat)),
			Label:      jsii.String(label), Period: minute,
		})
	}
	graph := func(title string, metrics ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Left: &metrics, Width: jsii.Number(12)})
	}
	sum := &awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Sum")}
	var fnErrors, fnThrottles []awscloudwatch.IMetric
	for _, name := range FunctionNames {
		fnErrors = append(fnErrors, s.Functions[name].MetricErrors(sum))
		fnThrottles = append(fnThrottles, s.Functions[name].MetricThrottles(sum))
	}
	// Each lane's queue depth, oldest message and dead letters, labelled
	// by lane.
	var depth, age, dead []awscloudwatch.IMetric
	for _, name := range s.laneOrder {
		lane, label := s.Lanes[name], name
		if name == "" {
			label = "default"
		} else {
			fnErrors = append(fnErrors, lane.Worker.MetricErrors(sum))
			fnThrottles = append(fnThrottles, lane.Worker.MetricThrottles(sum))
		}
		opts := func(what string) *awscloudwatch.MetricOptions {
			return &awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum"), Label: jsii.String(label + " " + what)}
		}
		depth = append(depth, lane.Queue.MetricApproximateNumberOfMessagesVisible(opts("depth")))
		age = append(age, lane.Queue.MetricApproximateAgeOfOldestMessage(opts("oldest (s)")))
		dead = append(dead, lane.DLQ.MetricApproximateNumberOfMessagesVisible(opts("dead letters")))
	}
	sweeper := func(metric, stat string) awscloudwatch.IMetric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: jsii.String(ns), MetricName: jsii.String(metric),
			DimensionsMap: &map[string]*string{metricnames.Service: jsii.String("sweeper")}, Period: minute, Statistic: jsii.String(stat)})
	}
	s.Dashboard = awscloudwatch.NewDashboard(s.Construct, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(s.Names.Dashboard),
		Widgets: &[]*[]awscloudwatch.IWidget{
			{graph("Jobs succeeded per minute, by kind", search("succeeded", metricnames.JobsSucceeded, "Sum")),
				graph("Jobs failed per minute, by kind and code", awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
					Expression: jsii.String(fmt.Sprintf(`SEARCH('{%s,code,kind,service} MetricName="%s" service="worker"', 'Sum', 60)`, ns, metricnames.JobsFailed)),
					Label:      jsii.String("failed"), Period: minute,
				}))},
			{graph("Jobs retried, timed out, interrupted, cancelled per minute",
				search("retried", metricnames.JobsRetried, "Sum"), search("timed out", metricnames.JobsTimedOut, "Sum"),
				search("interrupted", metricnames.JobsInterrupted, "Sum"), search("cancelled", metricnames.JobsCancelled, "Sum")),
				graph("Jobs started per minute, by kind", search("started", metricnames.JobsStarted, "Sum"))},
			{graph("Run duration p50 and p99 (ms), by kind", search("p50", metricnames.RunDuration, "p50"), search("p99", metricnames.RunDuration, "p99")),
				graph("Queue latency p50 and p99 (ms), by kind", search("p50", metricnames.QueueLatency, "p50"), search("p99", metricnames.QueueLatency, "p99"))},
			{graph("Flow control: jobs waited, woken per minute, by kind",
				search("waited", metricnames.JobsWaited, "Sum"), search("woken", metricnames.JobsWoken, "Sum")),
				graph("Backpressure: jobs refused at a queue cap per minute, by kind", awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
					Expression: jsii.String(fmt.Sprintf(`SEARCH('{%s,kind,service} MetricName="%s"', 'Sum', 60)`, ns, metricnames.JobsRefused)),
					Label:      jsii.String("refused"), Period: minute,
				}))},
			{graph("Queue depth by lane", depth...), graph("Oldest message age (s) by lane", age...)},
			{graph("Dead-letter queue depth by lane", dead...)},
			{graph("Function errors", fnErrors...), graph("Function throttles", fnThrottles...)},
			{graph("Sweeper: re-sent, interrupted, batches, errors",
				sweeper(metricnames.SweepResent, "Sum"), sweeper(metricnames.SweepInterrupted, "Sum"), sweeper(metricnames.SweepBatches, "Sum"), sweeper(metricnames.SweepErrors, "Sum")),
				graph("Sweeper: duration (ms) and completed sweeps", sweeper(metricnames.SweepDuration, "Maximum"), sweeper(metricnames.SweepComplete, "Sum"))},
		},
	})
}
