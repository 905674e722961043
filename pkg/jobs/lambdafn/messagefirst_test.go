package lambdafn

import (
	"log/slog"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// JOBS_MESSAGE_FIRST reaches the jobs.Config every function builds (in one
// place, jobsConfig): on turns it on, off or unset leaves it off (a
// function of a stack deployed before keeps its behaviour), and anything
// else refuses to start rather than guess.
func TestMessageFirstReachesEveryFunctionsConfig(t *testing.T) {
	awsCfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")}
	for value, want := range map[string]bool{"": false, "off": false, "on": true} {
		cfg, err := ConfigFromEnv(func(name string) string {
			return map[string]string{"JOBS_TABLE": "jobs", "JOBS_QUEUE_URL": "http://127.0.0.1:1/000000000000/q", "JOBS_MESSAGE_FIRST": value}[name]
		})
		if err != nil {
			t.Fatalf("JOBS_MESSAGE_FIRST=%q: %v", value, err)
		}
		d, err := newDeps(cfg, awsCfg, nil, slog.New(slog.DiscardHandler), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.jobsConfig(jobs.NewRegistry(), nil).MessageFirst; got != want {
			t.Errorf("JOBS_MESSAGE_FIRST=%q: jobs.Config.MessageFirst %v, want %v", value, got, want)
		}
	}
	if _, err := ConfigFromEnv(func(name string) string {
		return map[string]string{"JOBS_TABLE": "jobs", "JOBS_MESSAGE_FIRST": "true"}[name]
	}); err == nil {
		t.Error("JOBS_MESSAGE_FIRST=true was accepted: want on or off")
	}
}
