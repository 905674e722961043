package jobsinfra

import (
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
)

// functions creates the deployment's functions (deploy.Functions), each
// with its own role and log group. What each is told is set at the end,
// in one place (environments).
func (s *Jobs) functions() {
	for _, f := range deploy.Functions {
		memory, timeout := s.cfg.size(f.Name)
		s.function(f.Name, f.Name, memory, timeout)
	}
	s.Enqueue, s.GetJob, s.WaitJob, s.Cancel = s.Functions[deploy.Enqueue], s.Functions[deploy.GetJob], s.Functions[deploy.WaitJob], s.Functions[deploy.Cancel]
	s.Worker, s.Sweeper, s.Schedules = s.Functions[deploy.Worker], s.Functions[deploy.Sweeper], s.Functions[deploy.Schedules]
	s.Lanes[""].Worker = s.Worker
}

// size is the memory and timeout of the function name: the worker's, the
// sweeper's (the API's memory), the wait function's (the descriptor's: its
// timeout bounds the waits), or the API's.
func (c Config) size(name string) (int, time.Duration) {
	switch name {
	case deploy.WaitJob:
		f, _ := deploy.FunctionNamed(name)
		return f.MemoryMB, f.Timeout
	case deploy.Worker:
		return c.WorkerMemoryMB, c.WorkerTimeout
	case deploy.Sweeper:
		return c.APIMemoryMB, c.SweeperTimeout
	}
	return c.APIMemoryMB, c.APITimeout
}

// environments tells every function of the construct what it reads, in
// one place: one value of each variable the construct sets (values),
// each function given the values of the variables it reads
// (deploy.Values.For), after the team's own (Config.Environment,
// FunctionEnvironment), which they replace.
func (s *Jobs) environments() {
	s.values = s.envValues()
	for _, name := range FunctionNames {
		setEnv(s.Functions[name], s.values.For(name, jsii.String(name)))
	}
	for _, name := range s.laneOrder[1:] {
		setEnv(s.Lanes[name].Worker, s.laneWorkerValues(name).For(deploy.Worker, jsii.String(deploy.Worker)))
	}
}

func setEnv(f awslambda.Function, env map[string]*string) {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		f.AddEnvironment(jsii.String(k), env[k], nil)
	}
}

// envValues are the values of the variables the construct sets, from its
// Config and its resources: the default lane's worker's where a lane's
// worker has its own (laneWorkerValues).
func (s *Jobs) envValues() deploy.Values[*string] {
	cfg := s.cfg
	d := cfg.deadlines(cfg.lane(""))
	mode := deploy.EnvEvents.Format(cfg.AllEvents)
	str := func(v string) *string { return jsii.String(v) }
	v := deploy.Values[*string]{
		deploy.EnvTable.Var: s.Table.TableName(), deploy.EnvQueueURL.Var: s.Queue.QueueUrl(),
		deploy.EnvDispatchGrace.Var: str(deploy.EnvDispatchGrace.Format(cfg.DispatchGrace)),
		deploy.EnvRetention.Var:     str(deploy.EnvRetention.Format(cfg.Retention)),
		// One value for every function that reads it: a worker and an
		// enqueue that disagree would meet each other's jobs.
		deploy.EnvMessageFirst.Var:      str(deploy.EnvMessageFirst.Format(cfg.messageFirst())),
		deploy.EnvWorkerConcurrency.Var: str(deploy.EnvWorkerConcurrency.Format(cfg.WorkerConcurrency)),
		deploy.EnvHandlerReserve.Var:    str(deploy.EnvHandlerReserve.Format(d.Reserve)),
		deploy.EnvFinalWriteTimeout.Var: str(deploy.EnvFinalWriteTimeout.Format(d.FinalWrite)),
		// The worker refuses to start with a kind whose minimum run time
		// (KindOpts.MinRunTime) its invocations cannot give.
		deploy.EnvWorkerTimeout.Var: str(deploy.EnvWorkerTimeout.Format(cfg.WorkerTimeout)),
		// Per-kind metrics in Embedded Metric Format, with the logs.
		deploy.EnvMetricsNamespace.Var:     str(s.Names.MetricsNamespace),
		deploy.EnvPayloadKeyringSecret.Var: s.payloadSecret.SecretArn(),
		deploy.EnvPageTokenSecret.Var:      s.pageSecret.SecretArn(),
		// Operators: Config.Operators, and the roles given GrantOperate.
		deploy.EnvOperators.Var: awscdk.Lazy_String(&joined{s.operators}, nil),
		// Who may choose a job's tenant and lane over the API.
		deploy.EnvTrustedCallers.Var:      str(deploy.EnvTrustedCallers.Format(cfg.TrustedCallers)),
		deploy.EnvEnqueueRatePerOwner.Var: str(deploy.EnvEnqueueRatePerOwner.Format(cfg.EnqueueRatePerOwner)),
		deploy.EnvWaitsPerOwner.Var:       str(deploy.EnvWaitsPerOwner.Format(cfg.waitsPerOwner())),
		deploy.EnvDLQURL.Var:              s.DLQ.QueueUrl(),
		deploy.EnvEventBus.Var:            s.EventBus.EventBusArn(),
		deploy.EnvEvents.Var:              str(mode),
		deploy.EnvScheduleGroup.Var:       s.RuntimeScheduleGroup.Ref(), deploy.EnvQueueARN.Var: s.Queue.QueueArn(),
		deploy.EnvSchedulerRoleARN.Var: s.SchedulerRole.RoleArn(), deploy.EnvScheduleDLQARN.Var: s.ScheduleDLQ.QueueArn(),
		deploy.EnvScheduleMaxEventAge.Var: str(deploy.EnvScheduleMaxEventAge.Format(cfg.ScheduleMaxEventAge)),
	}
	if s.Parts != nil {
		v[deploy.EnvBucket.Var] = s.Parts.BucketName()
	}
	if cfg.Tracing {
		// OpenTelemetry spans to Lambda's X-Ray daemon (see lambdafn).
		v[deploy.EnvTracing.Var] = str(deploy.EnvTracing.Format(true))
	}
	if sources := cfg.sources(); sources != "" {
		// The worker refuses to start if a source has no route in its code.
		v[deploy.EnvSources.Var] = str(sources)
	}
	s.laneValues(v)
	return v
}

// function creates one of the functions (deploy.Functions) (or a lane's worker, id
// "worker-<lane>"), with its log group and role.
func (s *Jobs) function(name, id string, memory int, timeout time.Duration) awslambda.Function {
	cfg := s.cfg
	logs := s.logGroup(id, id+"Logs")
	arch := awslambda.Architecture_ARM_64()
	if cfg.Architecture == "x86_64" {
		arch = awslambda.Architecture_X86_64()
	}
	env := s.teamEnv(name)
	props := &awslambda.FunctionProps{
		Architecture:          arch,
		MemorySize:            jsii.Number(float64(memory)),
		Environment:           &env,
		ApplicationLogLevelV2: logLevel(cfg.LogLevel),
		Description:           jsii.String("lambdajobs " + cfg.Name + " " + name),
	}
	fixed := fixedFunction{name: name, timeout: timeout, logs: logs, role: s.functionRole(id)}
	s.fixFunction(props, fixed)
	s.overrides.function(name, props)
	s.fixFunction(props, fixed)
	f := awslambda.NewFunction(s.Construct, jsii.String(id), props)
	if id == name {
		s.Functions[name] = f
	}
	return f
}

// fixedFunction is what of a function no override changes.
type fixedFunction struct {
	name    string
	timeout time.Duration
	logs    awslogs.LogGroup
	role    awsiam.Role
}

// fixFunction sets the props of a function that the construct re-asserts
// after Overrides.Function (see there).
func (s *Jobs) fixFunction(props *awslambda.FunctionProps, f fixedFunction) {
	props.Runtime = awslambda.Runtime_PROVIDED_AL2023()
	props.Handler = jsii.String("bootstrap")
	props.Code = awslambda.Code_FromAsset(jsii.String(s.asset(f.name)), nil)
	props.Role, props.LogGroup = f.role, f.logs
	props.Timeout = dur(f.timeout)
	props.LoggingFormat = awslambda.LoggingFormat_JSON
	props.Tracing = awslambda.Tracing_DISABLED
	if s.cfg.Tracing {
		props.Tracing = awslambda.Tracing_ACTIVE
	}
	switch f.name {
	case "worker":
		// The worker sends retries and early deliveries back to its own
		// trigger queue on purpose, a chain bounded by each kind's
		// MaxAttempts; Lambda's default (Terminate) would cut it after
		// about 16 hops and drop the message into the DLQ.
		props.RecursiveLoop = awslambda.RecursiveLoop_ALLOW
	case "sweeper":
		// One sweep at a time: a slow sweep never overlaps the next.
		props.ReservedConcurrentExecutions = jsii.Number(1)
	case deploy.WaitJob:
		// Waits hold their instances: their own share, and no more.
		props.ReservedConcurrentExecutions = jsii.Number(float64(s.cfg.WaitConcurrency))
	}
}

// logGroup creates a log group (named for Overrides.LogGroup), kept as
// long as Config says.
func (s *Jobs) logGroup(name, id string) awslogs.LogGroup {
	props := &awslogs.LogGroupProps{Retention: retention(s.cfg.LogRetentionDays), RemovalPolicy: s.removal}
	s.overrides.logGroup(name, props)
	return awslogs.NewLogGroup(s.Construct, jsii.String(id), props)
}

// functionRole is a function's role, with no managed policy: what it may
// do is its grants in internal/deploy (grantRoles), its own log group's
// streams among them (not the managed AWSLambdaBasicExecutionRole), and
// X-Ray with tracing on.
func (s *Jobs) functionRole(name string) awsiam.Role {
	role := awsiam.NewRole(s.Construct, jsii.String(name+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("lambdajobs " + s.cfg.Name + " " + name + " function"),
	})
	return role
}

// teamEnv is the team's own variables of a function (Config.Environment,
// FunctionEnvironment); what the construct tells it replaces them
// (environments).
func (s *Jobs) teamEnv(name string) map[string]*string {
	env := map[string]*string{}
	for k, v := range s.cfg.Environment {
		env[k] = jsii.String(v)
	}
	for k, v := range s.cfg.FunctionEnvironment[name] {
		env[k] = jsii.String(v)
	}
	return env
}

// queuePolicy lets only known principals send to the queue: the roles
// granted sqs:SendMessage by their grants (grants.go: the construct's own senders,
// functions given GrantEnqueue, Scheduler's role), the configured envelope
// senders, and AWS services for configured sources (their requests carry
// aws:SourceArn, and the statements of sources scope them). Anyone else,
// in this account or another, is denied.
func (s *Jobs) queuePolicy() {
	for _, arn := range s.cfg.EnvelopeSenders {
		s.senders.add(jsii.String(arn))
	}
	// Every lane's queue: each sender may send to every lane (a job goes
	// to its own lane's queue whoever sends it).
	for _, name := range s.laneOrder {
		q := s.Lanes[name].Queue
		q.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:        jsii.String("OnlyKnownSenders"),
			Effect:     awsiam.Effect_DENY,
			Principals: &[]awsiam.IPrincipal{awsiam.NewAnyPrincipal()},
			Actions:    jsii.Strings("sqs:SendMessage"),
			Resources:  &[]*string{q.QueueArn()},
			Conditions: &map[string]any{
				"Null":       map[string]any{"aws:SourceArn": "true"},
				"ArnNotLike": map[string]any{"aws:PrincipalArn": s.senders.list()},
			},
		}))
	}
}

// apiPermissions records who may do what through the API's functions
// (the operators); their grants are in internal/deploy (grantRoles) and
// what they are told in environments.
func (s *Jobs) apiPermissions() {
	for _, op := range s.cfg.Operators {
		s.operators.add(jsii.String(op))
	}
}

// triggers connects each lane's worker to its queue (partial batch
// responses) and runs the sweeper every minute, never retried (the next
// minute is the retry).
func (s *Jobs) triggers() {
	for _, name := range s.laneOrder {
		s.laneTrigger(s.Lanes[name])
	}
	s.Sweeper.ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{RetryAttempts: jsii.Number(0)})
	awsevents.NewRule(s.Construct, jsii.String("SweepEveryMinute"), &awsevents.RuleProps{
		Schedule: awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(1))),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(s.Sweeper, &awseventstargets.LambdaFunctionProps{
			RetryAttempts: jsii.Number(0),
		})},
	})
}
