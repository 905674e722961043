package lambdafn_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"
)

// NewService (for a team's function given GrantEnqueue) builds its Service
// as the enqueue function does from the same environment: with
// JOBS_EVENTS=all every job it creates announces its outcomes, whatever
// its kind says, and its jobs' sweep times follow JOBS_DISPATCH_GRACE and
// the lanes' graces. (Nothing here calls AWS: Prepare only builds the
// record Enqueue would store.)
func TestNewServiceConfiguresAsTheEnqueueFunction(t *testing.T) {
	for _, mode := range []string{"", "kinds", "all"} {
		t.Run("JOBS_EVENTS="+mode, func(t *testing.T) {
			t.Setenv("JOBS_TABLE", "jobs")
			t.Setenv("JOBS_QUEUE_URL", "http://127.0.0.1:1/000000000000/q")
			t.Setenv("JOBS_LANE_QUEUE_URLS", `{"urgent":"http://127.0.0.1:1/000000000000/q-urgent"}`)
			t.Setenv("JOBS_DISPATCH_GRACE", "4m")
			t.Setenv("JOBS_LANE_DISPATCH_GRACES", `{"urgent":"7m"}`)
			t.Setenv("JOBS_EVENTS", mode)
			reg := jobs.NewRegistry()
			plain := jobs.MustRegister(reg, "plain", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
			urgent := jobs.MustRegister(reg, "urgent", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil },
				&jobs.KindOpts{Lane: "urgent"})
			awsCfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
			svc, err := lambdafn.NewServiceWithConfig(context.Background(), reg, awsCfg)
			if err != nil {
				t.Fatal(err)
			}
			for k, grace := range map[jobs.Kind[struct{}]]time.Duration{plain: 4 * time.Minute, urgent: 7 * time.Minute} {
				rec, err := k.Prepare(svc, "o", struct{}{}, nil)
				if err != nil {
					t.Fatal(err)
				}
				if want := mode == "all"; rec.Events != want {
					t.Errorf("kind %s: announces its outcomes %v, want %v", k.Name(), rec.Events, want)
				}
				if got := rec.SweepAt.Sub(rec.CreatedAt); got != grace {
					t.Errorf("kind %s: swept %v after its creation, want its lane's grace %v", k.Name(), got, grace)
				}
			}
		})
	}
}
