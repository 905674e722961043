package jobs_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// TestWorkerOnSQSFixture feeds the worker a batch as Lambda delivers it
// (testdata/sqs-batch.json): a job, the same job again in the same batch, a
// job whose item is not visible (yet), and a message that is not a job
// reference. The response must be exactly what Lambda needs back.
func TestWorkerOnSQSFixture(t *testing.T) {
	t.Parallel()
	h := newHarness(t, jobs.DefaultDeadlines)
	id := h.enqueue(t, "echo", `{"text":"fixture"}`)
	raw, err := os.ReadFile("testdata/sqs-batch.json")
	if err != nil {
		t.Fatal(err)
	}
	raw = []byte(strings.NewReplacer("JOB_ID_1", id, "JOB_ID_2", wire.NewID()).Replace(string(raw)))
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	resp, err := h.worker.HandleSQS(context.Background(), ev)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"8c7d21b9-5a3e-4f0c-9d6b-2f1e0a9b8c7d", "d9b0c3a1-7e6f-4b2a-8c1d-5e4f3a2b1c0d"}
	if !sameSet(failedIDs(resp), want) {
		t.Fatalf("batch item failures %v, want %v", failedIDs(resp), want)
	}
	if h.runCount(id) != 1 {
		t.Fatalf("handler ran %d times for a job delivered twice in one batch", h.runCount(id))
	}
	// The response round-trips as Lambda reads it.
	out, _ := json.Marshal(resp)
	if !strings.Contains(string(out), `"batchItemFailures":[{"itemIdentifier":"`) {
		t.Fatalf("response JSON %s", out)
	}
}
