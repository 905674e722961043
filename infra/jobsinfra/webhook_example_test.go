package jobsinfra_test

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/lambdajobs/lambdajobs/infra/jobsinfra"
)

// The webhook recipe of docs/reference/EVENTS.md: failed invoice jobs POSTed to a
// team's endpoint by an EventBridge API destination (auth, rate limit and
// retries managed by AWS), the event's stable id as the idempotency key,
// and what cannot be delivered kept in a dead-letter queue. It compiles
// with the construct's tests, so the recipe cannot drift from the CDK API.
func Example_webhook() {
	var stack awscdk.Stack   // your stack
	var jobs *jobsinfra.Jobs // jobsinfra.NewJobs(stack, "Jobs", props)
	if stack == nil || jobs == nil {
		return // (a recipe: nothing to synthesize here)
	}
	conn := awsevents.NewConnection(stack, jsii.String("HookAuth"), &awsevents.ConnectionProps{
		Authorization: awsevents.Authorization_ApiKey(jsii.String("X-Api-Key"),
			awscdk.SecretValue_SecretsManager(jsii.String("jobs-webhook-key"), nil)),
	})
	dest := awsevents.NewApiDestination(stack, jsii.String("Hook"), &awsevents.ApiDestinationProps{
		Connection:         conn,
		Endpoint:           jsii.String("https://hooks.example.com/jobs"),
		HttpMethod:         awsevents.HttpMethod_POST,
		RateLimitPerSecond: jsii.Number(10),
	})
	undelivered := awssqs.NewQueue(stack, jsii.String("HookDLQ"), &awssqs.QueueProps{RetentionPeriod: awscdk.Duration_Days(jsii.Number(14))})
	rule := awsevents.NewRule(stack, jsii.String("FailedInvoices"), &awsevents.RuleProps{
		EventBus: jobs.EventBus,
		EventPattern: &awsevents.EventPattern{
			Source:     jsii.Strings("lambdajobs"),
			DetailType: jsii.Strings("Job Finished"),
			Detail:     &map[string]any{"kind": []string{"invoice.send"}, "status": []string{"failed"}},
		},
	})
	rule.AddTarget(awseventstargets.NewApiDestination(dest, &awseventstargets.ApiDestinationProps{
		Event:            awsevents.RuleTargetInput_FromEventPath(jsii.String("$.detail")),
		HeaderParameters: &map[string]*string{"Idempotency-Key": jsii.String("$.detail.id")},
		RetryAttempts:    jsii.Number(185),
		MaxEventAge:      awscdk.Duration_Hours(jsii.Number(24)),
		DeadLetterQueue:  undelivered,
	}))
}
