package jobsinfra

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
)

// events creates the job events' bus (or takes Config.EventBusArn), and
// tells the functions what internal/deploy says they read: the bus to the
// functions that write outcomes, which alone may put events on it, and
// which kinds announce theirs to the functions that create jobs.
func (s *Jobs) events() {
	if s.cfg.EventBusArn != "" {
		s.EventBus = awsevents.EventBus_FromEventBusArn(s, jsii.String("EventBus"), jsii.String(s.cfg.EventBusArn))
	} else {
		bus := awsevents.NewEventBus(s, jsii.String("EventBus"), &awsevents.EventBusProps{EventBusName: jsii.String(s.Names.EventBus)})
		bus.ApplyRemovalPolicy(s.removal)
		s.EventBus = bus
	}
	mode := "kinds"
	if s.cfg.AllEvents {
		mode = "all"
	}
	busVar, _ := deploy.Lookup("JOBS_EVENT_BUS")
	modeVar, _ := deploy.Lookup("JOBS_EVENTS")
	tell := func(name string, f awslambda.Function) {
		if busVar.ReadBy(name) {
			s.GrantPutEvents(f)
			s.tell(f, busVar.Name, s.EventBus.EventBusArn())
		}
		if modeVar.ReadBy(name) {
			s.tell(f, modeVar.Name, jsii.String(mode))
		}
	}
	for _, name := range FunctionNames {
		tell(name, s.Functions[name])
	}
	// The other lanes' workers write outcomes as the default lane's does.
	for _, w := range s.workers()[1:] {
		tell("worker", w)
	}
}

// GrantPutEvents lets grantee put events on the job events' bus
// (events:PutEvents on it, nothing else): a team's own function that
// announces something beside the jobs' events, say.
func (s *Jobs) GrantPutEvents(grantee awsiam.IGrantable) awsiam.Grant {
	return s.EventBus.GrantPutEventsTo(grantee, nil)
}
