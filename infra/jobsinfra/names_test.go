package jobsinfra

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// Properties that end in "Name" but name no resource of the account and
// region: a name inside its parent resource, or an existing resource that
// Config names (the construct creates neither).
var notPhysicalNames = map[string]string{
	"AWS::IAM::Policy.PolicyName":                  "an inline policy's name, inside its role",
	"AWS::CloudWatch::Alarm.MetricName":            "a metric's name, inside its namespace (collected)",
	"AWS::ApiGatewayV2::Stage.StageName":           "a stage's name, inside its API",
	"AWS::ApiGatewayV2::Authorizer.Name":           "an authorizer's name, inside its API",
	"AWS::Events::Rule.EventBusName":               "the existing bus of an EventBridgeSource",
	"Custom::S3BucketNotifications.BucketName":     "the existing bucket of an S3Source",
	"AWS::Lambda::EventSourceMapping.FunctionName": "a reference to a function",
	"AWS::Lambda::Permission.FunctionName":         "a reference to a function",
}

// physicalNames walks a template generically: every top-level property of
// a resource whose key ends in "Name" (TableName, QueueName, FunctionName,
// RoleName, Name, GroupName, DashboardName, LogGroupName, AlarmName,
// TopicName...), and every "Namespace" at any depth but AWS's own, resolved
// to the string CloudFormation would make of it. A schedule's name is
// its group's and its own (it is unique within its group only). A
// reference to a resource of the stack resolves to a name CloudFormation
// generates from the stack's name, unique by construction.
func physicalNames(t *testing.T, stackName string, tmpl map[string]any) map[string]string {
	t.Helper()
	resources := tmpl["Resources"].(map[string]any)
	var resolve func(v any) string
	resolve = func(v any) string {
		switch x := v.(type) {
		case string:
			return x
		case map[string]any:
			if ref, ok := x["Ref"].(string); ok {
				switch {
				case ref == "AWS::StackName":
					return stackName
				case strings.HasPrefix(ref, "AWS::"):
					return "<" + ref + ">"
				}
				r := resources[ref].(map[string]any)
				if r["Type"] == "AWS::Scheduler::ScheduleGroup" {
					return resolve(props(r)["Name"])
				}
				return stackName + "-" + ref + "-GENERATED"
			}
			if att, ok := x["Fn::GetAtt"].([]any); ok {
				return stackName + "-" + fmt.Sprint(att[0]) + "-GENERATED"
			}
			if join, ok := x["Fn::Join"].([]any); ok {
				var parts []string
				for _, p := range join[1].([]any) {
					parts = append(parts, resolve(p))
				}
				return strings.Join(parts, join[0].(string))
			}
		}
		t.Fatalf("%s: a name that is not modelled: %s", stackName, jsonString(v))
		return ""
	}
	out := map[string]string{} // name -> where
	var namespaces func(v any, where string)
	namespaces = func(v any, where string) {
		switch x := v.(type) {
		case map[string]any:
			for k, y := range x {
				if ns, ok := y.(string); ok && k == "Namespace" && !strings.HasPrefix(ns, "AWS/") {
					out["namespace "+ns] = where
				}
				namespaces(y, where)
			}
		case []any:
			for _, y := range x {
				namespaces(y, where)
			}
		}
	}
	for id, r := range resources {
		res := r.(map[string]any)
		typ := res["Type"].(string)
		p := props(res)
		for k, v := range p {
			if !strings.HasSuffix(k, "Name") || notPhysicalNames[typ+"."+k] != "" {
				continue
			}
			name := resolve(v)
			if typ == "AWS::Scheduler::Schedule" {
				if k != "Name" {
					continue
				}
				name = resolve(p["GroupName"]) + "/" + name
			}
			out[typ+"."+k+" "+name] = id
		}
		namespaces(p, id)
	}
	return out
}

// Two services that both call their environment "prod" deploy the
// construct into one account and region: two stacks of one app, whose
// every explicit physical name differs (so neither deployment fails on,
// nor takes over, the other's schedule groups, dashboard, API name or
// metrics). A third stack with a name of 120 characters keeps every name
// within its service's limits.
func TestTwoDeploymentsShareAnAccount(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Context: cdkContext(t), Outdir: jsii.String(t.TempDir())})
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	schedules, err := exampleSchedules()
	if err != nil {
		t.Fatal(err)
	}
	long := "billing-" + strings.Repeat("x", 107) + "-prod-eu"
	stacks := map[string]*Jobs{}
	for _, name := range []string{"orders-prod", "billing-prod", long} {
		cfg := ProdConfig("prod")
		cfg.AlarmEmail = "oncall@example.com"
		cfg.CustomerManagedKey = true
		cfg.S3Sources = []S3Source{{BucketName: "uploads-example"}}
		cfg.EventBridgeSource = []EventBridgeSource{{Bus: "shop", Sources: []string{"shop.orders"}}}
		stack := awscdk.NewStack(app, jsii.String(name), &awscdk.StackProps{
			Env: &awscdk.Environment{Account: jsii.String(testAccount), Region: jsii.String(testRegion)},
		})
		stacks[name] = NewJobs(stack, "Jobs", &JobsProps{Config: cfg, Bootstraps: fakeBootstraps(t), Schedules: schedules})
	}
	seen := map[string]string{} // name -> stack
	for stackName, j := range stacks {
		tmpl := template(t, awscdk.Stack_Of(j))
		names := physicalNames(t, stackName, tmpl)
		if len(names) < 6 { // two groups, a schedule, the dashboard, the API, the namespace
			t.Errorf("%s: only %d physical names found: %v", stackName, len(names), names)
		}
		for name := range names {
			if other, ok := seen[name]; ok {
				t.Errorf("%s and %s both name %s", other, stackName, name)
			}
			seen[name] = stackName
		}
		checkLimits(t, j.Names)
		checkRuntimeAgrees(t, stackName, j.Names, tmpl)
	}
	if testing.Verbose() {
		list := make([]string, 0, len(seen))
		for n, s := range seen {
			list = append(list, s[:min(len(s), 16)]+": "+n)
		}
		sort.Strings(list)
		t.Log("\n  " + strings.Join(list, "\n  "))
	}
}

// template synthesizes stack; a panic (such as a cdk-nag error) fails t.
func template(t *testing.T, stack awscdk.Stack) (tmpl map[string]any) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("%s: %v", *stack.StackName(), p)
		}
	}()
	return *assertions.Template_FromStack(stack, nil).ToJSON()
}

var (
	scheduleGroupName = regexp.MustCompile(`^[0-9A-Za-z_.-]{1,64}$`)
	dashboardName     = regexp.MustCompile(`^[A-Za-z0-9_-]{1,255}$`)
	metricNamespace   = regexp.MustCompile(`^[0-9A-Za-z._/#: -]{1,255}$`)
)

// checkLimits checks each name against its service's length and
// characters.
func checkLimits(t *testing.T, n Names) {
	t.Helper()
	for _, g := range []string{n.ScheduleGroup, n.RuntimeScheduleGroup} {
		if !scheduleGroupName.MatchString(g) {
			t.Errorf("schedule group %q: want 1-64 of [0-9A-Za-z_.-]", g)
		}
	}
	if !dashboardName.MatchString(n.Dashboard) {
		t.Errorf("dashboard %q: want 1-255 of [A-Za-z0-9_-]", n.Dashboard)
	}
	if !metricNamespace.MatchString(n.MetricsNamespace) || strings.HasPrefix(n.MetricsNamespace, "AWS/") {
		t.Errorf("metric namespace %q: want 1-255 of [0-9A-Za-z._/#: -], not AWS/", n.MetricsNamespace)
	}
	if len(n.API) == 0 || len(n.API) > 128 {
		t.Errorf("API name %q: want 1-128 characters", n.API)
	}
}

// checkRuntimeAgrees checks that what the functions are told is what the
// template names: every function writes its metrics to the namespace the
// alarms watch, and the schedules function changes schedules in the
// runtime group the template creates.
func checkRuntimeAgrees(t *testing.T, stackName string, n Names, tmpl map[string]any) {
	t.Helper()
	resources := tmpl["Resources"].(map[string]any)
	functions, alarms := 0, 0
	for _, r := range resources {
		res := r.(map[string]any)
		switch res["Type"] {
		case "AWS::Lambda::Function":
			env, _ := props(res)["Environment"].(map[string]any)
			vars, _ := env["Variables"].(map[string]any)
			if vars == nil || vars["JOBS_FUNCTION"] == nil {
				continue // CDK's own (the bucket notifications handler)
			}
			functions++
			if vars["JOBS_METRICS_NAMESPACE"] != n.MetricsNamespace {
				t.Errorf("%s %s: JOBS_METRICS_NAMESPACE %v, want %s", stackName, vars["JOBS_FUNCTION"], vars["JOBS_METRICS_NAMESPACE"], n.MetricsNamespace)
			}
			if ref, ok := vars["JOBS_SCHEDULE_GROUP"].(map[string]any); ok {
				group := resources[ref["Ref"].(string)].(map[string]any)
				if group["Type"] != "AWS::Scheduler::ScheduleGroup" || props(group)["Name"] != n.RuntimeScheduleGroup {
					t.Errorf("%s: JOBS_SCHEDULE_GROUP is %s, want the group %s", stackName, jsonString(group), n.RuntimeScheduleGroup)
				}
			}
		case "AWS::CloudWatch::Alarm":
			if strings.Contains(jsonString(res), `"Namespace":"`+n.MetricsNamespace+`"`) {
				alarms++
			}
		}
	}
	if functions != len(FunctionNames) || alarms < 4 {
		t.Errorf("%s: %d functions, %d alarms on the functions' metrics", stackName, functions, alarms)
	}
}

// Config.NamePrefix is the base of every physical name in place of the
// derived one; Validate refuses one that would break a name's limits.
func TestNamePrefix(t *testing.T) {
	cfg := DevConfig("dev")
	cfg.NamePrefix = "lambdajobs-dev"
	s := synth(t, cfg, nil)
	want := Names{ScheduleGroup: "lambdajobs-dev", RuntimeScheduleGroup: "lambdajobs-dev-runtime", Dashboard: "lambdajobs-dev",
		API: "lambdajobs-dev", MetricsNamespace: "lambdajobs/lambdajobs-dev", EventBus: "lambdajobs-dev-events"}
	if s.jobs.Names != want {
		t.Errorf("names %+v, want %+v", s.jobs.Names, want)
	}
	names := physicalNames(t, "test-dev", s.raw)
	for _, n := range []string{"AWS::Scheduler::ScheduleGroup.Name lambdajobs-dev", "AWS::Scheduler::ScheduleGroup.Name lambdajobs-dev-runtime",
		"AWS::CloudWatch::Dashboard.DashboardName lambdajobs-dev", "AWS::ApiGatewayV2::Api.Name lambdajobs-dev", "namespace lambdajobs/lambdajobs-dev"} {
		if _, ok := names[n]; !ok {
			t.Errorf("the template lacks %s: %v", n, names)
		}
	}
	for _, bad := range []string{"has space", "dots.are.not.dashboard.names", "-leading", strings.Repeat("a", nameBaseMaxLength+1)} {
		c := DevConfig("dev")
		c.NamePrefix = bad
		if err := c.Validate(); err == nil {
			t.Errorf("NamePrefix %q accepted", bad)
		}
	}
	c := DevConfig("dev")
	c.NamePrefix = strings.Repeat("a", nameBaseMaxLength)
	if err := c.Validate(); err != nil {
		t.Errorf("NamePrefix of %d characters: %v", nameBaseMaxLength, err)
	}
}
