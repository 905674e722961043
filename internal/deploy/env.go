package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/keyring"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Var is a variable of the functions' environment: its name, its default,
// its meaning, who reads it and who sets it, and how a value is read (the
// Setting that holds it: Setting.Get).
type Var struct {
	Name string
	// Default is what an unset variable means ("": nothing, see Doc). It
	// is parsed as a set value is.
	Default string
	// Required: the functions refuse to start without it.
	Required bool
	Doc      string
	// Readers are the functions that read it (nil: all of them). The
	// construct and the local stack tell a function only the variables it
	// reads (For).
	Readers []string
	// Construct is set when the CDK construct sets it: a team's
	// Config.Environment may not (jobsinfra's reserved variables).
	Construct bool
	// Type is what a value is, as the docs say it.
	Type string
	// quiet: an error does not repeat the value (a key, a long JSON).
	quiet bool
	// parse reads a set value; its error says what a value should be.
	parse func(string) (any, error)
}

// ReadBy reports whether function fn reads v.
func (v *Var) ReadBy(fn string) bool { return v.Readers == nil || slices.Contains(v.Readers, fn) }

// Setting is a variable whose value is a T.
type Setting[T any] struct{ *Var }

// Get reads the variable with getenv: its value, else its default, else
// T's zero value. An error names the variable and what it wants.
func (s Setting[T]) Get(getenv func(string) string) (T, error) {
	var zero T
	raw := getenv(s.Name)
	if raw == "" {
		if s.Required {
			return zero, fmt.Errorf("%s is required", s.Name)
		}
		raw = s.Default
	}
	if raw == "" {
		return zero, nil
	}
	v, err := s.parse(raw)
	if err != nil {
		if s.quiet {
			return zero, fmt.Errorf("%s: %w", s.Name, err)
		}
		return zero, fmt.Errorf("%s=%q: %w", s.Name, raw, err)
	}
	return v.(T), nil
}

// DefaultValue is the value of the variable unset.
func (s Setting[T]) DefaultValue() T {
	v, _ := s.Get(func(string) string { return "" })
	return v
}

// Format is v as the variable holds it (durations as "3m0s", lists
// comma-separated, maps and lists of sources as JSON).
func (s Setting[T]) Format(v T) string {
	switch x := any(v).(type) {
	case string:
		return x
	case time.Duration:
		return x.String()
	case map[string]time.Duration:
		m := make(map[string]string, len(x))
		for k, d := range x {
			m[k] = d.String()
		}
		b, _ := json.Marshal(m)
		return string(b)
	case int:
		return strconv.Itoa(x)
	case []string:
		return strings.Join(x, ",")
	case bool:
		on, off, _ := strings.Cut(s.Type, "|")
		if x {
			return on
		}
		return off
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// setting makes v a Setting[T] whose values parse reads.
func setting[T any](v *Var, typ string, parse func(string) (T, error)) Setting[T] {
	v.Type = typ
	v.parse = func(s string) (any, error) { return parse(s) }
	return Setting[T]{v}
}

func text(v *Var) Setting[string] {
	return setting(v, "string", func(s string) (string, error) { return s, nil })
}

// minText is a string of at least n characters (a key).
func minText(v *Var, n int) Setting[string] {
	v.quiet = true
	return setting(v, fmt.Sprintf("string of %d+ characters", n), func(s string) (string, error) {
		if len(s) < n {
			return "", fmt.Errorf("want at least %d characters", n)
		}
		return s, nil
	})
}

func duration(v *Var) Setting[time.Duration] {
	return setting(v, "duration", parseDuration)
}

func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, errors.New("want a positive duration such as 90s")
	}
	return d, nil
}

// integer is an integer from lo to hi; want says so when it is not.
func integer(v *Var, lo, hi int, want string) Setting[int] {
	return setting(v, fmt.Sprintf("integer %d..%d", lo, hi), func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil || n < lo || n > hi {
			return 0, errors.New(want)
		}
		return n, nil
	})
}

// choice is on (true) or off (false), as the type "on|off" names them.
func choice(v *Var, on, off string) Setting[bool] {
	return setting(v, on+"|"+off, func(s string) (bool, error) {
		switch s {
		case on:
			return true, nil
		case off:
			return false, nil
		}
		return false, fmt.Errorf("want %s or %s", on, off)
	})
}

// flag is true when set to 1; any other value is false.
func flag(v *Var) Setting[bool] {
	return setting(v, "1|", func(s string) (bool, error) { return s == "1", nil })
}

func commaList(v *Var) Setting[[]string] {
	return setting(v, "comma-separated list", func(s string) ([]string, error) {
		var out []string
		for _, e := range strings.Split(s, ",") {
			if e = strings.TrimSpace(e); e != "" {
				out = append(out, e)
			}
		}
		return out, nil
	})
}

// urlsByLane is a JSON object of URLs by lane.
func urlsByLane(v *Var) Setting[map[string]string] {
	v.quiet = true
	return setting(v, "JSON object", func(s string) (map[string]string, error) {
		var m map[string]string
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			return nil, errors.New(`want a JSON object such as {"urgent":"https://sqs..."}`)
		}
		return m, nil
	})
}

// gracesByLane is a JSON object of positive durations by lane.
func gracesByLane(v *Var) Setting[map[string]time.Duration] {
	v.quiet = true
	return setting(v, "JSON object", func(s string) (map[string]time.Duration, error) {
		var raw map[string]string
		err := json.Unmarshal([]byte(s), &raw)
		out := map[string]time.Duration{}
		for lane, g := range raw {
			d, derr := parseDuration(g)
			err = errors.Join(err, derr)
			out[lane] = d
		}
		if err != nil {
			return nil, errors.New(`want a JSON object of positive durations such as {"long":"17m"}`)
		}
		return out, nil
	})
}

func lane(v *Var) Setting[string] {
	return setting(v, "lane name", func(s string) (string, error) {
		if !driver.ValidLane(s) {
			return "", errors.New(`want a lower-case letter, then up to 15 lower-case letters, digits or '-', not "default"`)
		}
		return s, nil
	})
}

func sources(v *Var) Setting[[]jobs.Source] {
	v.quiet = true
	return setting(v, "JSON list", func(s string) ([]jobs.Source, error) {
		var out []jobs.Source
		dec := json.NewDecoder(strings.NewReader(s))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&out); err != nil {
			return nil, errors.New(`want a JSON list such as [{"type":"s3","bucket":"uploads"}]`)
		}
		return out, nil
	})
}

func keys(v *Var) Setting[[][]byte] {
	v.quiet = true
	return setting(v, "base64 keys, comma-separated", keyring.Parse)
}

// shortDuration is d as the docs write it: 3m, not 3m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

var (
	sealingFns = []string{Enqueue, Worker}
	listingFns = []string{GetJob, Cancel}
	// operatorFns serve an operators' route, so read who the operators are.
	operatorFns = functionsServing(AuthOperator)
	queueFns    = []string{Enqueue, Cancel, Worker, Sweeper}
	workerOnly  = []string{Worker}
	// eventFns write outcomes, so send their events; creatingFns create
	// jobs, so mark those whose outcomes are announced.
	eventFns    = []string{Cancel, Worker, Sweeper}
	creatingFns = []string{Enqueue, Cancel, Worker, Sweeper}
	schedules   = []string{Schedules}
	enqueueOnly = []string{Enqueue}
	// deadLetterFns read the lanes' dead-letter queues: the operators'
	// routes (cancel) and the sweeper's drain.
	deadLetterFns = []string{Cancel, Sweeper}
	// objectFns read or write parts kept as objects: payloads written at
	// enqueue (enqueue, a worker's children and routed jobs, the
	// sweeper's and cancel's follow-ups and retries), read at a claim
	// (worker) and a replay (enqueue), kept longer (worker, sweeper),
	// linked by a GET (getjob, waitjob); the schedules function is told the bucket
	// because its registry has the large kinds too (lambdafn refuses to
	// start without it), and never calls S3.
	objectFns = []string{Enqueue, GetJob, WaitJob, Cancel, Worker, Sweeper, Schedules}
)

// The variables, in the order the docs list them (Env).
var (
	EnvFunction = text(&Var{Name: "JOBS_FUNCTION", Doc: "which function a one-main bootstrap (`lambdafn.Serve`) is: " + strings.Join(FunctionNames(), ", "), Construct: true})
	EnvTable    = text(&Var{Name: "JOBS_TABLE", Required: true, Doc: "the DynamoDB table", Construct: true})
	EnvQueueURL = text(&Var{Name: "JOBS_QUEUE_URL", Doc: "the SQS queue's URL (required by " + strings.Join(queueFns, ", ") + ")", Readers: queueFns, Construct: true})

	EnvLaneQueueURLs      = urlsByLane(&Var{Name: "JOBS_LANE_QUEUE_URLS", Doc: "the other lanes' queues, as JSON by lane (`{\"urgent\": url}`): every send goes to its job's lane", Readers: queueFns})
	EnvLaneDispatchGraces = gracesByLane(&Var{Name: "JOBS_LANE_DISPATCH_GRACES", Doc: "the dispatch grace of each lane whose worker runs longer than the default lane's, as JSON by lane (`{\"long\": \"17m\"}`); a lane not in it has `JOBS_DISPATCH_GRACE`", Readers: queueFns})
	EnvLane               = lane(&Var{Name: "JOBS_LANE", Doc: "the lane whose queue this worker serves (its hand-backs go back to it)", Readers: workerOnly})
	EnvDLQURL             = text(&Var{Name: "JOBS_DLQ_URL", Doc: "its dead-letter queue's URL: the operators' dead-letter routes, and the sweeper, which settles the job references there", Readers: deadLetterFns, Construct: true})
	EnvLaneDLQURLs        = urlsByLane(&Var{Name: "JOBS_LANE_DLQ_URLS", Doc: "the other lanes' dead-letter queues, as JSON by lane (`{\"bulk\": url}`): the operators' dead-letter routes serve each, redriving to the lane's own queue, and the sweeper drains each", Readers: deadLetterFns})

	EnvDispatchGrace = duration(&Var{Name: "JOBS_DISPATCH_GRACE", Default: shortDuration(jobs.DefaultDispatchGrace), Doc: "when the sweeper first looks at a job that is not final; keep it above the worker timeout", Construct: true})
	EnvRetention     = duration(&Var{Name: "JOBS_RETENTION", Default: shortDuration(jobs.DefaultRetention), Doc: "how long finished jobs stay readable (DynamoDB TTL)", Construct: true})
	// EnvMessageFirst is true for on.
	EnvMessageFirst      = choice(&Var{Name: "JOBS_MESSAGE_FIRST", Default: "off", Doc: "`on`: a job's message is sent before it is stored, and a queued or running job's safety net is its message instead of a sweep entry (`jobs.Config.MessageFirst`); set alike on every function that reads it: turning it on is a deploy of its own ([DEPLOY.md](../operations/DEPLOY.md#turning-on-the-message-first)); the construct sets it from `Config.MessageFirst` (on by default)", Readers: queueFns, Construct: true}, "on", "off")
	EnvWorkerConcurrency = integer(&Var{Name: "JOBS_WORKER_CONCURRENCY", Default: "8", Doc: "records of one batch run at once", Readers: workerOnly, Construct: true}, 1, 1000, "want 1..1000")
	EnvHandlerReserve    = duration(&Var{Name: "JOBS_HANDLER_RESERVE", Default: shortDuration(jobs.DefaultDeadlines.Reserve), Doc: "the handler's context ends this long before the Lambda deadline (the construct sets each lane worker's from `Config.HandlerReserve`, grown for a long timeout by `jobs.Deadlines.ForTimeout`)", Readers: workerOnly, Construct: true})
	EnvFinalWriteTimeout = duration(&Var{Name: "JOBS_FINAL_WRITE_TIMEOUT", Default: shortDuration(jobs.DefaultDeadlines.FinalWrite), Doc: "bound on the final write; must fit in the reserve with 0.5 s to spare (1/180 of a long worker's timeout, as the reserve)", Readers: workerOnly, Construct: true})
	EnvCallTimeout       = duration(&Var{Name: "JOBS_CALL_TIMEOUT", Default: shortDuration(jobs.DefaultDeadlines.Call), Doc: "bound on each other AWS call of the worker (claim, create of a routed job, re-send, cancel check)", Readers: workerOnly})
	EnvMinRunTime        = duration(&Var{Name: "JOBS_MIN_RUN_TIME", Default: shortDuration(jobs.DefaultDeadlines.MinRun), Doc: "a record is claimed only with at least this much handler time left; otherwise it comes back unclaimed, no attempt spent (a kind asks for more with `KindOpts.MinRunTime`)", Readers: workerOnly})
	EnvWorkerTimeout     = duration(&Var{Name: "JOBS_WORKER_TIMEOUT", Doc: "the worker function's timeout: the worker refuses to start with a kind whose `KindOpts.MinRunTime` exceeds it less the reserve; unset, nothing is checked", Readers: workerOnly, Construct: true})

	EnvPayloadKey           = keys(&Var{Name: "JOBS_PAYLOAD_KEY", Doc: "base64 32-byte AES key(s), comma-separated, newest first, sealing `jobs:\"secret\"` fields (locally; deployed, the construct sets the next one)", Readers: sealingFns})
	EnvPayloadSecret        = minText(&Var{Name: "JOBS_PAYLOAD_SECRET", Doc: "or a random string of 32+ characters the key is derived from (SHA-256)", Readers: sealingFns}, 32)
	EnvPayloadKeyringSecret = text(&Var{Name: "JOBS_PAYLOAD_KEYRING_SECRET", Doc: "a Secrets Manager secret holding the key ring, read at cold start (docs/operations/OPERATIONS.md \"The payload key\")", Readers: sealingFns, Construct: true})
	EnvSources              = sources(&Var{Name: "JOBS_SOURCES", Doc: "the foreign sources connected to the queue, as JSON; the worker refuses to start when its routes do not accept one", Readers: workerOnly, Construct: true})
	EnvBucket               = text(&Var{Name: "JOBS_BUCKET", Doc: "the S3 bucket of payloads and results kept as objects; set when a kind allows parts past an item (`KindOpts.MaxPayloadBytes`, `MaxResultBytes`; the main gives `lambdafn.Opts.Objects`)", Readers: objectFns, Construct: true})
	EnvEventBus             = text(&Var{Name: "JOBS_EVENT_BUS", Doc: "the EventBridge bus job events go to (name or ARN), sent by the functions that write outcomes; required when a kind has `KindOpts.Events` (docs/reference/EVENTS.md)", Readers: eventFns, Construct: true})
	// EnvEvents is true for all.
	EnvEvents           = choice(&Var{Name: "JOBS_EVENTS", Default: "kinds", Doc: "`kinds`: the outcomes of kinds with `KindOpts.Events` are announced; `all`: every kind's", Readers: creatingFns, Construct: true}, "all", "kinds")
	EnvMetricsNamespace = text(&Var{Name: "JOBS_METRICS_NAMESPACE", Doc: "turns on the per-kind metrics (EMF, with the logs) in this namespace", Construct: true})
	EnvTracing          = choice(&Var{Name: "JOBS_TRACING", Default: "off", Doc: "`on`: OpenTelemetry spans, sent as the main's `lambdafn.Opts.Tracing` says (the X-Ray daemon or OTLP/HTTP); a main that passes none refuses to start (docs/operations/OPERATIONS.md \"Tracing\")", Construct: true}, "on", "off")

	EnvScheduleGroup       = text(&Var{Name: "JOBS_SCHEDULE_GROUP", Doc: "the Scheduler group runtime schedules are created in", Readers: schedules, Construct: true})
	EnvQueueARN            = text(&Var{Name: "JOBS_QUEUE_ARN", Doc: "the queue runtime schedules send to", Readers: schedules, Construct: true})
	EnvSchedulerRoleARN    = text(&Var{Name: "JOBS_SCHEDULER_ROLE_ARN", Doc: "the role Scheduler sends with", Readers: schedules, Construct: true})
	EnvScheduleDLQARN      = text(&Var{Name: "JOBS_SCHEDULE_DLQ_ARN", Doc: "the dead-letter queue of runtime schedules' fires", Readers: schedules, Construct: true})
	EnvScheduleMaxEventAge = duration(&Var{Name: "JOBS_SCHEDULE_MAX_EVENT_AGE", Default: "1h", Doc: "how long Scheduler retries a runtime schedule's fire", Readers: schedules, Construct: true})
	EnvSchedulesPerOwner   = integer(&Var{Name: "JOBS_SCHEDULES_PER_OWNER", Default: "20", Doc: "each caller's runtime schedules", Readers: schedules}, 1, 1000, "want 1..1000")

	EnvPageTokenSecret     = text(&Var{Name: "JOBS_PAGE_TOKEN_SECRET", Doc: "a Secrets Manager secret whose value signs the listing's page tokens, read at cold start", Readers: listingFns, Construct: true})
	EnvPageTokenKey        = minText(&Var{Name: "JOBS_PAGE_TOKEN_KEY", Doc: "or that value itself, 32+ characters (the local stack sets a random one)", Readers: listingFns}, 32)
	EnvOperators           = commaList(&Var{Name: "JOBS_OPERATORS", Doc: "callers (owner identities or role ARNs, comma-separated) who may use the admin routes", Readers: operatorFns, Construct: true})
	EnvEnqueueRatePerOwner = integer(&Var{Name: "JOBS_ENQUEUE_RATE_PER_OWNER", Default: "0", Doc: "each caller's requests that make jobs (enqueue, batch, replay), a second; over it: 429 `rate_limited` (0: no bound)", Readers: enqueueOnly, Construct: true}, 0, 1_000_000, "want 0 (no bound) to 1000000 requests a second")
	EnvWaitsPerOwner       = integer(&Var{Name: "JOBS_WAITS_PER_OWNER", Default: strconv.Itoa(jobs.DefaultWaitsPerOwner), Doc: "each caller's open waits (`GET /v1/jobs/{id}/wait`); over it: 429 `too_many_waits`", Readers: []string{WaitJob}, Construct: true}, 1, 200, "want 1 to 200 open waits (each is a holder of the owner's slot item: 200 make it about 9 KB)")
	EnvTrustedCallers      = commaList(&Var{Name: "JOBS_TRUSTED_CALLERS", Doc: "callers (owner identities or role ARNs, comma-separated) who may give a job's `tenant` and `lane` over the API (anyone else: 403)", Readers: enqueueOnly, Construct: true})

	EnvPrintSchedules    = flag(&Var{Name: "JOBS_PRINT_SCHEDULES", Doc: "`1`: a bootstrap prints its registry's declared schedules as JSON and exits (how the local stack learns what to fire)"})
	EnvPrintLanes        = flag(&Var{Name: "JOBS_PRINT_LANES", Doc: "`1`: a bootstrap prints the lanes its registry's kinds run in as JSON and exits (how the local stack learns which queues and workers to run)"})
	EnvExampleRouteOwner = text(&Var{Name: "JOBS_EXAMPLE_ROUTE_OWNER", Doc: "the owner of the jobs this repository's example routes make from foreign messages (its worker reads it)", Readers: workerOnly})
	EnvExampleExportDir  = text(&Var{Name: "JOBS_EXAMPLE_EXPORT_DIR", Doc: "a directory where this repository's `example.export` writes one file per chunk (tests count them)", Readers: workerOnly})
	EnvExampleSpansDir   = text(&Var{Name: "JOBS_EXAMPLE_SPANS_DIR", Doc: "a directory where this repository's `example.hold*` kinds write one file per run, its start and end (tests count how many ran at once)", Readers: workerOnly})
	EnvExampleKinds      = text(&Var{Name: "JOBS_EXAMPLE_KINDS", Doc: "`on` makes this repository's own functions serve its example kinds (the local stack and its dev stack set it)"})
)

// Env is every variable of the functions' environment, in the order the
// docs list them.
var Env = []*Var{
	EnvFunction.Var, EnvTable.Var, EnvQueueURL.Var, EnvLaneQueueURLs.Var, EnvLaneDispatchGraces.Var, EnvLane.Var, EnvDLQURL.Var, EnvLaneDLQURLs.Var,
	EnvDispatchGrace.Var, EnvRetention.Var, EnvMessageFirst.Var, EnvWorkerConcurrency.Var, EnvHandlerReserve.Var, EnvFinalWriteTimeout.Var, EnvCallTimeout.Var, EnvMinRunTime.Var, EnvWorkerTimeout.Var,
	EnvPayloadKey.Var, EnvPayloadSecret.Var, EnvPayloadKeyringSecret.Var, EnvSources.Var, EnvBucket.Var, EnvEventBus.Var, EnvEvents.Var, EnvMetricsNamespace.Var, EnvTracing.Var,
	EnvScheduleGroup.Var, EnvQueueARN.Var, EnvSchedulerRoleARN.Var, EnvScheduleDLQARN.Var, EnvScheduleMaxEventAge.Var, EnvSchedulesPerOwner.Var,
	EnvPageTokenSecret.Var, EnvPageTokenKey.Var, EnvOperators.Var, EnvEnqueueRatePerOwner.Var, EnvWaitsPerOwner.Var, EnvTrustedCallers.Var,
	EnvPrintSchedules.Var, EnvPrintLanes.Var, EnvExampleRouteOwner.Var, EnvExampleExportDir.Var, EnvExampleSpansDir.Var, EnvExampleKinds.Var,
}

// keysHandedOut are variables the construct does not set but that would
// replace the keys it hands out through Secrets Manager: reserved too.
var keysHandedOut = []*Var{EnvPayloadKey.Var, EnvPayloadSecret.Var, EnvPageTokenKey.Var}

// laneVars are variables the construct sets only in a deployment with
// lanes besides the default one: reserved too.
var laneVars = []*Var{EnvLaneQueueURLs.Var, EnvLaneDispatchGraces.Var, EnvLane.Var, EnvLaneDLQURLs.Var}

// ServiceVars are the variables lambdafn.NewService reads: the enqueue
// function's Service as a team's own function builds it. jobsinfra's
// GrantEnqueue tells that function each of them that the construct tells
// its own enqueue function, with the same value, so both store, send,
// seal and announce jobs alike.
var ServiceVars = []*Var{
	EnvTable.Var, EnvQueueURL.Var, EnvLaneQueueURLs.Var, EnvDispatchGrace.Var, EnvLaneDispatchGraces.Var, EnvRetention.Var, EnvMessageFirst.Var,
	EnvPayloadKey.Var, EnvPayloadSecret.Var, EnvPayloadKeyringSecret.Var, EnvEvents.Var, EnvBucket.Var,
}

// Values are what a deployment (the construct, the local stack) sets its
// functions' variables to, each once: For gives each function its part.
type Values[V any] map[*Var]V

// For is the environment of function fn: the values of the variables it
// reads (Readers), by name, and JOBS_FUNCTION, self (its name as a V).
func (vs Values[V]) For(fn string, self V) map[string]V {
	out := map[string]V{EnvFunction.Name: self}
	for _, v := range Env {
		if x, ok := vs[v]; ok && v != EnvFunction.Var && v.ReadBy(fn) {
			out[v.Name] = x
		}
	}
	return out
}

// Lookup returns the variable named name.
func Lookup(name string) (*Var, bool) {
	for _, v := range Env {
		if v.Name == name {
			return v, true
		}
	}
	return nil, false
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
func ReservedVars() []string {
	out := ConstructVars()
	for _, v := range append(slices.Clone(laneVars), keysHandedOut...) {
		out = append(out, v.Name)
	}
	return out
}

// EnvMarkdown renders Env as the Markdown table of docs/reference/CONFIGURATION.md.
func EnvMarkdown() string {
	var b strings.Builder
	b.WriteString("| variable | type | default | read by | set by the construct | meaning |\n|---|---|---|---|---|---|\n")
	for _, v := range Env {
		def := "none"
		switch {
		case v.Required:
			def = "required"
		case v.Default != "":
			def = "`" + v.Default + "`"
		}
		readers := "all"
		if v.Readers != nil {
			readers = strings.Join(v.Readers, ", ")
		}
		set := ""
		if v.Construct {
			set = "yes"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", v.Name, strings.ReplaceAll(v.Type, "|", "\\|"), def, readers, set, v.Doc)
	}
	return b.String()
}

// ServiceList renders ServiceVars as the list of docs/reference/CONFIGURATION.md.
func ServiceList() string {
	names := make([]string, len(ServiceVars))
	for i, v := range ServiceVars {
		names[i] = "`" + v.Name + "`"
	}
	return strings.Join(names, ", ") + ".\n"
}

// RouteTable renders Routes as the Markdown table of docs/reference/CONFIGURATION.md.
func RouteTable() string {
	var b strings.Builder
	b.WriteString("| route | function | who |\n|---|---|---|\n")
	for _, r := range Routes {
		who := map[Auth]string{AuthCaller: "callers", AuthOperator: "operators", AuthNone: "anyone, with a callback token (no authorizer)"}[r.Auth]
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", r.Key(), r.Function, who)
	}
	return b.String()
}
