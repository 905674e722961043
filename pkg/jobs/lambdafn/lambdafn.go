// Package lambdafn turns the jobs package into the seven Lambda functions:
// it reads the configuration from the environment once, builds the AWS
// clients once (outside the handler), and starts the Lambda runtime.
//
// A team's functions are one main that serves all seven (Any: the role
// comes from JOBS_FUNCTION, which the CDK construct sets), or one main per
// function, which links only that function's code:
//
//	func main() {
//		reg := jobs.NewRegistry()
//		myjobs.MustRegister(reg) // the team's kinds
//		lambdafn.Serve(lambdafn.Any, reg, nil) // or lambdafn.Worker, ...
//	}
//
// The environment each function reads (its defaults, and which the CDK
// construct sets) is docs/reference/CONFIGURATION.md, rendered from the deployment's
// descriptor (internal/deploy). The AWS configuration is the one Lambda's
// environment gives (AWS_REGION, the role's credentials; see awsenv.go);
// AWS_ENDPOINT_URL_DYNAMODB, _SQS and _SCHEDULER point the SDK at local
// emulators. A team's other function or program enqueues with NewService.
//
// Tracing (JOBS_TRACING=on) needs the main to say how its functions trace:
// Opts.Tracing (see Tracing).
package lambdafn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/emf"
	"github.com/lambdajobs/lambdajobs/internal/lambdalog"
	"github.com/lambdajobs/lambdajobs/internal/metricnames"
	"github.com/lambdajobs/lambdajobs/internal/tracehook"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/eventbus"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/schedulerapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// Config is the functions' configuration.
type Config struct {
	Table    string
	QueueURL string
	// LaneQueueURLs are the other lanes' queues, by lane
	// (JOBS_LANE_QUEUE_URLS, JSON); Lane is the lane a worker serves
	// (JOBS_LANE).
	LaneQueueURLs map[string]string
	Lane          string
	// LaneDispatchGraces are the dispatch graces of the lanes whose worker
	// runs longer than the default lane's (JOBS_LANE_DISPATCH_GRACES, JSON
	// of durations by lane).
	LaneDispatchGraces map[string]time.Duration
	// DLQURL is the dead-letter queue the operators' routes read and
	// redrive and the sweeper drains (JOBS_DLQ_URL; cancel and sweeper);
	// LaneDLQURLs are the other lanes' (JOBS_LANE_DLQ_URLS, JSON by lane).
	DLQURL        string
	LaneDLQURLs   map[string]string
	DispatchGrace time.Duration
	Retention     time.Duration
	// MessageFirst is jobs.Config.MessageFirst (JOBS_MESSAGE_FIRST=on; off
	// by default), of every function that sends: docs/operations/DEPLOY.md says how a
	// deployment turns it on.
	MessageFirst bool
	Concurrency  int
	Deadlines    jobs.Deadlines
	// WorkerTimeout is the worker function's timeout
	// (JOBS_WORKER_TIMEOUT; zero when unset): see jobs.Config.WorkerTimeout.
	WorkerTimeout time.Duration
	// Sealer seals secret payload fields (nil without JOBS_PAYLOAD_KEY).
	Sealer jobs.Sealer
	// Sources are the foreign sources connected to the queue (JOBS_SOURCES).
	Sources []jobs.Source
	// KeyRingSecret names the Secrets Manager secret of the payload key
	// ring (JOBS_PAYLOAD_KEYRING_SECRET).
	KeyRingSecret string
	// MetricsNamespace turns on metrics (JOBS_METRICS_NAMESPACE).
	MetricsNamespace string
	// Tracing turns on the OpenTelemetry spans of Opts.Tracing
	// (JOBS_TRACING=on); XRayDaemon is the X-Ray daemon's address
	// (AWS_XRAY_DAEMON_ADDRESS, which Lambda sets), where tracing.XRay
	// sends them.
	Tracing    bool
	XRayDaemon string
	// Service names the function in metrics and traces: JOBS_FUNCTION,
	// else AWS_LAMBDA_FUNCTION_NAME.
	Service string
	// Scheduler is where the schedules function creates runtime
	// schedules (JOBS_SCHEDULE_GROUP, JOBS_QUEUE_ARN,
	// JOBS_SCHEDULER_ROLE_ARN, JOBS_SCHEDULE_DLQ_ARN,
	// JOBS_SCHEDULE_MAX_EVENT_AGE); SchedulesPerOwner bounds each owner's
	// (JOBS_SCHEDULES_PER_OWNER, default 20).
	Scheduler         schedulerapi.Config
	SchedulesPerOwner int
	// PageTokenSecret names the Secrets Manager secret whose value signs
	// the listing's page tokens (JOBS_PAGE_TOKEN_SECRET); PageTokenKey is
	// that value given directly (JOBS_PAGE_TOKEN_KEY, local stack). See
	// pagekey.go.
	PageTokenSecret string
	PageTokenKey    string
	// Operators may use the admin routes (JOBS_OPERATORS: owner
	// identities, comma-separated, as the API derives them).
	Operators []string
	// TrustedCallers may give a job's "tenant" and "lane" over the API
	// (JOBS_TRUSTED_CALLERS, as JOBS_OPERATORS; httpapi.Config.TrustedCallers).
	TrustedCallers []string
	// EnqueueRatePerOwner bounds each caller's requests that make jobs
	// (JOBS_ENQUEUE_RATE_PER_OWNER, a second; 0: none):
	// jobs.Config.EnqueueRatePerOwner of the enqueue function.
	EnqueueRatePerOwner int
	// WaitsPerOwner bounds each caller's open waits (JOBS_WAITS_PER_OWNER):
	// jobs.Config.WaitsPerOwner of the wait function.
	WaitsPerOwner int
	// EventBus is the EventBridge bus job events go to (JOBS_EVENT_BUS);
	// the roles that write outcomes (worker, sweeper, cancel) send them.
	// AllEvents announces every kind's outcomes (JOBS_EVENTS=all), not
	// only those of kinds with KindOpts.Events (JOBS_EVENTS=kinds, the
	// default).
	EventBus  string
	AllEvents bool
	// Bucket is the S3 bucket of the payloads and results kept as objects
	// (JOBS_BUCKET), through Opts.Objects.
	Bucket string
}

// ConfigFromEnv reads Config from the environment (see the package doc):
// each variable of the deployment's descriptor through its Setting (its
// parser and default), into the field fields binds it to; then the checks
// that span variables.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{Deadlines: jobs.DefaultDeadlines, Service: functionName(getenv)}
	var k payloadKeys
	var errs []error
	for _, f := range c.fields(&k) {
		if err := f.load(getenv); err != nil {
			errs = append(errs, err)
		}
	}
	if len(k.keys) > 0 || k.secret != "" {
		keys := k.keys
		if k.secret != "" {
			keys = append(keys, keyFromSecret(k.secret))
		}
		s, err := jobs.NewAESSealer(keys...)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", deploy.EnvPayloadKey.Name, err))
		} else {
			c.Sealer = s
		}
	}
	if c.Tracing {
		c.XRayDaemon = getenv("AWS_XRAY_DAEMON_ADDRESS")
	}
	if c.KeyRingSecret != "" && c.Sealer != nil {
		errs = append(errs, fmt.Errorf("%s and %s/%s: give one", deploy.EnvPayloadKeyringSecret.Name, deploy.EnvPayloadKey.Name, deploy.EnvPayloadSecret.Name))
	}
	if err := c.Deadlines.Validate(0); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
}

// payloadKeys are the payload keys given directly, which become
// Config.Sealer.
type payloadKeys struct {
	keys   [][]byte
	secret string
}

// fields binds each variable of the descriptor that ConfigFromEnv reads
// to where its value goes (the payload keys to k). The variables it does
// not bind are read elsewhere: JOBS_FUNCTION (Serve, functionName), the
// print switches (Main) and the example kinds' (this repository's mains).
func (c *Config) fields(k *payloadKeys) []field {
	return []field{
		bind(deploy.EnvTable, &c.Table), bind(deploy.EnvQueueURL, &c.QueueURL),
		bind(deploy.EnvLaneQueueURLs, &c.LaneQueueURLs), bind(deploy.EnvLaneDispatchGraces, &c.LaneDispatchGraces),
		bind(deploy.EnvLane, &c.Lane), bind(deploy.EnvDLQURL, &c.DLQURL), bind(deploy.EnvLaneDLQURLs, &c.LaneDLQURLs),
		bind(deploy.EnvDispatchGrace, &c.DispatchGrace), bind(deploy.EnvRetention, &c.Retention), bind(deploy.EnvMessageFirst, &c.MessageFirst),
		bind(deploy.EnvWorkerConcurrency, &c.Concurrency),
		bind(deploy.EnvHandlerReserve, &c.Deadlines.Reserve), bind(deploy.EnvFinalWriteTimeout, &c.Deadlines.FinalWrite),
		bind(deploy.EnvCallTimeout, &c.Deadlines.Call), bind(deploy.EnvMinRunTime, &c.Deadlines.MinRun),
		bind(deploy.EnvWorkerTimeout, &c.WorkerTimeout),
		bind(deploy.EnvPayloadKey, &k.keys), bind(deploy.EnvPayloadSecret, &k.secret),
		bind(deploy.EnvPayloadKeyringSecret, &c.KeyRingSecret),
		bind(deploy.EnvSources, &c.Sources), bind(deploy.EnvBucket, &c.Bucket), bind(deploy.EnvEventBus, &c.EventBus), bind(deploy.EnvEvents, &c.AllEvents),
		bind(deploy.EnvMetricsNamespace, &c.MetricsNamespace), bind(deploy.EnvTracing, &c.Tracing),
		bind(deploy.EnvScheduleGroup, &c.Scheduler.Group), bind(deploy.EnvQueueARN, &c.Scheduler.QueueARN),
		bind(deploy.EnvSchedulerRoleARN, &c.Scheduler.RoleARN), bind(deploy.EnvScheduleDLQARN, &c.Scheduler.DLQARN),
		bind(deploy.EnvScheduleMaxEventAge, &c.Scheduler.MaxEventAge), bind(deploy.EnvSchedulesPerOwner, &c.SchedulesPerOwner),
		bind(deploy.EnvPageTokenSecret, &c.PageTokenSecret), bind(deploy.EnvPageTokenKey, &c.PageTokenKey),
		bind(deploy.EnvOperators, &c.Operators), bind(deploy.EnvEnqueueRatePerOwner, &c.EnqueueRatePerOwner), bind(deploy.EnvWaitsPerOwner, &c.WaitsPerOwner),
		bind(deploy.EnvTrustedCallers, &c.TrustedCallers),
	}
}

// field is a variable bound to where its value goes.
type field interface {
	load(getenv func(string) string) error
}

// bind binds setting s to dst: the types agree by construction.
func bind[T any](s deploy.Setting[T], dst *T) field { return binding[T]{s, dst} }

type binding[T any] struct {
	s   deploy.Setting[T]
	dst *T
}

func (b binding[T]) load(getenv func(string) string) error {
	v, err := b.s.Get(getenv)
	if err != nil {
		return err
	}
	*b.dst = v
	return nil
}

// Deps are the clients and adapters built once per process.
type Deps struct {
	Config Config
	Store  *dynamostore.Store
	Queue  *sqsqueue.Queue
	Logger *slog.Logger
	// Routes turn foreign messages into jobs (worker only; see Opts).
	Routes *jobs.Routes

	aws     aws.Config
	ring    *jobs.AESSealer
	clients clients
	// metrics of the function being built (nil: off); its Service is set
	// by Build.
	metrics *jobs.Metrics
	// tracing, when on (nil: off).
	tracing tracehook.Tracing
	// pageKeyBytes, once read (see pageKey).
	pageKeyBytes []byte
	// setup times Build's steps (nil outside Build).
	setup *setupClock
	// eventBus, once a role that sends events asked for it (see bus).
	eventBus *eventbus.Bus
	// function is what JOBS_FUNCTION names (see Any).
	function string
	// ddb is the DynamoDB client of Store.
	ddb *dynamodb.Client
}

// useObjects gives the store the object tier of JOBS_BUCKET (Opts.Objects)
// when the main gives one and the construct a bucket; a registry with
// large parts (Registry.LargeParts) needs both.
func (d *Deps) useObjects(tier ObjectTier, large bool) error {
	switch {
	case large && tier == nil:
		return errors.New("lambdafn: a kind allows payloads or results past an item (jobs.KindOpts.MaxPayloadBytes, MaxResultBytes): give Opts.Objects (s3objects.Tier{})")
	case large && d.Config.Bucket == "":
		return fmt.Errorf("lambdafn: a kind allows payloads or results past an item, and %s is not set (jobsinfra sets it with JobsProps.LargeParts)", deploy.EnvBucket.Name)
	case tier == nil || d.Config.Bucket == "":
		return nil
	}
	d.Store = dynamostore.New(d.ddb, d.Config.Table, dynamostore.Config{Objects: tier.ObjectsFor(d.aws, d.Config.Bucket)})
	return nil
}

// Opts are what a main adds to the environment's configuration; nil
// Opts are the zero value.
type Opts struct {
	// Routes turn messages that other AWS services drop on the queue into
	// jobs (the worker's; see jobs.Routes).
	Routes *jobs.Routes
	// Logger is the functions' logger (Serve's default: JSON lines in
	// Lambda's format, the request id on warnings and errors; Build's:
	// none).
	Logger *slog.Logger
	// Tracing is how the functions trace when JOBS_TRACING=on:
	// tracing.XRay() or otlp.HTTP() (see Tracing). Nil links nothing of
	// OpenTelemetry, and a function refuses to start with JOBS_TRACING=on.
	Tracing Tracing
	// Objects keeps payloads and results too large for items in
	// JOBS_BUCKET: s3objects.Tier{}. Nil links no S3 client, and a
	// function whose registry has a kind that allows such parts
	// (jobs.KindOpts.MaxPayloadBytes, MaxResultBytes) refuses to start.
	Objects ObjectTier
}

// ObjectTier builds the object tier of a bucket from the functions' AWS
// configuration: s3objects.Tier.
type ObjectTier interface {
	ObjectsFor(cfg aws.Config, bucket string) dynamostore.Objects
}

// newDepsFromEnv reads the AWS configuration from the environment (region,
// credentials, AWS_ENDPOINT_URL_* overrides: see awsenv.go) and builds the
// store and queue.
func newDepsFromEnv(cfg Config, logger *slog.Logger) (*Deps, error) {
	awsCfg, err := awsConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	return newDeps(cfg, awsCfg, nil, logger, nil)
}

// newDeps builds the clients, traced by tr (nil: tracing off).
func newDeps(cfg Config, awsCfg aws.Config, tr tracehook.Tracing, logger *slog.Logger, clock *setupClock) (*Deps, error) {
	d := &Deps{Config: cfg, Logger: logger, aws: awsCfg, tracing: tr, setup: clock}
	d.initClients()
	d.ddb = d.dynamo()
	d.Store = dynamostore.New(d.ddb, cfg.Table, dynamostore.Config{})
	if cfg.QueueURL != "" {
		// Its client is built at the first send (see clients.go).
		urls := map[string]string{"": cfg.QueueURL}
		for lane, u := range cfg.LaneQueueURLs {
			urls[lane] = u
		}
		d.Queue = sqsqueue.NewLanes(lazySQS{&d.clients.sqs}, urls)
	}
	clock.step("clients")
	return d, nil
}

// secrets reads a secret's string with Secrets Manager, for the cold-start
// reads of the key ring and the page token key.
func (d *Deps) secrets(ctx context.Context, id string) (string, error) {
	return secretString(ctx, d.clients.secrets.get(), id)
}

// sealer returns the payload sealer of a function that seals or opens
// payloads: from the environment, or read from the key ring secret once.
func (d *Deps) sealer(ctx context.Context) (jobs.Sealer, error) {
	if d.Config.KeyRingSecret == "" {
		return d.Config.Sealer, nil
	}
	if d.ring == nil {
		began := time.Now()
		s, err := loadKeyRing(ctx, d.secrets, d.Config.KeyRingSecret)
		d.setup.secretsRead(time.Since(began))
		if err != nil {
			return nil, err
		}
		d.ring = s
	}
	return d.ring, nil
}

// readOnlySealer is the sealer of getjob and cancel: the configured one
// when there is one in the environment, else none that holds a key.
func (d *Deps) readOnlySealer() jobs.Sealer {
	if d.Config.Sealer != nil {
		return d.Config.Sealer
	}
	return newNoKey()
}

// bus returns the event bus of a role that writes outcomes (worker,
// sweeper, cancel), whose EventBridge client is built at its first send;
// nil without JOBS_EVENT_BUS. Refused when the registry has a kind that
// announces its outcomes and there is no bus: their events would stay
// pending for ever.
func (d *Deps) bus(reg *jobs.Registry) (driver.Bus, error) {
	if d.Config.EventBus == "" {
		if d.Config.AllEvents {
			return nil, fmt.Errorf("%s=all: %s is required", deploy.EnvEvents.Name, deploy.EnvEventBus.Name)
		}
		if k := reg.EventKinds(); len(k) > 0 {
			return nil, fmt.Errorf("kinds %v announce their outcomes (KindOpts.Events): %s is required", k, deploy.EnvEventBus.Name)
		}
		return nil, nil
	}
	if d.eventBus == nil {
		d.eventBus = eventbus.New(lazyEventBridge{&d.clients.events}, d.Config.EventBus, eventbus.Config{})
	}
	return d.eventBus, nil
}

// jobsConfig is what every function's jobs.Config holds, from the
// environment: the role's sealer given (one that seals, or one that only
// opens what the environment's key opens). Each function adds what only
// its role has (its bus, its page key, its scheduler, the worker's lane
// and deadlines).
func (d *Deps) jobsConfig(reg *jobs.Registry, sealer jobs.Sealer) jobs.Config {
	return jobs.Config{Registry: reg, Store: d.Store, Queue: queueOrNil(d.Queue), Sealer: sealer, Logger: d.Logger, Metrics: d.metrics,
		DispatchGrace: d.Config.DispatchGrace, LaneDispatchGrace: d.Config.LaneDispatchGraces, Retention: d.Config.Retention, AllEvents: d.Config.AllEvents,
		MessageFirst: d.Config.MessageFirst}
}

// Function builds one function's handler from its dependencies.
type Function func(d *Deps, reg *jobs.Registry) (lambda.Handler, error)

// Enqueue is the POST /v1/jobs and POST /v1/batches function.
func Enqueue(d *Deps, reg *jobs.Registry) (lambda.Handler, error) {
	if d.Queue == nil {
		return nil, errQueueURL
	}
	// Every enqueue sends: its SQS client is built now, at the start.
	d.clients.sqs.get()
	sealer, err := d.sealer(context.Background())
	if err != nil {
		return nil, err
	}
	cfg := d.jobsConfig(reg, sealer)
	cfg.EnqueueRatePerOwner = d.Config.EnqueueRatePerOwner
	c, err := jobs.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	return lambda.NewHandler(httpapi.New(c.Service(), httpapi.Config{Logger: d.Logger, TrustedCallers: d.Config.TrustedCallers, Operators: d.Config.Operators}).Route), nil
}

// GetJob is the GET /v1/jobs/{id}, GET /v1/jobs (the caller's jobs) and
// GET /v1/batches/{id} function.
func GetJob(d *Deps, reg *jobs.Registry) (lambda.Handler, error) {
	key, err := d.pageKey(context.Background())
	if err != nil {
		return nil, err
	}
	cfg := d.jobsConfig(reg, d.readOnlySealer())
	cfg.Queue, cfg.PageTokenKey = nil, key // it reads: it never sends
	c, err := jobs.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	return lambda.NewHandler(httpapi.New(c.Service(), httpapi.Config{Logger: d.Logger, Operators: d.Config.Operators}).Route), nil
}

// WaitJob is the GET /v1/jobs/{id}/wait function: it answers a job once
// it changes, holding its instance while it waits (up to jobs.MaxWait),
// so it is a function of its own, with reserved concurrency.
func WaitJob(d *Deps, reg *jobs.Registry) (lambda.Handler, error) {
	cfg := d.jobsConfig(reg, d.readOnlySealer())
	cfg.Queue, cfg.WaitsPerOwner = nil, d.Config.WaitsPerOwner // it reads, and writes its waits' slots: it never sends
	c, err := jobs.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	return lambda.NewHandler(httpapi.New(c.Service(), httpapi.Config{Logger: d.Logger, Operators: d.Config.Operators}).Route), nil
}

// Cancel is the job actions function: POST /v1/jobs/{id}/cancel,
// POST /v1/jobs/{id}/retry and POST /v1/bulk/{cancel,retry}, and the
// operators' dead-letter routes (with JOBS_DLQ_URL, and each other lane's
// with JOBS_LANE_DLQ_URLS). It sends retried jobs
// and redriven dead letters to the queue.
func Cancel(d *Deps, reg *jobs.Registry) (lambda.Handler, error) {
	if d.Queue == nil {
		return nil, errQueueURL
	}
	key, err := d.pageKey(context.Background())
	if err != nil {
		return nil, err
	}
	bus, err := d.bus(reg)
	if err != nil {
		return nil, err
	}
	cfg := d.jobsConfig(reg, d.readOnlySealer())
	cfg.PageTokenKey, cfg.Bus = key, bus
	c, err := jobs.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	api := httpapi.Config{Logger: d.Logger, Operators: d.Config.Operators}
	if d.Config.DLQURL != "" {
		api.DeadLetters = d.deadLetters()
	}
	return lambda.NewHandler(httpapi.New(c.Service(), api).Route), nil
}

// deadLetters are the lanes' dead-letter queues (JOBS_DLQ_URL and
// JOBS_LANE_DLQ_URLS): the operators' routes' and the sweeper's.
func (d *Deps) deadLetters() *sqsqueue.DeadLetters {
	return &sqsqueue.DeadLetters{SQS: lazySQS{&d.clients.sqs}, QueueURL: d.Config.QueueURL, DLQURL: d.Config.DLQURL,
		LaneQueueURLs: d.Config.LaneQueueURLs, LaneDLQURLs: d.Config.LaneDLQURLs}
}

// Worker is the SQS-triggered worker function. It refuses to start when a
// source connected to the queue (JOBS_SOURCES) has no route that accepts
// its messages, and when a kind needs more handler time (KindOpts.MinRunTime)
// than an invocation of JOBS_WORKER_TIMEOUT has.
func Worker(d *Deps, reg *jobs.Registry) (lambda.Handler, error) {
	if err := d.Routes.CheckSources(d.Config.Sources); err != nil {
		return nil, err
	}
	sealer, err := d.sealer(context.Background())
	if err != nil {
		return nil, err
	}
	bus, err := d.bus(reg)
	if err != nil {
		return nil, err
	}
	cfg := d.jobsConfig(reg, sealer)
	cfg.Bus, cfg.Routes, cfg.Tracer = bus, d.Routes, workerTracer(d.tracing)
	cfg.Lane, cfg.Concurrency, cfg.Deadlines, cfg.WorkerTimeout = d.Config.Lane, d.Config.Concurrency, d.Config.Deadlines, d.Config.WorkerTimeout
	c, err := jobs.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	return lambda.NewHandler(c.Worker().HandleSQS), nil
}

// Sweeper is the scheduled sweeper function. With JOBS_DLQ_URL (and each
// other lane's in JOBS_LANE_DLQ_URLS) it drains the lanes' dead-letter
// queues at each sweep (jobs.Config.DeadLetters).
func Sweeper(d *Deps, reg *jobs.Registry) (lambda.Handler, error) {
	cfg, err := d.sweeperConfig(reg)
	if err != nil {
		return nil, err
	}
	c, err := jobs.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	s := c.Sweeper()
	return lambda.NewHandler(func(ctx context.Context, _ events.CloudWatchEvent) (jobs.SweepReport, error) {
		return s.Sweep(ctx)
	}), nil
}

// sweeperConfig is the sweeper's jobs.Config.
func (d *Deps) sweeperConfig(reg *jobs.Registry) (jobs.Config, error) {
	if d.Queue == nil {
		return jobs.Config{}, errQueueURL
	}
	bus, err := d.bus(reg)
	if err != nil {
		return jobs.Config{}, err
	}
	cfg := d.jobsConfig(reg, d.readOnlySealer())
	cfg.Bus = bus
	if d.Config.DLQURL != "" {
		// Every sweep receives from the DLQs: its SQS client is built now.
		d.clients.sqs.get()
		cfg.DeadLetters = d.deadLetters()
	}
	return cfg, nil
}

// Schedules is the function of the caller's own recurring schedules
// (POST and GET /v1/schedules, GET and DELETE /v1/schedules/{name}): it
// alone may create and delete schedules in the runtime group.
func Schedules(d *Deps, reg *jobs.Registry) (lambda.Handler, error) {
	sched, err := schedulerapi.New(lazyScheduler{&d.clients.scheduler}, d.Config.Scheduler)
	if err != nil {
		return nil, err
	}
	cfg := d.jobsConfig(reg, d.readOnlySealer())
	cfg.Scheduler, cfg.SchedulesPerOwner = sched, d.Config.SchedulesPerOwner
	c, err := jobs.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	return lambda.NewHandler(httpapi.NewSchedules(c.Schedules(), d.Logger).Route), nil
}

// Any is the function JOBS_FUNCTION names (one of deploy.Functions, as
// the CDK construct sets it): one main and one asset serve them all. Its binary links every function's code, so
// it is a little larger than a bootstrap of one function; it builds and
// uploads once, and each function's cold start runs the same package
// initialisation either way.
func Any(d *Deps, reg *jobs.Registry) (lambda.Handler, error) {
	fn, err := functionNamed(d.function)
	if err != nil {
		return nil, err
	}
	return fn(d, reg)
}

// functionNamed returns the function called name, as JOBS_FUNCTION names
// it.
func functionNamed(name string) (Function, error) {
	if fn, ok := functions[name]; ok {
		return fn, nil
	}
	return nil, fmt.Errorf("%s=%q: want one of %s", deploy.EnvFunction.Name, name, strings.Join(deploy.FunctionNames(), ", "))
}

// functions are the deployment's functions (deploy.Functions), by name.
var functions = map[string]Function{
	deploy.Enqueue: Enqueue, deploy.GetJob: GetJob, deploy.WaitJob: WaitJob, deploy.Cancel: Cancel,
	deploy.Worker: Worker, deploy.Sweeper: Sweeper, deploy.Schedules: Schedules,
}

// Serve reads the configuration, builds fn's handler (Any, or one
// function: Worker, Enqueue, ...) and starts the Lambda runtime; it exits
// the process with status 1 if the function cannot start. A team's main:
//
//	func main() {
//		reg := jobs.NewRegistry()
//		myjobs.MustRegister(reg) // the team's kinds
//		lambdafn.Serve(lambdafn.Any, reg, &lambdafn.Opts{Routes: myjobs.Routes})
//	}
//
// With JOBS_PRINT_SCHEDULES=1 it instead prints the registry's declared
// schedules as JSON and exits: how the local stack learns what to fire;
// with JOBS_PRINT_LANES=1, the lanes the registry's kinds run in.
func Serve(fn Function, reg *jobs.Registry, opts *Opts) {
	for s, what := range map[deploy.Setting[bool]]func() any{
		deploy.EnvPrintSchedules: func() any { return reg.Schedules() },
		deploy.EnvPrintLanes:     func() any { return reg.Lanes() },
	} {
		if on, _ := s.Get(os.Getenv); on {
			if err := json.NewEncoder(os.Stdout).Encode(what()); err != nil {
				os.Exit(1)
			}
			os.Exit(0)
		}
	}
	mainTook := time.Since(processStart)
	o := Opts{}
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = lambdalog.New(os.Stdout, os.Getenv)
	}
	ctx := context.Background()
	handler, clock, err := build(ctx, fn, reg, os.Getenv, &o)
	if err != nil {
		o.Logger.Error("function cannot start", slog.String("error", err.Error()))
		os.Exit(1)
	}
	clock.log(ctx, o.Logger, mainTook)
	lambda.Start(handler)
}

// Build is Serve without the runtime, for tests: configuration (read with
// getenv), clients and handler.
//
// With tracing on (JOBS_TRACING=on), the handler is also an io.Closer: its
// tracing exports spans from a goroutine of its own, which a function
// keeps for the life of its process, and which Close (after the last
// invocation) flushes and stops. A Build that fails stops it itself.
func Build(ctx context.Context, fn Function, reg *jobs.Registry, getenv func(string) string, opts *Opts) (lambda.Handler, error) {
	h, _, err := build(ctx, fn, reg, getenv, opts)
	return h, err
}

// build is Build, timing its steps (see setup.go).
func build(ctx context.Context, fn Function, reg *jobs.Registry, getenv func(string) string, opts *Opts) (lambda.Handler, *setupClock, error) {
	h, clock, tr, err := assemble(ctx, fn, reg, getenv, opts)
	if err != nil && tr != nil {
		// The exporter's goroutine would outlive a function that never
		// starts (a test's Build, for one).
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
		defer cancel()
		_ = tr.Shutdown(sctx)
	}
	return h, clock, err
}

// assemble is build, returning the tracing it started (nil when it
// started none), which is the caller's to shut down when assemble fails.
func assemble(ctx context.Context, fn Function, reg *jobs.Registry, getenv func(string) string, opts *Opts) (lambda.Handler, *setupClock, tracehook.Tracing, error) {
	clock := newSetupClock()
	cfg, err := ConfigFromEnv(getenv)
	if err != nil {
		return nil, nil, nil, err
	}
	clock.step("config")
	awsCfg, err := awsConfigFromEnv(getenv)
	if err != nil {
		return nil, nil, nil, err
	}
	clock.step("aws")
	tr, err := startTracing(ctx, cfg, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	if tr != nil {
		clock.step("tracing")
	}
	d, err := newDeps(cfg, awsCfg, tr, nil, clock)
	if err != nil {
		return nil, nil, tr, err
	}
	d.function = getenv(deploy.EnvFunction.Name)
	var tier ObjectTier
	if opts != nil {
		d.Routes, d.Logger, tier = opts.Routes, opts.Logger, opts.Objects
	}
	if err := d.useObjects(tier, reg.LargeParts()); err != nil {
		return nil, nil, tr, err
	}
	if cfg.MetricsNamespace != "" {
		d.metrics = &jobs.Metrics{Namespace: cfg.MetricsNamespace, Service: cfg.Service, Writer: metricsOut}
		coldStart(d.metrics)
		clock.step("metrics")
	}
	h, err := fn(d, reg)
	if err != nil {
		return nil, nil, tr, err
	}
	if d.tracing != nil {
		h = tracedFunction{Handler: d.tracing.Wrap(cfg.Service, h), tracing: d.tracing}
	}
	clock.step("handler")
	return h, clock, tr, nil
}

// metricsOut is where metrics go: stdout, which Lambda sends to CloudWatch
// Logs line by line.
var metricsOut io.Writer = os.Stdout

// functionName is the "service" dimension: the role a Serve binary plays,
// else the Lambda function's name.
func functionName(getenv func(string) string) string {
	if v := getenv(deploy.EnvFunction.Name); v != "" {
		return v
	}
	if v := getenv("AWS_LAMBDA_FUNCTION_NAME"); v != "" {
		return v
	}
	return "lambdajobs"
}

// coldStart writes the ColdStart metric, once per process: Build runs at
// a function's init.
func coldStart(m *jobs.Metrics) {
	b := emf.New(m.Namespace, map[string]string{metricnames.Service: m.Service})
	b.Add(nil, metricnames.ColdStart, emf.Count, 1)
	_ = b.Flush(m.Writer, time.Now())
}

// errQueueURL is the error of a function that sends without a queue.
var errQueueURL = fmt.Errorf("%s is required", deploy.EnvQueueURL.Name)

// queueOrNil keeps a nil *sqsqueue.Queue from becoming a non-nil interface.
func queueOrNil(q *sqsqueue.Queue) driver.Queue {
	if q == nil {
		return nil
	}
	return q
}

// NewService returns a jobs.Service for enqueueing from a team's own code:
// another Lambda function given jobsinfra's GrantEnqueue, or a program
// outside Lambda (a script, a server; `make run` prints the variables for
// the local stack). It reads what GrantEnqueue sets, the variables
// internal/deploy's ServiceVars lists (the table, the queues, the dispatch
// graces, the retention, JOBS_EVENTS, and the payload key ring from
// JOBS_PAYLOAD_KEYRING_SECRET, read from Secrets Manager now, once, or
// JOBS_PAYLOAD_KEY), so its jobs are stored, sent, sealed and announced as
// the system's own enqueue function's are. Call it once, at start-up:
//
//	svc, err := lambdafn.NewService(ctx, reg)
//	...
//	res, err := receipts.Enqueue(ctx, svc, owner, Receipt{OrderID: id}, nil)
//
// The service enqueues and reads back its own enqueues' idempotent
// replays; GrantEnqueue gives nothing else (no reads, no listing).
//
// Its AWS configuration is the environment's, as Lambda gives it (region,
// credentials, endpoint overrides: see awsenv.go); without credentials in
// the environment it returns an error that says so. A program whose
// credentials come from a profile, SSO or instance metadata uses
// NewServiceWithConfig.
func NewService(ctx context.Context, reg *jobs.Registry) (*jobs.Service, error) {
	awsCfg, err := awsConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	if _, err := awsCfg.Credentials.Retrieve(ctx); errors.Is(err, errNoEnvCredentials) {
		return nil, err
	}
	return NewServiceWithConfig(ctx, reg, awsCfg)
}

// NewServiceWithConfig is NewService with the AWS configuration given: for
// a program outside Lambda whose credentials come from a profile, SSO or
// instance metadata, which NewService does not read (see awsenv.go):
//
//	awsCfg, err := config.LoadDefaultConfig(ctx)
//	...
//	svc, err := lambdafn.NewServiceWithConfig(ctx, reg, awsCfg)
//
// The rest of its configuration comes from the environment, as NewService's.
// The configuration's APIOptions and interceptors apply to the DynamoDB
// and SQS clients, not to the key ring's read from Secrets Manager (see
// clients.go).
func NewServiceWithConfig(ctx context.Context, reg *jobs.Registry, awsCfg aws.Config) (*jobs.Service, error) {
	return NewServiceWithObjects(ctx, reg, awsCfg, nil)
}

// NewServiceWithObjects is NewServiceWithConfig for a registry with a kind
// that allows payloads past an item (jobs.KindOpts.MaxPayloadBytes): its
// payloads go to JOBS_BUCKET through objects (s3objects.Tier{};
// jobsinfra's GrantEnqueue sets the bucket and grants its writes).
func NewServiceWithObjects(ctx context.Context, reg *jobs.Registry, awsCfg aws.Config, objects ObjectTier) (*jobs.Service, error) {
	cfg, err := ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	if cfg.Table == "" || cfg.QueueURL == "" {
		return nil, fmt.Errorf("lambdafn: %s and %s are required (jobsinfra's GrantEnqueue sets them)", deploy.EnvTable.Name, deploy.EnvQueueURL.Name)
	}
	// It does not trace: JOBS_TRACING is the functions' (the program's
	// own tracing, if any, sees its calls).
	d, err := newDeps(cfg, awsCfg, nil, slog.New(slog.NewJSONHandler(os.Stderr, nil)), nil)
	if err != nil {
		return nil, err
	}
	if err := d.useObjects(objects, reg.LargeParts()); err != nil {
		return nil, err
	}
	sealer, err := d.sealer(ctx)
	if err != nil {
		return nil, err
	}
	c, err := jobs.NewClient(d.jobsConfig(reg, sealer))
	if err != nil {
		return nil, err
	}
	return c.Service(), nil
}
