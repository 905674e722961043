package localstack

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/dashboard"
	"github.com/lambdajobs/lambdajobs/internal/dev/hostcheck"
	"github.com/lambdajobs/lambdajobs/internal/dev/iamcalls"
	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// Config describes a local stack. Zero values take the defaults of
// DefaultConfig.
type Config struct {
	// Root is the repository root (holding _tools); found from the working
	// directory when empty.
	Root string
	// Bootstraps is the folder holding <function>/bootstrap (enqueue, getjob,
	// cancel, worker, sweeper, schedules) built for this machine (make
	// build-local).
	Bootstraps string
	// Bootstrap, when set, is one bootstrap that serves every function
	// (lambdafn.Serve); each is told its role in JOBS_FUNCTION, as the CDK
	// construct does.
	Bootstrap string
	// RIE is the path of the aws-lambda-rie binary.
	RIE string
	// APIAddr is where the HTTP API listens.
	APIAddr string
	// DynamoDBPort and SQSPort are the emulators' ports (0: any free port).
	DynamoDBPort, SQSPort int
	// DynamoDBEndpoint and SQSEndpoint, when set, use emulators that are
	// already running instead of starting them.
	DynamoDBEndpoint, SQSEndpoint string
	// Table and Queue name the table and the queue (its DLQ is Queue-dlq).
	Table, Queue string
	// WorkerTimeout, APITimeout and SweeperTimeout are the functions'
	// Lambda timeouts, enforced by the emulator.
	WorkerTimeout, APITimeout, SweeperTimeout time.Duration
	// LaneTimeouts are the other lanes' worker timeouts, by lane (nil:
	// DefaultConfig's, the long lane's 1 minute); a lane not in it has
	// WorkerTimeout. As in the construct, the lane's queue visibility,
	// dispatch grace, handler reserve and event source follow it (see
	// LaneTimeout).
	LaneTimeouts map[string]time.Duration
	// WorkerInstances is the event source's maximum concurrency: one
	// emulator instance (and poller) each.
	WorkerInstances int
	// WaitInstances is the wait function's reserved concurrency here (its
	// pool's most instances, started as waits come: Pool): default 50.
	WaitInstances int
	// BatchSize (1..10) and BatchWindow configure the event source.
	BatchSize   int
	BatchWindow time.Duration
	// SweepEvery is the sweeper's schedule (0: never; tests call SweepNow).
	SweepEvery time.Duration
	// DashboardAddr, when set, serves the web dashboard there, over this
	// stack's API as the caller "local" (DefaultConfig: 127.0.0.1:8081). It
	// must be one address (port 0 takes any free one), not every
	// interface: the dashboard answers only requests addressed to it.
	DashboardAddr string
	// Webhook, when set, is a URL on this machine (ParseWebhook) the local
	// bus POSTs each event to, as an EventBridge rule to an API
	// destination would (Webhook); Start refuses any other host.
	Webhook string
	// NoSchedules keeps the declared schedules from firing on their own
	// (tests fire them with FireSchedule).
	NoSchedules bool
	// StartPaused starts everything but the event source's pollers; Resume
	// starts them (benchmarks fill the queue first).
	StartPaused bool
	// FunctionEnv is added to every function's environment
	// (JOBS_DISPATCH_GRACE, JOBS_RETENTION, ...).
	FunctionEnv []string
	// RecordCalls, when set (or when the environment variable
	// iamcalls.RecordDirEnv is), records every AWS call the functions, the
	// event source, the Scheduler and the API's callers make, as the IAM
	// authorisations AWS would make for them, to a file of its own in that
	// directory (package iamcalls); infra's tests evaluate them against the
	// deployed policies.
	RecordCalls string
	// Output receives the emulators' and the functions' output, each line
	// prefixed with its source.
	Output io.Writer
	Logger *slog.Logger
}

// DefaultConfig is what `make run` uses.
func DefaultConfig() Config {
	return Config{
		Bootstraps: "build/local", RIE: "bin/aws-lambda-rie",
		APIAddr: "127.0.0.1:8080", DynamoDBPort: 8000, SQSPort: 4566,
		Table: "lambdajobs-local", Queue: "lambdajobs-local",
		WorkerTimeout: 30 * time.Second, APITimeout: 10 * time.Second, SweeperTimeout: 60 * time.Second,
		// Longer than the default lane's, as the construct's long lane
		// (15 minutes); short enough that example.export's two minutes of
		// work show its continuations.
		LaneTimeouts:    map[string]time.Duration{"long": time.Minute},
		WorkerInstances: 2, WaitInstances: 50, BatchSize: 10, SweepEvery: time.Minute,
		DashboardAddr: "127.0.0.1:8081",
	}
}

// Stack is a running local system.
type Stack struct {
	APIURL           string
	DynamoDBEndpoint string
	SQSEndpoint      string
	Queues           sqsqueue.URLs
	Table            string
	// Bucket holds the parts kept as objects, on fauxqs's S3 at
	// SQSEndpoint.
	Bucket string
	// Lanes are the other lanes' queues, by lane: the lanes the worker's
	// registry uses (JOBS_PRINT_LANES), each with its own queue pair
	// (Config.Queue-LANE), worker instance and event source.
	Lanes map[string]sqsqueue.URLs

	// Stats are the metrics the functions wrote (GET StatsPath).
	Stats *Stats
	// Scheduler fires the declared schedules (GET SchedulesPath).
	Scheduler *Scheduler
	// Events is the local event bus, where the job events go (GET
	// EventBusPath).
	Events *EventBus
	// Webhook is the bus's webhook target (Config.Webhook; nil without).
	Webhook *Webhook
	// DashboardURL is where the dashboard is served (Config.DashboardAddr).
	DashboardURL string

	cfg Config
	// awsEnv is every function's AWS environment, values what the
	// functions are told (setFunctionEnv).
	awsEnv  []string
	values  deploy.Values[string]
	calls   *iamcalls.Recorder
	proxies []*iamcalls.Proxy
	// The endpoints the principals of the deployment call: the emulators',
	// or a recording proxy in front of each.
	ddbFor, sqsFor string
	pollers        []*EventSource
	gate           Gate
	runCtx         context.Context
	resumed        sync.Once
	procs          []*localaws.Process
	functions      []*Function
	workers        []*Function
	laneWorkers    map[string]*Function
	sweeper        *Function
	waits          *Pool
	server         *http.Server
	apiHosts       hostcheck.Hosts // the Host values the API answers
	extra          []*http.Server
	cancel         context.CancelFunc
	wg             sync.WaitGroup
	stopOnce       sync.Once
}

// Start brings the whole system up, in steps: the emulators, the table
// and queues, the functions under the Runtime Interface Emulator, the
// gateway (with the local Scheduler's API and the local event bus, with its
// webhook target), the SQS event source, the declared schedules and the
// sweeper's schedule, and the dashboard. It refuses a webhook that is not
// on this machine before starting anything. Stop undoes it.
func Start(ctx context.Context, cfg Config) (_ *Stack, err error) {
	cfg = cfg.withDefaults()
	s := &Stack{cfg: cfg, Table: cfg.Table, Stats: NewStats()}
	// Before anything starts: the webhook posts only to this machine.
	if cfg.Webhook != "" {
		u, err := ParseWebhook(cfg.Webhook)
		if err != nil {
			return nil, err
		}
		s.Webhook = &Webhook{URL: u, Log: cfg.Logger}
	}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	if err := s.startEmulators(ctx); err != nil {
		return nil, err
	}
	if err := s.createTableAndQueues(ctx); err != nil {
		return nil, err
	}
	// The gateway's address before the functions: the schedules function
	// calls the local Scheduler there.
	ln, err := net.Listen("tcp", cfg.APIAddr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.APIAddr, err)
	}
	defer func() {
		if err != nil {
			ln.Close()
		}
	}()
	// The API answers only requests for its own address (DNS rebinding):
	// every caller, the functions' calls to the local Scheduler and bus
	// included, uses APIURL.
	if s.apiHosts, err = hostcheck.For(ln.Addr().String()); err != nil {
		return nil, fmt.Errorf("the API's address (JOBS_LOCAL_API_ADDR): %w", err)
	}
	s.APIURL = "http://" + ln.Addr().String()
	if err := s.setFunctionEnv(); err != nil {
		return nil, err
	}
	api, err := s.startFunctions(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.serveGateway(ctx, ln, api); err != nil {
		return nil, err
	}
	s.startEventSource()
	s.startSchedules()
	if err := s.serveDashboard(); err != nil {
		return nil, err
	}
	cfg.Logger.Info("local stack up", slog.String("api", s.APIURL))
	return s, nil
}

// withDefaults returns cfg with DefaultConfig's values where it has none.
func (cfg Config) withDefaults() Config {
	def := DefaultConfig()
	if cfg.Bootstraps == "" {
		cfg.Bootstraps = def.Bootstraps
	}
	if cfg.RIE == "" {
		cfg.RIE = def.RIE
	}
	if cfg.APIAddr == "" {
		cfg.APIAddr = def.APIAddr
	}
	if cfg.Table == "" {
		cfg.Table = def.Table
	}
	if cfg.Queue == "" {
		cfg.Queue = def.Queue
	}
	if cfg.WorkerTimeout == 0 {
		cfg.WorkerTimeout = def.WorkerTimeout
	}
	if cfg.LaneTimeouts == nil {
		cfg.LaneTimeouts = def.LaneTimeouts
	}
	if cfg.APITimeout == 0 {
		cfg.APITimeout = def.APITimeout
	}
	if cfg.SweeperTimeout == 0 {
		cfg.SweeperTimeout = def.SweeperTimeout
	}
	if cfg.WorkerInstances == 0 {
		cfg.WorkerInstances = def.WorkerInstances
	}
	if cfg.WaitInstances == 0 {
		cfg.WaitInstances = def.WaitInstances
	}
	if cfg.BatchSize == 0 {
		cfg.BatchSize = def.BatchSize
	}
	if cfg.Output == nil {
		cfg.Output = io.Discard
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return cfg
}

// startEmulators starts DynamoDB Local and fauxqs, unless the
// configuration names running ones.
func (s *Stack) startEmulators(ctx context.Context) error {
	cfg := s.cfg
	s.DynamoDBEndpoint = cfg.DynamoDBEndpoint
	if s.DynamoDBEndpoint == "" {
		p, err := localaws.StartDynamoDB(ctx, localaws.Options{Port: cfg.DynamoDBPort, Root: cfg.Root, Output: prefixed(cfg.Output, "dynamodb")})
		if err != nil {
			return err
		}
		s.procs = append(s.procs, p)
		s.DynamoDBEndpoint = p.Endpoint
	}
	s.SQSEndpoint = cfg.SQSEndpoint
	if s.SQSEndpoint == "" {
		p, err := localaws.StartSQS(ctx, localaws.Options{Port: cfg.SQSPort, Root: cfg.Root, Output: prefixed(cfg.Output, "sqs")})
		if err != nil {
			return err
		}
		s.procs = append(s.procs, p)
		s.SQSEndpoint = p.Endpoint
	}
	cfg.Logger.Info("emulators up", slog.String("dynamodb", s.DynamoDBEndpoint), slog.String("sqs", s.SQSEndpoint))
	return nil
}

// bucketName is the local bucket of a stack whose queue is queue: S3's
// rules (3 to 63 lower-case letters, digits and '-').
func bucketName(queue string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(queue) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), "-")
	if len(name) > 57 {
		name = name[:57]
	}
	return name + "-parts"
}

// createTableAndQueues creates the table and the queues from their shared
// definitions, then the recording proxies in front of the emulators, if
// calls are recorded.
func (s *Stack) createTableAndQueues(ctx context.Context) error {
	cfg := s.cfg
	ddb := localaws.DynamoDBClient(s.DynamoDBEndpoint)
	if err := ensureTable(ctx, ddb, cfg.Table); err != nil {
		return err
	}
	// The bucket of the parts kept as objects (example.blob's), on
	// fauxqs's S3, which applies none of the construct's bucket
	// configuration (docs/guide/LOCAL.md).
	s.Bucket = bucketName(cfg.Queue)
	s3c := localaws.S3Client(s.SQSEndpoint)
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &s.Bucket}); err != nil {
		return fmt.Errorf("create the bucket %s: %w", s.Bucket, err)
	}
	sqsClient := localaws.SQSClient(s.SQSEndpoint)
	// As the construct: visibility is twice the worker timeout plus the
	// event source's batching window.
	spec := sqsqueue.SpecFor(cfg.WorkerTimeout, cfg.BatchWindow)
	var err error
	if s.Queues, err = sqsqueue.Create(ctx, sqsClient, cfg.Queue, spec); err != nil {
		return err
	}
	lanes, err := registryLanes(ctx, s.bootstrap(deploy.Worker), cfg.FunctionEnv)
	if err != nil {
		return err
	}
	s.Lanes = map[string]sqsqueue.URLs{}
	for _, lane := range lanes {
		if lane == "" {
			continue
		}
		// Its visibility follows its worker's timeout.
		if s.Lanes[lane], err = sqsqueue.Create(ctx, sqsClient, cfg.Queue+"-"+lane, sqsqueue.SpecFor(cfg.LaneTimeout(lane), cfg.BatchWindow)); err != nil {
			return err
		}
	}
	cfg.Logger.Info("table and queues ready", slog.String("table", cfg.Table), slog.String("queue", s.Queues.Queue), slog.String("dlq", s.Queues.DLQ),
		slog.Any("lanes", lanes))
	return s.record(cfg.RecordCalls)
}

// setFunctionEnv sets what the functions are told: the emulators'
// endpoints and the local credentials (awsEnv), and one value of each
// variable of the deployment's descriptor the stack sets (values: the
// table and queues, fresh page token and payload keys, a payload key of
// the configuration's own kept, the operator, the local Scheduler and bus);
// each function gets the values of the variables it reads
// (deploy.Values.For), then Config.FunctionEnv.
func (s *Stack) setFunctionEnv() error {
	cfg := s.cfg
	// The page token key every getjob and cancel instance shares.
	pageKey := make([]byte, 32)
	if _, err := rand.Read(pageKey); err != nil {
		return err
	}
	s.awsEnv = []string{
		"AWS_ENDPOINT_URL_DYNAMODB=" + s.ddbFor,
		"AWS_ENDPOINT_URL_SQS=" + s.sqsFor,
		// Parts kept as objects: fauxqs's S3 (on its SQS port, so
		// through the same recording proxy), path-style (s3objects).
		"AWS_ENDPOINT_URL_S3=" + s.sqsFor,
		"AWS_REGION=" + localaws.Region,
		"AWS_SECRET_ACCESS_KEY=local",
		"AWS_SESSION_TOKEN=",
		"AWS_PROFILE=",
		"AWS_EC2_METADATA_DISABLED=true",
		// Runtime schedules go to the local Scheduler (SchedulerAPI).
		"AWS_ENDPOINT_URL_SCHEDULER=" + s.APIURL,
		// Job events go to the local bus (EventBus).
		"AWS_ENDPOINT_URL_EVENTBRIDGE=" + s.APIURL + EventBusPath,
	}
	s.values = deploy.Values[string]{
		deploy.EnvTable.Var:    cfg.Table,
		deploy.EnvQueueURL.Var: s.Queues.Queue,
		// The local stack serves this repository's example kinds.
		deploy.EnvExampleKinds.Var: "on",
		// The functions write their metrics (EMF) with their output, as in Lambda.
		deploy.EnvMetricsNamespace.Var: "lambdajobs/local",
		deploy.EnvPageTokenKey.Var:     base64.StdEncoding.EncodeToString(pageKey),
		// The local operator: X-Local-Caller: operator.
		deploy.EnvOperators.Var: LocalOperator,
		// The default local caller may give a job's tenant and lane; any
		// other X-Local-Caller gets 403 for them.
		deploy.EnvTrustedCallers.Var: LocalTrustedCaller,
		// The operators' dead-letter routes (the cancel function).
		deploy.EnvDLQURL.Var:           s.Queues.DLQ,
		deploy.EnvScheduleGroup.Var:    RuntimeGroup,
		deploy.EnvQueueARN.Var:         s.Queues.QueueARN,
		deploy.EnvSchedulerRoleARN.Var: "arn:aws:iam::" + LocalAccount + ":role/lambdajobs-local-scheduler",
		deploy.EnvScheduleDLQARN.Var:   s.Queues.DLQARN,
		deploy.EnvEventBus.Var:         LocalEventBus,
		deploy.EnvBucket.Var:           s.Bucket,
		// As the construct sets it: the worker refuses a kind that needs
		// more handler time than its invocations have.
		deploy.EnvWorkerTimeout.Var: deploy.EnvWorkerTimeout.Format(cfg.WorkerTimeout),
		// As a new stack of the construct: a job's message goes first, on
		// every function that sends (Config.FunctionEnv may turn it off).
		deploy.EnvMessageFirst.Var: deploy.EnvMessageFirst.Format(true),
	}
	// Without a configured payload key, this run seals secret payload
	// fields with a fresh random key.
	if !hasEnv(cfg.FunctionEnv, deploy.EnvPayloadKey.Name) {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return err
		}
		s.values[deploy.EnvPayloadKey.Var] = base64.StdEncoding.EncodeToString(key)
	}
	s.laneValues(s.values)
	return nil
}

// envOf is the environment of the function name told values: the
// emulators' endpoints, the variables it reads, then Config.FunctionEnv.
func (s *Stack) envOf(name string, values deploy.Values[string]) []string {
	env := slices.Clone(s.awsEnv)
	vars := values.For(name, name)
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		env = append(env, k+"="+vars[k])
	}
	return append(env, s.cfg.FunctionEnv...)
}

// apiFunctions are the functions behind the gateway, by name.
type apiFunctions map[string]Invoker

// startFunctions starts the deployment's functions (deploy.Functions)
// under the emulator: each function behind the API once, the worker once
// per instance and once per other lane, the sweeper once.
func (s *Stack) startFunctions(ctx context.Context) (apiFunctions, error) {
	cfg := s.cfg
	api := apiFunctions{}
	for _, f := range deploy.Functions {
		var err error
		switch {
		case f.Name == deploy.WaitJob:
			// Waits hold their instances: a pool, as Lambda scales it
			// up to the function's reserved concurrency.
			s.waits = &Pool{Name: f.Name, Max: cfg.WaitInstances, Start: func(ctx context.Context) (*Function, error) {
				return StartFunction(ctx, s.functionConfig(instanceOf{name: f.Name, principal: f.Name, timeout: f.Timeout}))
			}}
			api[f.Name] = timeoutInvoker{s.waits, f.Timeout}
		case f.API:
			var fn *Function
			fn, err = s.startFunction(ctx, f.Name, "", cfg.APITimeout)
			api[f.Name] = timeoutInvoker{fn, cfg.APITimeout}
		case f.Name == deploy.Worker:
			err = s.startWorkers(ctx)
		case f.Name == deploy.Sweeper:
			s.sweeper, err = s.startFunction(ctx, f.Name, "", cfg.SweeperTimeout)
		default:
			err = fmt.Errorf("localstack: the descriptor's function %s has nothing to run it here", f.Name)
		}
		if err != nil {
			return api, err
		}
	}
	return api, nil
}

// startWorkers starts the worker's instances, and one instance per other
// lane, serving its lane (JOBS_LANE), with its own timeout and signing as
// its own function.
func (s *Stack) startWorkers(ctx context.Context) error {
	cfg := s.cfg
	for i := range cfg.WorkerInstances {
		w, err := s.startFunction(ctx, deploy.Worker, strconv.Itoa(i+1), cfg.WorkerTimeout)
		if err != nil {
			return err
		}
		s.workers = append(s.workers, w)
	}
	s.laneWorkers = map[string]*Function{}
	for _, lane := range slices.Sorted(maps.Keys(s.Lanes)) {
		w, err := s.startFunctionAs(ctx, instanceOf{name: deploy.Worker, instance: lane, principal: iamcalls.LaneWorker(lane), timeout: cfg.LaneTimeout(lane),
			values: cfg.laneWorkerValues(lane, s.values)})
		if err != nil {
			return err
		}
		s.laneWorkers[lane] = w
	}
	return nil
}

// startFunction starts one instance of the function name under the
// emulator, with the functions' environment, its own identity and
// timeout.
func (s *Stack) startFunction(ctx context.Context, name, instance string, timeout time.Duration) (*Function, error) {
	return s.startFunctionAs(ctx, instanceOf{name: name, instance: instance, principal: name, timeout: timeout})
}

// instanceOf is one instance of a function: the function's name, the
// instance's ("" for the only one), the principal it signs as
// (iamcalls), its timeout, and the values it is told (nil: the
// functions').
type instanceOf struct {
	name, instance, principal string
	timeout                   time.Duration
	values                    deploy.Values[string]
}

// startFunctionAs is startFunction for the instance fi: signing as its
// principal, with its environment.
func (s *Stack) startFunctionAs(ctx context.Context, fi instanceOf) (*Function, error) {
	f, err := StartFunction(ctx, s.functionConfig(fi))
	if err != nil {
		return nil, err
	}
	s.functions = append(s.functions, f)
	return f, nil
}

// functionConfig is how the instance fi starts.
func (s *Stack) functionConfig(fi instanceOf) FunctionConfig {
	cfg := s.cfg
	name, timeout := fi.name, fi.timeout
	label := name
	if fi.instance != "" {
		label = name + "-" + fi.instance
	}
	values := s.values
	if fi.values != nil {
		values = fi.values
	}
	// Each function signs as itself (iamcalls: its role in AWS).
	fenv := append(s.envOf(name, values), "AWS_ACCESS_KEY_ID="+iamcalls.AccessKeyID(fi.principal))
	return FunctionConfig{
		Name: name, RIE: cfg.RIE, Bootstrap: s.bootstrap(name),
		Timeout: timeout, Env: fenv,
		Output: s.Stats.Writer(prefixed(cfg.Output, label)),
	}
}

// bootstrap is the executable of the function name.
func (s *Stack) bootstrap(name string) string {
	if s.cfg.Bootstrap != "" {
		return s.cfg.Bootstrap
	}
	return filepath.Join(s.cfg.Bootstraps, name, "bootstrap")
}

// serveGateway serves on ln the gateway to the API's functions, the local
// Scheduler's API (with the declared schedules, read from the worker) and
// the stats.
func (s *Stack) serveGateway(ctx context.Context, ln net.Listener, api apiFunctions) error {
	cfg := s.cfg
	mux := http.NewServeMux()
	mux.Handle("GET "+StatsPath, s.Stats)
	declared, err := declaredSchedules(ctx, s.bootstrap(deploy.Worker), s.envOf(deploy.Worker, s.values))
	if err != nil {
		return err
	}
	// Scheduler sends fires with its own role.
	s.Scheduler = &Scheduler{Schedules: declared, Start: time.Now(), Send: sqsSender(s.SQSAs(iamcalls.Scheduler), s.Queues.Queue), Log: cfg.Logger}
	mux.Handle("GET "+SchedulesPath, s.Scheduler)
	mux.Handle(SchedulerAPIPrefix, SchedulerAPI{Scheduler: s.Scheduler, Calls: s.calls})
	s.Events = &EventBus{Calls: s.calls, Log: cfg.Logger, Webhook: s.Webhook}
	mux.Handle(EventBusPath, s.Events)
	mux.Handle("/", &Gateway{
		Enqueue: api[deploy.Enqueue], GetJob: api[deploy.GetJob], WaitJob: api[deploy.WaitJob],
		Cancel: api[deploy.Cancel], Schedules: api[deploy.Schedules], Logger: cfg.Logger,
		Calls: s.calls,
	})
	s.server = &http.Server{Handler: ownHostOnly(s.apiHosts, mux, cfg.Logger), ReadHeaderTimeout: 10 * time.Second}
	s.runCtx, s.cancel = context.WithCancel(context.Background())
	if s.Webhook != nil {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.Webhook.Run(s.runCtx) }()
	}
	s.wg.Add(1)
	go func() { defer s.wg.Done(); _ = s.server.Serve(ln) }()
	return nil
}

// startEventSource makes one poller per worker instance, polling with the
// worker's role as Lambda's event source mapping does, and starts them
// unless the stack starts paused.
func (s *Stack) startEventSource() {
	cfg := s.cfg
	for _, w := range s.workers {
		es := &EventSource{
			SQS: s.SQSAs("worker"), QueueURL: s.Queues.Queue, QueueARN: s.Queues.QueueARN,
			Invoke: invokeWorker(w), BatchSize: cfg.BatchSize, Window: cfg.BatchWindow,
			Concurrency: 1, Timeout: cfg.WorkerTimeout + 5*time.Second, Logger: cfg.Logger, Gate: &s.gate,
		}
		s.pollers = append(s.pollers, es)
	}
	// Each other lane: its own event source, with its batch size
	// (LaneBatchSize), polling as the lane's worker.
	for lane, w := range s.laneWorkers {
		q := s.Lanes[lane]
		s.pollers = append(s.pollers, &EventSource{
			SQS: s.SQSAs(iamcalls.LaneWorker(lane)), QueueURL: q.Queue, QueueARN: q.QueueARN,
			Invoke: invokeWorker(w), BatchSize: LaneBatchSize(lane, cfg.BatchSize), Window: cfg.BatchWindow,
			Concurrency: 1, Timeout: cfg.LaneTimeout(lane) + 5*time.Second, Logger: cfg.Logger, Gate: &s.gate,
		})
	}
	if !cfg.StartPaused {
		s.Resume()
	}
}

// startSchedules fires the declared schedules (unless NoSchedules) and
// the sweeper every SweepEvery.
func (s *Stack) startSchedules() {
	cfg, runCtx := s.cfg, s.runCtx
	if !cfg.NoSchedules {
		s.wg.Add(1)
		go func() { defer s.wg.Done(); s.Scheduler.Run(runCtx) }()
	}
	if cfg.SweepEvery > 0 {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			t := time.NewTicker(cfg.SweepEvery)
			defer t.Stop()
			for {
				select {
				case <-runCtx.Done():
					return
				case <-t.C:
					if err := s.SweepNow(runCtx); err != nil && runCtx.Err() == nil {
						cfg.Logger.Warn("scheduled sweep failed", slog.String("error", err.Error()))
					}
				}
			}
		}()
	}
}

// serveDashboard serves the dashboard on DashboardAddr, if set.
func (s *Stack) serveDashboard() error {
	addr := s.cfg.DashboardAddr
	if addr == "" {
		return nil
	}
	dln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	dash, err := s.Dashboard("local", dln.Addr().String())
	if err != nil {
		dln.Close()
		return err
	}
	s.DashboardURL = "http://" + dln.Addr().String()
	dsrv := &http.Server{Handler: dash, ReadHeaderTimeout: 10 * time.Second}
	s.extra = append(s.extra, dsrv)
	s.wg.Add(1)
	go func() { defer s.wg.Done(); _ = dsrv.Serve(dln) }()
	return nil
}

// LocalOperator is the local stack's operator (X-Local-Caller: operator):
// the admin routes are theirs.
const LocalOperator = "arn:aws:iam::" + LocalAccount + ":user/operator"

// LocalTrustedCaller is the local stack's default caller (no
// X-Local-Caller): it may give a job's tenant and lane
// (httpapi.Config.TrustedCallers), as a service that enqueues for its
// customers would be configured.
const LocalTrustedCaller = "arn:aws:iam::" + LocalAccount + ":user/local"

// Dashboard returns a dashboard over this stack's API as caller, with its
// metrics, its event bus and its dead-letter queue (through the operators'
// routes, as the local operator), that answers at addr, the address its
// listener reports (dashboard.Config.Addr).
func (s *Stack) Dashboard(caller, addr string) (*dashboard.Server, error) {
	cfg, err := s.DashboardConfig(caller, addr)
	if err != nil {
		return nil, err
	}
	return dashboard.New(cfg)
}

// DashboardConfig is the configuration Dashboard uses, for a test to
// change before dashboard.New (to count the dashboard's API calls through
// Do, say: the dashboard's browser tests in internal/devtools do).
func (s *Stack) DashboardConfig(caller, addr string) (dashboard.Config, error) {
	api, err := url.Parse(s.APIURL)
	if err != nil {
		return dashboard.Config{}, err
	}
	stats, _ := url.Parse(s.APIURL + StatsPath)
	bus, _ := url.Parse(s.APIURL + EventBusPath)
	// The dead-letter page uses the operators' routes, as the local
	// operator (X-Local-Caller: operator), whoever the dashboard's caller.
	return dashboard.Config{Addr: addr, API: api, Caller: caller, Stats: stats, Events: bus, Log: s.cfg.Logger,
		DLQ: &dashboard.APIDeadLetters{API: api, Caller: "operator"}}, nil
}

// FireSchedule sends one fire of the named schedule for the scheduled
// time at, as Scheduler would.
func (s *Stack) FireSchedule(ctx context.Context, name string, at time.Time) error {
	return s.Scheduler.Send(ctx, wire.FireMessage(name, at.UTC().Format(time.RFC3339)))
}

// FireRuntimeSchedule sends one fire of an owner's runtime schedule for
// the scheduled time at, as Scheduler would.
func (s *Stack) FireRuntimeSchedule(ctx context.Context, ownerKey, name string, at time.Time) error {
	return s.Scheduler.Send(ctx, wire.RuntimeFireMessage(ownerKey, name, at.UTC().Format(time.RFC3339)))
}

// Resume starts the event source's pollers (see Config.StartPaused).
func (s *Stack) Resume() {
	s.resumed.Do(func() {
		for _, es := range s.pollers {
			s.wg.Add(1)
			go func() { defer s.wg.Done(); es.Run(s.runCtx) }()
		}
	})
}

// Pause stops the event source from delivering messages (as disabling the
// worker's event source mapping does) and returns once the batches in
// flight are done; Unpause resumes it. Messages wait in the queue.
func (s *Stack) Pause() { s.gate.Close() }

// Unpause: see Pause.
func (s *Stack) Unpause() { s.gate.Open() }

// SweepNow invokes the sweeper with a scheduled event, as EventBridge does.
func (s *Stack) SweepNow(ctx context.Context) error {
	_, err := s.Sweep(ctx)
	return err
}

// Sweep is SweepNow, returning what the sweep reports it did.
func (s *Stack) Sweep(ctx context.Context) (jobs.SweepReport, error) {
	ev := events.CloudWatchEvent{
		Version: "0", ID: "local-" + strconv.FormatInt(time.Now().UnixNano(), 36), DetailType: "Scheduled Event",
		Source: "aws.events", AccountID: LocalAccount, Time: time.Now().UTC(), Region: localaws.Region,
		Resources: []string{"arn:aws:events:" + localaws.Region + ":" + LocalAccount + ":rule/lambdajobs-local-sweep"},
		Detail:    json.RawMessage(`{}`),
	}
	payload, _ := json.Marshal(ev)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.SweeperTimeout+5*time.Second)
	defer cancel()
	var rep jobs.SweepReport
	out, err := s.sweeper.Invoke(ctx, payload)
	if err != nil {
		return rep, err
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		return rep, fmt.Errorf("localstack: the sweeper's answer %q: %w", out, err)
	}
	return rep, nil
}

// WaitInstances is how many instances of the wait function have started
// (its pool grows as waits come).
func (s *Stack) WaitInstances() int {
	if s.waits == nil {
		return 0
	}
	return s.waits.Instances()
}

// Workers returns the default lane's worker function instances (tests
// kill them).
func (s *Stack) Workers() []*Function { return s.workers }

// LaneWorker returns the worker instance of another lane (nil: no such
// lane).
func (s *Stack) LaneWorker(lane string) *Function { return s.laneWorkers[lane] }

// LaneBatchSize is the batch size of a lane's event source on the local
// stack, as the construct's presets (jobsinfra.LanePreset) within what
// one receive returns: 1 for urgent and long, 10 for bulk, the default
// lane's for any other.
func LaneBatchSize(lane string, def int) int {
	switch lane {
	case "urgent", "long":
		return 1
	case "bulk":
		return 10
	}
	return def
}

// registryLanes asks a bootstrap which lanes its registry's kinds run in
// (lambdafn prints them and exits when JOBS_PRINT_LANES=1).
func registryLanes(ctx context.Context, bootstrap string, env []string) ([]string, error) {
	cmd := exec.CommandContext(ctx, bootstrap)
	// The example kinds, as every function of the stack (setFunctionEnv).
	cmd.Env = append([]string{deploy.EnvExampleKinds.Name + "=on"}, env...)
	cmd.Env = append(cmd.Env, deploy.EnvFunction.Name+"="+deploy.Worker, deploy.EnvPrintLanes.Name+"=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("list the lanes of %s: %w: %s", bootstrap, err, errOut.String())
	}
	var lanes []string
	if err := json.Unmarshal(out.Bytes(), &lanes); err != nil {
		return nil, fmt.Errorf("list the lanes of %s: %w", bootstrap, err)
	}
	return lanes, nil
}

// Stop stops everything Start started, in reverse order.
func (s *Stack) Stop() {
	s.stopOnce.Do(func() {
		if s.cancel != nil {
			s.cancel()
		}
		for _, srv := range append([]*http.Server{s.server}, s.extra...) {
			if srv == nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = srv.Shutdown(ctx)
			cancel()
		}
		s.wg.Wait()
		for _, f := range s.functions {
			f.Stop()
		}
		if s.waits != nil {
			s.waits.Stop()
		}
		for _, p := range s.proxies {
			_ = p.Close()
		}
		if err := s.calls.Close(); err != nil {
			s.cfg.Logger.Warn("recording the AWS calls failed", slog.String("error", err.Error()))
		}
		for i := len(s.procs) - 1; i >= 0; i-- {
			s.procs[i].Stop()
		}
	})
}

// record puts a recording proxy (package iamcalls) in front of each
// emulator for the deployment's principals when dir (or the environment's
// iamcalls.RecordDirEnv) names where to record; without it they call the
// emulators directly.
func (s *Stack) record(dir string) error {
	s.ddbFor, s.sqsFor = s.DynamoDBEndpoint, s.SQSEndpoint
	if dir == "" {
		dir = os.Getenv(iamcalls.RecordDirEnv)
	}
	if dir == "" {
		return nil
	}
	rec, err := iamcalls.NewRecorder(dir)
	if err != nil {
		return fmt.Errorf("record the AWS calls: %w", err)
	}
	s.calls = rec
	names := iamcalls.Names{Table: s.Table, Queue: s.Queues.Queue, DLQ: s.Queues.DLQ, LaneQueues: map[string]string{}, LaneDLQs: map[string]string{}, Bucket: s.Bucket}
	for lane, q := range s.Lanes {
		names.LaneQueues[lane], names.LaneDLQs[lane] = q.Queue, q.DLQ
	}
	for _, ep := range []*string{&s.ddbFor, &s.sqsFor} {
		p, err := iamcalls.StartProxy(*ep, names, rec)
		if err != nil {
			return fmt.Errorf("record the AWS calls: %w", err)
		}
		s.proxies = append(s.proxies, p)
		*ep = p.URL()
	}
	return nil
}

// laneValues sets the other lanes' queues and dead-letter queues in
// values, when there are other lanes, and the dispatch graces of those
// whose worker runs longer than the default lane's.
func (s *Stack) laneValues(values deploy.Values[string]) {
	if len(s.Lanes) == 0 {
		return
	}
	urls, dlqs := map[string]string{}, map[string]string{}
	graces := map[string]time.Duration{}
	grace := get(deploy.EnvDispatchGrace, s.cfg.FunctionEnv)
	for lane, q := range s.Lanes {
		urls[lane], dlqs[lane] = q.Queue, q.DLQ
		if g := deploy.LaneDispatchGrace(grace, s.cfg.WorkerTimeout, s.cfg.LaneTimeout(lane), s.cfg.BatchWindow); g != grace {
			graces[lane] = g
		}
	}
	values[deploy.EnvLaneQueueURLs.Var] = deploy.EnvLaneQueueURLs.Format(urls)
	values[deploy.EnvLaneDLQURLs.Var] = deploy.EnvLaneDLQURLs.Format(dlqs)
	if len(graces) > 0 {
		values[deploy.EnvLaneDispatchGraces.Var] = deploy.EnvLaneDispatchGraces.Format(graces)
	}
}

// LaneTimeout is the worker timeout of lane on this stack: LaneTimeouts',
// else WorkerTimeout (the default lane's always).
func (cfg Config) LaneTimeout(lane string) time.Duration {
	if t := cfg.LaneTimeouts[lane]; lane != "" && t > 0 {
		return t
	}
	return cfg.WorkerTimeout
}

// laneWorkerValues are what a lane's worker is told: the functions'
// values, with its lane, its timeout, and, when its timeout is long
// enough to grow them (jobs.Deadlines.ForTimeout), its handler reserve
// and final write's bound, as the construct sets them.
func (cfg Config) laneWorkerValues(lane string, values deploy.Values[string]) deploy.Values[string] {
	out := maps.Clone(values)
	out[deploy.EnvLane.Var] = lane
	out[deploy.EnvWorkerTimeout.Var] = deploy.EnvWorkerTimeout.Format(cfg.LaneTimeout(lane))
	base := jobs.Deadlines{
		Reserve:    get(deploy.EnvHandlerReserve, cfg.FunctionEnv),
		FinalWrite: get(deploy.EnvFinalWriteTimeout, cfg.FunctionEnv),
	}
	if d := base.ForTimeout(cfg.LaneTimeout(lane)); d.Reserve != base.Reserve {
		out[deploy.EnvHandlerReserve.Var] = deploy.EnvHandlerReserve.Format(d.Reserve)
		out[deploy.EnvFinalWriteTimeout.Var] = deploy.EnvFinalWriteTimeout.Format(d.FinalWrite)
	}
	return out
}

// get is the value of the setting the last name=... of env gives, else
// its default (a value the functions refuse too).
func get[T any](s deploy.Setting[T], env []string) T {
	v, err := s.Get(func(name string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(env[i], name+"="); ok {
				return v
			}
		}
		return ""
	})
	if err != nil {
		return s.DefaultValue()
	}
	return v
}

// EnqueuerEnv is the environment a program of a team's needs to enqueue
// into this stack with lambdafn.NewService, as jobsinfra's GrantEnqueue
// gives a function in AWS: each variable NewService reads
// (deploy.ServiceVars) that the functions are given, with their values
// (the table, the queues, the payload key, and any of the stack's
// Config.FunctionEnv), the emulators' endpoints, and credentials that sign
// as iamcalls.Enqueuer (so its calls are recorded and evaluated against
// GrantEnqueue's policy). lambdajobs-local prints it at start.
func (s *Stack) EnqueuerEnv() []string {
	var out []string
	for _, kv := range s.envOf(deploy.Enqueue, s.values) {
		name, _, _ := strings.Cut(kv, "=")
		if v, ok := deploy.Lookup(name); ok && slices.Contains(deploy.ServiceVars, v) {
			out = append(out, kv)
		}
	}
	return append(out,
		"AWS_ENDPOINT_URL_DYNAMODB="+s.ddbFor,
		"AWS_ENDPOINT_URL_SQS="+s.sqsFor,
		"AWS_REGION="+localaws.Region,
		"AWS_ACCESS_KEY_ID="+iamcalls.AccessKeyID(iamcalls.Enqueuer),
		"AWS_SECRET_ACCESS_KEY=local",
	)
}

// DynamoDBAs and SQSAs return clients that sign as a principal of the
// deployment (see iamcalls), whose calls are recorded when the stack
// records: a team's function given GrantEnqueue (iamcalls.Enqueuer), say.
func (s *Stack) DynamoDBAs(principal string) *dynamodb.Client {
	return localaws.DynamoDBClient(s.ddbFor, func(o *dynamodb.Options) { o.Credentials = localaws.As(iamcalls.AccessKeyID(principal)) })
}

// SQSAs: see DynamoDBAs.
func (s *Stack) SQSAs(principal string) *sqs.Client {
	return localaws.SQSClient(s.sqsFor, func(o *sqs.Options) { o.Credentials = localaws.As(iamcalls.AccessKeyID(principal)) })
}

func ensureTable(ctx context.Context, ddb *dynamodb.Client, table string) error {
	_, err := ddb.CreateTable(ctx, dynamostore.CreateTableInput(table))
	var inUse *ddbtypes.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("create table %s: %w", table, err)
	}
	ttl, err := ddb.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: &table})
	if err != nil {
		return fmt.Errorf("describe TTL of %s: %w", table, err)
	}
	if d := ttl.TimeToLiveDescription; d != nil && d.TimeToLiveStatus == ddbtypes.TimeToLiveStatusEnabled {
		return nil
	}
	if _, err := ddb.UpdateTimeToLive(ctx, dynamostore.TimeToLiveInput(table)); err != nil {
		return fmt.Errorf("enable TTL on %s: %w", table, err)
	}
	return nil
}

type timeoutInvoker struct {
	f       Invoker
	timeout time.Duration
}

func (t timeoutInvoker) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout+5*time.Second)
	defer cancel()
	return t.f.Invoke(ctx, payload)
}

func invokeWorker(f *Function) SQSHandler {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		payload, err := json.Marshal(ev)
		if err != nil {
			return events.SQSEventResponse{}, err
		}
		out, err := f.Invoke(ctx, payload)
		if err != nil {
			return events.SQSEventResponse{}, err
		}
		var resp events.SQSEventResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			return events.SQSEventResponse{}, fmt.Errorf("worker answer: %w", err)
		}
		return resp, nil
	}
}

// prefixed returns a writer that prefixes each line written to w with
// "[label] ".
func prefixed(w io.Writer, label string) io.Writer {
	return &prefixWriter{w: w, prefix: []byte("[" + label + "] ")}
}

type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix []byte
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			break
		}
		line := append(append([]byte{}, p.prefix...), p.buf[:i+1]...)
		if _, err := p.w.Write(line); err != nil {
			return len(b), err
		}
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

func hasEnv(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}

// QuietEmulator returns a writer that drops the Runtime Interface
// Emulator's own "(rapid)" log lines and passes everything else (the
// functions' JSON logs, START/END/REPORT lines) to w.
func QuietEmulator(w io.Writer) io.Writer { return &quietWriter{w: w} }

type quietWriter struct{ w io.Writer }

func (q *quietWriter) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte("] (rapid) ")) || bytes.Contains(b, []byte(" (rapid) ")) {
		return len(b), nil
	}
	return q.w.Write(b)
}
