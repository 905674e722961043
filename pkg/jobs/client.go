package jobs

import (
	"errors"
	"log/slog"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Config is the runtime's one configuration: every role a Client plays
// (its Service, Worker, Sweeper and ScheduleService) comes from it, so the
// roles of one deployment agree on the dispatch grace, the retention, the
// events and the sealer by construction. Registry and Store are required;
// every other field has a default or is off when unset. Package lambdafn
// builds it from the functions' environment; jobstest.Runner from its
// in-memory parts.
type Config struct {
	Registry *Registry
	Store    driver.Store
	// Queue sends job references (enqueue, retry, redelivery, the sweeper's
	// re-sends). A Client without one sends nothing: what it would send
	// waits for the re-send of a sweeper that has one (after
	// DispatchGrace), and its own Sweeper refuses to sweep.
	Queue driver.Queue
	// Scheduler holds the callers' runtime schedules; a Client without one
	// reads and lists their definitions but refuses to create or delete.
	Scheduler driver.Scheduler
	// Bus publishes job events (see Event); nil leaves the events of the
	// outcomes this Client writes pending, for a Client with a bus (the
	// sweeper's). AllEvents announces the outcomes of every kind, not only
	// those with KindOpts.Events: set it alike on every Client of a
	// deployment.
	Bus       driver.Bus
	AllEvents bool
	// Sealer seals and opens secret payload fields; required when a kind
	// has some.
	Sealer Sealer
	// Routes turn messages from other AWS services into jobs (the
	// Worker's; see Routes).
	Routes *Routes
	// Clock, Rand and Logger default to the system's (see Clock, Rand);
	// the default logger discards.
	Clock  Clock
	Rand   Rand
	Logger *slog.Logger
	// Metrics, when set, writes per-kind metrics (see Metrics).
	Metrics *Metrics
	// Tracer, when set, traces each record the Worker runs (see Tracer);
	// nil costs nothing.
	Tracer Tracer

	// DispatchGrace: see DefaultDispatchGrace. It is the first wait
	// before a queued job is re-sent; each further re-send waits twice as
	// long, up to 8 times.
	DispatchGrace time.Duration
	// LaneDispatchGrace is the dispatch grace of each lane whose worker
	// runs longer than the default lane's (a lane not in it has
	// DispatchGrace): a queued job of the lane is re-sent no sooner, so a
	// message waiting in a long worker's batch is not sent twice.
	LaneDispatchGrace map[string]time.Duration
	// Retention is how long a finished job stays readable (default
	// DefaultRetention; a kind's KindOpts.Retention instead, when it has
	// one).
	Retention time.Duration

	// PageTokenKey signs page and continuation tokens, a batch's page
	// tokens included (at least 32 bytes); required to list and to page
	// through a batch's job ids. Every instance that lists must share it.
	PageTokenKey []byte
	// EnqueueRatePerOwner bounds each owner's requests that make jobs
	// (Enqueue, EnqueueBatch, Replay: a batch is one request) to this many
	// a second across every instance (0: no bound). A request over it is
	// refused, nothing stored, with a *RequestError of code rate_limited
	// whose RetryAfter says when to try again (HTTP 429 with
	// Retry-After); a refusal reserves nothing. Each accepted request
	// costs one write more (docs/guide/FLOW_CONTROL.md says how hot its items
	// get). The enqueue function sets it from JOBS_ENQUEUE_RATE_PER_OWNER;
	// a Go producer's own Client is unbounded unless it sets it.
	EnqueueRatePerOwner int
	// SchedulesPerOwner bounds each owner's runtime schedules (default
	// 20).
	SchedulesPerOwner int
	// WaitsPerOwner bounds each owner's open waits (Service.Wait) across
	// every instance (default DefaultWaitsPerOwner). The wait function
	// sets it from JOBS_WAITS_PER_OWNER.
	WaitsPerOwner int

	// Lane is the lane whose queue the Worker serves ("" the default):
	// what it hands back before claiming goes back to it.
	Lane string
	// Concurrency bounds how many records of one batch the Worker runs at
	// once (default 8).
	Concurrency int
	// Deadlines divide the Worker's invocation (default DefaultDeadlines).
	Deadlines Deadlines
	// WorkerTimeout is the worker Lambda's timeout, when known at build
	// time (lambdafn reads JOBS_WORKER_TIMEOUT, which the CDK construct
	// sets). NewClient then refuses a kind of the Lane whose
	// KindOpts.MinRunTime is more than a fresh invocation's handler time
	// (WorkerTimeout less Deadlines.Reserve): no invocation could ever
	// start it. Other lanes' kinds are their workers' to check.
	// Zero: unknown, and nothing refuses such a kind: its jobs stay
	// queued, handed back unclaimed at every delivery (see
	// KindOpts.MinRunTime).
	WorkerTimeout time.Duration
	// CancelCheck is how often a running job is checked for a cancel
	// request while its handler works (default 5s; negative: only at
	// Publish). Each check is one read.
	CancelCheck time.Duration

	// MessageFirst makes every path that holds a job's message, or
	// sends a new one, send before it stores: a job whose message is sent
	// needs no sweep entry (2 write units less per job), and a queued or
	// running job is always either in a message nobody else can delete or
	// in the sweep index (docs/guide/ARCHITECTURE.md, "The dual write"). Set it
	// alike on every Client of a deployment; the functions read
	// JOBS_MESSAGE_FIRST. Off, every job enters the sweep index at its
	// creation, as before: a rollout turns it on once every function runs
	// code that knows it (docs/operations/DEPLOY.md).
	MessageFirst bool

	// SweepPageSize is how many due jobs a sweep reads per index query
	// (default 200).
	SweepPageSize int
	// SweepReserve is how long before its deadline a sweep stops starting
	// work (default 5s); what is left is picked up by the next sweep. No
	// call of a sweep outlives half of it.
	SweepReserve time.Duration
	// DeadLetters are the lanes' dead-letter queues, which the Sweeper
	// drains at each sweep (sqsqueue.DeadLetters on SQS; the sweeper
	// function's comes from JOBS_DLQ_URL and JOBS_LANE_DLQ_URLS): a job's
	// message that reached one may be the last thing naming its job, so
	// each dead letter that names a job gets the sweeper's own decision
	// for that job (interrupted or retried, sent again, its post-outcome
	// steps run, or dropped when the job is final or gone) and is deleted;
	// any other message stays for the operators' routes. Nil: no draining.
	DeadLetters driver.DeadLetterQueue
	// DeadLettersPerLane bounds how many dead letters a sweep receives
	// from each lane's dead-letter queue (default 100).
	DeadLettersPerLane int
}

// Client is the runtime built from one Config: the Service that enqueues
// and reads, the Worker that runs, the Sweeper that settles and the
// ScheduleService that keeps the callers' schedules. Its roles share one
// engine (the transitions, the delivery rule, the events); each is safe
// for concurrent use.
type Client struct {
	service   *Service
	worker    *Worker
	sweeper   *Sweeper
	schedules *ScheduleService
}

// errSweepNoQueue: a Client without a Queue cannot re-send.
var errSweepNoQueue = errors.New("jobs: the Sweeper needs Config.Queue to re-send queued jobs")

// errNoScheduler: a Client without a Scheduler cannot place schedules.
var errNoScheduler = errors.New("jobs: creating and deleting schedules needs Config.Scheduler")

// NewClient validates cfg and builds its roles; it puts the registry to
// use (no kind can be registered after). Its error says what is wrong
// with cfg: a missing Registry or Store, a kind with secret fields and no
// Sealer, a route to an unknown kind, an invalid lane or deadline, a kind
// whose minimum run time does not fit WorkerTimeout.
func NewClient(cfg Config) (*Client, error) {
	if cfg.Registry == nil || cfg.Store == nil {
		return nil, errors.New("jobs: NewClient needs Config.Registry and Config.Store")
	}
	uploads, staging := uploadsOf(cfg.Store)
	if uploads != nil {
		if err := cfg.Registry.addUploads(); err != nil {
			return nil, err
		}
	}
	if err := cfg.Registry.freeze(cfg.Sealer); err != nil {
		return nil, err
	}
	if err := cfg.Registry.checkParts(cfg.Store); err != nil {
		return nil, err
	}
	eng := newEngine(engine{reg: cfg.Registry, store: readConflicts(cfg.Store), queue: cfg.Queue, clock: cfg.Clock, log: cfg.Logger, grace: cfg.DispatchGrace,
		laneGrace: cfg.LaneDispatchGrace, retention: cfg.Retention, bus: cfg.Bus, allEvents: cfg.AllEvents, rand: cfg.Rand,
		messageFirst: cfg.MessageFirst, pauses: pausesOf(cfg.Store), links: linkerOf(cfg.Store), stager: stagerOf(cfg.Store),
		maxPart: maxPartOf(cfg.Store)})
	eng.uploads, eng.staging = uploads, staging
	eng.signaller, _ = cfg.Store.(driver.Signaller)
	eng.many, _ = cfg.Store.(driver.ManyGetter)
	svc, err := newService(cfg, eng)
	if err != nil {
		return nil, err
	}
	w, err := newWorker(cfg, eng)
	if err != nil {
		return nil, err
	}
	w.children = svc
	return &Client{service: svc, worker: w, sweeper: newSweeper(cfg, eng), schedules: newScheduleService(cfg, eng)}, nil
}

// Service is the Client's enqueueing and reading role (what the HTTP
// functions serve, and what a Go producer enqueues with).
func (c *Client) Service() *Service { return c.service }

// Worker is the Client's running role: the worker Lambda's handler.
func (c *Client) Worker() *Worker { return c.worker }

// Sweeper is the Client's settling role: the scheduled sweeper's handler.
func (c *Client) Sweeper() *Sweeper { return c.sweeper }

// Schedules is the Client's role that keeps the callers' runtime
// schedules.
func (c *Client) Schedules() *ScheduleService { return c.schedules }
