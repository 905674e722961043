package jobsinfra

import (
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

func TestForeignSourcesAreScopedToTheirARN(t *testing.T) {
	s := environments(t)["sources"]
	var allows []string
	for _, p := range s.resources("AWS::SQS::QueuePolicy") {
		for _, st := range props(p)["PolicyDocument"].(map[string]any)["Statement"].([]any) {
			stmt := st.(map[string]any)
			if stmt["Effect"] == "Allow" {
				allows = append(allows, jsonString(stmt))
			}
		}
	}
	var s3, events bool
	for _, a := range allows {
		switch {
		case strings.Contains(a, "s3.amazonaws.com"):
			s3 = strings.Contains(a, "aws:SourceArn") && strings.Contains(a, "uploads-example")
		case strings.Contains(a, "events.amazonaws.com"):
			events = strings.Contains(a, "aws:SourceArn") && strings.Contains(a, "Source0Rule")
		default:
			t.Errorf("an Allow for someone else: %s", a)
		}
	}
	if !s3 || !events {
		t.Errorf("queue policy allows (s3 scoped %v, events scoped %v):\n%s", s3, events, strings.Join(allows, "\n"))
	}
	if policy := jsonString(s.resources("AWS::SQS::QueuePolicy")); !strings.Contains(policy, `"Sid":"S3FromThisAccountOnly"`) ||
		!strings.Contains(policy, `"aws:SourceAccount":{"Ref":"AWS::AccountId"}`) {
		t.Errorf("S3 may send for buckets of other accounts: %s", policy)
	}
	rules := jsonString(s.resources("AWS::Events::Rule"))
	if !strings.Contains(rules, `"source":["shop.orders"]`) || !strings.Contains(rules, `"detail-type":["OrderPlaced"]`) {
		t.Errorf("rules %s", rules)
	}
	notif := jsonString(s.resources("Custom::S3BucketNotifications"))
	if !strings.Contains(notif, "uploads-example") || !strings.Contains(notif, "incoming/") {
		t.Errorf("bucket notifications %s", notif)
	}
	// Without sources, nobody else may send.
	for _, p := range environments(t)["dev"].resources("AWS::SQS::QueuePolicy") {
		if strings.Contains(jsonString(props(p)), `"Effect":"Allow"`) {
			t.Errorf("dev: the queue policy allows a sender: %s", jsonString(props(p)))
		}
	}
}

// A stack whose name is not its construct id (StackName) connects S3
// sources under cdk-nag: the suppressions of CDK's bucket notifications
// handler are found by the construct path, not the stack's name.
func TestS3SourcesInAStackNamedApartFromItsID(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Context: cdkContext(t), Outdir: jsii.String(t.TempDir())})
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	stack := awscdk.NewStack(app, jsii.String("Orders"), &awscdk.StackProps{StackName: jsii.String("orders-dev")})
	cfg := DevConfig("dev")
	cfg.S3Sources = []S3Source{{BucketName: "uploads-example"}}
	NewJobs(stack, "Jobs", &JobsProps{Config: cfg, Bootstraps: fakeBootstraps(t)})
	template(t, stack)
	if errs := nagFindings(stack, "aws:cdk:error"); len(errs) > 0 {
		t.Errorf("cdk-nag: %s", strings.Join(errs, "\n"))
	}
}
