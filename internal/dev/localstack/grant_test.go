package localstack_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"
)

// A team's own program enqueues with one call, lambdafn.NewService, from
// the environment the local stack prints (what the construct's
// GrantEnqueue sets in AWS). It signs as the granted role (its calls are
// recorded for infra's policy evaluation), seals a kind's jobs:"secret"
// field with the stack's key, and the job runs like any other.
func TestEnqueueFromAnotherProgramWithOneCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, kv := range stack.EnqueuerEnv() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	reg := jobs.NewRegistry()
	kind := jobs.MustRegister(reg, examplekinds.Fail, examplekinds.FailModes,
		&jobs.KindOpts{FailureCodes: []string{examplekinds.CodeExampleFailed, examplekinds.CodeInvalidMode}})
	svc, err := lambdafn.NewService(ctx, reg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := kind.Enqueue(ctx, svc, "arn:aws:iam::000000000000:user/local", examplekinds.FailPayload{Mode: "declared", Secret: "hunter2"}, nil)
	if err != nil || res.Replayed {
		t.Fatalf("enqueue from another program: %+v, %v", res, err)
	}
	v, _ := waitFinal(t, "local", res.Job.ID, 30*time.Second)
	// The handler ran with the field opened: it fails with its declared
	// code (a payload it could not open fails payload_unreadable).
	if v.Status != jobs.StatusFailed || v.Error == nil || *v.Error != examplekinds.CodeExampleFailed {
		t.Fatalf("job %s: %s %v, want failed %s", res.Job.ID, v.Status, v.Error, examplekinds.CodeExampleFailed)
	}
}
