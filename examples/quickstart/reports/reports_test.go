package reports_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"

	"example.com/quickstart/reports"
)

// The handler alone, as a plain function.
func TestBuildPublishesProgress(t *testing.T) {
	var partials []string
	job := jobs.NewTestJob("id-1", reports.Payload{Account: "acme", Months: 3}, func(_ context.Context, partial []byte) error {
		partials = append(partials, string(partial))
		return nil
	})
	r, err := reports.Build(context.Background(), job)
	if err != nil || r.Rows != 60 {
		t.Fatalf("report %+v %v, want 60 rows", r, err)
	}
	if len(partials) != 3 || partials[2] != `{"done":3,"total":3}` {
		t.Fatalf("partials %v", partials)
	}
	body, _ := r.PublicJSON()
	if string(body) != `{"account":"acme","rows":60}` {
		t.Fatalf("public JSON %s: only account and rows are public", body)
	}
}

// The whole path on jobstest's in-memory store and queue: enqueue with the
// typed handle, run through the worker, read the outcome.
func TestReportsRunThroughTheWorker(t *testing.T) {
	ctx := context.Background()
	reg := jobs.NewRegistry()
	kind := reports.Register(reg)
	store, queue := jobstest.NewMemStore(nil), &jobstest.MemQueue{}
	svc, err := jobs.NewService(jobs.ServiceConfig{Registry: reg, Store: store, Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	worker, err := jobs.NewWorker(jobs.WorkerConfig{Registry: reg, Store: store, Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	ok, err := kind.Enqueue(ctx, svc, "team", reports.Payload{Account: "acme", Months: 2}, &jobs.EnqueueOpts{IdempotencyKey: "acme-2"})
	if err != nil {
		t.Fatal(err)
	}
	closed, err := kind.Enqueue(ctx, svc, "team", reports.Payload{Account: "closed-1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	for i, id := range []string{ok.Job.ID, closed.Job.ID} {
		body, _ := json.Marshal(map[string]string{"job_id": id})
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: string(rune('a' + i)), Body: string(body)})
	}
	if resp, _ := worker.HandleSQS(ctx, ev); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	got, _ := svc.Get(ctx, "team", ok.Job.ID)
	if got.Status != jobs.StatusSucceeded || string(got.Result) != `{"account":"acme","rows":30}` {
		t.Fatalf("report job %s %s", got.Status, got.Result)
	}
	got, _ = svc.Get(ctx, "team", closed.Job.ID)
	if got.Status != jobs.StatusFailed || got.ErrorCode != reports.CodeNoSuchAccount {
		t.Fatalf("closed account: %s %q, want failed %s", got.Status, got.ErrorCode, reports.CodeNoSuchAccount)
	}
	if _, err := svc.Get(ctx, "someone-else", ok.Job.ID); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("another owner read the job: %v", err)
	}
}
