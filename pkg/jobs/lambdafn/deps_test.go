package lambdafn_test

import (
	"context"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"
)

// A bootstrap whose main does not import lambdafn/tracing links nothing of
// OpenTelemetry (nor protobuf, its exporter's encoding): what keeps the
// functions small and quick to start (docs/BENCHMARKS.md, "Cold start").
// One that imports it does.
func TestTracingIsLinkedOnlyWhenImported(t *testing.T) {
	t.Parallel()
	forbidden := []string{"go.opentelemetry.io/", "google.golang.org/protobuf/", "github.com/aws/smithy-go/tracing/smithyoteltracing"}
	for _, pkg := range []string{"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn", "github.com/lambdajobs/lambdajobs/pkg/jobs"} {
		for _, dep := range deps(t, pkg) {
			for _, f := range forbidden {
				if strings.HasPrefix(dep, f) {
					t.Errorf("%s imports %s", pkg, dep)
				}
			}
		}
	}
	traced := deps(t, "github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn/tracing")
	if !strings.Contains(strings.Join(traced, " "), "go.opentelemetry.io/otel/sdk/trace") {
		t.Errorf("lambdafn/tracing does not link OpenTelemetry's SDK: %v", traced)
	}
}

// deps lists the packages pkg imports, directly or not.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// With JOBS_TRACING=on, a bootstrap built without lambdafn/tracing refuses
// to start, saying how to link it: tracing asked for is never silently
// dropped. (This test binary does not import lambdafn/tracing.)
func TestTracingOnWithoutTheTracingPackageRefusesToStart(t *testing.T) {
	t.Parallel()
	getenv := env(map[string]string{"JOBS_TABLE": "t", "AWS_REGION": "us-east-1", "JOBS_TRACING": "on"})
	for name, fn := range map[string]lambdafn.Function{"worker": lambdafn.Worker, "getjob": lambdafn.GetJob} {
		_, err := lambdafn.Build(context.Background(), fn, jobs.NewRegistry(), getenv, nil)
		if err == nil || !strings.Contains(err.Error(), `import _ "github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn/tracing"`) {
			t.Errorf("%s with JOBS_TRACING=on and no tracing linked: got %v, want the import named", name, err)
		}
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
