package jobs_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// NewClient refuses a Config it cannot build every role from, saying what
// is missing, and builds nothing.
func TestNewClientRefusesAnIncompleteConfig(t *testing.T) {
	t.Parallel()
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "echo", echo, nil)
	store := jobstest.NewMemStore(nil)
	for name, tt := range map[string]struct {
		cfg  jobs.Config
		want string
	}{
		"no registry":   {jobs.Config{Store: store}, "Config.Registry and Config.Store"},
		"no store":      {jobs.Config{Registry: reg}, "Config.Registry and Config.Store"},
		"bad lane":      {jobs.Config{Registry: reg, Store: store, Lane: "Default"}, `lane "Default"`},
		"negative rate": {jobs.Config{Registry: reg, Store: store, EnqueueRatePerOwner: -1}, "EnqueueRatePerOwner"},
		"short key":     {jobs.Config{Registry: reg, Store: store, PageTokenKey: []byte("short")}, "PageTokenKey"},
	} {
		c, err := jobs.NewClient(tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) || c != nil {
			t.Errorf("%s: NewClient = %v, %v; want no client and an error saying %q", name, c, err, tt.want)
		}
	}
}

// One Config, one engine: a job the Client's Service enqueues runs in its
// Worker and reads back through its Service as succeeded.
func TestAClientsRolesShareItsConfig(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := jobstest.NewClock(jobstest.Epoch)
	store, queue := jobstest.NewMemStore(clock), &jobstest.MemQueue{}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "echo", echo, nil)
	c, err := jobs.NewClient(jobs.Config{Registry: reg, Store: store, Queue: queue, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Service().Enqueue(ctx, jobs.EnqueueRequest{Owner: "alice", Kind: "echo", Payload: json.RawMessage(`{"text":"hi"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := c.Worker().HandleSQS(ctx, sqsEvent(message.Encode(res.Job.ID))); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("the Client's worker: %+v, %v", resp, err)
	}
	got, err := c.Service().Get(ctx, "alice", res.Job.ID)
	if err != nil || got.Status != jobs.StatusSucceeded {
		t.Fatalf("job after the Client's worker ran it: %+v, %v", got, err)
	}
}

// A Client without a Queue sends nothing: its Service stores the job for a
// sweeper that has one to send, and its own Sweeper refuses to sweep.
func TestAClientWithoutAQueueLeavesSendingToTheSweeper(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := jobstest.NewClock(jobstest.Epoch)
	store, queue := jobstest.NewMemStore(clock), &jobstest.MemQueue{}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "echo", echo, nil)
	quiet, err := jobs.NewClient(jobs.Config{Registry: reg, Store: store, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	res, err := quiet.Service().Enqueue(ctx, jobs.EnqueueRequest{Owner: "alice", Kind: "echo", Payload: json.RawMessage(`{"text":"hi"}`)})
	if err != nil || res.Job.Status != jobs.StatusQueued {
		t.Fatalf("enqueue without a queue: %+v, %v; want the job stored as queued", res, err)
	}
	if _, err := quiet.Sweeper().Sweep(ctx); err == nil || !strings.Contains(err.Error(), "Config.Queue") {
		t.Fatalf("sweep without a queue: %v; want a refusal naming Config.Queue", err)
	}
	sending, err := jobs.NewClient(jobs.Config{Registry: reg, Store: store, Queue: queue, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(jobs.DefaultDispatchGrace)
	if rep, err := sending.Sweeper().Sweep(ctx); err != nil || rep.Resent != 1 || len(queue.Sent()) != 1 || queue.Sent()[0] != res.Job.ID {
		t.Fatalf("sweep with a queue: %+v, %v, sent %v; want the quiet client's job sent", rep, err, queue.Sent())
	}
}

// A Client without a Scheduler reads the callers' schedules but refuses to
// place one, and stores nothing.
func TestAClientWithoutASchedulerRefusesToPlaceSchedules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "echo", echo, nil)
	c, err := jobs.NewClient(jobs.Config{Registry: reg, Store: jobstest.NewMemStore(nil)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Schedules().Create(ctx, jobs.ScheduleRequest{Owner: "alice", Name: "n", Expression: "rate(1 hour)", Kind: "echo", Payload: json.RawMessage(`{"text":"hi"}`)})
	if err == nil || !strings.Contains(err.Error(), "Config.Scheduler") {
		t.Fatalf("create without a scheduler: %v; want a refusal naming Config.Scheduler", err)
	}
	if got, err := c.Schedules().List(ctx, "alice"); err != nil || len(got) != 0 {
		t.Fatalf("list: %v, %v; want none stored", got, err)
	}
	if err := c.Schedules().Delete(ctx, "alice", "n"); err == nil {
		t.Fatal("delete without a scheduler succeeded")
	}
}
