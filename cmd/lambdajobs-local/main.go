// Command lambdajobs-local runs the whole system on this machine, made of
// the same function code that deploys to Lambda: DynamoDB Local, the fauxqs
// SQS emulator, the seven functions under the AWS Lambda Runtime Interface
// Emulator, a gateway speaking API Gateway's payload format 2.0, an SQS
// event source, a stand-in for EventBridge Scheduler that fires the
// declared and runtime schedules, and the sweeper's schedule. `make run` builds what it needs
// and starts it; Ctrl-C, SIGINT or SIGTERM stops everything it started. A
// script that started it through `go run` or make stops it with SIGTERM:
// neither passes SIGINT on (docs/guide/LOCAL.md, "Stopping it").
//
// In a team's own repository, it runs the team's functions: one main that
// serves every function (lambdafn.Serve), built for this machine:
//
//	go run github.com/lambdajobs/lambdajobs/cmd/lambdajobs-local -main ./cmd/jobs
//
// or, as a tool of the team's module (go get -tool
// github.com/lambdajobs/lambdajobs/cmd/lambdajobs-local), which passes
// every signal on:
//
//	go tool lambdajobs-local -main ./cmd/jobs
//
// The emulators (at this repository's pins) and the Runtime Interface
// Emulator are installed into the user's cache the first time (npm and go
// install; JOBS_LOCAL_CACHE overrides where).
//
// Every address and setting can be overridden by environment variables:
//
//	JOBS_LOCAL_API_ADDR        HTTP API address (127.0.0.1:8080; one address, not every
//	                           interface: it answers only there)
//	JOBS_LOCAL_DASHBOARD_ADDR  the web dashboard's address (127.0.0.1:8081; one address, not
//	                           every interface: it answers only there)
//	JOBS_LOCAL_DYNAMODB_PORT   DynamoDB Local port (8000)
//	JOBS_LOCAL_SQS_PORT        fauxqs port (4566)
//	JOBS_LOCAL_WORKERS         worker instances = event source concurrency (2)
//	JOBS_LOCAL_BATCH_SIZE      messages per worker invocation, 1..10 (10)
//	JOBS_LOCAL_BATCH_WINDOW    how long to gather a batch (0s)
//	JOBS_LOCAL_WORKER_TIMEOUT  the worker's Lambda timeout (30s)
//	JOBS_LOCAL_LONG_WORKER_TIMEOUT  the long lane's worker timeout (1m)
//	JOBS_LOCAL_SWEEP_EVERY     sweeper schedule (1m)
//	JOBS_LOCAL_WEBHOOK         a URL on this machine the local bus POSTs each job event to, as an
//	                           EventBridge rule to an API destination would (docs/reference/EVENTS.md); unset: none
//	JOBS_LOCAL_VERBOSE         set to show the Runtime Interface Emulator's own log lines
//	JOBS_LOCAL_CACHE           where -main installs the emulators (the user's cache; when set, used
//	                           even inside this repository)
//	JOBS_*                     the functions' variables (docs/reference/CONFIGURATION.md), passed to them
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "lambdajobs-local:", err)
		os.Exit(1)
	}
}

func run() error {
	// First of all: a signal that arrives while the emulators install or
	// start, or the functions build, stops what has started (Start stops
	// it when its context ends), instead of being lost.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	mainPkg := flag.String("main", "", "a main package serving every function (lambdafn.Serve) to build and run, e.g. ./cmd/jobs")
	flag.Parse()
	localaws.DieWithParent()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if note := parentNote(os.Getppid()); note != "" {
		logger.Warn(note)
	}
	cfg := localstack.DefaultConfig()
	cfg.Output = os.Stdout
	if os.Getenv("JOBS_LOCAL_VERBOSE") == "" {
		cfg.Output = localstack.QuietEmulator(os.Stdout)
	}
	cfg.Logger = logger
	var errs []string
	str := func(name string, dst *string) {
		if v := os.Getenv(name); v != "" {
			*dst = v
		}
	}
	num := func(name string, dst *int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				errs = append(errs, name+"="+v+": want a number")
				return
			}
			*dst = n
		}
	}
	dur := func(name string, dst *time.Duration) {
		if v := os.Getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				errs = append(errs, name+"="+v+": want a duration such as 30s")
				return
			}
			*dst = d
		}
	}
	str("JOBS_LOCAL_API_ADDR", &cfg.APIAddr)
	str("JOBS_LOCAL_DASHBOARD_ADDR", &cfg.DashboardAddr)
	num("JOBS_LOCAL_DYNAMODB_PORT", &cfg.DynamoDBPort)
	num("JOBS_LOCAL_SQS_PORT", &cfg.SQSPort)
	num("JOBS_LOCAL_WORKERS", &cfg.WorkerInstances)
	num("JOBS_LOCAL_BATCH_SIZE", &cfg.BatchSize)
	dur("JOBS_LOCAL_BATCH_WINDOW", &cfg.BatchWindow)
	dur("JOBS_LOCAL_WORKER_TIMEOUT", &cfg.WorkerTimeout)
	long := cfg.LaneTimeouts["long"]
	dur("JOBS_LOCAL_LONG_WORKER_TIMEOUT", &long)
	cfg.LaneTimeouts = map[string]time.Duration{"long": long}
	dur("JOBS_LOCAL_SWEEP_EVERY", &cfg.SweepEvery)
	str("JOBS_LOCAL_WEBHOOK", &cfg.Webhook)
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	// The functions' own variables (internal/deploy) pass on to them.
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); isFunctionVar(name) {
			cfg.FunctionEnv = append(cfg.FunctionEnv, kv)
		}
	}

	enqueue, _ := deploy.RouteByID(deploy.RouteEnqueue)
	try := `  curl -s -X ` + enqueue.Method + ` %s` + enqueue.Path + ` -H 'content-type: application/json' \
    -d '{"kind":"example.hash","payload":{"text":"hello","rounds":1}}'`
	if *mainPkg != "" {
		tools, err := localstack.PrepareTools(ctx, os.Getenv("JOBS_LOCAL_CACHE"), logger)
		if err != nil {
			return interrupted(ctx, err)
		}
		dir, err := os.MkdirTemp("", "lambdajobs-local-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg.Bootstrap = filepath.Join(dir, "bootstrap")
		logger.Info("building your functions", slog.String("main", *mainPkg))
		if err := localstack.BuildMain(ctx, "", *mainPkg, cfg.Bootstrap); err != nil {
			return interrupted(ctx, err)
		}
		cfg.Root, cfg.RIE = tools.Root, tools.RIE
		try = `  curl -s -X ` + enqueue.Method + ` %s` + enqueue.Path + ` -H 'content-type: application/json' \
    -d '{"kind":"<one of your kinds>","payload":{...}}'`
	}
	stack, err := localstack.Start(ctx, cfg)
	if err != nil {
		return interrupted(ctx, err)
	}
	fmt.Fprintf(os.Stderr, `
lambdajobs is running:
  HTTP API     %s   (X-Local-Caller: NAME picks the caller)
  Dashboard    %s
  DynamoDB     %s   table %s
  SQS          %s   queue %s
  Job events   %s   (logged as "event"; `+deploy.EnvEvents.Name+"="+deploy.EnvEvents.Format(true)+` announces every kind's)
  Webhook      %s
  Lanes        %s
Try:
`+try+`
A program of yours enqueues with lambdafn.NewService after:
  export %s
Ctrl-C stops everything.
`, stack.APIURL, stack.DashboardURL, stack.DynamoDBEndpoint, stack.Table, stack.SQSEndpoint, stack.Queues.Queue, stack.APIURL+localstack.EventBusPath, webhook(cfg), lanes(stack), stack.APIURL,
		strings.Join(stack.EnqueuerEnv(), " \\\n         "))
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "stopping...")
	stack.Stop()
	fmt.Fprintln(os.Stderr, "stopped")
	return nil
}

// errInterrupted is what a signal during the start gives, in place of the
// cancelled step's error.
var errInterrupted = errors.New("interrupted while starting; everything it had started is stopped")

// interrupted returns errInterrupted when err came of a signal (ctx ended),
// and err otherwise.
func interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return errInterrupted
	}
	return err
}

// parentNote says how to stop this program from a script when the process
// that started it keeps SIGINT from it: `go run` catches SIGINT and does
// not pass it on to the program it runs (go.dev/issue/40467), and make,
// when it is sent SIGINT alone, waits for its recipe, which never gets it
// (both pass SIGTERM on, go run by dying, which the parent-death signal
// turns into a SIGTERM here). Ctrl-C in a terminal reaches every process of
// the foreground group, this one included. `go tool` passes every signal
// on. Empty when the parent is anything else, or cannot be read (only
// Linux has /proc).
func parentNote(ppid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", ppid))
	if err != nil {
		return ""
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	switch name := filepath.Base(args[0]); {
	case name == "go" && len(args) > 1 && args[1] == "run":
		return "started by `go run`, which does not pass SIGINT on (go.dev/issue/40467): " +
			"from a script, stop it with SIGTERM (kill PID), or start it with `go tool lambdajobs-local` or a built binary, which stop on either"
	case name == "make" || name == "gmake":
		return "started by make, which does not pass SIGINT on when it is sent alone: from a script, stop it with SIGTERM (kill PID)"
	}
	return ""
}

// webhook describes where the local bus posts its events.
func webhook(cfg localstack.Config) string {
	if cfg.Webhook == "" {
		return "none (JOBS_LOCAL_WEBHOOK=http://127.0.0.1:9000/hook posts each event there)"
	}
	return cfg.Webhook + " gets each event (POST, the event's detail as the body)"
}

// lanes describes the stack's other lanes: each one's queue.
func lanes(stack *localstack.Stack) string {
	if len(stack.Lanes) == 0 {
		return "only the default lane"
	}
	var out []string
	for _, lane := range slices.Sorted(maps.Keys(stack.Lanes)) {
		out = append(out, lane+" "+stack.Lanes[lane].Queue)
	}
	return strings.Join(out, ", ") + " (docs/guide/LANES.md)"
}

// isFunctionVar reports whether name is a variable of the functions'
// environment (docs/reference/CONFIGURATION.md).
func isFunctionVar(name string) bool {
	_, ok := deploy.Lookup(name)
	return ok
}
