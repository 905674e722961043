package jobsinfra

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"
)

// events creates the job events' bus (or takes Config.EventBusArn), and
// tells the functions what internal/deploy says they read: the bus to the
// functions that write outcomes, which alone may put events on it, and
// which kinds announce theirs to the functions that create jobs.
//
// A bus the construct creates has a policy that denies events:PutEvents
// to every principal but those GrantPutEvents names (the functions that
// write outcomes, and a team's own): no one else in the account forges a
// "Job Finished" event, whatever their own policy allows. A bus of
// Config.EventBusArn is its owner's to guard.
func (s *Jobs) events() {
	if s.cfg.EventBusArn != "" {
		s.EventBus = awsevents.EventBus_FromEventBusArn(s, jsii.String("EventBus"), jsii.String(s.cfg.EventBusArn))
	} else {
		bus := awsevents.NewEventBus(s, jsii.String("EventBus"), &awsevents.EventBusProps{EventBusName: jsii.String(s.Names.EventBus)})
		bus.ApplyRemovalPolicy(s.removal)
		bus.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String("OnlyItsPublishers"),
			Effect:     awsiam.Effect_DENY,
			Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
			Actions:    jsii.Strings("events:PutEvents"),
			Resources:  &[]*string{bus.EventBusArn()},
			Conditions: &map[string]any{"ArnNotLike": map[string]any{"aws:PrincipalArn": s.publishers.list()}},
		}))
		s.EventBus = bus
	}
}

// GrantPutEvents lets grantee put events on the job events' bus
// (events:PutEvents on it, nothing else), and names it among the bus
// policy's publishers: a team's own function that announces something
// beside the jobs' events, say. The grantee is a function (its role), a
// role or a user; any other principal panics, naming the reason (CDK's way
// for invalid props), as the bus policy could not name it.
func (s *Jobs) GrantPutEvents(grantee awsiam.IGrantable) awsiam.Grant {
	s.publishers.add(principalARN(grantee, "GrantPutEvents"))
	return s.EventBus.GrantPutEventsTo(grantee, nil)
}

// principalARN is the ARN a resource policy names grantee by
// (aws:PrincipalArn): a function's role's, a role's or a user's.
func principalARN(grantee awsiam.IGrantable, grant string) *string {
	switch g := grantee.(type) {
	case awslambda.IFunction:
		if g.Role() != nil {
			return g.Role().RoleArn()
		}
	case awsiam.IRole:
		return g.RoleArn()
	case awsiam.IUser:
		return g.UserArn()
	}
	panic("jobsinfra: " + grant + ": give a function with its role, a role or a user: the resource's policy names who may use it by ARN")
}
