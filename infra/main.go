// Command infra is the CDK app that deploys lambdajobs: one stack per
// environment ("lambdajobs-<env>"), chosen with `-c env=NAME` (dev by
// default). Configurations are in config.go; the bootstraps come from
// `make build` (../build, or -c bootstraps=DIR).
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/lambdajobs/lambdajobs/infra/jobsinfra"
)

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	applyChecks(app)
	if err := build(app); err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		os.Exit(1)
	}
	app.Synth(nil)
}

func build(app awscdk.App) error {
	name := "dev"
	if v, ok := app.Node().TryGetContext(jsii.String("env")).(string); ok && v != "" {
		name = v
	}
	cfg, err := ConfigFor(name)
	if err != nil && !strings.Contains(err.Error(), "alarm destination") {
		return err
	}
	// Where alarms go: -c alarmEmail=... or -c alarmTopicArn=... (an
	// environment that retains data, such as prod, cannot synthesize without).
	if v, ok := app.Node().TryGetContext(jsii.String("alarmEmail")).(string); ok && v != "" {
		cfg.AlarmEmail = v
	}
	if v, ok := app.Node().TryGetContext(jsii.String("alarmTopicArn")).(string); ok && v != "" {
		cfg.AlarmTopicARN = v
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	bootstraps := "../build"
	if v, ok := app.Node().TryGetContext(jsii.String("bootstraps")).(string); ok && v != "" {
		bootstraps = v
	}
	for _, f := range jobsinfra.FunctionNames {
		if _, err := os.Stat(bootstraps + "/" + f + "/bootstrap"); err != nil {
			return fmt.Errorf("%s/%s/bootstrap is missing: run `make build` first", bootstraps, f)
		}
	}
	// The demo kinds (example.fail panics or overruns on purpose) reach
	// prod only if asked for: -c exampleKinds=true.
	examples := cfg.Name != "prod"
	if v, ok := app.Node().TryGetContext(jsii.String("exampleKinds")).(string); ok && v != "" {
		examples = v == "true"
	}
	NewJobsStack(app, "lambdajobs-"+cfg.Name, &StackProps{StackProps: awscdk.StackProps{Env: env()}, Config: cfg, Bootstraps: bootstraps, ExampleKinds: examples})
	return nil
}

// env pins the stack to CDK_DEFAULT_ACCOUNT/REGION when both are set
// (deploy), and leaves it environment-agnostic otherwise (synth, tests).
func env() *awscdk.Environment {
	account, region := os.Getenv("CDK_DEFAULT_ACCOUNT"), os.Getenv("CDK_DEFAULT_REGION")
	if account == "" || region == "" {
		return nil
	}
	return &awscdk.Environment{Account: jsii.String(account), Region: jsii.String(region)}
}
