package lambdalog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/lambdajobs/lambdajobs/internal/lambdalog"
)

// A line is a JSON object with Lambda's keys, no timestamp, and the
// request id on warnings and errors only; the level comes from Lambda's.
func TestLines(t *testing.T) {
	var out bytes.Buffer
	getenv := func(k string) string {
		if k == "AWS_LAMBDA_LOG_LEVEL" {
			return "INFO"
		}
		return ""
	}
	log := lambdalog.New(&out, getenv).With(slog.String("kind", "k"))
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	log.DebugContext(ctx, "hidden")
	log.InfoContext(ctx, "job succeeded", slog.String("job_id", "j1"))
	log.WarnContext(ctx, "job failed", slog.String("job_id", "j2"))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2 (DEBUG filtered):\n%s", len(lines), out.String())
	}
	for i, want := range []map[string]any{
		{"level": "INFO", "message": "job succeeded", "kind": "k", "job_id": "j1"},
		{"level": "WARN", "message": "job failed", "kind": "k", "job_id": "j2", "requestId": "req-1"},
	} {
		var got map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Errorf("line %d: %v, want exactly %v", i, got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("line %d: %s = %v, want %v", i, k, got[k], v)
			}
		}
	}
	var warn bytes.Buffer
	lambdalog.New(&warn, func(string) string { return "WARN" }).Info("dropped")
	if warn.Len() != 0 {
		t.Fatalf("INFO written at WARN: %s", warn.String())
	}
}
