package jobsinfra

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// JobsProps configure a Jobs construct.
type JobsProps struct {
	// Config is the environment's settings (start from DevConfig or
	// ProdConfig).
	Config Config
	// Bootstrap is the folder holding one bootstrap that serves every
	// function (a main calling lambdafn.Serve; each function is told its
	// role in JOBS_FUNCTION). Give it, or Bootstraps.
	Bootstrap string
	// Bootstraps is the folder holding <function>/bootstrap for the seven
	// functions (enqueue, getjob, waitjob, cancel, worker, sweeper, schedules), one
	// main each.
	// Either way they are built for linux/arm64 from your own mains over
	// lambdafn (see the README's "Use it in your own service").
	Bootstraps string
	// Schedules are the periodic jobs to fire (your registry's
	// Schedules()): one EventBridge Scheduler schedule each. The worker
	// must declare the same ones (it turns a fire into its job from its
	// own declaration).
	Schedules []jobs.Schedule
	// LargeParts says that a kind of your registry allows payloads or
	// results past what an item keeps (your registry's LargeParts()): the
	// construct creates the bucket they rest in (Jobs.Parts, JOBS_BUCKET)
	// and grants the functions and GrantEnqueue's roles its objects. Your
	// functions' main then passes lambdafn.Opts.Objects.
	LargeParts bool
	// Lanes are the lanes your registry's kinds run in (your registry's
	// Lanes()): besides the default lane, each is its own queue pair,
	// worker and event source, tuned by its preset and Config.Lanes (see
	// docs/guide/LANES.md). Like Schedules, the worker's registry must match.
	Lanes []string
	// Overrides, when set, change the props of the resources the
	// construct creates, before it creates them (see Overrides for what
	// it re-asserts).
	Overrides *Overrides
}

// Jobs is one environment of lambdajobs inside your stack: the table, the
// queue pair, the seven functions, the HTTP API, the sweeper's schedule,
// the foreign sources, the alarms and the dashboard. Create one per
// environment and wire your own resources to its fields and Grant methods;
// two may share a stack, an account and a region (see Names).
type Jobs struct {
	constructs.Construct
	Table awsdynamodb.Table
	Queue awssqs.Queue
	DLQ   awssqs.Queue
	// Lanes are every lane's resources by name, the default lane ("":
	// Queue, DLQ and Worker) included.
	Lanes map[string]*Lane
	// The functions (deploy.Functions), also by name in Functions (the
	// other lanes' workers are in Lanes).
	Enqueue, GetJob, WaitJob, Cancel, Worker, Sweeper, Schedules awslambda.Function
	Functions                                                    map[string]awslambda.Function
	API                                                          awsapigatewayv2.HttpApi
	AlarmTopic                                                   awssns.ITopic
	// With schedules: the role Scheduler sends fires with (it may only
	// send to the queue and ScheduleDLQ) and the fires' dead-letter queue.
	SchedulerRole awsiam.Role
	ScheduleDLQ   awssqs.Queue
	// Key encrypts the table, the queues and the secrets when
	// Config.CustomerManagedKey is set; nil otherwise.
	Key awskms.Key
	// Parts is the bucket of the payloads and results kept as objects
	// (JobsProps.LargeParts); nil without.
	Parts awss3.Bucket
	// EventBus receives the job events (created, or Config.EventBusArn).
	EventBus awsevents.IEventBus
	// The groups of the declared and of the runtime schedules, and the
	// environment's dashboard.
	ScheduleGroup, RuntimeScheduleGroup awsscheduler.CfnScheduleGroup
	Dashboard                           awscloudwatch.Dashboard
	// Names are the deployment's explicit physical names, derived from
	// the stack and the construct's path (or Config.NamePrefix).
	Names Names

	cfg       Config
	overrides *Overrides
	// laneOrder are the lanes' names, the default lane first.
	laneOrder []string
	// asset is the folder of a function's bootstrap; removal what becomes
	// of the data and logs when the stack is deleted.
	asset   func(function string) string
	removal awscdk.RemovalPolicy
	// values are what the construct tells its functions (environments).
	values        deploy.Values[*string]
	payloadSecret awssecretsmanager.Secret
	pageSecret    awssecretsmanager.Secret
	// Who the queue's policy lets send, who each secret's policy lets read
	// (named by the grants that give them: grants.go), the roles given
	// GrantOperate, and who the bus's policy lets put events (grants.go,
	// and GrantPutEvents).
	senders, payloadReaders, pageReaders, operators, publishers, partUsers *principals
	// largeParts: JobsProps.LargeParts (the key is made before the bucket).
	largeParts bool
}

// NewJobs adds one environment of lambdajobs to scope. It panics if
// props.Config does not validate or a bootstrap is missing, naming the
// reason (CDK's way for invalid props).
//
// Each resource has its own method, called in this order (later ones use
// the earlier ones' resources).
func NewJobs(scope constructs.Construct, id string, props *JobsProps) *Jobs {
	cfg := props.Config
	if cfg.ScheduleMaxEventAge == 0 {
		cfg.ScheduleMaxEventAge = defaultScheduleMaxEventAge
	}
	if err := cfg.Validate(); err != nil {
		panic("jobsinfra: " + err.Error())
	}
	s := &Jobs{Functions: map[string]awslambda.Function{}, Lanes: map[string]*Lane{}, laneOrder: laneNames(props.Lanes), cfg: cfg, overrides: props.Overrides, asset: assets(props), removal: awscdk.RemovalPolicy_DESTROY,
		senders: &principals{}, payloadReaders: &principals{}, pageReaders: &principals{}, operators: &principals{}, publishers: &principals{}, partUsers: &principals{}, largeParts: props.LargeParts}
	// A construct of its own (jsii's way for a Go type): *Jobs is a scope
	// and an IConstruct wherever CDK takes one (Stack_Of, Tags_Of, ...).
	constructs.NewConstruct_Override(s, scope, &id)
	if cfg.Retain {
		s.removal = awscdk.RemovalPolicy_RETAIN
	}
	s.Names = names(s.Construct, cfg.NamePrefix)
	s.key()
	s.table()
	s.parts()
	s.queues()
	s.laneQueues()
	s.secrets()
	s.functions()
	s.laneWorkers()
	s.queuePolicy()
	s.partsPolicy()
	s.apiPermissions()
	s.events()
	s.triggers()
	s.api()
	s.sources()
	s.schedules(props.Schedules)
	s.grantRoles()
	s.environments()
	s.deadLetterPolicies()
	s.alarms()
	s.dashboard()
	return s
}

// assets returns where each function's bootstrap is, and panics if one is
// missing.
func assets(props *JobsProps) func(string) string {
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
	return asset
}

// FunctionNames are the deployment's functions (internal/deploy), as
// folders of JobsProps.Bootstraps.
var FunctionNames = deploy.FunctionNames()

func dur(d time.Duration) awscdk.Duration { return awscdk.Duration_Seconds(jsii.Number(d.Seconds())) }

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
