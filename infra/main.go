// Command infra is the CDK app that deploys lambdajobs: one stack per
// environment ("lambdajobs-<env>"), chosen with `-c env=NAME` (dev by
// default). Configurations are in config.go; the bootstraps come from
// `make build` (../build, or -c bootstraps=DIR).
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/lambdajobs/lambdajobs/infra/jobsinfra"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
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
	ctx := func(key string) string {
		v, _ := app.Node().TryGetContext(jsii.String(key)).(string)
		return v
	}
	cfg, err := configFromContext(ctx)
	if err != nil {
		return err
	}
	// An environment that retains data is pinned to one account and region:
	// -c account=... -c region=..., or CDK_DEFAULT_ACCOUNT and _REGION.
	pin := env()
	if a, r := ctx("account"), ctx("region"); a != "" && r != "" {
		pin = &awscdk.Environment{Account: jsii.String(a), Region: jsii.String(r)}
	}
	if cfg.Retain && pin == nil {
		return fmt.Errorf("%s retains data and is pinned to one account and region: pass -c account=... -c region=... (make: ACCOUNT=... REGION=...) or set CDK_DEFAULT_ACCOUNT and CDK_DEFAULT_REGION", cfg.Name)
	}
	bootstraps := "../build"
	if v := ctx("bootstraps"); v != "" {
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
	if v := ctx("exampleKinds"); v != "" {
		examples = v == "true"
	}
	NewJobsStack(app, "lambdajobs-"+cfg.Name, &StackProps{StackProps: awscdk.StackProps{Env: pin}, Config: cfg, Bootstraps: bootstraps, ExampleKinds: examples,
		Schedules: schedulesFor(cfg.Name, examples), Lanes: lanesFor(examples)})
	return nil
}

// configFromContext is the environment's Config from the app's context
// (-c env=NAME and the settings below), validated.
func configFromContext(ctx func(string) string) (Config, error) {
	name := "dev"
	if v := ctx("env"); v != "" {
		name = v
	}
	cfg, err := ConfigFor(name)
	if err != nil && !strings.Contains(err.Error(), "alarm destination") {
		return cfg, err
	}
	// Where alarms go: -c alarmEmail=... or -c alarmTopicArn=... (an
	// environment that retains data, such as prod, cannot synthesize without).
	if v := ctx("alarmEmail"); v != "" {
		cfg.AlarmEmail = v
	}
	if v := ctx("alarmTopicArn"); v != "" {
		cfg.AlarmTopicARN = v
	}
	// -c tracing=true turns on X-Ray and the functions' spans; -c
	// logLevel=WARN keeps a busy environment's per-job log lines out.
	if v := ctx("tracing"); v != "" {
		cfg.Tracing = v == "true"
	}
	if v := ctx("logLevel"); v != "" {
		cfg.LogLevel = v
	}
	// -c operators=arn:aws:iam::123456789012:role/oncall,... may use the
	// admin routes.
	if v := ctx("operators"); v != "" {
		cfg.Operators = strings.Split(v, ",")
	}
	// -c keyAdmins=arn:aws:iam::123456789012:role/security,... may read the
	// keys' secrets (to rotate them); -c customerManagedKey=true encrypts
	// the data with a KMS key of the stack's own.
	if v := ctx("keyAdmins"); v != "" {
		cfg.KeyAdmins = strings.Split(v, ",")
	}
	if v := ctx("customerManagedKey"); v != "" {
		cfg.CustomerManagedKey = v == "true"
	}
	// -c namePrefix=lambdajobs-prod names the schedule groups, the
	// dashboard, the API and the metrics after it instead of the stack
	// (jobsinfra.Names): it keeps an older deployment's names.
	if v := ctx("namePrefix"); v != "" {
		cfg.NamePrefix = v
	}
	// -c messageFirst=false deploys with message first off (on by
	// default): the first of the two deploys that turn it on in a stack
	// deployed before, and a rollback's first (docs/operations/DEPLOY.md).
	switch v := ctx("messageFirst"); v {
	case "true", "false":
		on := v == "true"
		cfg.MessageFirst = &on
	case "":
	default:
		return cfg, fmt.Errorf("-c messageFirst=%s: want true or false", v)
	}
	// -c tagIndexes=1 (then 2) declares only that many of the tag
	// indexes: the first deploys of a stack deployed before tags, which
	// CloudFormation gives one new index each (docs/operations/DEPLOY.md).
	if v := ctx("tagIndexes"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return cfg, fmt.Errorf("-c tagIndexes=%s: want a number", v)
		}
		cfg.TagIndexes = &n
	}
	return cfg, cfg.Validate()
}

// schedulesFor is what the app fires: example.tick where the example kinds
// run, except in prod.
func schedulesFor(env string, examples bool) []jobs.Schedule {
	if !examples {
		return nil
	}
	return exampleSchedules(env)
}

// lanesFor is the lanes the app creates: the example kinds' where they run
// (a team's app passes its own registry's Lanes()).
func lanesFor(examples bool) []string {
	if !examples {
		return nil
	}
	return exampleLanes()
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
