package jobsinfra

import (
	"strings"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/wire"
)

// Every environment but prod fires example.tick through EventBridge
// Scheduler: two groups per environment, one schedule per declared
// periodic job with its expression and time zone and no flexible window,
// in the declared group, with a target input carrying the schedule's name
// and Scheduler's scheduled time, sent with the scheduler's role, and the
// schedules' own DLQ, which has an alarm.
func TestSchedules(t *testing.T) {
	for name, s := range environments(t) {
		groups := map[string]bool{}
		for _, g := range s.resources("AWS::Scheduler::ScheduleGroup") {
			groups[props(g)["Name"].(string)] = true
		}
		declared, runtime := s.jobs.Names.ScheduleGroup, s.jobs.Names.RuntimeScheduleGroup
		if len(groups) != 2 || !groups[declared] || !groups[runtime] {
			t.Fatalf("%s: schedule groups %v, want %s and %s", name, groups, declared, runtime)
		}
		want := map[string][2]string{"example.tick": {"rate(1 minute)", "UTC"}}
		if name == "prod" {
			want = map[string][2]string{}
		}
		if name == "tuned" {
			want["nightly-report"] = [2]string{"cron(0 2 * * ? *)", "Europe/Paris"}
		}
		schedules := s.resources("AWS::Scheduler::Schedule")
		if len(schedules) != len(want) {
			t.Fatalf("%s: %d schedules, want %d", name, len(schedules), len(want))
		}
		dlqID, roleID := s.id(s.jobs.ScheduleDLQ), s.id(s.jobs.SchedulerRole)
		for _, sc := range schedules {
			p := props(sc)
			w, ok := want[p["Name"].(string)]
			if !ok || p["ScheduleExpression"] != w[0] || p["ScheduleExpressionTimezone"] != w[1] || p["State"] != "ENABLED" ||
				jsonString(p["FlexibleTimeWindow"]) != `{"Mode":"OFF"}` || jsonString(p["GroupName"]) != `{"Ref":"`+s.id(s.jobs.ScheduleGroup)+`"}` {
				t.Errorf("%s: schedule %s", name, jsonString(p))
			}
			target := p["Target"].(map[string]any)
			input := target["Input"].(string)
			// Scheduler substitutes the literal context attribute: it must
			// not be JSON-escaped (\u003c...).
			if input != wire.FireMessage(p["Name"].(string), "<aws.scheduler.scheduled-time>") || !strings.Contains(input, `"scheduled_time":"<aws.scheduler.scheduled-time>"`) {
				t.Errorf("%s: target input %s", name, input)
			}
			if !strings.Contains(jsonString(target["Arn"]), "JobsQueue") || !strings.Contains(jsonString(target["RoleArn"]), roleID) ||
				!strings.Contains(jsonString(target["DeadLetterConfig"]), dlqID) ||
				jsonString(target["RetryPolicy"]) != `{"MaximumEventAgeInSeconds":3600,"MaximumRetryAttempts":185}` {
				t.Errorf("%s: target %s", name, jsonString(target))
			}
		}
		found := false
		for id := range s.resources("AWS::CloudWatch::Alarm") {
			found = found || strings.Contains(id, "ScheduleDeadLettersAlarm")
		}
		if !found {
			t.Errorf("%s: no alarm on the schedules' DLQ", name)
		}
	}
}

// Scheduler alone assumes the scheduler's role, for this account's
// schedules of the environment's groups, and the role may only send to the
// queue and the schedules' DLQ (and use the key that encrypts them, if
// there is one); the queue's policy lets it send.
func TestSchedulerRole(t *testing.T) {
	for name, s := range environments(t) {
		dlqID, roleID := s.id(s.jobs.ScheduleDLQ), s.id(s.jobs.SchedulerRole)
		trust := jsonString(props(s.resources("AWS::IAM::Role")[roleID])["AssumeRolePolicyDocument"])
		if !strings.Contains(trust, `"Service":"scheduler.amazonaws.com"`) || !strings.Contains(trust, "aws:SourceAccount") ||
			!strings.Contains(trust, ":schedule/"+s.jobs.Names.ScheduleGroup+"/*") || !strings.Contains(trust, ":schedule/"+s.jobs.Names.RuntimeScheduleGroup+"/*") {
			t.Errorf("%s: scheduler role trust %s", name, trust)
		}
		sendsTo := map[string]bool{}
		for _, stmt := range roleStatements(s, roleID) {
			action, res := jsonString(stmt["Action"]), jsonString(stmt["Resource"])
			switch {
			case action == `"sqs:SendMessage"`:
				resources, ok := stmt["Resource"].([]any)
				if !ok {
					resources = []any{stmt["Resource"]}
				}
				for _, r := range resources {
					if r := jsonString(r); strings.Count(r, "Fn::GetAtt") == 1 && (strings.Contains(r, "JobsQueue") || strings.Contains(r, dlqID)) {
						sendsTo[r] = true
					} else {
						t.Errorf("%s: scheduler role may send to %s", name, r)
					}
				}
			case s.cfg.CustomerManagedKey && action == `["kms:Decrypt","kms:GenerateDataKey"]` && strings.Contains(res, "JobsKey"):
			default:
				t.Errorf("%s: scheduler role may %s on %s", name, action, res)
			}
		}
		if len(sendsTo) != 2 {
			t.Errorf("%s: scheduler role sends to %v, want the queue and the schedules' DLQ", name, sendsTo)
		}
		for _, qp := range s.resources("AWS::SQS::QueuePolicy") {
			if pol := jsonString(props(qp)["PolicyDocument"]); strings.Contains(pol, "OnlyKnownSenders") && !strings.Contains(pol, roleID) {
				t.Errorf("%s: the queue policy denies the scheduler's role", name)
			}
		}
	}
}

// The schedules function changes only the runtime group's schedules and
// passes only the scheduler's role, to Scheduler only; it is told that
// group's name.
func TestSchedulesFunctionChangesOnlyRuntimeSchedules(t *testing.T) {
	for name, s := range environments(t) {
		var all []string
		for _, stmt := range roleStatements(s, s.id(s.jobs.Schedules.Role())) {
			all = append(all, jsonString(stmt))
		}
		got := strings.Join(all, "\n")
		if !strings.Contains(got, `"Action":["scheduler:CreateSchedule","scheduler:DeleteSchedule","scheduler:GetSchedule","scheduler:UpdateSchedule"]`) ||
			!strings.Contains(got, ":schedule/"+s.jobs.Names.RuntimeScheduleGroup+"/*") || strings.Contains(got, ":schedule/"+s.jobs.Names.ScheduleGroup+"/*") ||
			!strings.Contains(got, `"iam:PassedToService":"scheduler.amazonaws.com"`) || !strings.Contains(got, s.id(s.jobs.SchedulerRole)) {
			t.Errorf("%s: the schedules function may:\n%s", name, got)
		}
		env := s.function(t, "schedules")["Environment"].(map[string]any)["Variables"].(map[string]any)
		if group := jsonString(env["JOBS_SCHEDULE_GROUP"]); group != `{"Ref":"`+s.id(s.jobs.RuntimeScheduleGroup)+`"}` {
			t.Errorf("%s: JOBS_SCHEDULE_GROUP %s, want the runtime group", name, group)
		}
	}
}

// roleStatements are the statements of a role's inline policies.
func roleStatements(s *environment, roleID string) []map[string]any {
	var out []map[string]any
	for _, pol := range s.resources("AWS::IAM::Policy") {
		p := props(pol)
		roles := p["Roles"].([]any)
		if !strings.Contains(jsonString(roles), `{"Ref":"`+roleID+`"}`) {
			continue
		}
		for _, st := range p["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			out = append(out, st.(map[string]any))
		}
	}
	return out
}
