package reports_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"

	"example.com/quickstart/reports"
)

// The handler alone, as a plain function.
func TestBuildPublishesProgress(t *testing.T) {
	var partials []string
	job := jobstest.NewJob(reports.Payload{Account: "acme", Months: 3}, &partials)
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

// The whole path in memory: enqueue with the typed handle, run what was
// enqueued (jobstest.Runner: the real worker, no queue message by hand),
// read the outcome as the API shows it.
func TestReportsRunThroughTheWorker(t *testing.T) {
	ctx := context.Background()
	reg := jobs.NewRegistry()
	kind := reports.Register(reg)
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := kind.Enqueue(ctx, r.Service, "team", reports.Payload{Account: "acme", Months: 2, Token: "tok-123"}, &jobs.EnqueueOpts{IdempotencyKey: "acme-2"})
	if err != nil {
		t.Fatal(err)
	}
	closed, err := kind.Enqueue(ctx, r.Service, "team", reports.Payload{Account: "closed-1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	got := job(t, r, "team", ok.Job.ID)
	if got.Status != jobs.StatusSucceeded || string(got.Result) != `{"account":"acme","rows":30}` {
		t.Fatalf("report job %s %s", got.Status, got.Result)
	}
	// The token was sealed before it was stored, and reads mask it.
	if strings.Contains(string(got.Payload), "tok-123") || !strings.Contains(string(got.Payload), `"token":"[secret]"`) {
		t.Fatalf("payload as read: %s, want the token masked", got.Payload)
	}
	got = job(t, r, "team", closed.Job.ID)
	if got.Status != jobs.StatusFailed || got.Error == nil || *got.Error != reports.CodeNoSuchAccount {
		t.Fatalf("closed account: %s %v, want failed %s", got.Status, got.Error, reports.CodeNoSuchAccount)
	}
	if _, err := r.Service.Get(ctx, "someone-else", ok.Job.ID); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("another owner read the job: %v", err)
	}
}

// The clean-up is declared as a schedule, owned by the team; the CDK app
// deploys it from reg.Schedules().
func TestCleanupIsScheduled(t *testing.T) {
	reg := jobs.NewRegistry()
	reports.Register(reg)
	s := reg.Schedules()
	if len(s) != 1 || s[0].Name != reports.CleanupSchedule || s[0].Kind != reports.Cleanup || s[0].Owner != reports.Owner {
		t.Fatalf("schedules %+v", s)
	}
}

// job reads a job as its owner sees it.
func job(t *testing.T, r *jobstest.Runner, owner, id string) *jobs.View {
	t.Helper()
	v, err := r.Service.Get(context.Background(), owner, id)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
