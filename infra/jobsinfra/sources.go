package jobsinfra

import (
	"encoding/json"
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3notifications"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// sources connects the foreign sources of Config to the queue
// (docs/guide/SOURCES.md), each allowed to send only from its own ARN.
func (s *Jobs) sources() {
	s.s3Sources()
	for i, src := range s.cfg.EventBridgeSource {
		pattern := &awsevents.EventPattern{Source: jsii.Strings(src.Sources...)}
		if len(src.DetailTypes) > 0 {
			pattern.DetailType = jsii.Strings(src.DetailTypes...)
		}
		props := &awsevents.RuleProps{
			EventPattern: pattern,
			Targets:      &[]awsevents.IRuleTarget{awseventstargets.NewSqsQueue(s.Queue, nil)},
		}
		if src.Bus != "" {
			props.EventBus = awsevents.EventBus_FromEventBusName(s.Construct, jsii.String(fmt.Sprintf("Source%dBus", i)), jsii.String(src.Bus))
		}
		awsevents.NewRule(s.Construct, jsii.String(fmt.Sprintf("Source%dRule", i)), props)
	}
}

// s3Sources sends the buckets' object-created notifications to the queue.
func (s *Jobs) s3Sources() {
	stack := s.Construct
	for i, src := range s.cfg.S3Sources {
		bucket := awss3.Bucket_FromBucketName(stack, jsii.String(fmt.Sprintf("Source%dBucket", i)), jsii.String(src.BucketName))
		filter := &awss3.NotificationKeyFilter{}
		if src.Prefix != "" {
			filter.Prefix = jsii.String(src.Prefix)
		}
		if src.Suffix != "" {
			filter.Suffix = jsii.String(src.Suffix)
		}
		// CDK refuses an empty filter: a source of every key passes none.
		var filters []*awss3.NotificationKeyFilter
		if src.Prefix != "" || src.Suffix != "" {
			filters = append(filters, filter)
		}
		bucket.AddEventNotification(awss3.EventType_OBJECT_CREATED, awss3notifications.NewSqsDestination(s.Queue), filters...)
	}
	if len(s.cfg.S3Sources) > 0 {
		// A bucket's ARN names no account: a bucket deleted and created
		// again by another account would keep sending. S3 may send only for
		// buckets of this account.
		s.Queue.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String("S3FromThisAccountOnly"),
			Effect:     awsiam.Effect_DENY,
			Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("s3.amazonaws.com"), nil)},
			Actions:    jsii.Strings("sqs:SendMessage"),
			Resources:  &[]*string{s.Queue.QueueArn()},
			Conditions: &map[string]any{"StringNotEquals": map[string]any{"aws:SourceAccount": awscdk.Stack_Of(stack).Account()}},
		}))
		// CDK configures notifications on existing buckets with its own
		// singleton custom resource.
		cdknag.NagSuppressions_AddResourceSuppressionsByPath(awscdk.Stack_Of(stack),
			jsii.String("/"+*awscdk.Stack_Of(stack).Node().Path()+"/BucketNotificationsHandler050a0587b7544547bf325f094a3db834/Role"),
			&[]*cdknag.NagPackSuppression{
				{Id: jsii.String("AwsSolutions-IAM4"), Reason: jsii.String("CDK's own handler that puts notification configurations on existing buckets; it runs only during deployments.")},
				{Id: jsii.String("AwsSolutions-IAM5"), Reason: jsii.String("CDK's bucket notifications handler needs s3:PutBucketNotification on the buckets it configures; it runs only during deployments.")},
			}, jsii.Bool(true))
	}
}

// sources is JOBS_SOURCES: the foreign sources as the worker checks them
// against its routes (jobs.Source).
func (c Config) sources() string {
	type source = jobs.Source
	var list []source
	for _, s3 := range c.S3Sources {
		list = append(list, source{Type: "s3", Bucket: s3.BucketName})
	}
	for _, eb := range c.EventBridgeSource {
		for _, src := range eb.Sources {
			if len(eb.DetailTypes) == 0 {
				list = append(list, source{Type: "eventbridge", EventSource: src})
			}
			for _, dt := range eb.DetailTypes {
				list = append(list, source{Type: "eventbridge", EventSource: src, DetailType: dt})
			}
		}
	}
	if len(list) == 0 {
		return ""
	}
	b, _ := json.Marshal(list)
	return string(b)
}
