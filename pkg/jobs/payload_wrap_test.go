package jobs_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// wrapped is a user's store middleware (metrics, tracing) that embeds
// driver.Store: the store underneath still splits payloads, and ReadPart,
// part of driver.Store, is forwarded with the rest.
type wrapped struct{ driver.Store }

// TestAWrappedStoreRunsAJobWithItsPayload: a Config.Store that wraps a
// payload-splitting store must not run a split job on an empty payload.
func TestAWrappedStoreRunsAJobWithItsPayload(t *testing.T) {
	clock := jobstest.NewClock(jobstest.Epoch)
	mem := jobstest.NewMemStore(clock)
	mem.KeepPayloadsApart(16)
	seen := ""
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "echo", func(ctx context.Context, job *jobs.Job[echoPayload]) (echoResult, error) {
		seen = job.Payload.Text
		return echo(ctx, job)
	}, nil)
	cfg := jobs.Config{Registry: reg, Store: wrapped{mem}, Clock: clock, Concurrency: 1}
	svc, err := testroles.Service(cfg)
	if err != nil {
		t.Fatal(err)
	}
	worker, err := testroles.Worker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Repeat("big ", 40)
	payload, _ := json.Marshal(echoPayload{Text: text})
	res, err := svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "alice", Kind: "echo", Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	worker.HandleSQS(context.Background(), sqsEvent(message.Encode(res.Job.ID)))
	rec, _ := mem.Get(context.Background(), res.Job.ID)
	if rec.Status != jobs.StatusSucceeded || seen != text {
		t.Fatalf("job %s %q, handler saw %q; want succeeded with its payload", rec.Status, rec.ErrorCode, seen)
	}
}

// TestAnInterruptedRunRetriedFarAheadKeepsItsPayload: a run interrupted by the
// sweeper (its worker died) and retried after a long backoff must find
// its payload at the retry's claim (DESIGN: no auxiliary item of a live
// job expires before the job's own final write).
func TestAnInterruptedRunRetriedFarAheadKeepsItsPayload(t *testing.T) {
	clock := jobstest.NewClock(jobstest.Epoch)
	mem := jobstest.NewMemStore(clock)
	mem.KeepPayloadsApart(16)
	reg := jobs.NewRegistry()
	const backoff = 60 * 24 * time.Hour
	jobs.MustRegister(reg, "echo", echo, &jobs.KindOpts{Retry: jobs.RetryPolicy{MaxAttempts: 3, BaseDelay: backoff, MaxDelay: backoff}})
	cfg := jobs.Config{Registry: reg, Store: mem, Queue: &jobstest.MemQueue{}, Clock: clock, Concurrency: 1}
	svc, _ := testroles.Service(cfg)
	worker, _ := testroles.Worker(cfg)
	sweeper, _ := testroles.Sweeper(cfg)
	ctx := context.Background()
	payload, _ := json.Marshal(echoPayload{Text: strings.Repeat("r", 40)})
	res, err := svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "alice", Kind: "echo", Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Job.ID
	// A worker claims it (its claim finds the payload with its whole
	// horizon left: nothing to extend) and dies.
	if _, err := mem.Claim(ctx, id, driver.Claim{Token: "dead", At: clock.Now(), LeaseUntil: clock.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	if rep, err := sweeper.Sweep(ctx); err != nil || rep.Retried != 1 {
		t.Fatalf("sweep: %+v %v, want the interrupted run retried", rep, err)
	}
	retry, err := mem.Get(ctx, id)
	if err != nil || retry.RunAt.Sub(clock.Now()) < backoff/2 {
		t.Fatalf("the retry is due %v (%v), want the backoff's", retry.RunAt, err)
	}
	clock.Set(retry.RunAt.Add(time.Minute))
	worker.HandleSQS(ctx, sqsEvent(message.Encode(id)))
	rec, _ := mem.Get(ctx, id)
	if rec.Status != jobs.StatusSucceeded {
		t.Fatalf("the retry %s %q; want succeeded (its payload item outlasted the backoff)", rec.Status, rec.ErrorCode)
	}
}
