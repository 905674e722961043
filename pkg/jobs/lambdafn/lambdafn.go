// Package lambdafn turns the jobs package into the six Lambda functions:
// it reads the configuration from the environment once, builds the AWS
// clients once (outside the handler), and starts the Lambda runtime.
//
// A team's functions are one main that serves all six (Any: the role
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
// construct sets) is docs/CONFIGURATION.md, rendered from the deployment's
// descriptor (internal/deploy). The AWS configuration is the one Lambda's
// environment gives (AWS_REGION, the role's credentials; see awsenv.go);
// AWS_ENDPOINT_URL_DYNAMODB, _SQS and _SCHEDULER point the SDK at local
// emulators. A team's other function or program enqueues with NewService.
//
// Tracing (JOBS_TRACING=on) needs the main to import package
// pkg/jobs/lambdafn/tracing; see there.
package lambdafn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/emf"
	"github.com/lambdajobs/lambdajobs/internal/keyring"
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
	// redrive (JOBS_DLQ_URL; cancel only); LaneDLQURLs are the other
	// lanes' (JOBS_LANE_DLQ_URLS, JSON by lane; cancel only).
	DLQURL        string
	LaneDLQURLs   map[string]string
	DispatchGrace time.Duration
	Retention     time.Duration
	Concurrency   int
	Deadlines     jobs.Deadlines
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
	// Tracing turns on OpenTelemetry spans sent to the X-Ray daemon
	// (JOBS_TRACING=on); XRayDaemon is its address
	// (AWS_XRAY_DAEMON_ADDRESS, which Lambda sets).
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
	// (JOBS_TRUSTED_CALLERS, as JOBS_OPERATORS; httpapi.WithTrustedCallers).
	TrustedCallers []string
	// EnqueueRatePerOwner bounds each caller's requests that make jobs
	// (JOBS_ENQUEUE_RATE_PER_OWNER, a second; 0: none):
	// jobs.Config.EnqueueRatePerOwner of the enqueue function.
	EnqueueRatePerOwner int
	// EventBus is the EventBridge bus job events go to (JOBS_EVENT_BUS);
	// the roles that write outcomes (worker, sweeper, cancel) send them.
	// AllEvents announces every kind's outcomes (JOBS_EVENTS=all), not
	// only those of kinds with KindOpts.Events (JOBS_EVENTS=kinds, the
	// default).
	EventBus  string
	AllEvents bool
}

// ConfigFromEnv reads Config from the environment (see the package doc).
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		Table:     getenv("JOBS_TABLE"),
		QueueURL:  getenv("JOBS_QUEUE_URL"),
		Lane:      getenv("JOBS_LANE"),
		DLQURL:    getenv("JOBS_DLQ_URL"),
		Deadlines: jobs.DefaultDeadlines,
		Service:   functionName(getenv),
	}
	var errs []error
	dur := func(name string, def time.Duration) time.Duration {
		v := getenv(name)
		if v == "" {
			return def
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q: want a positive duration such as 90s", name, v))
			return def
		}
		return d
	}
	c.DispatchGrace = dur("JOBS_DISPATCH_GRACE", jobs.DefaultDispatchGrace)
	c.Retention = dur("JOBS_RETENTION", jobs.DefaultRetention)
	c.Deadlines.Reserve = dur("JOBS_HANDLER_RESERVE", c.Deadlines.Reserve)
	c.Deadlines.FinalWrite = dur("JOBS_FINAL_WRITE_TIMEOUT", c.Deadlines.FinalWrite)
	c.Deadlines.Call = dur("JOBS_CALL_TIMEOUT", c.Deadlines.Call)
	c.Deadlines.MinRun = dur("JOBS_MIN_RUN_TIME", c.Deadlines.MinRun)
	c.WorkerTimeout = dur("JOBS_WORKER_TIMEOUT", 0)
	c.Scheduler = schedulerapi.Config{
		Group: getenv("JOBS_SCHEDULE_GROUP"), QueueARN: getenv("JOBS_QUEUE_ARN"),
		RoleARN: getenv("JOBS_SCHEDULER_ROLE_ARN"), DLQARN: getenv("JOBS_SCHEDULE_DLQ_ARN"),
		MaxEventAge: dur("JOBS_SCHEDULE_MAX_EVENT_AGE", time.Hour),
	}
	if v := getenv("JOBS_SCHEDULES_PER_OWNER"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			errs = append(errs, fmt.Errorf("JOBS_SCHEDULES_PER_OWNER=%q: want 1..1000", v))
		} else {
			c.SchedulesPerOwner = n
		}
	}
	if v := getenv("JOBS_ENQUEUE_RATE_PER_OWNER"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1_000_000 {
			errs = append(errs, fmt.Errorf("JOBS_ENQUEUE_RATE_PER_OWNER=%q: want 0 (no bound) to 1000000 requests a second", v))
		} else {
			c.EnqueueRatePerOwner = n
		}
	}
	c.Concurrency = 8
	if v := getenv("JOBS_WORKER_CONCURRENCY"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			errs = append(errs, fmt.Errorf("JOBS_WORKER_CONCURRENCY=%q: want 1..1000", v))
		} else {
			c.Concurrency = n
		}
	}
	var keys [][]byte
	var keyErr error
	if v := getenv("JOBS_PAYLOAD_KEY"); v != "" {
		keys, keyErr = keyring.Parse(v)
	}
	if v := getenv("JOBS_PAYLOAD_SECRET"); v != "" {
		if len(v) < 32 {
			errs = append(errs, errors.New("JOBS_PAYLOAD_SECRET: want at least 32 characters"))
		} else {
			keys = append(keys, keyFromSecret(v))
		}
	}
	if len(keys) > 0 || keyErr != nil {
		err := keyErr
		if err == nil {
			var s *jobs.AESSealer
			if s, err = jobs.NewAESSealer(keys...); err == nil {
				c.Sealer = s
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("JOBS_PAYLOAD_KEY: %w", err))
		}
	}
	c.KeyRingSecret = getenv("JOBS_PAYLOAD_KEYRING_SECRET")
	c.MetricsNamespace = getenv("JOBS_METRICS_NAMESPACE")
	c.PageTokenSecret, c.PageTokenKey = getenv("JOBS_PAGE_TOKEN_SECRET"), getenv("JOBS_PAGE_TOKEN_KEY")
	c.Operators = commaList(getenv("JOBS_OPERATORS"))
	c.TrustedCallers = commaList(getenv("JOBS_TRUSTED_CALLERS"))
	if c.PageTokenKey != "" && len(c.PageTokenKey) < 32 {
		errs = append(errs, errors.New("JOBS_PAGE_TOKEN_KEY: want at least 32 characters"))
	}
	switch v := getenv("JOBS_TRACING"); v {
	case "", "off":
	case "on":
		c.Tracing = true
		c.XRayDaemon = getenv("AWS_XRAY_DAEMON_ADDRESS")
	default:
		errs = append(errs, fmt.Errorf("JOBS_TRACING=%q: want on or off", v))
	}
	if c.KeyRingSecret != "" && c.Sealer != nil {
		errs = append(errs, errors.New("JOBS_PAYLOAD_KEYRING_SECRET and JOBS_PAYLOAD_KEY/JOBS_PAYLOAD_SECRET: give one"))
	}
	if v := getenv("JOBS_LANE_QUEUE_URLS"); v != "" {
		if err := json.Unmarshal([]byte(v), &c.LaneQueueURLs); err != nil {
			errs = append(errs, errors.New(`JOBS_LANE_QUEUE_URLS: want a JSON object such as {"urgent":"https://sqs..."}`))
		}
	}
	if v := getenv("JOBS_LANE_DLQ_URLS"); v != "" {
		if err := json.Unmarshal([]byte(v), &c.LaneDLQURLs); err != nil {
			errs = append(errs, errors.New(`JOBS_LANE_DLQ_URLS: want a JSON object such as {"urgent":"https://sqs..."}`))
		}
	}
	if v := getenv("JOBS_LANE_DISPATCH_GRACES"); v != "" {
		var graces map[string]string
		err := json.Unmarshal([]byte(v), &graces)
		c.LaneDispatchGraces = map[string]time.Duration{}
		for lane, g := range graces {
			d, derr := time.ParseDuration(g)
			if derr != nil || d <= 0 {
				err = errors.Join(err, derr, errors.New("not positive"))
			}
			c.LaneDispatchGraces[lane] = d
		}
		if err != nil {
			errs = append(errs, errors.New(`JOBS_LANE_DISPATCH_GRACES: want a JSON object of positive durations such as {"long":"17m"}`))
		}
	}
	if !driver.ValidLane(c.Lane) {
		errs = append(errs, fmt.Errorf("JOBS_LANE=%q: want a lower-case letter, then up to 15 lower-case letters, digits or '-', not \"default\"", c.Lane))
	}
	if v := getenv("JOBS_SOURCES"); v != "" {
		dec := json.NewDecoder(strings.NewReader(v))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c.Sources); err != nil {
			errs = append(errs, errors.New(`JOBS_SOURCES: want a JSON list such as [{"type":"s3","bucket":"uploads"}]`))
		}
	}
	c.EventBus = getenv("JOBS_EVENT_BUS")
	switch v := getenv("JOBS_EVENTS"); v {
	case "", "kinds":
	case "all":
		c.AllEvents = true
	default:
		errs = append(errs, fmt.Errorf("JOBS_EVENTS=%q: want kinds or all", v))
	}
	if c.Table == "" {
		errs = append(errs, errors.New("JOBS_TABLE is required"))
	}
	if err := c.Deadlines.Validate(0); err != nil {
		errs = append(errs, err)
	}
	return c, errors.Join(errs...)
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
}

// newDepsFromEnv reads the AWS configuration from the environment (region,
// credentials, AWS_ENDPOINT_URL_* overrides: see awsenv.go) and builds the
// store and queue.
func newDepsFromEnv(ctx context.Context, cfg Config, logger *slog.Logger) (*Deps, error) {
	awsCfg, err := awsConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	return newDeps(ctx, cfg, awsCfg, logger, nil)
}

func newDeps(ctx context.Context, cfg Config, awsCfg aws.Config, logger *slog.Logger, clock *setupClock) (*Deps, error) {
	var tr tracehook.Tracing
	var err error
	if cfg.Tracing {
		if tr, err = startTracing(ctx, cfg); err != nil {
			return nil, err
		}
		clock.step("tracing")
	}
	d := &Deps{Config: cfg, Logger: logger, aws: awsCfg, tracing: tr, setup: clock}
	d.initClients()
	d.Store = dynamostore.New(d.dynamo(), cfg.Table, dynamostore.Config{})
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
			return nil, errors.New("JOBS_EVENTS=all: JOBS_EVENT_BUS is required")
		}
		if k := reg.EventKinds(); len(k) > 0 {
			return nil, fmt.Errorf("kinds %v announce their outcomes (KindOpts.Events): JOBS_EVENT_BUS is required", k)
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
		DispatchGrace: d.Config.DispatchGrace, LaneDispatchGrace: d.Config.LaneDispatchGraces, Retention: d.Config.Retention, AllEvents: d.Config.AllEvents}
}

// Function builds one function's handler from its dependencies.
type Function func(d *Deps, reg *jobs.Registry) (lambda.Handler, error)

// Enqueue is the POST /v1/jobs and POST /v1/batches function.
func Enqueue(d *Deps, reg *jobs.Registry) (lambda.Handler, error) {
	if d.Queue == nil {
		return nil, errors.New("JOBS_QUEUE_URL is required")
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
	return lambda.NewHandler(httpapi.New(c.Service(), d.Logger).WithTrustedCallers(d.Config.TrustedCallers).Route), nil
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
	return lambda.NewHandler(httpapi.New(c.Service(), d.Logger).WithOperators(d.Config.Operators).Route), nil
}

// Cancel is the job actions function: POST /v1/jobs/{id}/cancel,
// POST /v1/jobs/{id}/retry and POST /v1/bulk/{cancel,retry}, and the
// operators' dead-letter routes (with JOBS_DLQ_URL, and each other lane's
// with JOBS_LANE_DLQ_URLS). It sends retried jobs
// and redriven dead letters to the queue.
func Cancel(d *Deps, reg *jobs.Registry) (lambda.Handler, error) {
	if d.Queue == nil {
		return nil, errors.New("JOBS_QUEUE_URL is required")
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
	api := httpapi.New(c.Service(), d.Logger).WithOperators(d.Config.Operators)
	if d.Config.DLQURL != "" {
		api = api.WithDeadLetters(&sqsqueue.DeadLetters{SQS: lazySQS{&d.clients.sqs}, QueueURL: d.Config.QueueURL, DLQURL: d.Config.DLQURL,
			LaneQueueURLs: d.Config.LaneQueueURLs, LaneDLQURLs: d.Config.LaneDLQURLs})
	}
	return lambda.NewHandler(api.Route), nil
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

// Sweeper is the scheduled sweeper function.
func Sweeper(d *Deps, reg *jobs.Registry) (lambda.Handler, error) {
	if d.Queue == nil {
		return nil, errors.New("JOBS_QUEUE_URL is required")
	}
	bus, err := d.bus(reg)
	if err != nil {
		return nil, err
	}
	cfg := d.jobsConfig(reg, d.readOnlySealer())
	cfg.Bus = bus
	c, err := jobs.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	s := c.Sweeper()
	return lambda.NewHandler(func(ctx context.Context, _ events.CloudWatchEvent) (jobs.SweepReport, error) {
		return s.Sweep(ctx)
	}), nil
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

// Any is the function JOBS_FUNCTION names (enqueue, getjob, cancel,
// worker, sweeper or schedules, as the CDK construct sets it): one main
// and one asset serve all six. Its binary links every function's code, so
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
	return nil, fmt.Errorf("JOBS_FUNCTION=%q: want one of %s", name, strings.Join(deploy.FunctionNames(), ", "))
}

// functions are the deployment's functions (deploy.Functions), by name.
var functions = map[string]Function{
	deploy.Enqueue: Enqueue, deploy.GetJob: GetJob, deploy.Cancel: Cancel,
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
	for name, what := range map[string]func() any{
		"JOBS_PRINT_SCHEDULES": func() any { return reg.Schedules() },
		"JOBS_PRINT_LANES":     func() any { return reg.Lanes() },
	} {
		if os.Getenv(name) == "1" {
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
func Build(ctx context.Context, fn Function, reg *jobs.Registry, getenv func(string) string, opts *Opts) (lambda.Handler, error) {
	h, _, err := build(ctx, fn, reg, getenv, opts)
	return h, err
}

// build is Build, timing its steps (see setup.go).
func build(ctx context.Context, fn Function, reg *jobs.Registry, getenv func(string) string, opts *Opts) (lambda.Handler, *setupClock, error) {
	clock := newSetupClock()
	cfg, err := ConfigFromEnv(getenv)
	if err != nil {
		return nil, nil, err
	}
	clock.step("config")
	awsCfg, err := awsConfigFromEnv(getenv)
	if err != nil {
		return nil, nil, err
	}
	clock.step("aws")
	d, err := newDeps(ctx, cfg, awsCfg, nil, clock)
	if err != nil {
		return nil, nil, err
	}
	d.function = getenv("JOBS_FUNCTION")
	if opts != nil {
		d.Routes, d.Logger = opts.Routes, opts.Logger
	}
	if cfg.MetricsNamespace != "" {
		d.metrics = &jobs.Metrics{Namespace: cfg.MetricsNamespace, Service: cfg.Service, Writer: metricsOut}
		coldStart(d.metrics)
		clock.step("metrics")
	}
	h, err := fn(d, reg)
	if err != nil {
		return nil, nil, err
	}
	if d.tracing != nil {
		h = d.tracing.Wrap(cfg.Service, h)
	}
	clock.step("handler")
	return h, clock, nil
}

// metricsOut is where metrics go: stdout, which Lambda sends to CloudWatch
// Logs line by line.
var metricsOut io.Writer = os.Stdout

// functionName is the "service" dimension: the role a Serve binary plays,
// else the Lambda function's name.
func functionName(getenv func(string) string) string {
	if v := getenv("JOBS_FUNCTION"); v != "" {
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
	cfg, err := ConfigFromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	if cfg.Table == "" || cfg.QueueURL == "" {
		return nil, errors.New("lambdafn: JOBS_TABLE and JOBS_QUEUE_URL are required (jobsinfra's GrantEnqueue sets them)")
	}
	d, err := newDeps(ctx, cfg, awsCfg, slog.New(slog.NewJSONHandler(os.Stderr, nil)), nil)
	if err != nil {
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

// commaList is the non-empty entries of a comma-separated list.
func commaList(v string) []string {
	var out []string
	for _, e := range strings.Split(v, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}
