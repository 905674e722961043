package jobsinfra

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/customresources"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// deadLetterPolicies closes the dead-letter queues to everyone but what
// must deliver there, since the operators' redrive moves their messages
// onto a lane's queue, where the worker trusts the body:
//
//   - no principal may send to a lane's DLQ (SQS moves a message there
//     itself when its receives run out), nor to the schedules' DLQ but
//     Scheduler's role, which delivers the fires it could not;
//   - each lane's DLQ may be the dead-letter queue of its own lane's queue
//     only (RedriveAllowPolicy byQueue), and the schedules' DLQ of no queue
//     (denyAll): no queue of someone else's, pointed at a DLQ, fills it.
//
// A lane's DLQ cannot name its source queue in its own template
// properties (the source names the DLQ: CloudFormation refuses the cycle),
// so a custom resource sets it once both exist (SetQueueAttributes).
func (s *Jobs) deadLetterPolicies() {
	for _, name := range s.laneOrder {
		lane := s.Lanes[name]
		s.denySenders(lane.DLQ, nil)
		s.redriveOnlyFrom(laneID(name), lane.DLQ, lane.Queue)
	}
	s.suppressCustomResourceProvider()
	if s.ScheduleDLQ == nil {
		return
	}
	s.denySenders(s.ScheduleDLQ, s.SchedulerRole.RoleArn())
	s.ScheduleDLQ.Node().DefaultChild().(awssqs.CfnQueue).SetRedriveAllowPolicy(map[string]any{"redrivePermission": "denyAll"})
}

// denySenders denies sqs:SendMessage on dlq to every principal, or, with
// sender, to every principal but sender.
func (s *Jobs) denySenders(dlq awssqs.Queue, sender *string) {
	st := &awsiam.PolicyStatementProps{
		Sid:        jsii.String("NoSenders"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("sqs:SendMessage"),
		Resources:  &[]*string{dlq.QueueArn()},
	}
	if sender != nil {
		st.Sid = jsii.String("OnlyItsSender")
		st.Conditions = &map[string]any{"ArnNotLike": map[string]any{"aws:PrincipalArn": sender}}
	}
	dlq.AddToResourcePolicy(awsiam.NewPolicyStatement(st))
}

// redriveOnlyFrom sets dlq's RedriveAllowPolicy to byQueue with source
// alone, on creation and on every update (so a change made by hand is
// undone by the next deployment).
func (s *Jobs) redriveOnlyFrom(id string, dlq, source awssqs.Queue) {
	stack := awscdk.Stack_Of(s.Construct)
	policy := stack.ToJsonString(map[string]any{"redrivePermission": "byQueue", "sourceQueueArns": []*string{source.QueueArn()}}, nil)
	call := &customresources.AwsSdkCall{
		Service: jsii.String("SQS"), Action: jsii.String("setQueueAttributes"),
		Parameters: map[string]any{"QueueUrl": dlq.QueueUrl(), "Attributes": map[string]any{"RedriveAllowPolicy": policy}},
		// The DLQ is the resource: a new DLQ is a new resource.
		PhysicalResourceId: customresources.PhysicalResourceId_Of(dlq.QueueArn()),
	}
	customresources.NewAwsCustomResource(s.Construct, jsii.String(id+"DeadLettersRedriveAllowPolicy"), &customresources.AwsCustomResourceProps{
		OnCreate: call, OnUpdate: call,
		Policy: customresources.AwsCustomResourcePolicy_FromStatements(&[]awsiam.PolicyStatement{awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions: jsii.Strings("sqs:SetQueueAttributes"), Resources: &[]*string{dlq.QueueArn()},
		})}),
		InstallLatestAwsSdk: jsii.Bool(false),
	})
}

// suppressCustomResourceProvider explains to cdk-nag the one Lambda
// function CDK's AwsCustomResource shares across a stack.
func (s *Jobs) suppressCustomResourceProvider() {
	stack := awscdk.Stack_Of(s.Construct)
	cdknag.NagSuppressions_AddResourceSuppressionsByPath(stack,
		jsii.String("/"+*stack.Node().Path()+"/AWS679f53fac002430cb0da5b7982bd2287"),
		&[]*cdknag.NagPackSuppression{
			{Id: jsii.String("AwsSolutions-IAM4"), Reason: jsii.String("CDK's own AwsCustomResource handler, which sets the dead-letter queues' RedriveAllowPolicy; it runs only during deployments and logs with AWSLambdaBasicExecutionRole.")},
			{Id: jsii.String("AwsSolutions-L1"), Reason: jsii.String("CDK's own AwsCustomResource handler: CDK picks its runtime; it runs only during deployments.")},
		}, jsii.Bool(true))
}
