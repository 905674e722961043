package main

import (
	"maps"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/lambdajobs/lambdajobs/infra/jobsinfra"
	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// StackProps configure a JobsStack.
type StackProps struct {
	awscdk.StackProps
	Config Config
	// Bootstraps is the folder holding <function>/bootstrap (make build),
	// or Bootstrap one bootstrap for all (see jobsinfra.JobsProps).
	Bootstraps, Bootstrap string
	// ExampleKinds deploys the demo kinds: every function is told
	// examplekinds.Switch=on (through Config.Environment), which only this
	// repository's mains read.
	ExampleKinds bool
	// Schedules are the periodic jobs to fire, and Lanes the lanes the
	// registry's kinds run in (see jobsinfra.JobsProps).
	Schedules []jobs.Schedule
	Lanes     []string
}

// exampleSchedules are the example kinds' periodic jobs (example.tick):
// fired in dev, never in prod, whatever ExampleKinds says.
func exampleSchedules(env string) []jobs.Schedule {
	if env == "prod" {
		return nil
	}
	return exampleRegistry().Schedules()
}

// exampleLanes are the lanes the example kinds run in (bulk, long, urgent).
func exampleLanes() []string { return exampleRegistry().Lanes() }

func exampleRegistry() *jobs.Registry {
	reg := jobs.NewRegistry()
	if _, err := examplekinds.Register(reg); err != nil {
		panic(err)
	}
	return reg
}

// JobsStack is one environment of this repository's own deployment: a stack
// holding one jobsinfra.Jobs construct, as a team's own CDK app would.
type JobsStack struct {
	Stack awscdk.Stack
	*jobsinfra.Jobs
}

// NewJobsStack builds the stack.
func NewJobsStack(scope constructs.Construct, id string, props *StackProps) *JobsStack {
	sp := props.StackProps
	if props.Config.Retain {
		// Deleting a stack that retains data takes two deliberate steps.
		sp.TerminationProtection = jsii.Bool(true)
	}
	stack := awscdk.NewStack(scope, &id, &sp)
	cfg := props.Config
	if props.ExampleKinds {
		// A variable of this repository's mains, not the construct's: it
		// goes in the environment a team's own settings go in.
		cfg.Environment = maps.Clone(cfg.Environment)
		if cfg.Environment == nil {
			cfg.Environment = map[string]string{}
		}
		cfg.Environment[examplekinds.Switch] = "on"
	}
	jobs := jobsinfra.NewJobs(stack, "Jobs", &jobsinfra.JobsProps{
		Config: cfg, Bootstraps: props.Bootstraps, Bootstrap: props.Bootstrap, Schedules: props.Schedules, Lanes: props.Lanes,
		// example.blob's payloads and results rest in the parts bucket.
		LargeParts: props.ExampleKinds,
	})
	awscdk.NewCfnOutput(stack, jsii.String("ApiUrl"), &awscdk.CfnOutputProps{Value: jobs.API.ApiEndpoint(), Description: jsii.String("the HTTP API (ljob -api)")})
	awscdk.NewCfnOutput(stack, jsii.String("TableName"), &awscdk.CfnOutputProps{Value: jobs.Table.TableName()})
	awscdk.NewCfnOutput(stack, jsii.String("QueueUrl"), &awscdk.CfnOutputProps{Value: jobs.Queue.QueueUrl(), Description: jsii.String("ljob drop -queue")})
	awscdk.NewCfnOutput(stack, jsii.String("DeadLetterQueueUrl"), &awscdk.CfnOutputProps{Value: jobs.DLQ.QueueUrl()})
	awscdk.NewCfnOutput(stack, jsii.String("DashboardName"), &awscdk.CfnOutputProps{Value: jsii.String(jobs.Names.Dashboard),
		Description: jsii.String("the CloudWatch dashboard; the metrics are in " + jobs.Names.MetricsNamespace)})
	return &JobsStack{Stack: stack, Jobs: jobs}
}
