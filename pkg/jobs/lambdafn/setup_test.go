package lambdafn

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Build times each step of a function's set-up, and Serve logs the
// breakdown once at DEBUG (the cold-start breakdown of docs/evidence/BENCHMARKS.md):
// nothing at INFO.
func TestSetupBreakdownIsLoggedAtDebug(t *testing.T) {
	t.Parallel()
	env := map[string]string{"JOBS_TABLE": "t", "JOBS_QUEUE_URL": "http://127.0.0.1:1/q", "AWS_REGION": "us-east-1",
		"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}
	ctx := context.Background()
	_, clock, err := build(ctx, Enqueue, jobs.NewRegistry(), func(k string) string { return env[k] }, nil)
	if err != nil {
		t.Fatal(err)
	}
	var info bytes.Buffer
	clock.log(ctx, slog.New(slog.NewJSONHandler(&info, nil)), time.Millisecond)
	if info.Len() != 0 {
		t.Fatalf("the breakdown was logged at INFO: %s", info.String())
	}
	var debug bytes.Buffer
	clock.log(ctx, slog.New(slog.NewJSONHandler(&debug, &slog.HandlerOptions{Level: slog.LevelDebug})), time.Millisecond)
	var line map[string]any
	if err := json.Unmarshal(debug.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, debug.String())
	}
	if line["msg"] != "function set up" {
		t.Fatalf("got message %v, want function set up", line["msg"])
	}
	for _, k := range []string{"main_ms", "config_ms", "aws_ms", "clients_ms", "handler_ms", "secrets_ms", "setup_ms", "cpu_ms"} {
		if _, ok := line[k].(float64); !ok {
			t.Errorf("no %s in %s", k, debug.String())
		}
	}
	if line["main_ms"] != 1.0 {
		t.Errorf("got main_ms %v, want 1", line["main_ms"])
	}
}
