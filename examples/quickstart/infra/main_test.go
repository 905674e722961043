package main

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
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/lambdajobs/lambdajobs/infra/jobsinfra"
)

func TestMain(m *testing.M) {
	code := m.Run()
	jsii.Close()
	os.Exit(code)
}

// The team's app synthesizes dev and prod, cdk-nag clean, with the team's
// one bootstrap for all seven functions and no demo kind.
func TestAppSynthesizesCleanly(t *testing.T) {
	dir := t.TempDir()
	one := filepath.Join(dir, "build")
	if err := os.MkdirAll(one, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(one, "bootstrap"), []byte("stand-in"), 0o755); err != nil {
		t.Fatal(err)
	}
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
	app := awscdk.NewApp(&awscdk.AppProps{Context: &c.Context, Outdir: jsii.String(filepath.Join(dir, "cdk.out"))})
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	t.Setenv("ALARM_EMAIL", "")
	if err := Build(app, one); err == nil || !strings.Contains(err.Error(), "alarm destination") {
		t.Fatalf("prod without an alarm destination: %v, want it refused", err)
	}
	t.Setenv("ALARM_EMAIL", "oncall@example.com")
	app = awscdk.NewApp(&awscdk.AppProps{Context: &c.Context, Outdir: jsii.String(filepath.Join(dir, "cdk.out"))})
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	if err := Build(app, one); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"reports-dev", "reports-prod"} {
		stack := app.Node().FindChild(jsii.String(name)).(awscdk.Stack)
		tmpl := template(t, stack)
		fns, schedules := 0, 0
		for id, r := range tmpl["Resources"].(map[string]any) {
			res := r.(map[string]any)
			if strings.HasPrefix(id, "AWS679f53fac002430cb0da5b7982bd2287") {
				continue // CDK's AwsCustomResource handler, which sets the DLQs' RedriveAllowPolicy
			}
			if res["Type"] == "AWS::Scheduler::Schedule" && strings.Contains(fmt.Sprint(res["Properties"]), "reports-cleanup") {
				schedules++
			}
			if res["Type"] != "AWS::Lambda::Function" {
				continue
			}
			fns++
			env := fmt.Sprint(res["Properties"].(map[string]any)["Environment"])
			if strings.Contains(env, "JOBS_EXAMPLE_KINDS") || !strings.Contains(env, "JOBS_FUNCTION") {
				t.Errorf("%s: a function's environment %s", name, env)
			}
		}
		if schedules != 1 {
			t.Errorf("%s: %d schedules for the declared clean-up, want 1 (from the registry)", name, schedules)
		}
		if fns != len(jobsinfra.FunctionNames) {
			t.Errorf("%s: %d functions, want %d", name, fns, len(jobsinfra.FunctionNames))
		}
	}
}

// template synthesizes stack; a cdk-nag error (AwsSolutions) fails the
// synthesis, and the test with it.
func template(t *testing.T, stack awscdk.Stack) (tmpl map[string]any) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("%s: %v", *stack.StackName(), p)
		}
	}()
	assertions.Annotations_FromStack(stack).HasNoError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
	return *assertions.Template_FromStack(stack, nil).ToJSON()
}
