package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// applyChecks runs the cdk-nag AwsSolutions pack on everything in scope.
// With the CDK CLI an unsuppressed error fails `cdk synth`; the tests
// assert there are none.
func applyChecks(app awscdk.App) {
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
}
