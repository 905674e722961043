package lambdafn_test

import (
	"context"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambda"
	smithytracing "github.com/aws/smithy-go/tracing"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/tracehook"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"
)

// A bootstrap whose main passes no tracing links nothing of OpenTelemetry
// (nor protobuf, its exporters' encoding): what keeps the functions small
// and quick to start (docs/evidence/BENCHMARKS.md, "Cold start"). Checked on the
// packages (lambdafn and jobs link none) and on this repository's seven
// mains built as a team's main that passes none (the tag
// lambdajobs.notracing, as make build NOTRACING=1 and the bench build
// them). One that passes tracing.XRay() links OpenTelemetry's SDK but not
// the OTLP/HTTP exporter and gRPC, which only package otlp brings.
func TestTracingIsLinkedOnlyWhenPassed(t *testing.T) {
	t.Parallel()
	forbidden := []string{"go.opentelemetry.io/", "google.golang.org/protobuf/", "google.golang.org/grpc", "github.com/aws/smithy-go/tracing/smithyoteltracing"}
	untraced := [][]string{{"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"}, {"github.com/lambdajobs/lambdajobs/pkg/jobs"}}
	for _, fn := range deploy.FunctionNames() {
		untraced = append(untraced, []string{"-tags=lambda.norpc,lambdajobs.notracing", "github.com/lambdajobs/lambdajobs/functions/" + fn})
	}
	for _, args := range untraced {
		for _, dep := range deps(t, args...) {
			for _, f := range forbidden {
				if strings.HasPrefix(dep, f) {
					t.Errorf("%s imports %s", args[len(args)-1], dep)
				}
			}
		}
	}
	xray := strings.Join(deps(t, "github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn/tracing"), " ")
	if !strings.Contains(xray, "go.opentelemetry.io/otel/sdk/trace") {
		t.Errorf("lambdafn/tracing does not link OpenTelemetry's SDK: %v", xray)
	}
	if strings.Contains(xray, "otlptracehttp") || strings.Contains(xray, "google.golang.org/grpc") {
		t.Errorf("lambdafn/tracing links the OTLP/HTTP exporter or gRPC: %v", xray)
	}
	if otlp := strings.Join(deps(t, "github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn/tracing/otlp"), " "); !strings.Contains(otlp, "go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp") {
		t.Errorf("lambdafn/tracing/otlp does not link OpenTelemetry's OTLP/HTTP exporter: %v", otlp)
	}
}

// deps lists the packages a package imports, directly or not: go list's
// arguments (build flags, then the package).
func deps(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list -deps %v: %v", args, err)
	}
	return strings.Fields(string(out))
}

// With JOBS_TRACING=on, a function whose main passes no tracing refuses to
// start, saying how to give one: tracing asked for is never silently
// dropped. (This test binary links no tracing package.)
func TestTracingOnWithoutATracingRefusesToStart(t *testing.T) {
	t.Parallel()
	getenv := env(map[string]string{"JOBS_TABLE": "t", "AWS_REGION": "us-east-1", "JOBS_TRACING": "on"})
	for name, fn := range map[string]lambdafn.Function{"worker": lambdafn.Worker, "getjob": lambdafn.GetJob} {
		for _, opts := range []*lambdafn.Opts{nil, {}} {
			_, err := lambdafn.Build(context.Background(), fn, jobs.NewRegistry(), getenv, opts)
			if err == nil || !strings.Contains(err.Error(), "lambdafn.Opts{Tracing: tracing.XRay()}") {
				t.Errorf("%s with JOBS_TRACING=on and no tracing passed: got %v, want the option named", name, err)
			}
		}
	}
}

// fakeTracing records what lambdafn does with a main's Opts.Tracing.
type fakeTracing struct {
	started []string // the services started
	wrapped []string // the handlers wrapped, by name
	workers int      // the worker tracers asked for
	stopped int      // the times it was shut down
}

func (f *fakeTracing) Start(_ context.Context, cfg lambdafn.Config) (tracehook.Tracing, error) {
	f.started = append(f.started, cfg.Service)
	return f, nil
}

func (f *fakeTracing) Instrument(*smithytracing.TracerProvider) {}

func (f *fakeTracing) Worker() jobs.Tracer { f.workers++; return nil }

func (f *fakeTracing) Wrap(name string, h lambda.Handler) lambda.Handler {
	f.wrapped = append(f.wrapped, name)
	return h
}

func (f *fakeTracing) Shutdown(context.Context) error { f.stopped++; return nil }

// A tracing's exporter runs a goroutine of its own. A Build that fails
// after starting it stops it (a function that never starts keeps nothing
// running); a Build that succeeds leaves it to its handler, whose Close
// stops it once. (TestMain's goleak sees what a real exporter leaves.)
func TestTracingStopsWithTheFunction(t *testing.T) {
	t.Parallel()
	on := map[string]string{"JOBS_TABLE": "t", "AWS_REGION": "us-east-1", "JOBS_FUNCTION": "enqueue", "JOBS_TRACING": "on"}
	f := &fakeTracing{}
	// enqueue without JOBS_QUEUE_URL fails after its tracing started.
	if _, err := lambdafn.Build(context.Background(), lambdafn.Enqueue, jobs.NewRegistry(), env(on), &lambdafn.Opts{Tracing: f}); err == nil {
		t.Fatal("enqueue built without JOBS_QUEUE_URL")
	}
	if len(f.started) != 1 || f.stopped != 1 {
		t.Fatalf("a failed Build started its tracing %d times and stopped it %d times, want once each", len(f.started), f.stopped)
	}

	f = &fakeTracing{}
	on["JOBS_FUNCTION"] = "worker"
	h, err := lambdafn.Build(context.Background(), lambdafn.Worker, jobs.NewRegistry(), env(on), &lambdafn.Opts{Tracing: f})
	if err != nil {
		t.Fatal(err)
	}
	if f.stopped != 0 {
		t.Fatalf("a built function's tracing was stopped %d times before its handler was closed", f.stopped)
	}
	c, ok := h.(io.Closer)
	if !ok {
		t.Fatalf("a traced function's handler %T is no io.Closer", h)
	}
	if err := c.Close(); err != nil || f.stopped != 1 {
		t.Fatalf("Close: %v; the tracing was stopped %d times, want once", err, f.stopped)
	}
}

// A main's Opts.Tracing links tracing; JOBS_TRACING turns it on. Off (unset
// or "off"), the function starts none: no exporter, no span, whatever the
// option. On, it starts the main's, once, for the function JOBS_FUNCTION
// names, wraps the handler in it and hands the worker its record tracer.
func TestTracingIsTheMainsOptionTurnedOnByTheEnvironment(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"", "off"} {
		f := &fakeTracing{}
		getenv := env(map[string]string{"JOBS_TABLE": "t", "AWS_REGION": "us-east-1", "JOBS_FUNCTION": "worker", "JOBS_TRACING": v})
		if _, err := lambdafn.Build(context.Background(), lambdafn.Worker, jobs.NewRegistry(), getenv, &lambdafn.Opts{Tracing: f}); err != nil {
			t.Fatal(err)
		}
		if len(f.started)+len(f.wrapped)+f.workers != 0 {
			t.Errorf("JOBS_TRACING=%q: tracing started %v, wrapped %v, %d worker tracers", v, f.started, f.wrapped, f.workers)
		}
	}
	f := &fakeTracing{}
	getenv := env(map[string]string{"JOBS_TABLE": "t", "AWS_REGION": "us-east-1", "JOBS_FUNCTION": "worker", "JOBS_TRACING": "on"})
	if _, err := lambdafn.Build(context.Background(), lambdafn.Any, jobs.NewRegistry(), getenv, &lambdafn.Opts{Tracing: f}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(f.started, []string{"worker"}) || !slices.Equal(f.wrapped, []string{"worker"}) || f.workers != 1 {
		t.Errorf("JOBS_TRACING=on: tracing started %v, wrapped %v, %d worker tracers; want the worker's, once each", f.started, f.wrapped, f.workers)
	}
}

// The functions read their AWS configuration from Lambda's environment
// with the SDK's own credential providers (awsenv.go): they link neither
// the SDK's shared-config loader nor the clients of the credential sources
// Lambda never uses (SSO, SSO OIDC, STS, sign-in, instance metadata), whose
// package initialisation every cold start would pay for. The service
// clients they link are the SDK's clients of the roles' calls, and only
// those: DynamoDB, SQS, Scheduler, EventBridge and Secrets Manager.
func TestFunctionsLinkNoSharedConfigLoader(t *testing.T) {
	t.Parallel()
	forbidden := []string{"github.com/aws/aws-sdk-go-v2/config", "github.com/aws/aws-sdk-go-v2/credentials/ssocreds", "github.com/aws/aws-sdk-go-v2/credentials/stscreds",
		"github.com/aws/aws-sdk-go-v2/credentials/processcreds", "github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds", "github.com/aws/aws-sdk-go-v2/feature/ec2/imds"}
	const services = "github.com/aws/aws-sdk-go-v2/service/"
	clients := map[string]bool{}
	for _, dep := range deps(t, "github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn") {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("lambdafn imports %s", dep)
			}
		}
		if name, ok := strings.CutPrefix(dep, services); ok && !strings.Contains(name, "/") {
			clients[name] = true
		}
	}
	want := []string{"dynamodb", "eventbridge", "scheduler", "secretsmanager", "sqs"}
	got := slices.Sorted(maps.Keys(clients))
	if !slices.Equal(got, want) {
		t.Errorf("lambdafn links the service clients %v, want the roles' %v", got, want)
	}
}
