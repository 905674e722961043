package lambdafn_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	cfg, err := lambdafn.ConfigFromEnv(env(map[string]string{
		"JOBS_TABLE": "jobs-dev", "JOBS_QUEUE_URL": "https://sqs.example/q",
		"JOBS_DISPATCH_GRACE": "5m", "JOBS_RETENTION": "24h", "JOBS_WORKER_CONCURRENCY": "16",
		"JOBS_HANDLER_RESERVE": "4s", "JOBS_FINAL_WRITE_TIMEOUT": "3s",
		"JOBS_LANE_QUEUE_URLS": `{"long":"https://sqs.example/q-long"}`, "JOBS_LANE_DISPATCH_GRACES": `{"long":"17m"}`, "JOBS_LANE": "long",
		"JOBS_ENQUEUE_RATE_PER_OWNER": "50", "JOBS_TRUSTED_CALLERS": " arn:aws:iam::1:role/a, ,arn:aws:iam::1:role/b",
		"JOBS_LANE_DLQ_URLS": `{"long":"https://sqs.example/dlq-long"}`,
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Table != "jobs-dev" || cfg.DispatchGrace != 5*time.Minute || cfg.Retention != 24*time.Hour ||
		cfg.Concurrency != 16 || cfg.Deadlines.Reserve != 4*time.Second || cfg.Deadlines.FinalWrite != 3*time.Second {
		t.Fatalf("config %+v", cfg)
	}
	if cfg.EnqueueRatePerOwner != 50 || len(cfg.TrustedCallers) != 2 || cfg.TrustedCallers[1] != "arn:aws:iam::1:role/b" {
		t.Fatalf("enqueue rate %d, trusted callers %q", cfg.EnqueueRatePerOwner, cfg.TrustedCallers)
	}
	if cfg.Lane != "long" || cfg.LaneQueueURLs["long"] != "https://sqs.example/q-long" || cfg.LaneDispatchGraces["long"] != 17*time.Minute ||
		cfg.LaneDLQURLs["long"] != "https://sqs.example/dlq-long" {
		t.Fatalf("lanes: %q %v %v %v", cfg.Lane, cfg.LaneQueueURLs, cfg.LaneDispatchGraces, cfg.LaneDLQURLs)
	}
	def, err := lambdafn.ConfigFromEnv(env(map[string]string{"JOBS_TABLE": "t"}))
	if err != nil || def.DispatchGrace != jobs.DefaultDispatchGrace || def.Concurrency != 8 || def.Deadlines != jobs.DefaultDeadlines {
		t.Fatalf("defaults %+v %v", def, err)
	}
}

func TestConfigFromEnvRefuses(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		env  map[string]string
		want string
	}{
		"no table":            {map[string]string{}, "JOBS_TABLE is required"},
		"bad duration":        {map[string]string{"JOBS_TABLE": "t", "JOBS_RETENTION": "7 days"}, "JOBS_RETENTION"},
		"negative duration":   {map[string]string{"JOBS_TABLE": "t", "JOBS_DISPATCH_GRACE": "-1m"}, "JOBS_DISPATCH_GRACE"},
		"bad concurrency":     {map[string]string{"JOBS_TABLE": "t", "JOBS_WORKER_CONCURRENCY": "0"}, "JOBS_WORKER_CONCURRENCY"},
		"negative rate":       {map[string]string{"JOBS_TABLE": "t", "JOBS_ENQUEUE_RATE_PER_OWNER": "-1"}, "JOBS_ENQUEUE_RATE_PER_OWNER"},
		"reserve below write": {map[string]string{"JOBS_TABLE": "t", "JOBS_HANDLER_RESERVE": "1s", "JOBS_FINAL_WRITE_TIMEOUT": "2s"}, "reserve"},
		"lane grace not JSON": {map[string]string{"JOBS_TABLE": "t", "JOBS_LANE_DISPATCH_GRACES": "long=17m"}, "JOBS_LANE_DISPATCH_GRACES"},
		"lane grace negative": {map[string]string{"JOBS_TABLE": "t", "JOBS_LANE_DISPATCH_GRACES": `{"long":"-1m"}`}, "JOBS_LANE_DISPATCH_GRACES"},
		"lane default":        {map[string]string{"JOBS_TABLE": "t", "JOBS_LANE": "default"}, "JOBS_LANE"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := lambdafn.ConfigFromEnv(env(tt.env))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

func TestBuildNeedsQueueForEnqueueAndSweeper(t *testing.T) {
	t.Parallel()
	getenv := env(map[string]string{"JOBS_TABLE": "t", "AWS_REGION": "us-east-1", "JOBS_PAGE_TOKEN_KEY": strings.Repeat("k", 32)})
	for name, fn := range map[string]lambdafn.Function{"enqueue": lambdafn.Enqueue, "sweeper": lambdafn.Sweeper, "cancel": lambdafn.Cancel} {
		if _, err := lambdafn.Build(context.Background(), fn, jobs.NewRegistry(), getenv, nil); err == nil || !strings.Contains(err.Error(), "JOBS_QUEUE_URL") {
			t.Fatalf("%s without a queue: %v", name, err)
		}
	}
	for name, fn := range map[string]lambdafn.Function{"getjob": lambdafn.GetJob, "worker": lambdafn.Worker} {
		if _, err := lambdafn.Build(context.Background(), fn, jobs.NewRegistry(), getenv, nil); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// The functions that list need the page token key.
	bare := env(map[string]string{"JOBS_TABLE": "t", "AWS_REGION": "us-east-1", "JOBS_QUEUE_URL": "http://127.0.0.1:1/q"})
	for name, fn := range map[string]lambdafn.Function{"getjob": lambdafn.GetJob, "cancel": lambdafn.Cancel} {
		if _, err := lambdafn.Build(context.Background(), fn, jobs.NewRegistry(), bare, nil); err == nil || !strings.Contains(err.Error(), "JOBS_PAGE_TOKEN") {
			t.Fatalf("%s without a page token key: %v", name, err)
		}
	}
	if _, err := lambdafn.ConfigFromEnv(env(map[string]string{"JOBS_TABLE": "t", "JOBS_PAGE_TOKEN_KEY": "short"})); err == nil {
		t.Fatal("a short JOBS_PAGE_TOKEN_KEY was accepted")
	}
}

// A source the stack connects to the queue but no route accepts is refused
// at cold start, naming both the source and the routes there are.
func TestWorkerRefusesASourceWithoutRoute(t *testing.T) {
	t.Parallel()
	getenv := env(map[string]string{"JOBS_TABLE": "t", "AWS_REGION": "us-east-1",
		"JOBS_SOURCES": `[{"type":"eventbridge","source":"shop.orders","detail_type":"OrderPlaced"},{"type":"s3","bucket":"uploads"}]`})
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "order", func(context.Context, *jobs.Job[events.EventBridgeEvent]) (jobs.NoResult, error) {
		return jobs.NoResult{}, nil
	}, nil)
	_, err := lambdafn.Build(context.Background(), lambdafn.Worker, reg, getenv, nil)
	if err == nil || !strings.Contains(err.Error(), "has no route") || !strings.Contains(err.Error(), "EventBridge source shop.orders (detail type OrderPlaced)") ||
		!strings.Contains(err.Error(), "S3 bucket uploads") {
		t.Fatalf("worker without routes: %v, want both sources named", err)
	}
	routes := &jobs.Routes{EventBridge: []jobs.EventBridgeRoute{{Source: "shop.orders", Kind: "order", Owner: "o"}}}
	_, err = lambdafn.Build(context.Background(), lambdafn.Worker, reg, getenv, &lambdafn.Opts{Routes: routes})
	if err == nil || strings.Contains(err.Error(), "EventBridge source shop.orders") || !strings.Contains(err.Error(), "S3 bucket uploads") {
		t.Fatalf("worker routing EventBridge only: %v, want only the bucket refused", err)
	}
	if _, err := lambdafn.ConfigFromEnv(env(map[string]string{"JOBS_TABLE": "t", "JOBS_SOURCES": `[{"type":"s3","buckets":"x"}]`})); err == nil {
		t.Fatal("a malformed JOBS_SOURCES was accepted")
	}
}

// A kind that needs more handler time than an invocation of the worker's
// timeout (JOBS_WORKER_TIMEOUT, less the reserve) has is refused at cold
// start, naming the kind: the function fails to start rather than hand
// that kind's jobs back forever.
func TestWorkerRefusesAKindLongerThanItsTimeout(t *testing.T) {
	t.Parallel()
	reg := func() *jobs.Registry {
		r := jobs.NewRegistry()
		jobs.MustRegister(r, "report", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) {
			return jobs.NoResult{}, nil
		}, &jobs.KindOpts{MinRunTime: 2 * time.Minute})
		return r
	}
	base := map[string]string{"JOBS_TABLE": "t", "AWS_REGION": "us-east-1"}
	getenv := func(extra map[string]string) func(string) string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return env(m)
	}
	_, err := lambdafn.Build(context.Background(), lambdafn.Worker, reg(), getenv(map[string]string{"JOBS_WORKER_TIMEOUT": "1m"}), nil)
	if err == nil || !strings.Contains(err.Error(), `kind "report"`) {
		t.Fatalf("a 1m worker with a kind needing 2m: %v, want the kind refused", err)
	}
	for _, extra := range []map[string]string{{"JOBS_WORKER_TIMEOUT": "5m"}, {}} {
		if _, err := lambdafn.Build(context.Background(), lambdafn.Worker, reg(), getenv(extra), nil); err != nil {
			t.Fatalf("worker with %v: %v", extra, err)
		}
	}
	cfg, err := lambdafn.ConfigFromEnv(getenv(map[string]string{"JOBS_WORKER_TIMEOUT": "90s"}))
	if err != nil || cfg.WorkerTimeout != 90*time.Second {
		t.Fatalf("JOBS_WORKER_TIMEOUT=90s: %+v %v", cfg.WorkerTimeout, err)
	}
}

// Any builds the function JOBS_FUNCTION names, and refuses a name the
// descriptor does not have.
func TestAnyServesTheFunctionJobsFunctionNames(t *testing.T) {
	t.Parallel()
	base := map[string]string{"JOBS_TABLE": "t", "AWS_REGION": "us-east-1", "JOBS_PAGE_TOKEN_KEY": strings.Repeat("k", 32)}
	with := func(fn string) func(string) string {
		m := map[string]string{"JOBS_FUNCTION": fn}
		for k, v := range base {
			m[k] = v
		}
		return env(m)
	}
	if _, err := lambdafn.Build(context.Background(), lambdafn.Any, jobs.NewRegistry(), with("getjob"), nil); err != nil {
		t.Fatalf("JOBS_FUNCTION=getjob: %v", err)
	}
	// enqueue needs a queue: the error is enqueue's, so Any built enqueue.
	if _, err := lambdafn.Build(context.Background(), lambdafn.Any, jobs.NewRegistry(), with("enqueue"), nil); err == nil || !strings.Contains(err.Error(), "JOBS_QUEUE_URL") {
		t.Fatalf("JOBS_FUNCTION=enqueue without a queue: %v", err)
	}
	if _, err := lambdafn.Build(context.Background(), lambdafn.Any, jobs.NewRegistry(), with("workr"), nil); err == nil || !strings.Contains(err.Error(), `JOBS_FUNCTION="workr"`) {
		t.Fatalf("JOBS_FUNCTION=workr: %v", err)
	}
}

func TestFunctionNamed(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"enqueue", "getjob", "cancel", "worker", "sweeper", "schedules"} {
		if fn, err := lambdafn.FunctionNamed(name); err != nil || fn == nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := lambdafn.FunctionNamed("workr"); err == nil || !strings.Contains(err.Error(), "JOBS_FUNCTION") {
		t.Errorf("a misspelt role: %v", err)
	}
}

// A kind that announces its outcomes, or JOBS_EVENTS=all, without an
// event bus: the roles that send events refuse to start rather than leave
// every event pending; those that do not send start.
func TestEventsWithoutABusRefuseToStart(t *testing.T) {
	t.Parallel()
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "announced", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, &jobs.KindOpts{Events: true})
	base := map[string]string{"JOBS_TABLE": "t", "AWS_REGION": "us-east-1", "JOBS_QUEUE_URL": "http://127.0.0.1:1/000000000000/q", "JOBS_PAGE_TOKEN_KEY": strings.Repeat("k", 32)}
	for name, fn := range map[string]lambdafn.Function{"worker": lambdafn.Worker, "sweeper": lambdafn.Sweeper, "cancel": lambdafn.Cancel} {
		_, err := lambdafn.Build(context.Background(), fn, reg, env(base), nil)
		if err == nil || !strings.Contains(err.Error(), "JOBS_EVENT_BUS is required") {
			t.Errorf("%s with an announcing kind and no bus: %v, want JOBS_EVENT_BUS required", name, err)
		}
		withBus := maps.Clone(base)
		withBus["JOBS_EVENT_BUS"] = "jobs-bus"
		if _, err := lambdafn.Build(context.Background(), fn, reg, env(withBus), nil); err != nil {
			t.Errorf("%s with a bus: %v", name, err)
		}
	}
	all := maps.Clone(base)
	all["JOBS_EVENTS"] = "all"
	if _, err := lambdafn.Build(context.Background(), lambdafn.Worker, jobs.NewRegistry(), env(all), nil); err == nil || !strings.Contains(err.Error(), "JOBS_EVENT_BUS is required") {
		t.Errorf("worker with JOBS_EVENTS=all and no bus: %v, want JOBS_EVENT_BUS required", err)
	}
}

// bigObjects is an object tier that is never called.
type bigObjects struct{ dynamostore.Objects }

func (bigObjects) MaxBytes() int { return 100 << 20 }

type bigTier struct{}

func (bigTier) ObjectsFor(aws.Config, string) dynamostore.Objects { return bigObjects{} }

// A registry with a kind that allows large parts needs the object tier:
// without Opts.Objects, or without JOBS_BUCKET, a function refuses to
// start; with both it starts, and a registry without such a kind starts
// with neither.
func TestLargePartsNeedTheObjectTier(t *testing.T) {
	t.Parallel()
	reg := func(large bool) *jobs.Registry {
		r := jobs.NewRegistry()
		opts := &jobs.KindOpts{}
		if large {
			opts.MaxPayloadBytes = 1 << 20
		}
		jobs.MustRegister(r, "blob", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, opts)
		return r
	}
	with := &lambdafn.Opts{Objects: bigTier{}}
	for _, tc := range []struct {
		large  bool
		bucket string
		opts   *lambdafn.Opts
		want   string
	}{
		{true, "parts", nil, "give Opts.Objects"},
		{true, "", with, "JOBS_BUCKET is not set"},
		{true, "parts", with, ""},
		{false, "", nil, ""},
		{false, "", with, ""},
	} {
		e := map[string]string{"JOBS_TABLE": "t", "AWS_REGION": "us-east-1", "JOBS_BUCKET": tc.bucket}
		_, err := lambdafn.Build(context.Background(), lambdafn.Worker, reg(tc.large), env(e), tc.opts)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("large %v, bucket %q, tier %v: %v, want %q", tc.large, tc.bucket, tc.opts != nil, err, tc.want)
		}
	}
}
