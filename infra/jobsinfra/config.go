package jobsinfra

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

var envName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,19}$`)

// Config is one environment's settings. Every field has a value in the
// presets DevConfig and ProdConfig: start from one of them and change what
// you tune, then pass it in JobsProps. NewJobs validates it (Validate) and panics with the reason if
// it does not hold, as CDK constructs do.
type Config struct {
	// Name names the environment (1-20 lower-case letters, digits or '-');
	// it is part of resource descriptions. Physical names do not derive
	// from it (two services may both call their environment "prod" in one
	// account): see Names.
	Name string
	// NamePrefix, when set, is the base of the deployment's physical names
	// (Names) instead of one derived from the stack and the construct's
	// path: 1-56 letters, digits, '-' or '_', starting with a letter or
	// digit, unique in the account and region. Set it to keep names you
	// chose, such as "lambdajobs-prod" (the schedule groups and the
	// dashboard of deployments before names were derived).
	NamePrefix string

	// Worker function.
	WorkerMemoryMB int
	WorkerTimeout  time.Duration
	// HandlerReserve: handler contexts end this long before the worker's
	// deadline; FinalWriteTimeout bounds the final write inside it. A
	// worker whose timeout is longer than 180 final writes (a long lane)
	// gets more of both: jobs.Deadlines.ForTimeout, docs/guide/LANES.md.
	HandlerReserve    time.Duration
	FinalWriteTimeout time.Duration
	// WorkerConcurrency: records of one batch run at once.
	WorkerConcurrency int
	// Event source: batch size, batching window, maximum concurrent
	// invocations (2..1000).
	BatchSize      int
	BatchWindow    time.Duration
	MaxConcurrency int

	// Lanes tunes the lanes the registry uses (JobsProps.Lanes), by name;
	// each lane starts from its preset (LanePreset: urgent, bulk and long
	// have their own, any other lane the default lane's settings above).
	// A lane here that the registry does not use creates nothing.
	Lanes map[string]LaneConfig

	// API and sweeper functions.
	APIMemoryMB    int
	APITimeout     time.Duration
	SweeperTimeout time.Duration

	// Tracing turns on X-Ray active tracing on every function and the
	// functions' OpenTelemetry spans (JOBS_TRACING=on): one span per
	// invocation, per job and per DynamoDB/SQS call, sent as the functions'
	// main says (lambdafn.Opts.Tracing: to Lambda's X-Ray daemon, or over
	// OTLP/HTTP to a collector layer given through Overrides.Function and
	// configured through Environment; docs/operations/OPERATIONS.md "Tracing"). Off by
	// default: X-Ray bills per trace. The functions carry the trace through
	// SQS (AWSTraceHeader), so a job's enqueue, its wait in the queue and
	// its run share one trace.
	Tracing bool

	// Architecture of every function: "arm64" (the default, and the one
	// `make build` targets) or "x86_64"; build the bootstraps to match.
	Architecture string
	// Environment is added to every function's environment, and
	// FunctionEnvironment to one function's (by name: enqueue, getjob,
	// cancel, worker, sweeper, schedules), for your own handlers' settings.
	// Neither may set a variable the construct sets (JOBS_TABLE,
	// JOBS_QUEUE_URL, ...: see reservedEnv) or an AWS_ one (Lambda's).
	Environment         map[string]string
	FunctionEnvironment map[string]map[string]string

	// Jobs.
	DispatchGrace time.Duration
	Retention     time.Duration
	// MessageFirst sets JOBS_MESSAGE_FIRST alike on every function that
	// reads it (jobs.Config.MessageFirst: a job's message is sent before
	// it is stored, and a queued or running job's safety net is its
	// message, not a sweep entry). Nil is on, for a new stack. A stack
	// deployed before turns it on in two deploys: the first with it off
	// (false) brings the new code, the second turns it on; a rollback turns
	// it off first (docs/operations/DEPLOY.md, "Turning on message first").
	MessageFirst *bool
	// TagIndexes is how many of the table's tag indexes the stack
	// declares (dynamostore.TagIndexes, one for each tag a job may carry):
	// nil is all of them. CloudFormation adds at most one index to a table
	// per update, so a stack deployed before tags adds them in three
	// deploys, with 1, then 2, then nil (docs/operations/DEPLOY.md, "Adding the tag
	// indexes"); a new stack needs nothing.
	TagIndexes *int

	// Logs and data.
	LogRetentionDays int
	// LogLevel is the functions' application log level: "DEBUG", "INFO"
	// (the default when empty), "WARN" or "ERROR" (Lambda's
	// ApplicationLogLevel, which aws-lambda-go's logger honours). At WARN
	// a job that runs normally writes no log line at all, only its share
	// of the metrics (which are not filtered): see docs/evidence/BENCHMARKS.md.
	LogLevel string
	// Retain keeps the table, the queues (dead-letter queues included),
	// its logs and secret when the stack is deleted, and turns on
	// point-in-time recovery and deletion protection.
	Retain bool

	// API throttling (requests per second, burst), and the tighter one of
	// POST /v1/batches (each request writes up to 1,000 jobs).
	ThrottleRate       float64
	ThrottleBurst      int
	BatchThrottleRate  float64
	BatchThrottleBurst int
	// CallbackThrottleRate and CallbackThrottleBurst throttle POST
	// /v1/callbacks/{token}, the one route without IAM or JWT auth (its
	// token is its authority), apart from the API's other routes.
	CallbackThrottleRate  float64
	CallbackThrottleBurst int
	// JWT, when set, authorizes the routes with a JWT authorizer instead
	// of IAM.
	JWT *JWTConfig
	// CORS, when set, answers browsers' preflight requests.
	CORS *CORSConfig

	// Alarms go to AlarmTopicARN if set, else to a new topic that
	// AlarmEmail (if set) subscribes to.
	AlarmEmail    string
	AlarmTopicARN string
	// OldestMessageAlarm fires when the queue's oldest message is older.
	OldestMessageAlarm time.Duration
	// QueueLatencyAlarm fires when jobs wait longer from enqueue (or
	// run_at) to start (p99 over 5 minutes); FailuresAlarm when this many
	// jobs fail in a minute.
	QueueLatencyAlarm time.Duration
	FailuresAlarm     int

	// Operators are the callers who may use the admin routes (any
	// owner's jobs: /v1/admin/jobs..., and the dead-letter queue:
	// /v1/admin/dead-letters): an IAM role's ARN
	// (arn:aws:iam::ACCOUNT:role/[PATH/]NAME, standing for every session
	// of the role), a user's ARN, an assumed role as the API names its
	// callers (arn:aws:sts::ACCOUNT:assumed-role/NAME), or
	// "jwt:ISSUER#SUBJECT" for a JWT. Empty: nobody but the roles given
	// GrantOperate. Give those routes their own JWT scope too
	// (JWT.Scopes); with IAM, GrantOperate grants them and GrantInvoke
	// grants every other route.
	Operators []string

	// TrustedCallers are the API callers who may give a job's "tenant"
	// and "lane" (as Operators names callers): services that enqueue for
	// their own customers. Anyone else who gives either gets 403 (a
	// tenant is a share of the queue's fairness and of per-tenant limits;
	// a lane, a queue and workers of its own). Go producers given
	// GrantEnqueue set both without being listed.
	TrustedCallers []string

	// EnqueueRatePerOwner bounds each caller's requests that make jobs
	// (POST /v1/jobs, /v1/batches, replays) to this many a second, across
	// every instance; over it a caller gets 429 rate_limited with
	// Retry-After (0: no bound, the default). Each accepted request costs
	// one write more (docs/guide/FLOW_CONTROL.md). The API's stage throttle
	// bounds every caller together; this bounds each.
	EnqueueRatePerOwner int

	// WaitConcurrency is the wait function's reserved concurrency (GET
	// /v1/jobs/{id}/wait): how many waits are open at once across every
	// caller. A wait holds an instance for up to 20 s, so waits have
	// their own share of the account's concurrency, and never take the
	// other functions'. Beyond it API Gateway answers 500 (Lambda's
	// throttle), and clients read the job instead. Lambda refuses a
	// reservation that leaves the account fewer than 100 unreserved.
	WaitConcurrency int
	// WaitsPerOwner bounds each caller's open waits (0: the default,
	// JOBS_WAITS_PER_OWNER's; at most 200, and at most WaitConcurrency);
	// over it a caller gets 429 too_many_waits. Keep it well below
	// WaitConcurrency: WaitConcurrency/WaitsPerOwner callers waiting at
	// once hold every instance, and the others' waits are throttled (they
	// read instead). The presets: 20 and 5 (dev), 100 and 10 (prod).
	WaitsPerOwner int

	// KeyAdmins are the IAM principals (role or user ARNs) who may read
	// the payload key ring and the page token key besides the functions
	// that use them, to rotate them (docs/operations/OPERATIONS.md). Each secret's
	// policy denies secretsmanager:GetSecretValue to everyone else, in this
	// account or another. Empty: only the functions.
	KeyAdmins []string

	// CustomerManagedKey encrypts the table, the queues and the secrets
	// with one KMS key of the stack's own (rotated yearly; Jobs.Key),
	// instead of AWS-owned and AWS-managed keys: every function, and every
	// principal given a Grant, may use it only as its calls need
	// (kms:ViaService). Off by default: a customer-managed key costs $1 a
	// month plus its requests.
	CustomerManagedKey bool

	// ScheduleMaxEventAge is how long EventBridge Scheduler retries a
	// periodic job's fire that it cannot deliver to the queue before it
	// goes to the schedules' dead-letter queue (0: one hour; 1 minute to
	// 24 hours). See docs/guide/SCHEDULES.md.
	ScheduleMaxEventAge time.Duration

	// Sources of foreign messages (see docs/guide/SOURCES.md).
	S3Sources         []S3Source
	EventBridgeSource []EventBridgeSource
	// EnvelopeSenders are the IAM principals (role or user ARNs) allowed to
	// send their own messages (envelopes) to the queue. The queue's policy
	// denies sqs:SendMessage to every other principal of any account, but
	// the construct's own functions, those given GrantEnqueue, and AWS
	// services sending for a configured source (S3, EventBridge, SNS).
	EnvelopeSenders []string

	// EventBusArn is an existing EventBridge bus the job events go to;
	// empty, the construct creates one (Jobs.EventBus, named
	// Names.EventBus). AllEvents announces every kind's outcomes, not only
	// those of kinds with KindOpts.Events (JOBS_EVENTS=all). See
	// docs/reference/EVENTS.md.
	EventBusArn string
	AllEvents   bool
}

// JWTConfig configures a JWT authorizer.
type JWTConfig struct {
	Issuer   string
	Audience []string
	// Scopes, by route key ("POST /v1/jobs", "GET /v1/jobs/{id}",
	// "POST /v1/batches", "GET /v1/batches/{id}", "POST /v1/jobs/{id}/cancel"),
	// are the OAuth scopes a token needs for that route (any one of them).
	// The wait route ("GET /v1/jobs/{id}/wait") asks for "GET
	// /v1/jobs/{id}"'s unless it has its own.
	Scopes map[string][]string
}

// CORSConfig lets browsers on AllowOrigins call the API (GET and POST, with
// the content-type, idempotency-key, authorization and if-none-match
// headers; the ETag answered) and, when the stack has the parts bucket,
// PUT an upload's parts to its links (the ETag answered).
type CORSConfig struct {
	AllowOrigins []string
}

// S3Source connects an existing bucket's notifications to the queue.
type S3Source struct {
	BucketName string
	// Prefix and Suffix filter object keys ("" for any).
	Prefix, Suffix string
}

// EventBridgeSource is a rule on a bus with the queue as target.
type EventBridgeSource struct {
	// Bus is the event bus name ("" for default).
	Bus         string
	Sources     []string
	DetailTypes []string
}

// DevConfig is the development preset, named name: small, cheap,
// destroyed with the stack. Each call returns a fresh Config of its own to
// change what you tune before passing it in JobsProps.
func DevConfig(name string) Config {
	// The functions' sizes and the variables' defaults are the
	// descriptor's (internal/deploy).
	worker, _ := deploy.FunctionNamed(deploy.Worker)
	api, _ := deploy.FunctionNamed(deploy.Enqueue)
	sweeper, _ := deploy.FunctionNamed(deploy.Sweeper)
	return Config{
		Name:           name,
		WorkerMemoryMB: worker.MemoryMB, WorkerTimeout: worker.Timeout,
		HandlerReserve: deploy.EnvHandlerReserve.DefaultValue(), FinalWriteTimeout: deploy.EnvFinalWriteTimeout.DefaultValue(),
		WorkerConcurrency: deploy.EnvWorkerConcurrency.DefaultValue(),
		BatchSize:         10, BatchWindow: 0, MaxConcurrency: 5,
		APIMemoryMB: api.MemoryMB, APITimeout: api.Timeout, SweeperTimeout: sweeper.Timeout,
		DispatchGrace: deploy.EnvDispatchGrace.DefaultValue(), Retention: 3 * 24 * time.Hour,
		LogRetentionDays: 14, Retain: false,
		WaitConcurrency: 20, WaitsPerOwner: 5,
		ThrottleRate: 50, ThrottleBurst: 100, BatchThrottleRate: 2, BatchThrottleBurst: 5, CallbackThrottleRate: 5, CallbackThrottleBurst: 10,
		OldestMessageAlarm: 15 * time.Minute, QueueLatencyAlarm: 10 * time.Minute, FailuresAlarm: 10,
	}
}

// ProdConfig is the production preset, named name: retained data, PITR,
// longer logs. It needs an alarm destination (AlarmEmail or AlarmTopicARN)
// before it validates. Each call returns a fresh Config.
func ProdConfig(name string) Config {
	return Config{
		Name:           name,
		WorkerMemoryMB: 1024, WorkerTimeout: 120 * time.Second,
		HandlerReserve: 5 * time.Second, FinalWriteTimeout: 3 * time.Second,
		WorkerConcurrency: 10,
		BatchSize:         10, BatchWindow: 0, MaxConcurrency: 50,
		APIMemoryMB: 512, APITimeout: 10 * time.Second, SweeperTimeout: 120 * time.Second,
		DispatchGrace: 5 * time.Minute, Retention: 14 * 24 * time.Hour,
		LogRetentionDays: 90, Retain: true,
		WaitConcurrency: 100, WaitsPerOwner: 10,
		ThrottleRate: 500, ThrottleBurst: 1000, BatchThrottleRate: 10, BatchThrottleBurst: 20, CallbackThrottleRate: 50, CallbackThrottleBurst: 100,
		OldestMessageAlarm: 10 * time.Minute, QueueLatencyAlarm: 5 * time.Minute, FailuresAlarm: 10,
	}
}

// tagIndexes is TagIndexes, nil being all.
func (c Config) tagIndexes() int {
	if c.TagIndexes == nil {
		return dynamostore.TagSlots
	}
	return *c.TagIndexes
}

// waitsPerOwner is WaitsPerOwner, 0 being the default.
func (c Config) waitsPerOwner() int {
	if c.WaitsPerOwner == 0 {
		return deploy.EnvWaitsPerOwner.DefaultValue()
	}
	return c.WaitsPerOwner
}

// messageFirst is MessageFirst, nil being on.
func (c Config) messageFirst() bool { return c.MessageFirst == nil || *c.MessageFirst }

// Validate checks the settings against each other.
func (c Config) Validate() error {
	// The queue's visibility timeout follows the worker's (sqsqueue.SpecFor).
	queue := sqsqueue.SpecFor(c.WorkerTimeout, c.BatchWindow).Validate(c.WorkerTimeout)
	switch {
	case c.TagIndexes != nil && (*c.TagIndexes < 0 || *c.TagIndexes > dynamostore.TagSlots):
		return fmt.Errorf("%s: tag indexes %d: 0 to %d, or nil for all", c.Name, *c.TagIndexes, dynamostore.TagSlots)
	case !envName.MatchString(c.Name):
		return fmt.Errorf("environment %q: want 1-20 lower-case letters, digits or '-'", c.Name)
	case c.NamePrefix != "" && (!namePrefix.MatchString(c.NamePrefix) || len(c.NamePrefix) > nameBaseMaxLength):
		return fmt.Errorf("%s: name prefix %q: want 1-%d letters, digits, '-' or '_', starting with a letter or digit", c.Name, c.NamePrefix, nameBaseMaxLength)
	case c.HandlerReserve < c.FinalWriteTimeout+500*time.Millisecond:
		return fmt.Errorf("%s: handler reserve %v must exceed the final write timeout %v by 0.5s", c.Name, c.HandlerReserve, c.FinalWriteTimeout)
	case c.WorkerTimeout <= 2*c.HandlerReserve:
		return fmt.Errorf("%s: worker timeout %v leaves handlers less than half after the reserve %v", c.Name, c.WorkerTimeout, c.HandlerReserve)
	case c.WorkerTimeout > 15*time.Minute || c.SweeperTimeout > 15*time.Minute:
		return fmt.Errorf("%s: Lambda timeouts are at most 15 minutes", c.Name)
	case queue != nil:
		return fmt.Errorf("%s: the queue: %w", c.Name, queue)
	case c.Retain && c.AlarmEmail == "" && c.AlarmTopicARN == "":
		return fmt.Errorf("%s: an environment that retains data needs an alarm destination: set AlarmEmail or AlarmTopicARN (this repository's app: -c alarmEmail=... or -c alarmTopicArn=...)", c.Name)
	case c.BatchThrottleRate <= 0 || c.BatchThrottleBurst <= 0 || c.BatchThrottleRate > c.ThrottleRate:
		return fmt.Errorf("%s: batch throttle %v/s burst %d: positive, and at most the API's %v/s", c.Name, c.BatchThrottleRate, c.BatchThrottleBurst, c.ThrottleRate)
	case c.CallbackThrottleRate <= 0 || c.CallbackThrottleBurst <= 0 || c.CallbackThrottleRate > c.ThrottleRate:
		return fmt.Errorf("%s: callback throttle %v/s burst %d: positive, and at most the API's %v/s", c.Name, c.CallbackThrottleRate, c.CallbackThrottleBurst, c.ThrottleRate)
	case c.DispatchGrace <= c.WorkerTimeout:
		return fmt.Errorf("%s: dispatch grace %v must exceed the worker timeout %v", c.Name, c.DispatchGrace, c.WorkerTimeout)
	case c.BatchSize < 1 || c.BatchSize > 10000 || (c.BatchSize > 10 && c.BatchWindow == 0):
		return fmt.Errorf("%s: batch size %d: 1..10, or up to 10000 with a batching window", c.Name, c.BatchSize)
	case c.MaxConcurrency < 2 || c.MaxConcurrency > 1000:
		return fmt.Errorf("%s: maximum concurrency %d: 2..1000", c.Name, c.MaxConcurrency)
	case c.BatchWindow > 5*time.Minute:
		return fmt.Errorf("%s: batching window %v: at most 5 minutes", c.Name, c.BatchWindow)
	case c.QueueLatencyAlarm <= 0 || c.FailuresAlarm < 1:
		return fmt.Errorf("%s: queue latency alarm %v and failures alarm %d must be positive", c.Name, c.QueueLatencyAlarm, c.FailuresAlarm)
	case c.ScheduleMaxEventAge != 0 && (c.ScheduleMaxEventAge < time.Minute || c.ScheduleMaxEventAge > 24*time.Hour):
		return fmt.Errorf("%s: schedule maximum event age %v: 1 minute to 24 hours", c.Name, c.ScheduleMaxEventAge)
	case c.LogLevel != "" && !slices.Contains([]string{"DEBUG", "INFO", "WARN", "ERROR"}, c.LogLevel):
		return fmt.Errorf("%s: log level %q: DEBUG, INFO, WARN or ERROR", c.Name, c.LogLevel)
	case c.EnqueueRatePerOwner < 0 || c.EnqueueRatePerOwner > 1_000_000:
		return fmt.Errorf("%s: enqueue rate per owner %d: 0 (no bound) to 1000000 a second", c.Name, c.EnqueueRatePerOwner)
	case c.WaitConcurrency < 1 || c.WaitConcurrency > 10_000:
		return fmt.Errorf("%s: wait concurrency %d: 1 to 10000", c.Name, c.WaitConcurrency)
	case c.WaitsPerOwner < 0 || c.WaitsPerOwner > 200 || c.waitsPerOwner() > c.WaitConcurrency:
		return fmt.Errorf("%s: waits per owner %d (%d in effect): 0 (the default) to 200, and at most the wait concurrency (%d)", c.Name, c.WaitsPerOwner, c.waitsPerOwner(), c.WaitConcurrency)
	case c.Architecture != "" && c.Architecture != "arm64" && c.Architecture != "x86_64":
		return fmt.Errorf("%s: architecture %q: arm64 or x86_64", c.Name, c.Architecture)
	}
	if c.JWT != nil {
		for route := range c.JWT.Scopes {
			if !slices.Contains(RouteKeys, route) {
				return fmt.Errorf("%s: JWT scopes for %q: want one of %v", c.Name, route, RouteKeys)
			}
		}
	}
	if err := c.validateLanes(); err != nil {
		return err
	}
	for _, who := range append(slices.Clone(c.Operators), c.TrustedCallers...) {
		if who == "" || strings.ContainsAny(who, ", \t\n") {
			return fmt.Errorf("%s: caller %q (Operators, TrustedCallers): want an identity or a role ARN, without commas or spaces", c.Name, who)
		}
	}
	if c.CORS != nil && len(c.CORS.AllowOrigins) == 0 {
		return fmt.Errorf("%s: CORS needs AllowOrigins", c.Name)
	}
	for name, env := range c.FunctionEnvironment {
		if !slices.Contains(FunctionNames, name) {
			return fmt.Errorf("%s: FunctionEnvironment names %q: want one of %v", c.Name, name, FunctionNames)
		}
		if err := checkEnv(c.Name, env); err != nil {
			return err
		}
	}
	return checkEnv(c.Name, c.Environment)
}

// reservedEnv are the variables a team's Environment may not set: those
// the construct sets on some function (a template test checks that it sets
// no other) and those that would replace the keys it hands out, as the
// deployment's descriptor (internal/deploy) lists them. The other JOBS_
// variables lambdafn reads (docs/reference/CONFIGURATION.md) are yours to tune
// through Environment.
var reservedEnv = deploy.ReservedVars()

func checkEnv(env string, vars map[string]string) error {
	for k := range vars {
		if slices.Contains(reservedEnv, k) || strings.HasPrefix(k, "AWS_") {
			return fmt.Errorf("%s: environment variable %s is set by the construct or Lambda; tune it through Config", env, k)
		}
	}
	return nil
}
