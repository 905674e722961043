// Package jobsinfra is the CDK construct that deploys lambdajobs into your
// own CDK app: one Jobs per environment, inside a stack of yours.
//
//	app := awscdk.NewApp(nil)
//	stack := awscdk.NewStack(app, jsii.String("orders-prod"), nil)
//	cfg := jobsinfra.ProdConfig("prod") // or DevConfig; change what you tune
//	cfg.BatchSize, cfg.MaxConcurrency = 10, 20
//	cfg.AlarmEmail = "oncall@example.com"
//	jobs := jobsinfra.NewJobs(stack, "Jobs", &jobsinfra.JobsProps{
//		Config:     cfg,
//		Bootstraps: "../build", // <function>/bootstrap, from your own mains
//	})
//	jobs.GrantEnqueue(ordersFunction) // enqueue from your own Go code
//	jobs.GrantReadJobs(operatorRole)  // read jobs straight from the table
//
// # What it creates
//
// The jobs table (its sweep index from dynamostore's one definition), the
// queue and its dead-letter queue (sqsqueue's one definition), the seven
// functions (enqueue, getjob, waitjob, cancel, worker, sweeper, schedules) on arm64
// provided.al2023 with a least-privilege role and a log group each, the
// worker's SQS event source with partial batch responses, the sweeper's
// one-minute schedule, the HTTP API (IAM or JWT authorisation, access logs,
// throttling), the foreign sources of Config (S3 buckets, EventBridge
// rules), the EventBridge Scheduler groups, role and dead-letter queue of
// periodic jobs with one schedule per declared one (JobsProps.Schedules;
// docs/guide/SCHEDULES.md), and alarms on one SNS topic, and a dashboard.
// Everything passes cdk-nag's AwsSolutions pack (the few suppressions carry
// their reasons).
//
// # Names
//
// Two deployments share an account and region, even when both call their
// environment "prod": CloudFormation names every resource it can after the
// stack, and the few physical names the construct must spell (the two
// schedule groups, the dashboard, the API's name, the metric namespace)
// derive from one base made of the stack's name, the construct's path and
// a hash of the path, such as "orders-prod-Jobs-C19DB740" (Names, in
// Jobs.Names), or from Config.NamePrefix. The functions are told the names
// they use (JOBS_SCHEDULE_GROUP, JOBS_METRICS_NAMESPACE), so the runtime
// and the template agree. Each name keeps its service's limits (a schedule
// group's 64 characters among them).
//
// # What you tune
//
// Config holds every setting, with validated defaults in the presets
// DevConfig and ProdConfig (functions: each call returns a Config of your
// own, so no change of yours reaches another stack's): the
// worker's memory, timeout, handler reserve, final-write bound and
// concurrency; the event source's batch size, batching window and maximum
// concurrency; the API functions' memory and timeout; the sweeper's
// timeout; the functions' architecture and extra environment (for all, or
// per function); dispatch grace and retention of jobs; log retention; Retain
// (keep the table, logs and secret on deletion, point-in-time recovery,
// deletion protection); API throttling; JWT authorisation; the alarm topic
// or e-mail; the foreign sources. NewJobs panics with the reason when
// Config.Validate refuses it or a bootstrap is missing, so `cdk synth`
// fails before anything is deployed.
//
// # Overrides
//
// What Config does not tune, JobsProps.Overrides does: one hook per kind
// of resource (Table, Queue, Function, LogGroup, API) that receives the
// props the construct built and changes them before the resource is
// created, for example
//
//	Overrides: &jobsinfra.Overrides{
//		Table: func(p *awsdynamodb.TableProps) { p.TableClass = awsdynamodb.TableClass_STANDARD_INFREQUENT_ACCESS },
//		Function: func(name string, p *awslambda.FunctionProps) {
//			if name == "worker" {
//				p.MemorySize = jsii.Number(3008)
//			}
//		},
//	}
//
// This is the pattern of AWS Solutions Constructs (optional props for each
// underlying resource, merged over the construct's defaults, after which
// the construct re-asserts what it needs), in the form Go makes natural: a
// function over the L2 props rather than a second, partial props value to
// merge, because a hook sees the defaults it changes (double the worker's
// memory, add a variable to the environment), is checked by the compiler,
// and needs no reflection to say which zero values were meant. The
// construct then re-asserts the few fields the system depends on (each
// hook's comment lists them: the table's key schema and TTL attribute, the
// queue's visibility timeout and redrive, the functions' code, role,
// timeout and own variables, encryption where the grants depend on it), so
// an override can tune a resource but not break it. For a property the L2
// props do not reach, the resources are exposed and CDK's escape hatch
// (Node().DefaultChild(), AddPropertyOverride) applies.
//
// # Your functions
//
// The bootstraps are your own: mains over package lambdafn that register
// your kinds (see the README's "Use it in your own service"). The worker is
// told the foreign sources connected to its queue (JOBS_SOURCES) and
// refuses to start when its routes do not accept one of them, naming both.
// Your own settings reach them through Config.Environment and
// FunctionEnvironment (this repository's app switches its demo kinds on
// that way, with JOBS_EXAMPLE_KINDS=on, which only its own mains read).
//
// # What it exposes
//
// Table, Queue, DLQ, API, AlarmTopic, SchedulerRole, ScheduleDLQ,
// ScheduleGroup, RuntimeScheduleGroup, Dashboard, Key and the seven
// functions (also in Functions by name), to wire your own resources to;
// Names; and four grants, each returning the awsiam.Grant of the statements
// it added, as CDK's own grants do: GrantEnqueue (a function of yours
// enqueues from Go; it takes an awslambda.Function because it also sets
// the function's environment), GrantReadJobs (GetItem on the table),
// GrantInvoke (the callers' routes) and GrantOperate (every route, and
// the role among the operators). *Jobs is itself a construct, to pass
// wherever CDK takes one (awscdk.Tags_Of(jobs), awscdk.Stack_Of(jobs)). It
// creates no stack outputs: add the ones you want.
package jobsinfra
