package main

// The tests of this repository's CDK app (main.go, config.go, stack.go):
// which environments it builds and how. The construct's own template tests
// are beside it, in jobsinfra.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/lambdajobs/lambdajobs/infra/jobsinfra"
)

func TestMain(m *testing.M) {
	code := m.Run()
	// Without it, every run leaks a jsii-runtime temp folder.
	jsii.Close()
	os.Exit(code)
}

// cdkContext loads the feature flags from cdk.json (NewApp does not).
func cdkContext(t *testing.T) *map[string]any {
	t.Helper()
	raw, err := os.ReadFile("cdk.json")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return &c.Context
}

// bootstraps is a folder of <function>/bootstrap stand-ins.
func bootstraps(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range jobsinfra.FunctionNames {
		if err := os.MkdirAll(filepath.Join(dir, f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f, "bootstrap"), []byte("test "+f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// app is the CDK app as `cdk synth -c KEY=VALUE...` runs it, with cdk-nag
// (applyChecks) and the bootstraps in dir; unpinned unless ctx pins it.
func app(t *testing.T, dir string, ctx map[string]any) awscdk.App {
	t.Helper()
	t.Setenv("CDK_DEFAULT_ACCOUNT", "")
	t.Setenv("CDK_DEFAULT_REGION", "")
	c := cdkContext(t)
	for k, v := range ctx {
		(*c)[k] = v
	}
	(*c)["bootstraps"] = dir
	a := awscdk.NewApp(&awscdk.AppProps{Context: c, Outdir: jsii.String(t.TempDir())})
	applyChecks(a)
	return a
}

// synthApp builds the app with ctx and returns its one stack's template.
// A cdk-nag error fails the synthesis (a panic), and the test.
func synthApp(t *testing.T, ctx map[string]any) (awscdk.Stack, map[string]any) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("%v: %v", ctx, p)
		}
	}()
	a := app(t, bootstraps(t), ctx)
	if err := build(a); err != nil {
		t.Fatal(err)
	}
	stack := a.Node().FindChild(jsii.String("lambdajobs-" + ctx["env"].(string))).(awscdk.Stack)
	return stack, *assertions.Template_FromStack(stack, nil).ToJSON()
}

// noNagErrors fails t when cdk-nag's AwsSolutions pack reports an
// unsuppressed error in stack (the assertion panics, naming them).
func noNagErrors(t *testing.T, stack awscdk.Stack) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Errorf("%s: cdk-nag: %v", *stack.StackName(), p)
		}
	}()
	assertions.Annotations_FromStack(stack).HasNoError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
}

// -c messageFirst sets Config.MessageFirst (unset: nil, on); anything but
// true or false is refused rather than read as off.
func TestConfigFromContextMessageFirst(t *testing.T) {
	for value, want := range map[string]*bool{"": nil, "true": jsii.Bool(true), "false": jsii.Bool(false)} {
		c, err := configFromContext(func(key string) string { return map[string]string{"messageFirst": value}[key] })
		if err != nil || (c.MessageFirst == nil) != (want == nil) || (want != nil && *c.MessageFirst != *want) {
			t.Errorf("-c messageFirst=%q: %v %v, want %v", value, c.MessageFirst, err, want)
		}
	}
	if _, err := configFromContext(func(key string) string { return map[string]string{"messageFirst": "off"}[key] }); err == nil {
		t.Error("-c messageFirst=off was accepted")
	}
}

// -c tagIndexes=N declares N tag indexes (unset: all); a word, or a
// number past the tag slots, is refused.
func TestConfigFromContextTagIndexes(t *testing.T) {
	c, err := configFromContext(func(key string) string { return map[string]string{"tagIndexes": "1"}[key] })
	if err != nil || c.TagIndexes == nil || *c.TagIndexes != 1 {
		t.Errorf("-c tagIndexes=1: %v %v", c.TagIndexes, err)
	}
	for _, bad := range []string{"one", "4", "-1"} {
		if _, err := configFromContext(func(key string) string { return map[string]string{"tagIndexes": bad}[key] }); err == nil {
			t.Errorf("-c tagIndexes=%s was accepted", bad)
		}
	}
}

func TestConfigFor(t *testing.T) {
	if c, err := ConfigFor("staging"); err != nil || c.Name != "staging" || c.Retain {
		t.Fatalf("staging: %+v %v", c, err)
	}
	if c, err := ConfigFor("prod"); err == nil || !c.Retain || !strings.Contains(err.Error(), "alarm destination") {
		t.Fatalf("prod without an alarm destination: %+v %v, want it refused", c, err)
	}
	for _, bad := range []string{"", "Prod", "has space", strings.Repeat("a", 21)} {
		if _, err := ConfigFor(bad); err == nil {
			t.Errorf("ConfigFor(%q) accepted", bad)
		}
	}
}

// The app refuses to synthesize prod without an alarm destination or
// unpinned to an account and region, and pins it when told.
func TestAppPinsProd(t *testing.T) {
	dir := bootstraps(t)
	if err := build(app(t, dir, map[string]any{"env": "prod", "account": "123456789012", "region": "us-east-1"})); err == nil || !strings.Contains(err.Error(), "alarm destination") {
		t.Errorf("prod without alarms: %v", err)
	}
	if err := build(app(t, dir, map[string]any{"env": "prod", "alarmEmail": "oncall@example.com"})); err == nil || !strings.Contains(err.Error(), "pinned") {
		t.Errorf("prod unpinned: %v", err)
	}
	a := app(t, dir, map[string]any{"env": "prod", "alarmEmail": "oncall@example.com", "account": "123456789012", "region": "us-east-1"})
	if err := build(a); err != nil {
		t.Fatal(err)
	}
	stack := a.Node().FindChild(jsii.String("lambdajobs-prod")).(awscdk.Stack)
	// Pinned, ARNs hold the literal account and region: the nag
	// suppressions must still apply.
	noNagErrors(t, stack)
	if *stack.Account() != "123456789012" || *stack.Region() != "us-east-1" || !*stack.TerminationProtection() {
		t.Errorf("prod stack: account %s region %s termination protection %v", *stack.Account(), *stack.Region(), *stack.TerminationProtection())
	}
	if err := build(app(t, dir, map[string]any{"env": "staging"})); err != nil {
		t.Errorf("a non-retained environment needs no pin: %v", err)
	}
}

// Each environment of the app: cdk-nag clean, its outputs, termination
// protection where data is retained, and the demo kinds (example.fail
// panics or overruns on purpose) with their schedule in dev, never in a
// prod synthesis unless opted in (and then without the schedule).
func TestAppEnvironments(t *testing.T) {
	pinned := map[string]any{"alarmEmail": "oncall@example.com", "account": "123456789012", "region": "us-east-1"}
	for _, c := range []struct {
		ctx       map[string]any
		examples  bool
		schedules int
	}{
		{map[string]any{"env": "dev"}, true, 1},
		{merge(pinned, map[string]any{"env": "prod"}), false, 0},
		{merge(pinned, map[string]any{"env": "prod", "exampleKinds": "true"}), true, 0},
		{map[string]any{"env": "dev", "exampleKinds": "false"}, false, 0},
	} {
		name := fmt.Sprint(c.ctx)
		stack, tmpl := synthApp(t, c.ctx)
		noNagErrors(t, stack)
		if got, want := *stack.TerminationProtection(), c.ctx["env"] == "prod"; got != want {
			t.Errorf("%s: termination protection %v, want %v", name, got, want)
		}
		outputs, _ := tmpl["Outputs"].(map[string]any)
		for _, o := range []string{"ApiUrl", "TableName", "QueueUrl", "DeadLetterQueueUrl", "DashboardName"} {
			if outputs[o] == nil {
				t.Errorf("%s: no output %s", name, o)
			}
		}
		functions, examples, schedules := 0, 0, 0
		for id, r := range tmpl["Resources"].(map[string]any) {
			res := r.(map[string]any)
			if strings.HasPrefix(id, "AWS679f53fac002430cb0da5b7982bd2287") {
				continue // CDK's AwsCustomResource handler, which sets the DLQs' RedriveAllowPolicy
			}
			switch res["Type"] {
			case "AWS::Lambda::Function":
				functions++
				env, _ := json.Marshal(res["Properties"].(map[string]any)["Environment"])
				if strings.Contains(string(env), `"JOBS_EXAMPLE_KINDS":"on"`) {
					examples++
				}
			case "AWS::Scheduler::Schedule":
				schedules++
			}
		}
		// Where the example kinds run, so do their lanes (bulk, long and urgent):
		// a worker each.
		lanes := map[bool]int{true: len(exampleLanes()) - 1, false: 0}[c.examples]
		if want := map[bool]int{true: functions, false: 0}[c.examples]; examples != want || functions != len(jobsinfra.FunctionNames)+lanes {
			t.Errorf("%s: %d of %d functions serve the example kinds, want %d of %d", name, examples, functions, want, len(jobsinfra.FunctionNames)+lanes)
		}
		if schedules != c.schedules {
			t.Errorf("%s: %d schedules, want %d", name, schedules, c.schedules)
		}
	}
}

func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// -c namePrefix names the deployment's schedule groups, dashboard, API and
// metrics (a way to keep an older deployment's names).
func TestAppNamePrefix(t *testing.T) {
	_, tmpl := synthApp(t, map[string]any{"env": "dev", "namePrefix": "lambdajobs-dev"})
	groups := map[string]bool{}
	for _, r := range tmpl["Resources"].(map[string]any) {
		res := r.(map[string]any)
		if res["Type"] == "AWS::Scheduler::ScheduleGroup" {
			groups[res["Properties"].(map[string]any)["Name"].(string)] = true
		}
	}
	if len(groups) != 2 || !groups["lambdajobs-dev"] || !groups["lambdajobs-dev-runtime"] {
		t.Errorf("schedule groups %v, want lambdajobs-dev and lambdajobs-dev-runtime", groups)
	}
}
