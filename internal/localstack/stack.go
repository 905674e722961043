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
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdajobs/lambdajobs/internal/dashboard"
	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/hostcheck"
	"github.com/lambdajobs/lambdajobs/internal/iamcalls"
	"github.com/lambdajobs/lambdajobs/internal/localaws"
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
		WorkerInstances: 2, BatchSize: 10, SweepEvery: time.Minute,
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
	// env is every function's environment (setFunctionEnv).
	env     []string
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
	server         *http.Server
	apiHosts       hostcheck.Hosts // the Host values the API answers
	extra          []*http.Server
	cancel         context.CancelFunc
	wg             sync.WaitGroup
	stopOnce       sync.Once
}

// Start brings the whole system up, in steps: the emulators, the table
// and queues, the six functions under the Runtime Interface Emulator, the
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

// createTableAndQueues creates the table and the queues from their shared
// definitions, then the recording proxies in front of the emulators, if
// calls are recorded.
func (s *Stack) createTableAndQueues(ctx context.Context) error {
	cfg := s.cfg
	ddb := localaws.DynamoDBClient(s.DynamoDBEndpoint)
	if err := ensureTable(ctx, ddb, cfg.Table); err != nil {
		return err
	}
	sqsClient := localaws.SQSClient(s.SQSEndpoint)
	spec := sqsqueue.DefaultSpec(cfg.WorkerTimeout)
	var err error
	if s.Queues, err = sqsqueue.Create(ctx, sqsClient, cfg.Queue, spec); err != nil {
		return err
	}
	lanes, err := registryLanes(ctx, s.bootstrap("worker"), cfg.FunctionEnv)
	if err != nil {
		return err
	}
	s.Lanes = map[string]sqsqueue.URLs{}
	for _, lane := range lanes {
		if lane == "" {
			continue
		}
		// Its visibility follows its worker's timeout.
		if s.Lanes[lane], err = sqsqueue.Create(ctx, sqsClient, cfg.Queue+"-"+lane, sqsqueue.DefaultSpec(cfg.LaneTimeout(lane))); err != nil {
			return err
		}
	}
	cfg.Logger.Info("table and queues ready", slog.String("table", cfg.Table), slog.String("queue", s.Queues.Queue), slog.String("dlq", s.Queues.DLQ),
		slog.Any("lanes", lanes))
	return s.record(cfg.RecordCalls)
}

// setFunctionEnv sets the environment every function gets: the table and
// queues, the emulators' endpoints, fresh page token and payload keys (a
// payload key of the configuration's own is kept), the operator, the local
// Scheduler, then Config.FunctionEnv. It refuses a JOBS_ variable the
// deployment's descriptor does not list, as the construct sets only those.
func (s *Stack) setFunctionEnv() error {
	cfg := s.cfg
	// The page token key every getjob and cancel instance shares.
	pageKey := make([]byte, 32)
	if _, err := rand.Read(pageKey); err != nil {
		return err
	}
	keyEnvPage := "JOBS_PAGE_TOKEN_KEY=" + base64.StdEncoding.EncodeToString(pageKey)
	// Without a configured payload
	// key, this run seals secret payload fields with a fresh random key.
	keyEnv := []string{}
	if !hasEnv(cfg.FunctionEnv, "JOBS_PAYLOAD_KEY") {
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return err
		}
		keyEnv = append(keyEnv, "JOBS_PAYLOAD_KEY="+base64.StdEncoding.EncodeToString(key))
	}
	env := append([]string{
		"JOBS_TABLE=" + cfg.Table,
		"JOBS_QUEUE_URL=" + s.Queues.Queue,
		"AWS_ENDPOINT_URL_DYNAMODB=" + s.ddbFor,
		"AWS_ENDPOINT_URL_SQS=" + s.sqsFor,
		"AWS_REGION=" + localaws.Region,
		"AWS_SECRET_ACCESS_KEY=local",
		"AWS_SESSION_TOKEN=",
		"AWS_PROFILE=",
		"AWS_EC2_METADATA_DISABLED=true",
		// The local stack serves this repository's example kinds.
		"JOBS_EXAMPLE_KINDS=on",
		// The functions write their metrics (EMF) with their output, as in Lambda.
		"JOBS_METRICS_NAMESPACE=lambdajobs/local",
		keyEnvPage,
		// The local operator: X-Local-Caller: operator.
		"JOBS_OPERATORS=" + LocalOperator,
		// The default local caller may give a job's tenant and lane; any
		// other X-Local-Caller gets 403 for them.
		"JOBS_TRUSTED_CALLERS=" + LocalTrustedCaller,
		// The operators' dead-letter routes (the cancel function).
		"JOBS_DLQ_URL=" + s.Queues.DLQ,
		// Runtime schedules go to the local Scheduler (SchedulerAPI).
		"AWS_ENDPOINT_URL_SCHEDULER=" + s.APIURL,
		"JOBS_SCHEDULE_GROUP=" + RuntimeGroup,
		"JOBS_QUEUE_ARN=" + s.Queues.QueueARN,
		"JOBS_SCHEDULER_ROLE_ARN=arn:aws:iam::" + LocalAccount + ":role/lambdajobs-local-scheduler",
		"JOBS_SCHEDULE_DLQ_ARN=" + s.Queues.DLQARN,
		// Job events go to the local bus (EventBus).
		"AWS_ENDPOINT_URL_EVENTBRIDGE=" + s.APIURL + EventBusPath,
		"JOBS_EVENT_BUS=" + LocalEventBus,
	}, keyEnv...)
	env = append(env, s.laneEnv()...)
	// The stack sets only what the deployment's descriptor lists, as the
	// construct does.
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "JOBS_") {
			if _, ok := deploy.Lookup(name); !ok {
				return fmt.Errorf("localstack: %s is not in the deployment's descriptor (internal/deploy)", name)
			}
		}
	}
	s.env = append(env, cfg.FunctionEnv...)
	return nil
}

// apiFunctions are the functions behind the gateway.
type apiFunctions struct {
	enqueue, getjob, cancel, schedules *Function
}

// startFunctions starts the six functions under the emulator, the worker
// once per instance.
func (s *Stack) startFunctions(ctx context.Context) (api apiFunctions, err error) {
	cfg := s.cfg
	if api.enqueue, err = s.startFunction(ctx, "enqueue", "", cfg.APITimeout); err != nil {
		return api, err
	}
	if api.getjob, err = s.startFunction(ctx, "getjob", "", cfg.APITimeout); err != nil {
		return api, err
	}
	if api.cancel, err = s.startFunction(ctx, "cancel", "", cfg.APITimeout); err != nil {
		return api, err
	}
	for i := range cfg.WorkerInstances {
		w, err := s.startFunction(ctx, "worker", strconv.Itoa(i+1), cfg.WorkerTimeout)
		if err != nil {
			return api, err
		}
		s.workers = append(s.workers, w)
	}
	// One worker instance per other lane, serving its lane (JOBS_LANE),
	// with its own timeout and signing as its own function.
	s.laneWorkers = map[string]*Function{}
	for _, lane := range slices.Sorted(maps.Keys(s.Lanes)) {
		w, err := s.startFunctionAs(ctx, instanceOf{name: "worker", instance: lane, principal: iamcalls.LaneWorker(lane), timeout: cfg.LaneTimeout(lane),
			env: cfg.laneWorkerEnv(lane)})
		if err != nil {
			return api, err
		}
		s.laneWorkers[lane] = w
	}
	if s.sweeper, err = s.startFunction(ctx, "sweeper", "", cfg.SweeperTimeout); err != nil {
		return api, err
	}
	api.schedules, err = s.startFunction(ctx, "schedules", "", cfg.APITimeout)
	return api, err
}

// startFunction starts one instance of the function name under the
// emulator, with the functions' environment, its own identity and
// timeout.
func (s *Stack) startFunction(ctx context.Context, name, instance string, timeout time.Duration) (*Function, error) {
	return s.startFunctionAs(ctx, instanceOf{name: name, instance: instance, principal: name, timeout: timeout})
}

// instanceOf is one instance of a function: the function's name, the
// instance's ("" for the only one), the principal it signs as
// (iamcalls), its timeout, and environment beside the functions'.
type instanceOf struct {
	name, instance, principal string
	timeout                   time.Duration
	env                       []string
}

// startFunctionAs is startFunction for the instance fi: signing as its
// principal, with its environment.
func (s *Stack) startFunctionAs(ctx context.Context, fi instanceOf) (*Function, error) {
	cfg := s.cfg
	name, timeout := fi.name, fi.timeout
	label := name
	if fi.instance != "" {
		label = name + "-" + fi.instance
	}
	// Each function signs as itself (iamcalls: its role in AWS).
	fenv := append(slices.Clone(s.env), "JOBS_FUNCTION="+name, "AWS_ACCESS_KEY_ID="+iamcalls.AccessKeyID(fi.principal))
	fenv = append(fenv, fi.env...)
	if name == "worker" {
		// As the construct sets it: the worker refuses a kind that
		// needs more handler time than its invocations have.
		fenv = append(fenv, "JOBS_WORKER_TIMEOUT="+timeout.String())
	}
	f, err := StartFunction(ctx, FunctionConfig{
		Name: name, RIE: cfg.RIE, Bootstrap: s.bootstrap(name),
		Timeout: timeout, Env: fenv,
		Output: s.Stats.Writer(prefixed(cfg.Output, label)),
	})
	if err != nil {
		return nil, err
	}
	s.functions = append(s.functions, f)
	return f, nil
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
	declared, err := declaredSchedules(ctx, s.bootstrap("worker"), s.env)
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
		Enqueue: timeoutInvoker{api.enqueue, cfg.APITimeout}, GetJob: timeoutInvoker{api.getjob, cfg.APITimeout},
		Cancel: timeoutInvoker{api.cancel, cfg.APITimeout}, Schedules: timeoutInvoker{api.schedules, cfg.APITimeout}, Logger: cfg.Logger,
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
// (httpapi.WithTrustedCallers), as a service that enqueues for its
// customers would be configured.
const LocalTrustedCaller = "arn:aws:iam::" + LocalAccount + ":user/local"

// Dashboard returns a dashboard over this stack's API as caller, with its
// metrics, its event bus and its dead-letter queue (through the operators'
// routes, as the local operator), that answers at addr, the address its
// listener reports (dashboard.Config.Addr).
func (s *Stack) Dashboard(caller, addr string) (*dashboard.Server, error) {
	cfg, err := s.dashboardConfig(caller, addr)
	if err != nil {
		return nil, err
	}
	return dashboard.New(cfg)
}

// dashboardConfig is the configuration Dashboard uses (tests change it
// through DashboardConfig, in export_test.go).
func (s *Stack) dashboardConfig(caller, addr string) (dashboard.Config, error) {
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
	ev := events.CloudWatchEvent{
		Version: "0", ID: "local-" + strconv.FormatInt(time.Now().UnixNano(), 36), DetailType: "Scheduled Event",
		Source: "aws.events", AccountID: LocalAccount, Time: time.Now().UTC(), Region: localaws.Region,
		Resources: []string{"arn:aws:events:" + localaws.Region + ":" + LocalAccount + ":rule/lambdajobs-local-sweep"},
		Detail:    json.RawMessage(`{}`),
	}
	payload, _ := json.Marshal(ev)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.SweeperTimeout+5*time.Second)
	defer cancel()
	_, err := s.sweeper.Invoke(ctx, payload)
	return err
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
	cmd.Env = append([]string{"JOBS_EXAMPLE_KINDS=on"}, env...)
	cmd.Env = append(cmd.Env, "JOBS_FUNCTION=worker", "JOBS_PRINT_LANES=1")
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
	names := iamcalls.Names{Table: s.Table, Queue: s.Queues.Queue, DLQ: s.Queues.DLQ, LaneQueues: map[string]string{}, LaneDLQs: map[string]string{}}
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

// laneEnv is JOBS_LANE_QUEUE_URLS and JOBS_LANE_DLQ_URLS, the other
// lanes' queues and dead-letter queues, when there are other lanes, and
// JOBS_LANE_DISPATCH_GRACES for those whose worker runs longer than the
// default lane's.
func (s *Stack) laneEnv() []string {
	if len(s.Lanes) == 0 {
		return nil
	}
	urls, dlqs := map[string]string{}, map[string]string{}
	graces := map[string]string{}
	grace := envDuration(s.cfg.FunctionEnv, "JOBS_DISPATCH_GRACE", jobs.DefaultDispatchGrace)
	for lane, q := range s.Lanes {
		urls[lane], dlqs[lane] = q.Queue, q.DLQ
		if g := deploy.LaneDispatchGrace(grace, s.cfg.WorkerTimeout, s.cfg.LaneTimeout(lane), s.cfg.BatchWindow); g != grace {
			graces[lane] = g.String()
		}
	}
	b, _ := json.Marshal(urls)
	d, _ := json.Marshal(dlqs)
	env := []string{"JOBS_LANE_QUEUE_URLS=" + string(b), "JOBS_LANE_DLQ_URLS=" + string(d)}
	if len(graces) > 0 {
		g, _ := json.Marshal(graces)
		env = append(env, "JOBS_LANE_DISPATCH_GRACES="+string(g))
	}
	return env
}

// LaneTimeout is the worker timeout of lane on this stack: LaneTimeouts',
// else WorkerTimeout (the default lane's always).
func (cfg Config) LaneTimeout(lane string) time.Duration {
	if t := cfg.LaneTimeouts[lane]; lane != "" && t > 0 {
		return t
	}
	return cfg.WorkerTimeout
}

// laneWorkerEnv is what a lane's worker is told beyond every function's
// environment: its lane, and, when its timeout is long enough to grow
// them (jobs.Deadlines.ForTimeout), its handler reserve and final write's
// bound, as the construct sets them.
func (cfg Config) laneWorkerEnv(lane string) []string {
	env := []string{"JOBS_LANE=" + lane}
	base := jobs.Deadlines{
		Reserve:    envDuration(cfg.FunctionEnv, "JOBS_HANDLER_RESERVE", jobs.DefaultDeadlines.Reserve),
		FinalWrite: envDuration(cfg.FunctionEnv, "JOBS_FINAL_WRITE_TIMEOUT", jobs.DefaultDeadlines.FinalWrite),
	}
	if d := base.ForTimeout(cfg.LaneTimeout(lane)); d.Reserve != base.Reserve {
		env = append(env, "JOBS_HANDLER_RESERVE="+d.Reserve.String(), "JOBS_FINAL_WRITE_TIMEOUT="+d.FinalWrite.String())
	}
	return env
}

// envDuration is the duration the last name=... of env says, else def.
func envDuration(env []string, name string, def time.Duration) time.Duration {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			if d, err := time.ParseDuration(v); err == nil {
				return d
			}
		}
	}
	return def
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
	for _, kv := range s.env {
		if name, _, _ := strings.Cut(kv, "="); slices.Contains(deploy.ServiceVars, name) {
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
	f       *Function
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
