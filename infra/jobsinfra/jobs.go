package jobsinfra

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3notifications"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// JobsProps configure a Jobs construct.
type JobsProps struct {
	// Config is the environment's settings (start from Dev or Prod).
	Config Config
	// Bootstrap is the folder holding one bootstrap that serves every
	// function (a main calling lambdafn.Serve; each function is told its
	// role in JOBS_FUNCTION). Give it, or Bootstraps.
	Bootstrap string
	// Bootstraps is the folder holding <function>/bootstrap for the six
	// functions (enqueue, getjob, cancel, worker, sweeper, schedules), one
	// main each.
	// Either way they are built for linux/arm64 from your own mains over
	// lambdafn (see the README's "Use it in your own service").
	Bootstraps string
	// Schedules are the periodic jobs to fire (your registry's
	// Schedules()): one EventBridge Scheduler schedule each. The worker
	// must declare the same ones (it turns a fire into its job from its
	// own declaration).
	Schedules []jobs.Schedule
	// ExampleKinds sets JOBS_EXAMPLE_KINDS=on in every function, which this
	// repository's own mains read to register the demo kinds (example.*,
	// including example.fail, which panics or overruns on purpose). Leave it
	// off in production; your own mains need not read it at all.
	ExampleKinds bool
}

// Jobs is one environment of lambdajobs inside your stack: the table, the
// queue pair, the six functions, the HTTP API, the sweeper's schedule,
// the foreign sources and the alarms. Create one per environment (per
// stack) and wire your own resources to its fields and Grant methods.
type Jobs struct {
	constructs.Construct
	Table awsdynamodb.Table
	Queue awssqs.Queue
	DLQ   awssqs.Queue
	// The six functions, also by name in Functions.
	Enqueue, GetJob, Cancel, Worker, Sweeper, Schedules awslambda.Function
	Functions                                           map[string]awslambda.Function
	API                                                 awsapigatewayv2.HttpApi
	AlarmTopic                                          awssns.ITopic
	// With schedules: the role Scheduler sends fires with (it may only
	// send to the queue and ScheduleDLQ) and the fires' dead-letter queue.
	SchedulerRole awsiam.Role
	ScheduleDLQ   awssqs.Queue
	// Key encrypts the table, the queues and the secrets when
	// Config.CustomerManagedKey is set; nil otherwise.
	Key awskms.Key

	cfg           Config
	payloadSecret awssecretsmanager.Secret
	pageSecret    awssecretsmanager.Secret
	// Who the queue's policy lets send (grantSend), who each secret's
	// policy lets read (grantSecret), and the roles given GrantOperate.
	senders, payloadReaders, pageReaders, operators *principals
}

func dur(d time.Duration) awscdk.Duration { return awscdk.Duration_Seconds(jsii.Number(d.Seconds())) }

// NewJobs adds one environment of lambdajobs to scope. It panics if
// props.Config does not validate or a bootstrap is missing, naming the
// reason (CDK's way for invalid props).
func NewJobs(scope constructs.Construct, id string, props *JobsProps) *Jobs {
	cfg := props.Config
	if cfg.ScheduleMaxEventAge == 0 {
		cfg.ScheduleMaxEventAge = defaultScheduleMaxEventAge
	}
	if err := cfg.Validate(); err != nil {
		panic("jobsinfra: " + err.Error())
	}
	asset := func(name string) string { return filepath.Join(props.Bootstraps, name) }
	switch {
	case (props.Bootstrap == "") == (props.Bootstraps == ""):
		panic("jobsinfra: give JobsProps.Bootstrap (one bootstrap for every function) or Bootstraps (one per function), not both")
	case props.Bootstrap != "":
		asset = func(string) string { return props.Bootstrap }
	}
	for _, f := range FunctionNames {
		if _, err := os.Stat(filepath.Join(asset(f), "bootstrap")); err != nil {
			panic(fmt.Sprintf("jobsinfra: %s/bootstrap is missing: build your functions first", asset(f)))
		}
	}
	stack := constructs.NewConstruct(scope, &id)
	s := &Jobs{Construct: stack, Functions: map[string]awslambda.Function{}, cfg: cfg,
		senders: &principals{}, payloadReaders: &principals{}, pageReaders: &principals{}, operators: &principals{}}
	removal := awscdk.RemovalPolicy_DESTROY
	if cfg.Retain {
		removal = awscdk.RemovalPolicy_RETAIN
	}
	tableEncryption := awsdynamodb.TableEncryption_AWS_MANAGED
	queueEncryption := awssqs.QueueEncryption_SQS_MANAGED
	if cfg.CustomerManagedKey {
		s.Key = awskms.NewKey(stack, jsii.String("Key"), &awskms.KeyProps{
			Description:       jsii.String("lambdajobs " + cfg.Name + ": encrypts the jobs table, the queues and the keys' secrets"),
			EnableKeyRotation: jsii.Bool(true),
			RemovalPolicy:     removal,
		})
		tableEncryption, queueEncryption = awsdynamodb.TableEncryption_CUSTOMER_MANAGED, awssqs.QueueEncryption_KMS
	}

	// The table, from dynamostore's one definition.
	s.Table = awsdynamodb.NewTable(stack, jsii.String("Jobs"), &awsdynamodb.TableProps{
		PartitionKey:        &awsdynamodb.Attribute{Name: jsii.String(dynamostore.AttrID), Type: awsdynamodb.AttributeType_STRING},
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String(dynamostore.AttrExpires),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(cfg.Retain),
		},
		DeletionProtection: jsii.Bool(cfg.Retain),
		Encryption:         tableEncryption,
		EncryptionKey:      s.Key,
		RemovalPolicy:      removal,
	})
	if !cfg.Retain {
		cdknag.NagSuppressions_AddResourceSuppressions(s.Table, &[]*cdknag.NagPackSuppression{{
			Id:     jsii.String("AwsSolutions-DDB3"),
			Reason: jsii.String("A non-retained environment's table is disposable (it is deleted with the stack); retained environments such as prod enable point-in-time recovery."),
		}}, jsii.Bool(true))
	}
	// Its indexes, each as dynamostore defines it (the sweep index, the
	// listing's), so the table here and the local one cannot drift.
	def := dynamostore.CreateTableInput("jobs")
	attrType := map[string]awsdynamodb.AttributeType{}
	for _, a := range def.AttributeDefinitions {
		attrType[*a.AttributeName] = map[ddbtypes.ScalarAttributeType]awsdynamodb.AttributeType{
			ddbtypes.ScalarAttributeTypeS: awsdynamodb.AttributeType_STRING, ddbtypes.ScalarAttributeTypeN: awsdynamodb.AttributeType_NUMBER,
		}[a.AttributeType]
	}
	for _, g := range def.GlobalSecondaryIndexes {
		props := &awsdynamodb.GlobalSecondaryIndexProps{IndexName: g.IndexName}
		for _, k := range g.KeySchema {
			attr := &awsdynamodb.Attribute{Name: k.AttributeName, Type: attrType[*k.AttributeName]}
			if k.KeyType == ddbtypes.KeyTypeHash {
				props.PartitionKey = attr
			} else {
				props.SortKey = attr
			}
		}
		switch g.Projection.ProjectionType {
		case ddbtypes.ProjectionTypeKeysOnly:
			props.ProjectionType = awsdynamodb.ProjectionType_KEYS_ONLY
		case ddbtypes.ProjectionTypeInclude:
			props.ProjectionType = awsdynamodb.ProjectionType_INCLUDE
			props.NonKeyAttributes = jsii.Strings(g.Projection.NonKeyAttributes...)
		default:
			props.ProjectionType = awsdynamodb.ProjectionType_ALL
		}
		s.Table.AddGlobalSecondaryIndex(props)
	}

	// The queue pair, from sqsqueue's one definition.
	spec := sqsqueue.DefaultSpec(cfg.WorkerTimeout)
	// AWS: at least six times the function timeout plus the batching window.
	spec.VisibilityTimeout += cfg.BatchWindow
	s.DLQ = awssqs.NewQueue(stack, jsii.String("DeadLetters"), &awssqs.QueueProps{
		RetentionPeriod:     dur(spec.DLQRetention),
		Encryption:          queueEncryption,
		EncryptionMasterKey: s.Key,
		EnforceSSL:          jsii.Bool(true),
	})
	s.Queue = awssqs.NewQueue(stack, jsii.String("Jobs"+"Queue"), &awssqs.QueueProps{
		VisibilityTimeout:   dur(spec.VisibilityTimeout),
		RetentionPeriod:     dur(spec.Retention),
		DeadLetterQueue:     &awssqs.DeadLetterQueue{Queue: s.DLQ, MaxReceiveCount: jsii.Number(float64(spec.MaxReceiveCount))},
		Encryption:          queueEncryption,
		EncryptionMasterKey: s.Key,
		EnforceSSL:          jsii.Bool(true),
	})

	// The key that seals secret payload fields, generated once per stack.
	payloadSecret := awssecretsmanager.NewSecret(stack, jsii.String("PayloadSecret"), &awssecretsmanager.SecretProps{
		Description: jsii.String("lambdajobs " + cfg.Name + ": seals payload fields tagged jobs:\"secret\""),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			PasswordLength: jsii.Number(64), ExcludePunctuation: jsii.Bool(true),
		},
		EncryptionKey: s.Key,
		RemovalPolicy: removal,
	})
	s.payloadSecret = payloadSecret
	s.onlyReaders(payloadSecret, s.payloadReaders)
	cdknag.NagSuppressions_AddResourceSuppressions(payloadSecret, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-SMG4"),
		Reason: jsii.String("The payload sealing key cannot rotate on a schedule: values sealed with the old key must stay " +
			"readable until their jobs expire, so a new key is added ahead of the old one (JOBS_PAYLOAD_KEY is a key ring) " +
			"and the old one removed after the retention; see docs/OPERATIONS.md."),
	}}, jsii.Bool(true))

	// The key that signs the listing's page tokens: protects no data
	// (owners are checked on every read), so it is not retained.
	s.pageSecret = awssecretsmanager.NewSecret(stack, jsii.String("PageTokenSecret"), &awssecretsmanager.SecretProps{
		Description: jsii.String("lambdajobs " + cfg.Name + ": signs the page tokens of GET /v1/jobs and bulk actions"),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			PasswordLength: jsii.Number(64), ExcludePunctuation: jsii.Bool(true),
		},
		EncryptionKey: s.Key,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	s.onlyReaders(s.pageSecret, s.pageReaders)
	cdknag.NagSuppressions_AddResourceSuppressions(s.pageSecret, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String("AwsSolutions-SMG4"),
		Reason: jsii.String("The page token key signs listing positions only; rotating it invalidates the page tokens in flight, " +
			"which a caller recovers from by listing again. Rotate it by hand if wanted (docs/OPERATIONS.md)."),
	}}, jsii.Bool(true))

	env := map[string]*string{
		"JOBS_TABLE":               s.Table.TableName(),
		"JOBS_QUEUE_URL":           s.Queue.QueueUrl(),
		"JOBS_DISPATCH_GRACE":      jsii.String(cfg.DispatchGrace.String()),
		"JOBS_RETENTION":           jsii.String(cfg.Retention.String()),
		"JOBS_WORKER_CONCURRENCY":  jsii.String(strconv.Itoa(cfg.WorkerConcurrency)),
		"JOBS_HANDLER_RESERVE":     jsii.String(cfg.HandlerReserve.String()),
		"JOBS_FINAL_WRITE_TIMEOUT": jsii.String(cfg.FinalWriteTimeout.String()),
		// Per-kind metrics in Embedded Metric Format, with the logs.
		"JOBS_METRICS_NAMESPACE": jsii.String(MetricsNamespace(cfg)),
	}
	if props.ExampleKinds {
		env["JOBS_EXAMPLE_KINDS"] = jsii.String("on")
	}
	if cfg.Tracing {
		// OpenTelemetry spans to Lambda's X-Ray daemon (see lambdafn).
		env["JOBS_TRACING"] = jsii.String("on")
	}
	fn := func(name string, memory int, timeout time.Duration) awslambda.Function {
		logs := awslogs.NewLogGroup(stack, jsii.String(name+"Logs"), &awslogs.LogGroupProps{
			Retention:     retention(cfg.LogRetentionDays),
			RemovalPolicy: removal,
		})
		role := awsiam.NewRole(stack, jsii.String(name+"Role"), &awsiam.RoleProps{
			AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
			Description: jsii.String("lambdajobs " + cfg.Name + " " + name + " function"),
		})
		// Logging without the managed AWSLambdaBasicExecutionRole: only its
		// own log group.
		role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Actions:   jsii.Strings("logs:CreateLogStream", "logs:PutLogEvents"),
			Resources: jsii.Strings(*logs.LogGroupArn() + ":*"),
		}))
		cdknag.NagSuppressions_AddResourceSuppressions(role, &[]*cdknag.NagPackSuppression{{
			Id: jsii.String("AwsSolutions-IAM5"),
			Reason: jsii.String("Lambda names its log streams at run time; the wildcard covers only the streams of this " +
				"function's own log group, in place of the managed AWSLambdaBasicExecutionRole."),
			AppliesTo: &[]interface{}{jsii.String("Resource::<" + *awscdk.Stack_Of(stack).GetLogicalId(logs.Node().DefaultChild().(awscdk.CfnElement)) + ".Arn>:*")},
		}}, jsii.Bool(true))
		fnEnv := map[string]*string{"JOBS_FUNCTION": jsii.String(name)}
		for k, v := range cfg.Environment {
			fnEnv[k] = jsii.String(v)
		}
		for k, v := range cfg.FunctionEnvironment[name] {
			fnEnv[k] = jsii.String(v)
		}
		for k, v := range env {
			fnEnv[k] = v
		}
		arch := awslambda.Architecture_ARM_64()
		if cfg.Architecture == "x86_64" {
			arch = awslambda.Architecture_X86_64()
		}
		var recursive awslambda.RecursiveLoop
		var reserved *float64
		switch name {
		case "worker":
			// The worker sends retries and early deliveries back to its own
			// trigger queue on purpose, a chain bounded by each kind's
			// MaxAttempts; Lambda's default (Terminate) would cut it after
			// about 16 hops and drop the message into the DLQ.
			recursive = awslambda.RecursiveLoop_ALLOW
		case "sweeper":
			// One sweep at a time: a slow sweep never overlaps the next.
			reserved = jsii.Number(1)
		}
		tracing := awslambda.Tracing_DISABLED
		if cfg.Tracing {
			tracing = awslambda.Tracing_ACTIVE
		}
		if cfg.Tracing {
			cdknag.NagSuppressions_AddResourceSuppressions(role, &[]*cdknag.NagPackSuppression{{
				Id: jsii.String("AwsSolutions-IAM5"),
				Reason: jsii.String("X-Ray's xray:PutTraceSegments and xray:PutTelemetryRecords support no resource-level " +
					"permissions; Lambda's active tracing needs them on '*'."),
				AppliesTo: &[]interface{}{jsii.String("Resource::*")},
			}}, jsii.Bool(true))
		}
		f := awslambda.NewFunction(stack, jsii.String(name), &awslambda.FunctionProps{
			Tracing:                      tracing,
			RecursiveLoop:                recursive,
			ReservedConcurrentExecutions: reserved,
			Runtime:                      awslambda.Runtime_PROVIDED_AL2023(),
			Architecture:                 arch,
			Handler:                      jsii.String("bootstrap"),
			Code:                         awslambda.Code_FromAsset(jsii.String(asset(name)), nil),
			MemorySize:                   jsii.Number(float64(memory)),
			Timeout:                      dur(timeout),
			Environment:                  &fnEnv,
			LoggingFormat:                awslambda.LoggingFormat_JSON,
			ApplicationLogLevelV2:        logLevel(cfg.LogLevel),
			LogGroup:                     logs,
			Role:                         role,
			Description:                  jsii.String("lambdajobs " + cfg.Name + " " + name),
		})
		s.Functions[name] = f
		return f
	}
	enqueue := fn("enqueue", cfg.APIMemoryMB, cfg.APITimeout)
	getjob := fn("getjob", cfg.APIMemoryMB, cfg.APITimeout)
	cancelFn := fn("cancel", cfg.APIMemoryMB, cfg.APITimeout)
	worker := fn("worker", cfg.WorkerMemoryMB, cfg.WorkerTimeout)
	sweeper := fn("sweeper", cfg.APIMemoryMB, cfg.SweeperTimeout)
	schedulesFn := fn("schedules", cfg.APIMemoryMB, cfg.APITimeout)
	s.Enqueue, s.GetJob, s.Cancel, s.Worker, s.Sweeper, s.Schedules = enqueue, getjob, cancelFn, worker, sweeper, schedulesFn
	// Only known principals send to the queue: the roles granted
	// sqs:SendMessage by grantSend (the construct's own senders, functions
	// given GrantEnqueue, Scheduler's role), the configured envelope
	// senders, and AWS services for configured sources (their requests
	// carry aws:SourceArn, and the statements below scope them). Anyone
	// else, in this account or another, is denied.
	for _, arn := range cfg.EnvelopeSenders {
		s.senders.add(jsii.String(arn))
	}
	s.Queue.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("OnlyKnownSenders"),
		Effect:     awsiam.Effect_DENY,
		Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
		Actions:    jsii.Strings("sqs:SendMessage"),
		Resources:  &[]*string{s.Queue.QueueArn()},
		Conditions: &map[string]any{
			"Null":       map[string]any{"aws:SourceArn": "true"},
			"ArnNotLike": map[string]any{"aws:PrincipalArn": s.senders.list()},
		},
	}))
	// Only the functions that seal or open payloads read the key ring, at
	// cold start; no key material is in any environment or template.
	for _, f := range []awslambda.Function{enqueue, worker} {
		s.grantKeyRing(f)
	}
	// The worker refuses to start with a kind whose minimum run time
	// (KindOpts.MinRunTime) its invocations cannot give (jobs.WorkerConfig.Timeout).
	worker.AddEnvironment(jsii.String("JOBS_WORKER_TIMEOUT"), jsii.String(cfg.WorkerTimeout.String()), nil)
	if sources := cfg.sources(); sources != "" {
		// The worker refuses to start if a source has no route in its code.
		worker.AddEnvironment(jsii.String("JOBS_SOURCES"), jsii.String(sources), nil)
	}

	// Least privilege, per function.
	table := s.Table.TableArn()
	allow(enqueue, []string{"dynamodb:PutItem"}, table)
	// Batches: an idempotent retry reads the batch; creating it is an update.
	allow(enqueue, []string{"dynamodb:GetItem", "dynamodb:UpdateItem"}, table)
	s.grantSend(enqueue, enqueue.Role().RoleArn())
	allow(getjob, []string{"dynamodb:GetItem"}, table)
	// Cancel, retry (and a batch's completion job, created when the cancel
	// of its last job ends it).
	allow(cancelFn, []string{"dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:PutItem"}, table)
	// Listing: the two listing indexes, and the jobs they name.
	for _, f := range []awslambda.Function{getjob, cancelFn} {
		allow(f, []string{"dynamodb:Query"}, s.tableIndex(dynamostore.OwnerIndex), s.tableIndex(dynamostore.AttentionIndex),
			s.tableIndex(dynamostore.QueuedIndex), s.tableIndex(dynamostore.RunningIndex))
		allow(f, []string{"dynamodb:BatchGetItem"}, table)
		s.grantPageKey(f)
		// Operators: Config.Operators, and the roles given GrantOperate.
		f.AddEnvironment(jsii.String("JOBS_OPERATORS"), awscdk.Lazy_String(&joined{s.operators}, nil), nil)
	}
	for _, op := range cfg.Operators {
		s.operators.add(jsii.String(op))
	}
	// Retries and redriven dead letters go back to the queue: the
	// operators' dead-letter routes read and redrive the DLQ, so no person
	// needs to send to the queue.
	s.grantSend(cancelFn, cancelFn.Role().RoleArn())
	allow(cancelFn, []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes"}, s.DLQ.QueueArn())
	allow(cancelFn, []string{"sqs:GetQueueAttributes"}, s.Queue.QueueArn())
	cancelFn.AddEnvironment(jsii.String("JOBS_DLQ_URL"), s.DLQ.QueueUrl(), nil)
	// The worker claims, publishes and finishes (UpdateItem), reads a job
	// it may interrupt, and creates jobs from foreign messages (PutItem).
	allow(worker, []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem"}, table)
	// Batches: the job that ends a batch sums its shards' counts (the
	// worker, the sweeper, the cancel of its last job, the retry of its
	// enqueue), reading them at once.
	for _, f := range []awslambda.Function{enqueue, worker, sweeper} {
		allow(f, []string{"dynamodb:BatchGetItem"}, table)
	}
	// ...and sends retries and early deliveries back with a delay.
	s.grantSend(worker, worker.Role().RoleArn())
	allow(sweeper, []string{"dynamodb:Query"}, s.tableIndex(dynamostore.SweepIndex))
	allow(sweeper, []string{"dynamodb:GetItem", "dynamodb:UpdateItem"}, table)
	// ...and creates the completion job of a batch whose end was never recorded.
	allow(sweeper, []string{"dynamodb:PutItem"}, table)
	s.grantSend(sweeper, sweeper.Role().RoleArn())
	// With a customer-managed key: each function uses it for its table
	// writes and reads (the worker's receives are its event source's,
	// granted by CDK; the DLQ's, cancel's).
	for _, f := range []awslambda.Function{enqueue, cancelFn, worker, sweeper, s.Schedules} {
		s.grantKey(f, keyWrite)
	}
	s.grantKey(getjob, keyDecrypt)

	// The worker's event source.
	worker.AddEventSource(awslambdaeventsources.NewSqsEventSource(s.Queue, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(float64(cfg.BatchSize)),
		MaxBatchingWindow:       batchWindow(cfg.BatchWindow),
		MaxConcurrency:          jsii.Number(float64(cfg.MaxConcurrency)),
		ReportBatchItemFailures: jsii.Bool(true),
	}))

	// The sweeper, every minute, never retried (the next minute is the retry).
	sweeper.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{RetryAttempts: jsii.Number(0)})
	awsevents.NewRule(stack, jsii.String("SweepEveryMinute"), &awsevents.RuleProps{
		Schedule: awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(1))),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(sweeper, &awseventstargets.LambdaFunctionProps{
			RetryAttempts: jsii.Number(0),
		})},
	})

	// The HTTP API: IAM (or JWT) on both routes, access logs, throttling.
	var authorizer awsapigatewayv2.IHttpRouteAuthorizer = awsapigatewayv2authorizers.NewHttpIamAuthorizer()
	if cfg.JWT != nil {
		authorizer = awsapigatewayv2authorizers.NewHttpJwtAuthorizer(jsii.String("Jwt"), jsii.String(cfg.JWT.Issuer),
			&awsapigatewayv2authorizers.HttpJwtAuthorizerProps{JwtAudience: jsii.Strings(cfg.JWT.Audience...)})
	}
	apiProps := &awsapigatewayv2.HttpApiProps{
		ApiName:            jsii.String("lambdajobs-" + cfg.Name),
		CreateDefaultStage: jsii.Bool(false),
	}
	if c := cfg.CORS; c != nil {
		apiProps.CorsPreflight = &awsapigatewayv2.CorsPreflightOptions{
			AllowOrigins: jsii.Strings(c.AllowOrigins...),
			AllowMethods: &[]awsapigatewayv2.CorsHttpMethod{awsapigatewayv2.CorsHttpMethod_GET, awsapigatewayv2.CorsHttpMethod_POST, awsapigatewayv2.CorsHttpMethod_DELETE},
			AllowHeaders: jsii.Strings("content-type", "idempotency-key", "authorization"),
			MaxAge:       awscdk.Duration_Hours(jsii.Number(1)),
		}
	}
	s.API = awsapigatewayv2.NewHttpApi(stack, jsii.String("Api"), apiProps)
	// The routes, in one table: each with its function and, behind a JWT
	// authorizer, the scopes Config.JWT asks of it.
	for _, r := range routes {
		opts := &awsapigatewayv2.AddRoutesOptions{
			Path: jsii.String(r.path), Methods: &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod(r.method)},
			Integration: awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String(r.id), s.Functions[r.function], nil),
			Authorizer:  authorizer,
		}
		if cfg.JWT != nil {
			if scopes := cfg.JWT.Scopes[r.method+" "+r.path]; len(scopes) > 0 {
				opts.AuthorizationScopes = jsii.Strings(scopes...)
			}
		}
		s.API.AddRoutes(opts)
	}
	accessLogs := awslogs.NewLogGroup(stack, jsii.String("ApiAccessLogs"), &awslogs.LogGroupProps{
		Retention: retention(cfg.LogRetentionDays), RemovalPolicy: removal,
	})
	stage := awsapigatewayv2.NewHttpStage(stack, jsii.String("DefaultStage"), &awsapigatewayv2.HttpStageProps{
		HttpApi:    s.API,
		StageName:  jsii.String("$default"),
		AutoDeploy: jsii.Bool(true),
		Throttle:   &awsapigatewayv2.ThrottleSettings{RateLimit: jsii.Number(cfg.ThrottleRate), BurstLimit: jsii.Number(float64(cfg.ThrottleBurst))},
		AccessLogSettings: &accessLogSettings{
			destination: awsapigatewayv2.NewLogGroupLogDestination(accessLogs),
			format:      awsapigateway.AccessLogFormat_Custom(jsii.String(AccessLogFormat)),
		},
	})
	// Creating a batch writes up to 1,000 jobs: its own, tighter throttle.
	stage.Node().DefaultChild().(awsapigatewayv2.CfnStage).SetRouteSettings(map[string]any{
		"POST /v1/batches": map[string]any{
			"ThrottlingRateLimit":  cfg.BatchThrottleRate,
			"ThrottlingBurstLimit": cfg.BatchThrottleBurst,
		},
		// A bulk action changes up to 100 jobs.
		"POST /v1/bulk/{action}": map[string]any{
			"ThrottlingRateLimit":  cfg.BatchThrottleRate,
			"ThrottlingBurstLimit": cfg.BatchThrottleBurst,
		},
	})

	// Foreign sources (docs/SOURCES.md): each allowed to send only from
	// its own ARN.
	for i, src := range cfg.S3Sources {
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
	if len(cfg.S3Sources) > 0 {
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
			jsii.String("/"+*awscdk.Stack_Of(stack).StackName()+"/BucketNotificationsHandler050a0587b7544547bf325f094a3db834/Role"),
			&[]*cdknag.NagPackSuppression{
				{Id: jsii.String("AwsSolutions-IAM4"), Reason: jsii.String("CDK's own handler that puts notification configurations on existing buckets; it runs only during deployments.")},
				{Id: jsii.String("AwsSolutions-IAM5"), Reason: jsii.String("CDK's bucket notifications handler needs s3:PutBucketNotification on the buckets it configures; it runs only during deployments.")},
			}, jsii.Bool(true))
	}
	for i, src := range cfg.EventBridgeSource {
		pattern := &awsevents.EventPattern{Source: jsii.Strings(src.Sources...)}
		if len(src.DetailTypes) > 0 {
			pattern.DetailType = jsii.Strings(src.DetailTypes...)
		}
		props := &awsevents.RuleProps{
			EventPattern: pattern,
			Targets:      &[]awsevents.IRuleTarget{awseventstargets.NewSqsQueue(s.Queue, nil)},
		}
		if src.Bus != "" {
			props.EventBus = awsevents.EventBus_FromEventBusName(stack, jsii.String(fmt.Sprintf("Source%dBus", i)), jsii.String(src.Bus))
		}
		awsevents.NewRule(stack, jsii.String(fmt.Sprintf("Source%dRule", i)), props)
	}

	s.schedules(props.Schedules)
	s.alarms(cfg, worker, sweeper)
	s.dashboard(cfg)

	return s
}

// AccessLogFormat is the API's access log line: one JSON object per request,
// with the caller, the route, the status, the latencies and the errors of the
// authorizer and the integration.
const AccessLogFormat = `{"requestId":"$context.requestId","ip":"$context.identity.sourceIp","caller":"$context.identity.caller",` +
	`"user":"$context.identity.userArn","requestTime":"$context.requestTime","routeKey":"$context.routeKey",` +
	`"status":"$context.status","responseLength":"$context.responseLength","latency":"$context.responseLatency",` +
	`"integrationLatency":"$context.integrationLatency","integrationStatus":"$context.integrationStatus",` +
	`"integrationError":"$context.integrationErrorMessage","error":"$context.error.message",` +
	`"authorizerError":"$context.authorizer.error"}`

// accessLogSettings is the stage's access log configuration (an
// awsapigatewayv2.IAccessLogSettings).
type accessLogSettings struct {
	destination awsapigatewayv2.IAccessLogDestination
	format      awsapigateway.AccessLogFormat
}

func (a *accessLogSettings) Destination() awsapigatewayv2.IAccessLogDestination { return a.destination }
func (a *accessLogSettings) Format() awsapigateway.AccessLogFormat              { return a.format }

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

// FunctionNames are the six functions, as folders of JobsProps.Bootstraps.
var FunctionNames = []string{"enqueue", "getjob", "cancel", "worker", "sweeper", "schedules"}

// alarms sends to one topic, with OK actions, so whoever is told of a
// problem is told of its end: the dead-letter queue grows; the oldest
// queued message is old; any function errs; the worker is throttled; the
// sweeper stops running (a dead sweeper means lost dispatches never
// recover); DynamoDB throttles; the API answers 5xx or slowly; jobs fail
// interrupted or timed out.
func (s *Jobs) alarms(cfg Config, worker, sweeper awslambda.Function) {
	stack := s.Construct
	if cfg.AlarmTopicARN != "" {
		s.AlarmTopic = awssns.Topic_FromTopicArn(stack, jsii.String("Alarms"), jsii.String(cfg.AlarmTopicARN))
	} else {
		topic := awssns.NewTopic(stack, jsii.String("Alarms"), &awssns.TopicProps{EnforceSSL: jsii.Bool(true)})
		if cfg.AlarmEmail != "" {
			topic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(cfg.AlarmEmail), nil))
		}
		s.AlarmTopic = topic
	}
	action := awscloudwatchactions.NewSnsAction(s.AlarmTopic)
	type opts struct {
		periods  float64
		below    bool
		breached bool // missing data counts as breaching (a heartbeat)
	}
	alarm := func(id, description string, metric awscloudwatch.IMetric, threshold float64, o opts) {
		cmp := awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD
		if o.below {
			cmp = awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD
		}
		missing := awscloudwatch.TreatMissingData_NOT_BREACHING
		if o.breached {
			missing = awscloudwatch.TreatMissingData_BREACHING
		}
		a := awscloudwatch.NewAlarm(stack, jsii.String(id), &awscloudwatch.AlarmProps{
			AlarmDescription:   jsii.String(description),
			Metric:             metric,
			Threshold:          jsii.Number(threshold),
			EvaluationPeriods:  jsii.Number(max(o.periods, 1)),
			ComparisonOperator: cmp,
			TreatMissingData:   missing,
		})
		a.AddAlarmAction(action)
		a.AddOkAction(action)
	}
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	five := awscdk.Duration_Minutes(jsii.Number(5))
	sum := &awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Sum")}
	alarm("DeadLettersAlarm", "Messages reached the dead-letter queue (more than a minute ago): unroutable messages or jobs that could not be settled.",
		dlqGrowth(s.DLQ), 1, opts{})
	alarm("OldestMessageAlarm", fmt.Sprintf("The oldest queued message is older than %v: workers are not keeping up.", cfg.OldestMessageAlarm),
		s.Queue.MetricApproximateAgeOfOldestMessage(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum")}), cfg.OldestMessageAlarm.Seconds(), opts{})
	for _, name := range FunctionNames {
		alarm(strings.ToUpper(name[:1])+name[1:]+"ErrorsAlarm", "The "+name+" function failed (an invocation, not a job).",
			s.Functions[name].MetricErrors(sum), 1, opts{})
	}
	alarm("WorkerThrottlesAlarm", "The worker function was throttled.", worker.MetricThrottles(sum), 1, opts{})
	alarm("SweeperHeartbeatAlarm", "The sweeper has not run for 5 minutes: lost dispatches and dead workers' jobs are not being recovered.",
		sweeper.MetricInvocations(&awscloudwatch.MetricOptions{Period: five, Statistic: jsii.String("Sum")}), 1, opts{below: true, breached: true})
	alarm("TableThrottlesAlarm", "DynamoDB throttled requests to the jobs table.",
		s.Table.MetricThrottledRequestsForOperations(&awsdynamodb.OperationsMetricOptions{Period: minute, Operations: &[]awsdynamodb.Operation{
			awsdynamodb.Operation_PUT_ITEM, awsdynamodb.Operation_GET_ITEM, awsdynamodb.Operation_UPDATE_ITEM,
			awsdynamodb.Operation_QUERY, awsdynamodb.Operation_TRANSACT_WRITE_ITEMS,
		}}), 1, opts{})
	apiMetric := func(name, stat string) awscloudwatch.Metric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String("AWS/ApiGateway"), MetricName: jsii.String(name),
			DimensionsMap: &map[string]*string{"ApiId": s.API.ApiId(), "Stage": jsii.String("$default")},
			Period:        minute, Statistic: jsii.String(stat),
		})
	}
	s.scheduleAlarm(func(id, description string, metric awscloudwatch.IMetric, threshold float64) {
		alarm(id, description, metric, threshold, opts{})
	})
	alarm("Api5xxAlarm", "The API answered 5xx: a dependency is down or a function fails.", apiMetric("5xx", "Sum"), 5, opts{})
	alarm("ApiLatencyAlarm", "The API's p99 latency was over 2 s for 5 minutes.", apiMetric("Latency", "p99"), 2000, opts{periods: 5})
	// From the functions' own metrics (Embedded Metric Format; each also
	// published under the service dimension alone, which alarms can watch).
	jobsMetric := func(name, service, stat string) awscloudwatch.Metric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String(MetricsNamespace(cfg)), MetricName: jsii.String(name),
			DimensionsMap: &map[string]*string{"service": jsii.String(service)},
			Period:        minute, Statistic: jsii.String(stat),
		})
	}
	alarm("AbandonedJobsAlarm", "Jobs failed or retried as interrupted (their worker died) or timed out (their handler overran).",
		awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String("FILL(wi, 0) + FILL(wt, 0) + FILL(si, 0)"),
			UsingMetrics: &map[string]awscloudwatch.IMetric{
				"wi": jobsMetric("JobsInterrupted", "worker", "Sum"), "wt": jobsMetric("JobsTimedOut", "worker", "Sum"),
				"si": jobsMetric("JobsInterrupted", "sweeper", "Sum"),
			},
			Period: minute, Label: jsii.String("jobs interrupted or timed out per minute"),
		}), 1, opts{})
	alarm("JobFailuresAlarm", fmt.Sprintf("%d or more jobs failed in a minute (any kind, any code).", cfg.FailuresAlarm),
		jobsMetric("JobsFailed", "worker", "Sum"), float64(cfg.FailuresAlarm), opts{})
	alarm("QueueLatencyAlarm", fmt.Sprintf("Jobs waited more than %v from enqueue (or run_at) to start (p99, 5 minutes).", cfg.QueueLatencyAlarm),
		jobsMetric("QueueLatency", "worker", "p99"), float64(cfg.QueueLatencyAlarm.Milliseconds()), opts{periods: 5})
	alarm("SweepIncompleteAlarm", "Sweeps ran out of time for 5 minutes: more unfinished jobs are due than one sweep can settle.",
		jobsMetric("SweepComplete", "sweeper", "Minimum"), 1, opts{periods: 5, below: true})
}

// MetricsNamespace is the namespace of an environment's metrics.
func MetricsNamespace(cfg Config) string { return "lambdajobs/" + cfg.Name }

// dashboard draws an environment on one CloudWatch dashboard: jobs by
// status and kind, run duration and queue latency, the queue and its DLQ,
// the functions, the sweeper.
func (s *Jobs) dashboard(cfg Config) {
	ns := MetricsNamespace(cfg)
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	search := func(label, metric, stat string) awscloudwatch.IMetric {
		return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression: jsii.String(fmt.Sprintf(`SEARCH('{%s,kind,service} MetricName="%s" service="worker"', '%s', 60)`, ns, metric, stat)),
			Label:      jsii.String(label), Period: minute,
		})
	}
	graph := func(title string, metrics ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{Title: jsii.String(title), Left: &metrics, Width: jsii.Number(12)})
	}
	peak := &awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum")}
	sum := &awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Sum")}
	var fnErrors, fnThrottles []awscloudwatch.IMetric
	for _, name := range FunctionNames {
		fnErrors = append(fnErrors, s.Functions[name].MetricErrors(sum))
		fnThrottles = append(fnThrottles, s.Functions[name].MetricThrottles(sum))
	}
	sweeper := func(metric, stat string) awscloudwatch.IMetric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: jsii.String(ns), MetricName: jsii.String(metric),
			DimensionsMap: &map[string]*string{"service": jsii.String("sweeper")}, Period: minute, Statistic: jsii.String(stat)})
	}
	awscloudwatch.NewDashboard(s.Construct, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String("lambdajobs-" + cfg.Name),
		Widgets: &[]*[]awscloudwatch.IWidget{
			{graph("Jobs succeeded per minute, by kind", search("succeeded", "JobsSucceeded", "Sum")),
				graph("Jobs failed per minute, by kind and code", awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
					Expression: jsii.String(fmt.Sprintf(`SEARCH('{%s,code,kind,service} MetricName="JobsFailed" service="worker"', 'Sum', 60)`, ns)),
					Label:      jsii.String("failed"), Period: minute,
				}))},
			{graph("Jobs retried, timed out, interrupted, cancelled per minute",
				search("retried", "JobsRetried", "Sum"), search("timed out", "JobsTimedOut", "Sum"),
				search("interrupted", "JobsInterrupted", "Sum"), search("cancelled", "JobsCancelled", "Sum")),
				graph("Jobs started per minute, by kind", search("started", "JobsStarted", "Sum"))},
			{graph("Run duration p50 and p99 (ms), by kind", search("p50", "RunDuration", "p50"), search("p99", "RunDuration", "p99")),
				graph("Queue latency p50 and p99 (ms), by kind", search("p50", "QueueLatency", "p50"), search("p99", "QueueLatency", "p99"))},
			{graph("Queue depth and oldest message age (s)",
				s.Queue.MetricApproximateNumberOfMessagesVisible(peak), s.Queue.MetricApproximateAgeOfOldestMessage(peak)),
				graph("Dead-letter queue depth", s.DLQ.MetricApproximateNumberOfMessagesVisible(peak))},
			{graph("Function errors", fnErrors...), graph("Function throttles", fnThrottles...)},
			{graph("Sweeper: re-sent, interrupted, batches, errors",
				sweeper("SweepResent", "Sum"), sweeper("SweepInterrupted", "Sum"), sweeper("SweepBatches", "Sum"), sweeper("SweepErrors", "Sum")),
				graph("Sweeper: duration (ms) and completed sweeps", sweeper("SweepDuration", "Maximum"), sweeper("SweepComplete", "Sum"))},
		},
	})
}

func batchWindow(d time.Duration) awscdk.Duration {
	if d <= 0 {
		return nil
	}
	return dur(d)
}

func retention(days int) awslogs.RetentionDays {
	switch {
	case days <= 1:
		return awslogs.RetentionDays_ONE_DAY
	case days <= 7:
		return awslogs.RetentionDays_ONE_WEEK
	case days <= 14:
		return awslogs.RetentionDays_TWO_WEEKS
	case days <= 30:
		return awslogs.RetentionDays_ONE_MONTH
	case days <= 90:
		return awslogs.RetentionDays_THREE_MONTHS
	case days <= 180:
		return awslogs.RetentionDays_SIX_MONTHS
	case days <= 365:
		return awslogs.RetentionDays_ONE_YEAR
	}
	return awslogs.RetentionDays_TWO_YEARS
}

// logLevel is Lambda's application log level for a Config.LogLevel.
func logLevel(l string) awslambda.ApplicationLogLevel {
	switch l {
	case "DEBUG":
		return awslambda.ApplicationLogLevel_DEBUG
	case "WARN":
		return awslambda.ApplicationLogLevel_WARN
	case "ERROR":
		return awslambda.ApplicationLogLevel_ERROR
	}
	return awslambda.ApplicationLogLevel_INFO
}

// DLQGrowthExpression is the metric math of the dead-letter alarms: the
// messages added to a dead-letter queue in the last minute (the change of
// its visible count), an idle queue's missing data points counted as 0.
// SQS publishes a queue's metrics only while the queue is active, so after
// a quiet spell the first data point of a new dead letter follows a gap:
// RATE over the raw metric divides by the gap's hours and never reaches
// one message a minute, while this fires. It clears once the queue stops
// growing, rather than staying in ALARM while old messages sit there.
const DLQGrowthExpression = "DIFF(FILL(dlq, 0))"

// dlqGrowth is DLQGrowthExpression over a queue.
func dlqGrowth(q awssqs.IQueue) awscloudwatch.IMetric {
	minute := awscdk.Duration_Minutes(jsii.Number(1))
	return awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
		Expression: jsii.String(DLQGrowthExpression),
		UsingMetrics: &map[string]awscloudwatch.IMetric{
			"dlq": q.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{Period: minute, Statistic: jsii.String("Maximum")}),
		},
		Period: minute, Label: jsii.String("messages added to the DLQ per minute"),
	})
}
