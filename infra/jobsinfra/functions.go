package jobsinfra

import (
	"maps"
	"strconv"
	"strings"
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

// functions creates the six functions, each with its own role and log
// group, and the environment every one of them is told.
func (s *Jobs) functions() {
	cfg := s.cfg
	s.env = map[string]*string{
		"JOBS_TABLE":               s.Table.TableName(),
		"JOBS_QUEUE_URL":           s.Queue.QueueUrl(),
		"JOBS_DISPATCH_GRACE":      jsii.String(cfg.DispatchGrace.String()),
		"JOBS_RETENTION":           jsii.String(cfg.Retention.String()),
		"JOBS_WORKER_CONCURRENCY":  jsii.String(strconv.Itoa(cfg.WorkerConcurrency)),
		"JOBS_HANDLER_RESERVE":     jsii.String(cfg.HandlerReserve.String()),
		"JOBS_FINAL_WRITE_TIMEOUT": jsii.String(cfg.FinalWriteTimeout.String()),
		// Per-kind metrics in Embedded Metric Format, with the logs.
		"JOBS_METRICS_NAMESPACE": jsii.String(s.Names.MetricsNamespace),
	}
	if cfg.Tracing {
		// OpenTelemetry spans to Lambda's X-Ray daemon (see lambdafn).
		s.env["JOBS_TRACING"] = jsii.String("on")
	}
	s.Enqueue = s.function("enqueue", "enqueue", cfg.APIMemoryMB, cfg.APITimeout)
	s.GetJob = s.function("getjob", "getjob", cfg.APIMemoryMB, cfg.APITimeout)
	s.Cancel = s.function("cancel", "cancel", cfg.APIMemoryMB, cfg.APITimeout)
	s.Worker = s.function("worker", "worker", cfg.WorkerMemoryMB, cfg.WorkerTimeout)
	s.Sweeper = s.function("sweeper", "sweeper", cfg.APIMemoryMB, cfg.SweeperTimeout)
	s.Schedules = s.function("schedules", "schedules", cfg.APIMemoryMB, cfg.APITimeout)
	// Only the functions that seal or open payloads read the key ring, at
	// cold start; no key material is in any environment or template.
	for _, f := range []awslambda.Function{s.Enqueue, s.Worker} {
		s.tellKeyRing(f)
	}
	// The worker refuses to start with a kind whose minimum run time
	// (KindOpts.MinRunTime) its invocations cannot give (jobs.Config.WorkerTimeout).
	s.tell(s.Worker, "JOBS_WORKER_TIMEOUT", jsii.String(cfg.WorkerTimeout.String()))
	s.deadlineEnv(s.Worker, cfg.lane(""))
	s.Lanes[""].Worker = s.Worker
	if sources := cfg.sources(); sources != "" {
		// The worker refuses to start if a source has no route in its code.
		s.tell(s.Worker, "JOBS_SOURCES", jsii.String(sources))
	}
}

// function creates one of the six functions (or a lane's worker, id
// "worker-<lane>"), with its log group and role.
func (s *Jobs) function(name, id string, memory int, timeout time.Duration) awslambda.Function {
	cfg := s.cfg
	logs := s.logGroup(id, id+"Logs")
	arch := awslambda.Architecture_ARM_64()
	if cfg.Architecture == "x86_64" {
		arch = awslambda.Architecture_X86_64()
	}
	env := s.functionEnv(name)
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
	s.told[*f.Node().Path()] = s.ownEnv(name)
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
	env := map[string]*string{}
	if props.Environment != nil {
		env = maps.Clone(*props.Environment)
	}
	maps.Copy(env, s.ownEnv(f.name))
	props.Environment = &env
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

// functionEnv is a function's environment: the team's own variables
// (Config.Environment, FunctionEnvironment), then what the construct tells
// it (ownEnv), which nothing overrides.
func (s *Jobs) functionEnv(name string) map[string]*string {
	env := map[string]*string{}
	for k, v := range s.cfg.Environment {
		env[k] = jsii.String(v)
	}
	for k, v := range s.cfg.FunctionEnvironment[name] {
		env[k] = jsii.String(v)
	}
	maps.Copy(env, s.ownEnv(name))
	return env
}

// tell sets the variable name of f's environment to v, and records it
// among what the construct told f (told) when f is one of its own.
func (s *Jobs) tell(f awslambda.Function, name string, v *string) {
	f.AddEnvironment(jsii.String(name), v, nil)
	if told, ok := s.told[*f.Node().Path()]; ok {
		told[name] = v
	}
}

// ownEnv is what the construct tells a function at creation: its role
// (JOBS_FUNCTION) and what every function is told.
func (s *Jobs) ownEnv(name string) map[string]*string {
	env := maps.Clone(s.env)
	env["JOBS_FUNCTION"] = jsii.String(name)
	// The lanes, to the functions that send (as the descriptor says).
	for k, v := range s.laneEnv() {
		if d, ok := deploy.Lookup(k); ok && d.ReadBy(name) {
			env[k] = v
		}
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

// apiPermissions tells the API's functions (enqueue, getjob, cancel) what
// their grants (internal/deploy, grantRoles) let them reach, and who may
// do what through them.
func (s *Jobs) apiPermissions() {
	enqueue, getjob, cancelFn := s.Enqueue, s.GetJob, s.Cancel
	// Who may choose a job's tenant and lane over the API.
	s.tell(enqueue, "JOBS_TRUSTED_CALLERS", jsii.String(strings.Join(s.cfg.TrustedCallers, ",")))
	s.tell(enqueue, "JOBS_ENQUEUE_RATE_PER_OWNER", jsii.String(strconv.Itoa(s.cfg.EnqueueRatePerOwner)))
	for _, f := range []awslambda.Function{getjob, cancelFn} {
		s.tellPageKey(f)
		// Operators: Config.Operators, and the roles given GrantOperate.
		s.tell(f, "JOBS_OPERATORS", awscdk.Lazy_String(&joined{s.operators}, nil))
	}
	for _, op := range s.cfg.Operators {
		s.operators.add(jsii.String(op))
	}
	// The operators' dead-letter routes read and redrive the DLQ, so no
	// person needs to send to the queue.
	s.deadLetterPermissions(cancelFn)
}

// deadLetterPermissions tells fn (cancel) every lane's DLQ, which its
// grants let it read and redrive to the lane's own queue.
func (s *Jobs) deadLetterPermissions(fn awslambda.Function) {
	urls := map[string]*string{}
	for _, name := range s.laneOrder[1:] {
		urls[name] = s.Lanes[name].DLQ.QueueUrl()
	}
	s.tell(fn, "JOBS_DLQ_URL", s.DLQ.QueueUrl())
	if len(urls) > 0 {
		s.tell(fn, "JOBS_LANE_DLQ_URLS", awscdk.Stack_Of(s.Construct).ToJsonString(urls, nil))
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
