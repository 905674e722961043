// Command infra is the team's CDK app: a dev and a prod stack, each holding
// one jobsinfra.Jobs over the team's own bootstrap (../build/bootstrap, from
// `make build`). cdk-nag's AwsSolutions pack checks every synth.
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/lambdajobs/lambdajobs/infra/jobsinfra"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"

	"example.com/quickstart/reports"
)

func main() {
	defer jsii.Close()
	app := awscdk.NewApp(nil)
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	if err := Build(app, "../build"); err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		os.Exit(1)
	}
	app.Synth(nil)
}

// Build adds the team's environments to app.
func Build(app awscdk.App, bootstrap string) error {
	if _, err := os.Stat(bootstrap + "/bootstrap"); err != nil {
		return fmt.Errorf("%s/bootstrap is missing: run `make build` first", bootstrap)
	}
	// The registry declares the schedules the construct deploys (the
	// clean-up's); the functions' main registers the same kinds.
	reg := jobs.NewRegistry()
	reports.Register(reg)
	dev := jobsinfra.DevConfig("dev")
	prod := jobsinfra.ProdConfig("prod")
	prod.AlarmEmail = os.Getenv("ALARM_EMAIL") // who is told when jobs go wrong
	for _, cfg := range []jobsinfra.Config{dev, prod} {
		if err := cfg.Validate(); err != nil {
			return err // prod without ALARM_EMAIL: nobody would hear its alarms
		}
		stack := awscdk.NewStack(app, jsii.String("reports-"+cfg.Name), &awscdk.StackProps{
			Env: env(), TerminationProtection: jsii.Bool(cfg.Retain),
		})
		j := jobsinfra.NewJobs(stack, "Jobs", &jobsinfra.JobsProps{Config: cfg, Bootstrap: bootstrap, Schedules: reg.Schedules(), Lanes: reg.Lanes()})
		awscdk.NewCfnOutput(stack, jsii.String("ApiUrl"), &awscdk.CfnOutputProps{Value: j.API.ApiEndpoint()})
	}
	return nil
}

// env pins the stacks to CDK_DEFAULT_ACCOUNT/REGION when both are set.
func env() *awscdk.Environment {
	account, region := os.Getenv("CDK_DEFAULT_ACCOUNT"), os.Getenv("CDK_DEFAULT_REGION")
	if account == "" || region == "" {
		return nil
	}
	return &awscdk.Environment{Account: jsii.String(account), Region: jsii.String(region)}
}
