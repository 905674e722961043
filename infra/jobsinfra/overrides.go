package jobsinfra

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
)

// Overrides change the props of the resources the construct creates, for
// what Config does not tune (a table class, a queue's retention, a
// function's memory or VPC, a log group's key, a custom domain's API
// settings). Each hook is called with the props the construct built from
// Config, changes them in place, and runs before the resource is created;
// the construct then re-asserts the fields it depends on, listed on each
// hook, so no override can break the system (a field it re-asserts is
// tuned through Config, if at all). A nil hook changes nothing.
//
// The names of the queues, functions and log groups are stable: "jobs",
// "dead-letters", "schedule-dead-letters"; FunctionNames; a function's
// name or "api-access". Beyond the props, every resource is exposed on
// Jobs, and CDK's escape hatch (Node().DefaultChild() as the Cfn resource,
// AddPropertyOverride) reaches any CloudFormation property.
type Overrides struct {
	// Table changes the jobs table's props. Re-asserted: PartitionKey and
	// SortKey (dynamostore's key), TimeToLiveAttribute, Encryption and
	// EncryptionKey (Config.CustomerManagedKey: the grants are made for
	// it). The indexes are added after, from dynamostore's definition.
	Table func(props *awsdynamodb.TableProps)
	// Queue changes the props of each queue, by name. Re-asserted on every
	// queue: Encryption, EncryptionMasterKey, EnforceSSL and Fifo (a
	// standard queue); on "jobs" (and each lane's "jobs-<lane>") also
	// VisibilityTimeout (two worker timeouts and the batching window: the
	// dead-worker bound, sqsqueue.Spec) and DeadLetterQueue (the
	// "dead-letters" queue after sqsqueue's 10 receives).
	Queue func(name string, props *awssqs.QueueProps)
	// Function changes the props of each of the seven functions, by name.
	// Re-asserted: Code, Handler, Runtime, Role (its least-privilege role),
	// LogGroup, Timeout (Config: the queue and the deadlines depend on
	// it), Tracing and LoggingFormat (Config.Tracing, JSON), the variables
	// the construct sets in Environment (variables of yours stay; Config.
	// Environment is the usual way), RecursiveLoop for the worker and
	// ReservedConcurrentExecutions for the sweeper and the wait function
	// (Config.WaitConcurrency).
	Function func(name string, props *awslambda.FunctionProps)
	// LogGroup changes the props of each log group: a function's (by its
	// name) or the API's access logs ("api-access"). Nothing re-asserted.
	LogGroup func(name string, props *awslogs.LogGroupProps)
	// API changes the HTTP API's props. Re-asserted: ApiName (Names.API)
	// and CreateDefaultStage (false: the construct creates the stage, with
	// its access logs and throttling).
	API func(props *awsapigatewayv2.HttpApiProps)
}

func (o *Overrides) table(p *awsdynamodb.TableProps) {
	if o != nil && o.Table != nil {
		o.Table(p)
	}
}

func (o *Overrides) queue(name string, p *awssqs.QueueProps) {
	if o != nil && o.Queue != nil {
		o.Queue(name, p)
	}
}

func (o *Overrides) function(name string, p *awslambda.FunctionProps) {
	if o != nil && o.Function != nil {
		o.Function(name, p)
	}
}

func (o *Overrides) logGroup(name string, p *awslogs.LogGroupProps) {
	if o != nil && o.LogGroup != nil {
		o.LogGroup(name, p)
	}
}

func (o *Overrides) api(p *awsapigatewayv2.HttpApiProps) {
	if o != nil && o.API != nil {
		o.API(p)
	}
}
