package jobstest_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

type greeting struct {
	Name  string `json:"name"`
	Token string `json:"token" jobs:"secret"`
}

// The Runner runs what was enqueued through the real worker: a secret field
// sealed and opened, a retry that waits for its backoff, a delayed job that
// waits for its time, and a delay past the queue's 15 minutes that the
// sweeper sends.
func TestRunnerRunsWhatWasEnqueued(t *testing.T) {
	ctx := context.Background()
	reg := jobs.NewRegistry()
	var runs atomic.Int32
	greet := jobs.MustRegister(reg, "greet", func(_ context.Context, job *jobs.Job[greeting]) (jobs.JSON[string], error) {
		if job.Payload.Name == "flaky" && runs.Add(1) == 1 {
			return jobs.JSON[string]{}, jobs.Retry(errors.New("try again"))
		}
		if job.Payload.Token != "t0ken" {
			return jobs.JSON[string]{}, jobs.Fail("bad_token", nil)
		}
		return jobs.JSON[string]{V: "hello " + job.Payload.Name}, nil
	}, &jobs.KindOpts{FailureCodes: []string{"bad_token"}, Retry: jobs.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Minute}})
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	enqueue := func(name string, opts *jobs.EnqueueOpts) string {
		res, err := greet.Enqueue(ctx, r.Service, "o", greeting{Name: name, Token: "t0ken"}, opts)
		if err != nil {
			t.Fatal(err)
		}
		return res.Job.ID
	}
	now, flaky := enqueue("ada", nil), enqueue("flaky", nil)
	soon, later := enqueue("soon", &jobs.EnqueueOpts{Delay: 5 * time.Minute}), enqueue("later", &jobs.EnqueueOpts{Delay: time.Hour})
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	if v := job(t, r, "o", now); v.Status != jobs.StatusSucceeded || string(v.Result) != `"hello ada"` {
		t.Fatalf("now: %s %s", v.Status, v.Result)
	}
	if strings.Contains(string(job(t, r, "o", now).Payload), "t0ken") {
		t.Fatal("the secret field is shown")
	}
	for _, id := range []string{flaky, soon, later} {
		if v := job(t, r, "o", id); v.Status != jobs.StatusQueued {
			t.Fatalf("%s before its time: %s", id, v.Status)
		}
	}
	r.Clock.Advance(5 * time.Minute)
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{flaky, soon} {
		if v := job(t, r, "o", id); v.Status != jobs.StatusSucceeded {
			t.Fatalf("%s after 5 minutes: %s", id, v.Status)
		}
	}
	if v := job(t, r, "o", later); v.Status != jobs.StatusQueued {
		t.Fatalf("later after 5 minutes: %s", v.Status)
	}
	r.Clock.Advance(time.Hour)
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	if v := job(t, r, "o", later); v.Status != jobs.StatusSucceeded {
		t.Fatalf("later after an hour: %s (the sweeper sends it)", v.Status)
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

// The Runner's Bus holds the outcome events a team's consumers would get:
// one per outcome of a kind that announces them, with its status and
// code, and none for a kind that does not.
func TestRunnerKeepsTheOutcomeEvents(t *testing.T) {
	ctx := context.Background()
	reg := jobs.NewRegistry()
	type order struct {
		ID string `json:"id"`
	}
	ship := jobs.MustRegister(reg, "ship", func(_ context.Context, job *jobs.Job[order]) (jobs.NoResult, error) {
		if job.Payload.ID == "lost" {
			return jobs.NoResult{}, jobs.Fail("no_address", nil)
		}
		return jobs.NoResult{}, nil
	}, &jobs.KindOpts{Events: true, FailureCodes: []string{"no_address"}})
	quiet := jobs.MustRegister(reg, "quiet", func(context.Context, *jobs.Job[order]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := ship.Enqueue(ctx, r.Service, "o", order{ID: "o-1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lost, err := ship.Enqueue(ctx, r.Service, "o", order{ID: "lost"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := quiet.Enqueue(ctx, r.Service, "o", order{ID: "o-2"}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]jobs.Event{}
	for _, ev := range r.Bus.Events() {
		got[ev.JobID] = ev
	}
	if len(got) != 2 || got[ok.Job.ID].Status != jobs.StatusSucceeded || got[lost.Job.ID].Status != jobs.StatusFailed || got[lost.Job.ID].Code != "no_address" {
		t.Fatalf("events %+v, want ship's two outcomes and nothing of quiet's", got)
	}
}
