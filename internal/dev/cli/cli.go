// Package cli is the ljob command: enqueue a job, get it, and watch it with
// a progress bar until it ends, against the local stack or a deployed API.
package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/apiclient"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// DefaultAPI is the local stack's address.
const DefaultAPI = "http://127.0.0.1:8080"

// command is one ljob command: its name, the arguments it takes (between
// min and max of them), its lines of the usage, and what it runs. Main
// reads the table; the usage is written from it.
type command struct {
	name     string
	args     string   // as the usage shows them
	min, max int      // how many arguments it takes
	help     []string // what it does, one usage line each
	run      func(c *client, ctx context.Context, args []string) int
}

var commands = []command{
	{name: "enqueue", args: "KIND [PAYLOAD]", min: 1, max: 2, run: (*client).enqueueCommand,
		help: []string{`enqueue a job (PAYLOAD is JSON, "-" or absent: read stdin)`}},
	{name: "upload", args: "KIND [FILE]", min: 1, max: 2, run: (*client).uploadCommand,
		help: []string{`enqueue a job whose payload (FILE, "-" or absent: stdin; up to 100 MiB)`,
			"goes up in parts through presigned links, is validated by a worker,", "then enqueued with the enqueue flags (-wait: watch it)"}},
	{name: "get", args: "ID", min: 1, max: 1, run: func(c *client, ctx context.Context, args []string) int { return c.get(ctx, args[0]) },
		help: []string{"show a job"}},
	{name: "watch", args: "ID", min: 1, max: 1, run: func(c *client, ctx context.Context, args []string) int { return c.watch(ctx, args[0]) },
		help: []string{"follow a job until it ends, with a progress bar"}},
	{name: "cancel", args: "ID", min: 1, max: 1, run: func(c *client, ctx context.Context, args []string) int { return c.cancel(ctx, args[0]) },
		help: []string{"cancel a job (a running one stops at its next check)"}},
	{name: "signal", args: "ID NAME [PAYLOAD]", min: 2, max: 3, run: (*client).signalCommand,
		help: []string{`deliver the signal NAME to a job (PAYLOAD is JSON, "-" or absent:`, "read stdin); -operator: to any owner's job; -wait: watch it"}},
	{name: "list", run: func(c *client, ctx context.Context, _ []string) int { return c.list(ctx) },
		help: []string{"your jobs, newest first (-status, -kind, -tag K=V, -limit N,", "-all: every page)"}},
	{name: "bulk", args: "cancel|retry", min: 1, max: 1, run: (*client).bulkCommand,
		help: []string{"cancel (or retry) every job of yours that -status, -kind and",
			"-tag K=V select (at least one), created before now"}},
	{name: "retry", args: "ID", min: 1, max: 1, run: func(c *client, ctx context.Context, args []string) int { return c.retry(ctx, args[0]) },
		help: []string{"queue a failed or cancelled job again (-wait: watch it)"}},
	{name: "replay", args: "ID [PAYLOAD]", min: 1, max: 2, run: (*client).replayCommand,
		help: []string{"enqueue a new job from one of yours, with its payload or PAYLOAD",
			`(a secret field given as "[secret]" keeps its value); the enqueue flags apply`}},
	{name: "ui", run: func(c *client, ctx context.Context, _ []string) int { return c.ui(ctx) },
		help: []string{"the web dashboard over the API, on -listen (127.0.0.1:8081, loopback",
			"only), signing as the CLI does; -operator: any owner's jobs and the",
			"dead-letter queue, through the admin routes"}},
	{name: "mcp", args: "[http ADDR]", max: 2, run: (*client).mcpCommand,
		help: []string{"serve the API to AI agents over the Model Context Protocol, on stdio",
			"or streamable HTTP on ADDR (loopback only): runs ljob-mcp, built", "beside ljob by make cli, with these flags"}},
	{name: "batch", args: "[FILE]", max: 1, run: (*client).batchCommand,
		help: []string{`submit the JSON lines of FILE (or stdin), {"kind", "payload"}`,
			"each, as one batch; -wait follows it with one progress bar"}},
	{name: "get-batch", args: "ID", min: 1, max: 1, run: (*client).getBatchCommand,
		help: []string{"show a batch and its counts"}},
	{name: "counts", run: func(c *client, ctx context.Context, _ []string) int { return c.counts(ctx) },
		help: []string{"your queued (and of those, waiting on a limit) and running", "jobs now, by kind"}},
	{name: "kinds", run: func(c *client, ctx context.Context, _ []string) int { return c.kinds(ctx) },
		help: []string{"the deployment's kinds: lane, concurrency and rate limits,", "caps on queued jobs"}},
	{name: "stats", run: func(c *client, ctx context.Context, _ []string) int { return c.stats(ctx) },
		help: []string{"the local stack's metrics per kind: counts by outcome,", "flow control (waited, woken, refused at a cap),", "p50/p99 run duration and queue latency"}},
	{name: "schedules", run: func(c *client, ctx context.Context, _ []string) int { return c.schedules(ctx) },
		help: []string{"the declared schedules and their next fire times (local stack)"}},
	{name: "events", run: func(c *client, ctx context.Context, _ []string) int { return c.events(ctx) },
		help: []string{"the job events the local stack's bus received, newest first",
			"(-kind, -status, -limit N; -follow: the last N oldest first,", "then each new one as it arrives, until Ctrl-C)"}},
	{name: "pause", args: "KIND|lane:NAME|schedule:NAME", min: 1, max: 1, run: (*client).pauseCommand,
		help: []string{"hold your queued jobs of KIND back until a resume (-for D: at most",
			"D); -operator: every owner's jobs of KIND (-owner ARN: one owner's),", "or of the lane NAME (lane:default: the default lane);",
			"schedule:NAME: its fires make no job (yours; -operator: a declared one)"}},
	{name: "resume", args: "KIND|lane:NAME|schedule:NAME", min: 1, max: 1, run: (*client).resumeCommand,
		help: []string{"end a pause (-operator and -owner as for pause)"}},
	{name: "run-now", args: "SCHEDULE", min: 1, max: 1, run: (*client).runNowCommand,
		help: []string{"one job of the schedule now, as a fire would make (-key K: one job", "per key; -operator: a declared schedule; -wait: watch it)"}},
	{name: "pauses", run: (*client).pausesCommand,
		help: []string{"the pauses that hold your jobs (-operator: every one)"}},
	{name: "drop", args: "[FILE]", max: 1, run: (*client).dropCommand,
		help: []string{"send a raw message (an S3 notification, an EventBridge",
			"event, an envelope...) to the queue, as another AWS service",
			"would, and print the ids of the jobs it becomes"}},
}

const flagsUsage = `Flags:
  -api URL       the API (env LJOB_API; default http://127.0.0.1:8080, the local stack)
  -caller NAME   local caller, sent as X-Local-Caller (env LJOB_CALLER)
  -key KEY       Idempotency-Key for enqueue
  -wait          enqueue (or cancel), then watch the job until it ends
  -delay D       enqueue: run the job after D (such as 90s or 36h)
  -at TIME       enqueue: run the job at TIME (RFC 3339)
  -json          print JSON only (one object per line when watching)
  -sigv4         sign requests with SigV4 (default credential chain); on by default for *.amazonaws.com
  -region R      region for SigV4 (default: from the API host or AWS_REGION)
  -interval D    events -follow poll interval, and watch's when a wait is refused (default 500ms)
  -queue Q       drop: the queue's URL, or its name on -sqs-endpoint (env LJOB_QUEUE; default lambdajobs-local)
  -sqs-endpoint  drop: SQS endpoint for a queue name (env LJOB_SQS_ENDPOINT; default http://127.0.0.1:4566)
  -owner ARN     drop: the envelope route's owner, to derive keyed envelope ids (default the local caller);
                 pause, resume -operator: the owner whose jobs of KIND
  -for D         pause: end by itself after D (such as 2h; default and most 13 days)
  -completion J  batch: the completion job, {"kind": ..., "payload": ...}
  -unique-key K  enqueue: one job of the kind per key among yours (docs/guide/FLOW_CONTROL.md)
  -unique MODE   enqueue: until_finished (default), until_started, period or debounce
  -unique-for D  enqueue: the period of -unique period, the window of -unique debounce
  -tenant T      enqueue: who the job is for (its fair-queue group and per-tenant limits; trusted callers only)
  -start-by TIME enqueue: a job not started by TIME (RFC 3339) ends cancelled, code expired
  -after IDS     enqueue: run after these jobs of yours (comma-separated) have all succeeded
  -tag K=V       enqueue: tag the job (repeat for up to 3 tags); list, bulk: only jobs with this tag

Exit status: 0 success (or job succeeded), 1 usage or request error, 2 job failed.
`

// usage is the command's help: its commands (from the table) and flags.
func usage() string {
	var b strings.Builder
	b.WriteString("ljob: enqueue and watch lambdajobs jobs.\n\nUsage:\n")
	for _, cmd := range commands {
		fmt.Fprintf(&b, "  ljob [flags] %-25s%s\n", strings.TrimSpace(cmd.name+" "+cmd.args), cmd.help[0])
		for _, line := range cmd.help[1:] {
			fmt.Fprintf(&b, "%40s%s\n", "", line)
		}
	}
	b.WriteString("\n" + flagsUsage)
	return b.String()
}

// Env is what a run of the command uses besides its arguments: the
// process's own in cmd/ljob, buffers in tests.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

// options are the flags the commands read (those of the client itself are
// set on it).
type options struct {
	key        string        // -key: the Idempotency-Key of enqueue and batch
	wait       bool          // -wait
	delay      time.Duration // -delay (enqueue)
	at         string        // -at (enqueue)
	queue      string        // -queue (drop)
	endpoint   string        // -sqs-endpoint (drop)
	owner      string        // -owner (drop, pause)
	ownerSet   bool          // -owner was given
	pauseFor   time.Duration // -for (pause)
	completion string        // -completion (batch)
	listen     string        // -listen (ui)
	operator   bool          // -operator (ui, signal)
	status     string        // -status (list, events)
	kind       string        // -kind (list, events)
	limit      int           // -limit (list, events)
	all        bool          // -all (list)
	follow     bool          // -follow (events)
	uniqueKey  string        // -unique-key (enqueue)
	unique     string        // -unique (enqueue)
	uniqueFor  time.Duration // -unique-for (enqueue)
	tenant     string        // -tenant (enqueue)
	startBy    string        // -start-by (enqueue)
	after      string        // -after (enqueue)
	tags       tagFlags      // -tag, repeated (enqueue; list and bulk: one)
}

// APIClient returns the client of the API that ljob's flags in args
// describe (-api or LJOB_API, -caller, -sigv4, -region: requests signed
// as ljob signs them), and the arguments after the flags; false, having
// said why on env.Stderr, if it cannot. The MCP server (ljob mcp) talks to
// the API through it.
func APIClient(ctx context.Context, args []string, env Env) (*apiclient.Client, []string, bool) {
	c, rest, ok := newClient(ctx, args, env)
	if !ok {
		return nil, nil, false
	}
	return &apiclient.Client{Base: c.base, Do: c.send}, rest, true
}

// Main runs the command with args (without the program name) and returns
// its exit status.
func Main(ctx context.Context, args []string, env Env) int {
	c, rest, ok := newClient(ctx, args, env)
	if !ok {
		return 1
	}
	if len(rest) > 0 {
		for _, cmd := range commands {
			if cmd.name == rest[0] && len(rest)-1 >= cmd.min && len(rest)-1 <= cmd.max {
				return cmd.run(c, ctx, rest[1:])
			}
		}
	}
	fmt.Fprint(env.Stderr, usage())
	return 1
}

// newClient parses the flags of args into a client, and returns it with
// the arguments after the flags; false (having said why) if it cannot.
func newClient(ctx context.Context, args []string, env Env) (*client, []string, bool) {
	fs := flag.NewFlagSet("ljob", flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() { fmt.Fprint(env.Stderr, usage()) }
	c := &client{stdin: env.Stdin, stdout: env.Stdout, stderr: env.Stderr}
	o := &c.opts
	api := fs.String("api", envOr(env.Getenv, "LJOB_API", DefaultAPI), "")
	fs.StringVar(&c.caller, "caller", env.Getenv("LJOB_CALLER"), "")
	fs.StringVar(&o.key, "key", "", "")
	fs.BoolVar(&o.wait, "wait", false, "")
	fs.DurationVar(&o.delay, "delay", 0, "")
	fs.StringVar(&o.at, "at", "", "")
	fs.BoolVar(&c.jsonOut, "json", false, "")
	sig := fs.Bool("sigv4", false, "")
	fs.StringVar(&c.region, "region", env.Getenv("AWS_REGION"), "")
	fs.DurationVar(&c.interval, "interval", 500*time.Millisecond, "")
	fs.StringVar(&o.queue, "queue", envOr(env.Getenv, "LJOB_QUEUE", "lambdajobs-local"), "")
	fs.StringVar(&o.endpoint, "sqs-endpoint", envOr(env.Getenv, "LJOB_SQS_ENDPOINT", "http://127.0.0.1:4566"), "")
	fs.StringVar(&o.owner, "owner", "arn:aws:iam::000000000000:user/local", "")
	fs.StringVar(&o.completion, "completion", "", "")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8081", "")
	fs.BoolVar(&o.operator, "operator", false, "")
	fs.StringVar(&o.status, "status", "", "")
	fs.StringVar(&o.kind, "kind", "", "")
	fs.IntVar(&o.limit, "limit", 20, "")
	fs.BoolVar(&o.all, "all", false, "")
	fs.BoolVar(&o.follow, "follow", false, "")
	fs.StringVar(&o.uniqueKey, "unique-key", "", "")
	fs.StringVar(&o.unique, "unique", "", "")
	fs.DurationVar(&o.uniqueFor, "unique-for", 0, "")
	fs.StringVar(&o.tenant, "tenant", "", "")
	fs.StringVar(&o.startBy, "start-by", "", "")
	fs.StringVar(&o.after, "after", "", "")
	fs.DurationVar(&o.pauseFor, "for", 0, "")
	fs.Var(&o.tags, "tag", "")
	if err := fs.Parse(args); err != nil {
		return nil, nil, false
	}
	fs.Visit(func(f *flag.Flag) { o.ownerSet = o.ownerSet || f.Name == "owner" })
	u, err := url.Parse(strings.TrimRight(*api, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		fmt.Fprintf(env.Stderr, "ljob: -api %q is not an http(s) URL\n", *api)
		return nil, nil, false
	}
	c.base = u
	c.http = &http.Client{Timeout: 30 * time.Second}
	if *sig || strings.HasSuffix(u.Hostname(), ".amazonaws.com") {
		if err := c.setupSigV4(ctx); err != nil {
			fmt.Fprintln(env.Stderr, "ljob:", err)
			return nil, nil, false
		}
	}
	return c, fs.Args(), true
}

// enqueueCommand is ljob enqueue KIND [PAYLOAD].
func (c *client) enqueueCommand(ctx context.Context, args []string) int {
	payload := "-"
	if len(args) == 2 {
		payload = args[1]
	}
	if payload == "-" {
		b, err := io.ReadAll(io.LimitReader(c.stdin, 16<<20))
		if err != nil {
			fmt.Fprintln(c.stderr, "ljob: read payload:", err)
			return 1
		}
		payload = string(b)
	}
	if !json.Valid([]byte(payload)) {
		fmt.Fprintln(c.stderr, "ljob: the payload is not valid JSON")
		return 1
	}
	req, ok := c.enqueueOptions()
	if !ok {
		return 1
	}
	req["kind"], req["payload"] = args[0], json.RawMessage(payload)
	return c.submit(ctx, apiclient.Request{Route: deploy.RouteEnqueue}, req)
}

// replayCommand is ljob replay ID [PAYLOAD].
func (c *client) replayCommand(ctx context.Context, args []string) int {
	req, ok := c.enqueueOptions()
	if !ok {
		return 1
	}
	if len(args) == 2 {
		if !json.Valid([]byte(args[1])) {
			fmt.Fprintln(c.stderr, "ljob: the payload is not valid JSON")
			return 1
		}
		req["payload"] = json.RawMessage(args[1])
	}
	return c.submit(ctx, apiclient.Request{Route: deploy.RouteReplayJob, Params: map[string]string{"id": args[0]}}, req)
}

// signalCommand is ljob signal ID NAME [PAYLOAD]: it prints whether the
// signal woke the job, was kept for a later wait, or was a duplicate.
func (c *client) signalCommand(ctx context.Context, args []string) int {
	var body []byte
	if len(args) == 3 && args[2] != "-" {
		body = []byte(args[2])
	} else {
		b, err := io.ReadAll(c.stdin)
		if err != nil {
			fmt.Fprintln(c.stderr, "ljob:", err)
			return 1
		}
		body = b
	}
	if !json.Valid(body) {
		fmt.Fprintln(c.stderr, "ljob: the payload is not valid JSON")
		return 1
	}
	route := deploy.RouteSignalJob
	if c.opts.operator {
		route = deploy.RouteAdminSignalJob
	}
	status, resp, _, err := c.call(ctx, apiclient.Request{Route: route, Params: map[string]string{"id": args[0], "name": args[1]}, Body: json.RawMessage(body)})
	if err != nil {
		fmt.Fprintln(c.stderr, "ljob:", err)
		return 1
	}
	if status != http.StatusOK && status != http.StatusAccepted {
		return c.fail(status, resp)
	}
	var r struct{ Duplicate, Woke bool }
	if err := json.Unmarshal(resp, &r); err != nil {
		fmt.Fprintln(c.stderr, "ljob: unexpected answer:", err)
		return 1
	}
	switch {
	case c.opts.wait:
		return c.watch(ctx, args[0])
	case c.jsonOut:
		fmt.Fprintln(c.stdout, strings.TrimSpace(string(resp)))
	case r.Duplicate:
		fmt.Fprintln(c.stdout, "duplicate: the job had that signal already; nothing changed")
	case r.Woke:
		fmt.Fprintln(c.stdout, "delivered: the job was waiting for it and runs now")
	default:
		fmt.Fprintln(c.stdout, "kept: the job's handler gets it when it waits for it")
	}
	return 0
}

// getBatchCommand is ljob get-batch ID.
func (c *client) getBatchCommand(ctx context.Context, args []string) int {
	b, raw, code := c.getBatch(ctx, args[0])
	if code == 0 {
		c.printBatch(b, raw)
	}
	return code
}

// batchCommand is ljob batch [FILE].
func (c *client) batchCommand(ctx context.Context, args []string) int {
	in := c.stdin
	if len(args) == 1 && args[0] != "-" {
		f, err := os.Open(args[0])
		if err != nil {
			fmt.Fprintln(c.stderr, "ljob:", err)
			return 1
		}
		defer f.Close()
		in = f
	}
	return c.batch(ctx, in)
}

// dropCommand is ljob drop [FILE].
func (c *client) dropCommand(ctx context.Context, args []string) int {
	var body []byte
	var err error
	if len(args) == 1 && args[0] != "-" {
		body, err = os.ReadFile(args[0])
	} else {
		body, err = io.ReadAll(io.LimitReader(c.stdin, 1<<20))
	}
	if err != nil {
		fmt.Fprintln(c.stderr, "ljob:", err)
		return 1
	}
	return c.drop(ctx, body)
}

func envOr(getenv func(string) string, k, def string) string {
	if v := getenv(k); v != "" {
		return v
	}
	return def
}

type client struct {
	opts     options
	base     *url.URL
	http     *http.Client
	caller   string
	jsonOut  bool
	interval time.Duration
	region   string
	creds    aws.CredentialsProvider
	signer   *v4.Signer
	stdin    io.Reader
	stdout   io.Writer
	stderr   io.Writer
}

// Job is the API's job JSON.
type Job struct {
	ID        string            `json:"id"`
	Kind      string            `json:"kind"`
	Status    string            `json:"status"`
	Result    json.RawMessage   `json:"result"`
	Error     *string           `json:"error"`
	Attempt   int               `json:"attempt"`
	RunAt     *time.Time        `json:"run_at,omitempty"`
	WaitingOn string            `json:"waiting_on,omitempty"`
	Signal    string            `json:"signal,omitempty"`
	Steps     []StepMark        `json:"steps,omitempty"`
	After     []string          `json:"after,omitempty"`
	Left      int               `json:"parents_left,omitempty"`
	ReplayOf  string            `json:"replay_of,omitempty"`
	ChildOf   string            `json:"child_of,omitempty"`
	Lane      string            `json:"lane,omitempty"`
	LastError *string           `json:"last_error,omitempty"`
	Cancel    bool              `json:"cancel_requested,omitempty"`
	Tags      map[string]string `json:"tags,omitempty"`
	// PayloadBytes, ResultBytes and ResultURL: a payload or result kept
	// as an S3 object.
	PayloadBytes int        `json:"payload_bytes,omitempty"`
	ResultBytes  int        `json:"result_bytes,omitempty"`
	ResultURL    string     `json:"result_url,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
	StartedAt    *time.Time `json:"started_at,omitempty"`
	FinishedAt   *time.Time `json:"finished_at,omitempty"`
}

// StepMark is one of a durable job's steps in its view (steps): its name,
// kind ("step", "sleep", "signal", "child", "children"), status ("done", "waiting",
// "timed_out") and times.
type StepMark struct {
	Name, Kind, Status string
	At, Until          *time.Time
}

func (j Job) final() bool {
	return j.Status == "succeeded" || j.Status == "failed" || j.Status == "cancelled"
}

func (c *client) setupSigV4(ctx context.Context) error {
	if err := checkSigningTarget(c.base); err != nil {
		return err
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("load AWS credentials: %w", err)
	}
	if c.region == "" {
		c.region = cfg.Region
	}
	// https://ID.execute-api.REGION.amazonaws.com
	if parts := strings.Split(c.base.Hostname(), "."); len(parts) >= 5 && parts[1] == "execute-api" {
		c.region = parts[2]
	}
	if c.region == "" {
		return errors.New("-sigv4 needs a region: pass -region or set AWS_REGION")
	}
	c.creds, c.signer = cfg.Credentials, v4.NewSigner()
	return nil
}

// checkSigningTarget refuses to send signed requests, which carry the
// caller's access key id and a signature, over plain HTTP to anything but
// this machine.
func checkSigningTarget(u *url.URL) error {
	if u.Scheme == "https" {
		return nil
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("-sigv4 signs only over https (or to this machine): %s is plain %s", u.Host, u.Scheme)
}

// call sends one request of the API's route table through the API
// client, as the local caller or signed (send), and returns the answer
// whatever its status.
func (c *client) call(ctx context.Context, req apiclient.Request) (int, []byte, http.Header, error) {
	resp, err := (&apiclient.Client{Base: c.base, Do: c.send}).Send(ctx, req)
	if err != nil {
		return 0, nil, nil, err
	}
	return resp.Status, resp.Body, resp.Header, nil
}

// do GETs one of the local stack's own endpoints (its
// metrics, its schedules: not routes of the API).
func (c *client) do(ctx context.Context, path string) (int, []byte, error) {
	u := *c.base
	path, u.RawQuery, _ = strings.Cut(path, "?")
	u.Path = strings.TrimRight(u.Path, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.send(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, b, err
}

// send sends one request to the API: as the local caller, or signed with
// SigV4 when the CLI signs (the dashboard of ljob ui sends through it too).
func (c *client) send(req *http.Request) (*http.Response, error) {
	if c.caller != "" {
		req.Header.Set(apiclient.CallerHeader, c.caller)
	}
	if c.signer != nil {
		var body []byte
		if req.Body != nil {
			b, err := io.ReadAll(io.LimitReader(req.Body, 8<<20))
			if err != nil {
				return nil, err
			}
			body = b
			req.Body = io.NopCloser(bytes.NewReader(b))
		}
		creds, err := c.creds.Retrieve(req.Context())
		if err != nil {
			return nil, fmt.Errorf("AWS credentials: %w", err)
		}
		sum := sha256.Sum256(body)
		if err := c.signer.SignHTTP(req.Context(), creds, req, hex.EncodeToString(sum[:]), "execute-api", c.region, time.Now()); err != nil {
			return nil, err
		}
	}
	return c.http.Do(req)
}

func (c *client) fail(status int, body []byte) int {
	if p := apiclient.ProblemOf(&apiclient.Response{Status: status, Body: body}); p.Code != "" {
		if c.jsonOut {
			fmt.Fprintln(c.stdout, strings.TrimSpace(string(body)))
		}
		fmt.Fprintf(c.stderr, "ljob: %d %s (%s): %s\n", status, p.Title, p.Code, p.Detail)
		return 1
	}
	fmt.Fprintf(c.stderr, "ljob: HTTP %d: %s\n", status, strings.TrimSpace(string(body)))
	return 1
}

// enqueueOptions are the enqueue flags as the body of POST /v1/jobs (or of
// a replay) gives them; false, having said why, for a malformed one.
func (c *client) enqueueOptions() (map[string]any, bool) {
	req := map[string]any{}
	if delay := c.opts.delay; delay > 0 {
		req["delay"] = int64((delay + time.Second - 1) / time.Second)
	}
	if c.opts.at != "" {
		t, err := time.Parse(time.RFC3339, c.opts.at)
		if err != nil {
			fmt.Fprintln(c.stderr, "ljob: -at wants an RFC 3339 time such as 2026-12-01T09:00:00Z")
			return nil, false
		}
		req["run_at"] = t.UTC().Format(time.RFC3339Nano)
	}
	if o := c.opts; o.uniqueKey != "" || o.unique != "" || o.uniqueFor > 0 {
		req["unique_key"], req["unique"] = o.uniqueKey, o.unique
		if o.uniqueFor > 0 {
			req["unique_for"] = int64((o.uniqueFor + time.Second - 1) / time.Second)
		}
	}
	if c.opts.tenant != "" {
		req["tenant"] = c.opts.tenant
	}
	if c.opts.startBy != "" {
		t, err := time.Parse(time.RFC3339, c.opts.startBy)
		if err != nil {
			fmt.Fprintln(c.stderr, "ljob: -start-by: want an RFC 3339 time such as 2026-12-01T15:04:05Z")
			return nil, false
		}
		req["start_by"] = t.UTC().Format(time.RFC3339Nano)
	}
	if c.opts.after != "" {
		req["after"] = strings.Split(c.opts.after, ",")
	}
	if len(c.opts.tags) > 0 {
		tags := map[string]string{}
		for _, t := range c.opts.tags {
			k, v, _ := strings.Cut(t, "=")
			tags[k] = v
		}
		req["tags"] = tags
	}
	return req, true
}

// submit posts req to route (POST /v1/jobs, or a replay), with -key; with
// -wait it watches the job it made.
func (c *client) submit(ctx context.Context, route apiclient.Request, req map[string]any) int {
	body, _ := json.Marshal(req)
	route.Body = body
	if c.opts.key != "" {
		route.Header = map[string]string{"Idempotency-Key": c.opts.key}
	}
	status, resp, hdr, err := c.call(ctx, route)
	if err != nil {
		fmt.Fprintln(c.stderr, "ljob:", err)
		return 1
	}
	if status != http.StatusAccepted {
		return c.fail(status, resp)
	}
	var j Job
	if err := json.Unmarshal(resp, &j); err != nil {
		fmt.Fprintln(c.stderr, "ljob: unexpected answer:", err)
		return 1
	}
	if d := hdr.Get("Duplicate"); d != "" && !c.jsonOut {
		fmt.Fprintf(c.stderr, "ljob: no new job (%s): %s holds the unique key\n", d, j.ID)
	}
	if c.opts.wait {
		if !c.jsonOut {
			fmt.Fprintf(c.stderr, "enqueued %s (%s)\n", j.ID, j.Kind)
		}
		return c.watch(ctx, j.ID)
	}
	c.print(j, resp)
	return 0
}

func (c *client) fetch(ctx context.Context, id string) (Job, []byte, int) {
	j, raw, _, code := c.read(ctx, apiclient.Request{Route: deploy.RouteGetJob, Params: map[string]string{"id": id}})
	return j, raw, code
}

// read reads a job with req (a GET or a wait): the job, its JSON, its
// version (ETag) and 0, or the exit code after saying why not.
func (c *client) read(ctx context.Context, req apiclient.Request) (Job, []byte, string, int) {
	status, resp, hdr, err := c.call(ctx, req)
	if err != nil {
		fmt.Fprintln(c.stderr, "ljob:", err)
		return Job{}, nil, "", 1
	}
	if status != http.StatusOK {
		return Job{}, nil, "", c.fail(status, resp)
	}
	var j Job
	if err := json.Unmarshal(resp, &j); err != nil {
		fmt.Fprintln(c.stderr, "ljob: unexpected answer:", err)
		return Job{}, nil, "", 1
	}
	return j, resp, hdr.Get("ETag"), 0
}

// next is the job once it changes from the version etag: a wait of at
// most jobs.MaxWait (GET /v1/jobs/{id}/wait), or, when the wait is
// refused (429 too_many_waits; 500 when every wait instance is busy) or
// there is no version to wait from, a GET after -interval.
func (c *client) next(ctx context.Context, id, etag string) (Job, []byte, string, int) {
	params := map[string]string{"id": id}
	if etag != "" {
		q := url.Values{"timeout": {strconv.Itoa(int(jobs.MaxWait / time.Second))}}
		status, resp, hdr, err := c.call(ctx, apiclient.Request{Route: deploy.RouteWaitJob, Params: params, Query: q, Header: map[string]string{"If-None-Match": etag}})
		if err == nil && status == http.StatusOK {
			var j Job
			if err := json.Unmarshal(resp, &j); err == nil {
				return j, resp, hdr.Get("ETag"), 0
			}
		}
		if err == nil && status != http.StatusTooManyRequests && status < 500 {
			return Job{}, nil, "", c.fail(status, resp)
		}
	}
	select {
	case <-ctx.Done():
		return Job{}, nil, "", 1
	case <-time.After(c.interval):
	}
	return c.read(ctx, apiclient.Request{Route: deploy.RouteGetJob, Params: params})
}

func (c *client) get(ctx context.Context, id string) int {
	j, raw, code := c.fetch(ctx, id)
	if code != 0 {
		return code
	}
	c.print(j, raw)
	return 0
}

func (c *client) print(j Job, raw []byte) {
	if c.jsonOut {
		fmt.Fprintln(c.stdout, strings.TrimSpace(string(raw)))
		return
	}
	lane := j.Lane
	if lane == "" {
		lane = "default"
	}
	fmt.Fprintf(c.stdout, "id:       %s\nkind:     %s\nlane:     %s\nstatus:   %s\nattempt:  %d\ncreated:  %s\n", j.ID, j.Kind, lane, j.Status, j.Attempt, j.CreatedAt.Format(time.RFC3339Nano))
	if j.RunAt != nil {
		fmt.Fprintf(c.stdout, "next run: %s (in %s)\n", j.RunAt.Format(time.RFC3339Nano), time.Until(*j.RunAt).Round(time.Second))
	}
	switch {
	case j.WaitingOn == "parents" && j.Status == "queued":
		fmt.Fprintf(c.stdout, "waiting:  on %d of the jobs it runs after (no attempt spent)\n", j.Left)
	case j.WaitingOn == "sleep" && j.Status == "queued":
		fmt.Fprintln(c.stdout, "waiting:  on its handler's sleep, until the next run (no attempt spent)")
	case j.WaitingOn == "signal" && j.Status == "queued" && j.Signal == "":
		fmt.Fprintln(c.stdout, "waiting:  its signal came while it ran: it runs again now (no attempt spent)")
	case j.WaitingOn == "signal" && j.Status == "queued":
		fmt.Fprintf(c.stdout, "waiting:  for the signal %q, at most until the next run (no attempt spent)\n", j.Signal)
	case j.WaitingOn != "" && j.Status == "queued":
		fmt.Fprintf(c.stdout, "waiting:  on %s (flow control; no attempt spent)\n", j.WaitingOn)
	}
	for i, m := range j.Steps {
		label := "          "
		if i == 0 {
			label = "steps:    "
		}
		line := fmt.Sprintf("%s (%s, %s", m.Name, m.Kind, strings.ReplaceAll(m.Status, "_", " "))
		if m.At != nil {
			line += " " + m.At.Format(time.RFC3339)
		}
		if m.Until != nil && m.Status == "waiting" {
			line += ", until " + m.Until.Format(time.RFC3339)
		}
		fmt.Fprintln(c.stdout, label+line+")")
	}
	if len(j.After) > 0 {
		fmt.Fprintf(c.stdout, "after:    %s\n", strings.Join(j.After, ", "))
	}
	if j.ReplayOf != "" {
		fmt.Fprintf(c.stdout, "replays:  %s\n", j.ReplayOf)
	}
	if j.ChildOf != "" {
		fmt.Fprintf(c.stdout, "parent:   %s (its handler started this job)\n", j.ChildOf)
	}
	if len(j.Tags) > 0 {
		tags := make([]string, 0, len(j.Tags))
		for k, v := range j.Tags {
			tags = append(tags, k+"="+v)
		}
		slices.Sort(tags)
		fmt.Fprintf(c.stdout, "tags:     %s\n", strings.Join(tags, " "))
	}
	if j.LastError != nil {
		fmt.Fprintf(c.stdout, "retrying: the last attempt failed with %s\n", *j.LastError)
	}
	if j.Cancel {
		fmt.Fprintln(c.stdout, "cancel:   requested; the run is stopping")
	}
	if j.StartedAt != nil {
		fmt.Fprintf(c.stdout, "started:  %s\n", j.StartedAt.Format(time.RFC3339Nano))
	}
	if j.FinishedAt != nil {
		fmt.Fprintf(c.stdout, "finished: %s (%s)\n", j.FinishedAt.Format(time.RFC3339Nano), j.FinishedAt.Sub(j.CreatedAt).Round(time.Millisecond))
	}
	if j.Error != nil {
		fmt.Fprintf(c.stdout, "error:    %s\n", *j.Error)
	}
	if j.PayloadBytes > 0 {
		fmt.Fprintf(c.stdout, "payload:  %d bytes, kept as an S3 object\n", j.PayloadBytes)
	}
	if j.ResultBytes > 0 {
		fmt.Fprintf(c.stdout, "result:   %d bytes, kept as an S3 object", j.ResultBytes)
		if j.ResultURL != "" {
			fmt.Fprintf(c.stdout, ": curl -o result.json '%s' (for 5 minutes)", j.ResultURL)
		}
		fmt.Fprintln(c.stdout)
		return
	}
	fmt.Fprintf(c.stdout, "result:   %s\n", string(j.Result))
}

// watch follows the job until it is final, each answer a wait for its
// next change (next), drawing progress from its partial results, and
// returns 0 if it succeeded, 2 if it failed.
func (c *client) watch(ctx context.Context, id string) int {
	tty := isTerminal(c.stderr)
	last := ""
	j, raw, etag, code := c.read(ctx, apiclient.Request{Route: deploy.RouteGetJob, Params: map[string]string{"id": id}})
	for {
		if code != 0 {
			if ctx.Err() != nil {
				fmt.Fprintln(c.stderr, "\nljob: stopped watching")
			}
			return code
		}
		line := string(raw)
		if line != last {
			last = line
			if c.jsonOut {
				fmt.Fprintln(c.stdout, strings.TrimSpace(line))
			} else {
				bar := Progress(j)
				if tty {
					fmt.Fprintf(c.stderr, "\r\033[K%s", bar)
				} else {
					fmt.Fprintln(c.stderr, bar)
				}
			}
		}
		if j.final() {
			if !c.jsonOut {
				if tty {
					fmt.Fprintln(c.stderr)
				}
				c.print(j, raw)
			}
			if j.Status != "succeeded" {
				return 2
			}
			return 0
		}
		j, raw, etag, code = c.next(ctx, id, etag)
	}
}

// cancel cancels the job id; with -wait it watches it stop.
func (c *client) cancel(ctx context.Context, id string) int {
	status, resp, _, err := c.call(ctx, apiclient.Request{Route: deploy.RouteCancelJob, Params: map[string]string{"id": id}})
	if err != nil {
		fmt.Fprintln(c.stderr, "ljob:", err)
		return 1
	}
	if status != http.StatusOK && status != http.StatusAccepted {
		return c.fail(status, resp)
	}
	var j Job
	if err := json.Unmarshal(resp, &j); err != nil {
		fmt.Fprintln(c.stderr, "ljob: unexpected answer:", err)
		return 1
	}
	if c.opts.wait && !j.final() {
		c.watch(ctx, id)
		return 0
	}
	c.print(j, resp)
	return 0
}

// Progress renders a job's state as one line: a bar when its partial result
// has {"done", "total"} or {"percent"}, else the partial result itself.
func Progress(j Job) string {
	var p map[string]any
	_ = json.Unmarshal(j.Result, &p)
	num := func(k string) (float64, bool) {
		v, ok := p[k].(float64)
		return v, ok
	}
	frac := -1.0
	label := ""
	if done, ok := num("done"); ok {
		if total, ok := num("total"); ok && total > 0 {
			frac, label = done/total, fmt.Sprintf("%g/%g", done, total)
		}
	} else if pct, ok := num("percent"); ok {
		frac, label = pct/100, fmt.Sprintf("%g%%", pct)
	}
	head := fmt.Sprintf("%-9s %s", j.Status, j.ID)
	if j.Attempt > 1 {
		head += fmt.Sprintf(" (attempt %d)", j.Attempt)
	}
	if j.RunAt != nil && j.Status == "queued" {
		head += " next run " + j.RunAt.Format(time.RFC3339)
	}
	switch {
	case frac >= 0:
		frac = min(max(frac, 0), 1)
		const width = 30
		n := int(frac * width)
		return fmt.Sprintf("%s [%s%s] %s", head, strings.Repeat("#", n), strings.Repeat(".", width-n), label)
	case len(j.Result) > 0 && string(j.Result) != "null" && !j.final():
		r := string(j.Result)
		if len(r) > 60 {
			r = r[:60] + "..."
		}
		return head + " " + r
	}
	return head
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
