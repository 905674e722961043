package deploy

import (
	"fmt"
	"slices"
	"strings"
)

// Var is a variable of the functions' environment.
type Var struct {
	Name string
	// Default is what an unset variable means ("" when it has no default:
	// see Doc).
	Default string
	Doc     string
	// Readers are the functions that read it (nil: all of them).
	Readers []string
	// Construct is set when the CDK construct sets it: a team's
	// Config.Environment may not (jobsinfra's reserved variables).
	Construct bool
}

// keysHandedOut are variables the construct does not set but that would
// replace the keys it hands out through Secrets Manager: reserved too.
var keysHandedOut = []string{"JOBS_PAYLOAD_KEY", "JOBS_PAYLOAD_SECRET", "JOBS_PAGE_TOKEN_KEY"}

// laneVars are variables the construct sets only in a deployment with
// lanes besides the default one: reserved too.
var laneVars = []string{"JOBS_LANE_QUEUE_URLS", "JOBS_LANE_DISPATCH_GRACES", "JOBS_LANE", "JOBS_LANE_DLQ_URLS"}

// ReadBy reports whether function fn reads v.
func (v Var) ReadBy(fn string) bool { return v.Readers == nil || slices.Contains(v.Readers, fn) }

var (
	sealingFns = []string{Enqueue, Worker}
	listingFns = []string{GetJob, Cancel}
	queueFns   = []string{Enqueue, Cancel, Worker, Sweeper}
	workerOnly = []string{Worker}
	// eventFns write outcomes, so send their events; creatingFns create
	// jobs, so mark those whose outcomes are announced.
	eventFns    = []string{Cancel, Worker, Sweeper}
	creatingFns = []string{Enqueue, Cancel, Worker, Sweeper}
)

// Env is every variable lambdafn reads, in the order the docs list them.
var Env = []Var{
	{"JOBS_FUNCTION", "", "which function a one-main bootstrap (`lambdafn.Serve`) is: " + strings.Join(FunctionNames(), ", "), nil, true},
	{"JOBS_TABLE", "required", "the DynamoDB table", nil, true},
	{"JOBS_QUEUE_URL", "", "the SQS queue's URL (required by " + strings.Join(queueFns, ", ") + ")", queueFns, true},
	{"JOBS_LANE_QUEUE_URLS", "", "the other lanes' queues, as JSON by lane (`{\"urgent\": url}`): every send goes to its job's lane", queueFns, false},
	{"JOBS_LANE_DISPATCH_GRACES", "", "the dispatch grace of each lane whose worker runs longer than the default lane's, as JSON by lane (`{\"long\": \"17m\"}`); a lane not in it has `JOBS_DISPATCH_GRACE`", queueFns, false},
	{"JOBS_LANE", "", "the lane whose queue this worker serves (its hand-backs go back to it)", workerOnly, false},
	{"JOBS_DLQ_URL", "", "its dead-letter queue's URL: the operators' dead-letter routes", []string{Cancel}, true},
	{"JOBS_LANE_DLQ_URLS", "", "the other lanes' dead-letter queues, as JSON by lane (`{\"bulk\": url}`): the operators' dead-letter routes serve each, redriving to the lane's own queue", []string{Cancel}, false},
	{"JOBS_DISPATCH_GRACE", "3m", "when the sweeper first looks at a job that is not final; keep it above the worker timeout", nil, true},
	{"JOBS_RETENTION", "168h", "how long finished jobs stay readable (DynamoDB TTL)", nil, true},
	{"JOBS_WORKER_CONCURRENCY", "8", "records of one batch run at once", workerOnly, true},
	{"JOBS_HANDLER_RESERVE", "3s", "the handler's context ends this long before the Lambda deadline (the construct sets each lane worker's from `Config.HandlerReserve`, grown for a long timeout by `jobs.Deadlines.ForTimeout`)", workerOnly, true},
	{"JOBS_FINAL_WRITE_TIMEOUT", "2s", "bound on the final write; must fit in the reserve with 0.5 s to spare (1/180 of a long worker's timeout, as the reserve)", workerOnly, true},
	{"JOBS_CALL_TIMEOUT", "2s", "bound on each other AWS call of the worker (claim, create of a routed job, re-send, cancel check)", workerOnly, false},
	{"JOBS_MIN_RUN_TIME", "2s", "a record is claimed only with at least this much handler time left; otherwise it comes back unclaimed, no attempt spent (a kind asks for more with `KindOpts.MinRunTime`)", workerOnly, false},
	{"JOBS_WORKER_TIMEOUT", "", "the worker function's timeout: the worker refuses to start with a kind whose `KindOpts.MinRunTime` exceeds it less the reserve; unset, nothing is checked", workerOnly, true},
	{"JOBS_PAYLOAD_KEY", "", "base64 32-byte AES key(s), comma-separated, newest first, sealing `jobs:\"secret\"` fields (locally; deployed, the construct sets the next one)", sealingFns, false},
	{"JOBS_PAYLOAD_SECRET", "", "or a random string of 32+ characters the key is derived from (SHA-256)", sealingFns, false},
	{"JOBS_PAYLOAD_KEYRING_SECRET", "", "a Secrets Manager secret holding the key ring, read at cold start (docs/OPERATIONS.md \"The payload key\")", sealingFns, true},
	{"JOBS_SOURCES", "", "the foreign sources connected to the queue, as JSON; the worker refuses to start when its routes do not accept one", workerOnly, true},
	{"JOBS_EVENT_BUS", "", "the EventBridge bus job events go to (name or ARN), sent by the functions that write outcomes; required when a kind has `KindOpts.Events` (docs/EVENTS.md)", eventFns, true},
	{"JOBS_EVENTS", "kinds", "`kinds`: the outcomes of kinds with `KindOpts.Events` are announced; `all`: every kind's", creatingFns, true},
	{"JOBS_METRICS_NAMESPACE", "", "turns on the per-kind metrics (EMF, with the logs) in this namespace", nil, true},
	{"JOBS_TRACING", "off", "`on`: OpenTelemetry spans to Lambda's X-Ray daemon (docs/OPERATIONS.md \"Tracing\")", nil, true},
	{"JOBS_SCHEDULE_GROUP", "", "the Scheduler group runtime schedules are created in", []string{Schedules}, true},
	{"JOBS_QUEUE_ARN", "", "the queue runtime schedules send to", []string{Schedules}, true},
	{"JOBS_SCHEDULER_ROLE_ARN", "", "the role Scheduler sends with", []string{Schedules}, true},
	{"JOBS_SCHEDULE_DLQ_ARN", "", "the dead-letter queue of runtime schedules' fires", []string{Schedules}, true},
	{"JOBS_SCHEDULE_MAX_EVENT_AGE", "1h", "how long Scheduler retries a runtime schedule's fire", []string{Schedules}, true},
	{"JOBS_SCHEDULES_PER_OWNER", "20", "each caller's runtime schedules", []string{Schedules}, false},
	{"JOBS_PAGE_TOKEN_SECRET", "", "a Secrets Manager secret whose value signs the listing's page tokens, read at cold start", listingFns, true},
	{"JOBS_PAGE_TOKEN_KEY", "", "or that value itself, 32+ characters (the local stack sets a random one)", listingFns, false},
	{"JOBS_OPERATORS", "", "callers (owner identities or role ARNs, comma-separated) who may use the admin routes", listingFns, true},
	{"JOBS_ENQUEUE_RATE_PER_OWNER", "0", "each caller's requests that make jobs (enqueue, batch, replay), a second; over it: 429 `rate_limited` (0: no bound)", []string{Enqueue}, true},
	{"JOBS_TRUSTED_CALLERS", "", "callers (owner identities or role ARNs, comma-separated) who may give a job's `tenant` and `lane` over the API (anyone else: 403)", []string{Enqueue}, true},
	{"JOBS_PRINT_SCHEDULES", "", "`1`: a bootstrap prints its registry's declared schedules as JSON and exits (how the local stack learns what to fire)", nil, false},
	{"JOBS_PRINT_LANES", "", "`1`: a bootstrap prints the lanes its registry's kinds run in as JSON and exits (how the local stack learns which queues and workers to run)", nil, false},
	{"JOBS_EXAMPLE_ROUTE_OWNER", "", "the owner of the jobs this repository's example routes make from foreign messages (its worker reads it)", []string{Worker}, false},
	{"JOBS_EXAMPLE_EXPORT_DIR", "", "a directory where this repository's `example.export` writes one file per chunk (tests count them)", []string{Worker}, false},
	{"JOBS_EXAMPLE_SPANS_DIR", "", "a directory where this repository's `example.hold*` kinds write one file per run, its start and end (tests count how many ran at once)", []string{Worker}, false},
	{"JOBS_EXAMPLE_KINDS", "", "`on` makes this repository's own functions serve its example kinds (the local stack and its dev stack set it)", nil, false},
}

// ServiceVars are the variables lambdafn.NewService reads: the enqueue
// function's Service as a team's own function builds it. jobsinfra's
// GrantEnqueue tells that function each of them that the construct tells
// its own enqueue function, with the same value, so both store, send,
// seal and announce jobs alike.
var ServiceVars = []string{
	"JOBS_TABLE", "JOBS_QUEUE_URL", "JOBS_LANE_QUEUE_URLS", "JOBS_DISPATCH_GRACE", "JOBS_LANE_DISPATCH_GRACES", "JOBS_RETENTION",
	"JOBS_PAYLOAD_KEY", "JOBS_PAYLOAD_SECRET", "JOBS_PAYLOAD_KEYRING_SECRET", "JOBS_EVENTS",
}

// Lookup returns the variable named name.
func Lookup(name string) (Var, bool) {
	for _, v := range Env {
		if v.Name == name {
			return v, true
		}
	}
	return Var{}, false
}

// ConstructVars are the variables the construct sets.
func ConstructVars() []string {
	var out []string
	for _, v := range Env {
		if v.Construct {
			out = append(out, v.Name)
		}
	}
	return out
}

// ReservedVars are the variables a team's Config.Environment may not set:
// those the construct sets (the lanes' when there are lanes), and those
// that would replace the keys it hands out.
func ReservedVars() []string { return append(append(ConstructVars(), laneVars...), keysHandedOut...) }

// EnvTable renders Env as the Markdown table of docs/CONFIGURATION.md.
func EnvTable() string {
	var b strings.Builder
	b.WriteString("| variable | default | read by | set by the construct | meaning |\n|---|---|---|---|---|\n")
	for _, v := range Env {
		def := "none"
		if v.Default != "" {
			def = "`" + v.Default + "`"
			if v.Default == "required" {
				def = "required"
			}
		}
		readers := "all"
		if v.Readers != nil {
			readers = strings.Join(v.Readers, ", ")
		}
		set := ""
		if v.Construct {
			set = "yes"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", v.Name, def, readers, set, v.Doc)
	}
	return b.String()
}

// ServiceList renders ServiceVars as the list of docs/CONFIGURATION.md.
func ServiceList() string {
	names := make([]string, len(ServiceVars))
	for i, n := range ServiceVars {
		names[i] = "`" + n + "`"
	}
	return strings.Join(names, ", ") + ".\n"
}

// RouteTable renders Routes as the Markdown table of docs/CONFIGURATION.md.
func RouteTable() string {
	var b strings.Builder
	b.WriteString("| route | function | who |\n|---|---|---|\n")
	for _, r := range Routes {
		who := "callers"
		if r.Auth == AuthOperator {
			who = "operators"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.Key(), r.Function, who)
	}
	return b.String()
}
