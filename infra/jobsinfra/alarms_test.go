package jobsinfra

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/metricnames"
)

func TestEveryAlarm(t *testing.T) {
	for name, s := range environments(t) {
		alarms := s.resources("AWS::CloudWatch::Alarm")
		got := map[string]int{}
		metricName := regexp.MustCompile(`"MetricName":"([^"]+)"`)
		var settled, nearExpiry int
		for id, a := range alarms {
			p := props(a)
			if !strings.Contains(jsonString(p["AlarmActions"]), "Alarms") || !strings.Contains(jsonString(p["OKActions"]), "Alarms") {
				t.Errorf("%s: alarm %s does not notify the topic on alarm and on OK", name, p["AlarmDescription"])
			}
			for _, m := range metricName.FindAllStringSubmatch(jsonString(p), -1) {
				got[m[1]]++
			}
			if strings.Contains(jsonString(p), "Invocations") && (p["TreatMissingData"] != "breaching" || p["ComparisonOperator"] != "LessThanThreshold") {
				t.Errorf("%s: the sweeper heartbeat must fire when the sweeper does not run: %s", name, jsonString(p))
			}
			// The dead-letter alarms fire on growth (not staying in ALARM while
			// old messages sit), and on the first dead letter after a quiet
			// spell: SQS publishes no data for an idle queue, which FILL
			// counts as 0 (RATE over the gap never reached the threshold).
			if strings.Contains(jsonString(p), "ApproximateNumberOfMessagesVisible") &&
				(!strings.Contains(jsonString(p), `"Expression":"`+DLQGrowthExpression+`"`) || DLQGrowthExpression != "DIFF(FILL(dlq, 0))" || p["Threshold"] != 1.0) {
				t.Errorf("%s: the DLQ alarm must fire on growth after any quiet spell: %s", name, jsonString(p))
			}
			// A lane's DLQ is drained of job references by the sweeper: its
			// alarm watches what stays, from one hour to the next; the
			// schedules' DLQ, which nothing drains, by the minute.
			if strings.Contains(jsonString(p), "ApproximateNumberOfMessagesVisible") {
				period := 3600.0
				if strings.Contains(id, "ScheduleDeadLetters") {
					period = 60
				}
				if !strings.Contains(jsonString(p), `"Period":`+strconv.FormatFloat(period, 'f', -1, 64)+`,"Stat":"Maximum"`) {
					t.Errorf("%s: %s: want the depth's maximum per %gs: %s", name, id, period, jsonString(p))
				}
			}
			// A dead letter the sweeper settles leaves the DLQ near empty:
			// any one of them fires, from the sweeper's own metric.
			if p["MetricName"] == metricnames.DeadLettersSettled {
				settled++
				if p["Namespace"] != s.jobs.Names.MetricsNamespace || jsonString(p["Dimensions"]) != `[{"Name":"service","Value":"sweeper"}]` ||
					p["Statistic"] != "Sum" || p["Threshold"] != 1.0 || p["ComparisonOperator"] != "GreaterThanOrEqualToThreshold" {
					t.Errorf("%s: the settled dead letters alarm must fire on any one the sweeper counts: %s", name, jsonString(p))
				}
			}
			// A message near the queue's 14-day retention (10 days old) fires
			// before SQS deletes it.
			if p["MetricName"] == "ApproximateAgeOfOldestMessage" && p["Threshold"] == float64(10*24*3600) {
				nearExpiry++
			}
		}
		if settled != 1 {
			t.Errorf("%s: %d alarms on %s, want 1", name, settled, metricnames.DeadLettersSettled)
		}
		if nearExpiry != 1 {
			t.Errorf("%s: %d alarms on a message 10 days old, want 1 (one lane)", name, nearExpiry)
		}
		want := map[string]int{"ApproximateNumberOfMessagesVisible": 1, "ApproximateAgeOfOldestMessage": 2, "Errors": 5, "Throttles": 1,
			"Invocations": 1, "ThrottledRequests": 5, "5xx": 1, "Latency": 1,
			"JobsInterrupted": 2, "JobsTimedOut": 1, "JobsFailed": 1, "QueueLatency": 1, "SweepComplete": 1, "DeadLettersSettled": 1}
		for m, n := range want {
			if got[m] < n {
				t.Errorf("%s: %d alarm metrics %s, want %d (have %v)", name, got[m], m, n, got)
			}
		}
		// The job alarms read the functions' own metrics (EMF) in the
		// environment's namespace, by service: no log metric filters.
		if filters := s.resources("AWS::Logs::MetricFilter"); len(filters) != 0 {
			t.Errorf("%s: metric filters %s", name, jsonString(filters))
		}
		if !strings.Contains(jsonString(alarms), `"Namespace":"`+s.jobs.Names.MetricsNamespace+`"`) {
			t.Errorf("%s: no alarm on the environment's own metrics", name)
		}
	}
}

// One dashboard per environment, over the functions' own metrics, and every
// function writes them.
func TestDashboardAndMetrics(t *testing.T) {
	for name, s := range environments(t) {
		boards := s.resources("AWS::CloudWatch::Dashboard")
		if len(boards) != 1 {
			t.Fatalf("%s: %d dashboards", name, len(boards))
		}
		body := jsonString(boards)
		for _, w := range []string{"Jobs succeeded per minute, by kind", "Jobs failed per minute, by kind and code",
			"Run duration p50 and p99", "Queue latency p50 and p99", "Queue depth by lane", "Oldest message age (s) by lane", "Dead-letter queue depth by lane",
			"Function errors", "Function throttles", "Sweeper: re-sent", "Sweeper: duration",
			"Flow control: jobs waited, woken", "Backpressure: jobs refused at a queue cap"} {
			if !strings.Contains(body, w) {
				t.Errorf("%s: the dashboard lacks %q", name, w)
			}
		}
		// Flow control's counts, by the metrics the worker and the enqueue
		// write.
		for _, m := range []string{metricnames.JobsWaited, metricnames.JobsWoken, metricnames.JobsRefused} {
			if !regexp.MustCompile(`MetricName=[\\"]*` + m + `[\\"]`).MatchString(body) {
				t.Errorf("%s: the dashboard does not graph %s", name, m)
			}
		}
		if !strings.Contains(body, "{"+s.jobs.Names.MetricsNamespace+",") {
			t.Errorf("%s: the dashboard does not read the environment's namespace", name)
		}
		for _, fn := range FunctionNames {
			if env := jsonString(s.function(t, fn)["Environment"]); !strings.Contains(env, `"JOBS_METRICS_NAMESPACE":"`+s.jobs.Names.MetricsNamespace+`"`) {
				t.Errorf("%s %s: no metrics namespace: %s", name, fn, env)
			}
		}
	}
}

// The alarms and the dashboard read only metrics the functions write: every
// name they give in the environment's namespace is one internal/metricnames
// defines (pkg/jobs's tests hold the writers to the same list).
func TestAlarmsAndDashboardReadWrittenMetrics(t *testing.T) {
	for name, s := range environments(t) {
		ns := regexp.QuoteMeta(s.jobs.Names.MetricsNamespace)
		var read []string
		for _, a := range s.resources("AWS::CloudWatch::Alarm") {
			for _, m := range regexp.MustCompile(`"MetricName":"([^"]+)","Namespace":"`+ns+`"`).FindAllStringSubmatch(jsonString(props(a)), -1) {
				read = append(read, m[1])
			}
		}
		board := jsonString(s.resources("AWS::CloudWatch::Dashboard"))
		for _, re := range []*regexp.Regexp{
			regexp.MustCompile(`MetricName=\\"([^"\\]+)\\"`),         // SEARCH expressions
			regexp.MustCompile(`\[\\"` + ns + `\\",\\"([^"\\]+)\\"`), // plain metrics: [namespace, name, ...]
		} {
			for _, m := range re.FindAllStringSubmatch(board, -1) {
				read = append(read, m[1])
			}
		}
		if len(read) < 10 {
			t.Fatalf("%s: found %d metric names of the namespace (%v): the patterns no longer match the template", name, len(read), read)
		}
		for _, m := range read {
			if !metricnames.Known(m) {
				t.Errorf("%s: the template reads metric %q, which no function writes (not in internal/metricnames)", name, m)
			}
		}
	}
}
