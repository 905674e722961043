package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// TestAResultApartIsShownByEveryView: a final result kept in an item of
// its own is what every view of the finished job shows, as GET does: the
// listing and the answer to an idempotent retry of the enqueue (docs/openapi
// "result: ... the final one after") must not show null.
func TestAResultApartIsShownByEveryView(t *testing.T) {
	t.Parallel()
	s := newApartSetup(t)
	text := strings.Repeat("r", 40)
	id := s.enqueue(t, text, jobs.EnqueueOpts{IdempotencyKey: "k1"})
	if rec := s.run(t, id); rec.Status != jobs.StatusSucceeded || rec.ResultRef == "" {
		t.Fatalf("job %s, result ref %q: want succeeded with its result apart", rec.Status, rec.ResultRef)
	}
	ctx := context.Background()
	got, err := s.svc.Get(ctx, "alice", id)
	if err != nil || !strings.Contains(string(got.Result), text) {
		t.Fatalf("GET: result %s, %v", got.Result, err)
	}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "echo", echo, nil)
	lister, err := testroles.Service(jobs.Config{Registry: reg, Store: s.store, Clock: s.clock, PageTokenKey: []byte(strings.Repeat("k", 32))})
	if err != nil {
		t.Fatal(err)
	}
	list, err := lister.List(ctx, "alice", jobs.ListRequest{})
	if err != nil || len(list.Jobs) != 1 {
		t.Fatalf("list: %v, %v", list, err)
	}
	if r := string(list.Jobs[0].Result); !strings.Contains(r, text) {
		t.Errorf("the listing shows result %s; GET shows %s", r, got.Result)
	}
	payload, _ := json.Marshal(map[string]string{"text": text})
	again, err := s.svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "alice", Kind: "echo", Payload: payload, EnqueueOpts: jobs.EnqueueOpts{IdempotencyKey: "k1"}})
	if err != nil || !again.Replayed {
		t.Fatalf("enqueue again: %+v, %v", again, err)
	}
	if r := string(again.Job.Result); !strings.Contains(r, text) {
		t.Errorf("an idempotent retry of the enqueue shows result %s; GET shows %s", r, got.Result)
	}
}

// TestACheckpointItemOutlivesRetries: a run that checkpoints a large
// state and fails resumes from it on its retry, however the retry comes:
// due two months on (the requeue extends the checkpoint's item), or a day
// on, twice, each claim 12 days late (a backlog: each claim extends it).
func TestACheckpointItemOutlivesRetries(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		backoff, late time.Duration
		attempts      int
	}{
		"retry far ahead":     {backoff: 60 * 24 * time.Hour, attempts: 2},
		"claims in a backlog": {backoff: 12 * time.Hour, late: 12 * 24 * time.Hour, attempts: 3},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clock := jobstest.NewClock(jobstest.Epoch)
			store := jobstest.NewMemStore(clock)
			store.KeepPayloadsApart(16)
			resumed := map[int]string{}
			reg := jobs.NewRegistry()
			jobs.MustRegister(reg, "cp", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.NoResult, error) {
				var st struct{ Notes string }
				ok, err := job.Resume(&st)
				if err != nil {
					return jobs.NoResult{}, err
				}
				if ok {
					resumed[job.Attempt] = st.Notes
				}
				if job.Attempt == 1 {
					if err := job.Checkpoint(ctx, struct{ Notes string }{strings.Repeat("n", 2000)}); err != nil {
						return jobs.NoResult{}, err
					}
				}
				if job.Attempt < tc.attempts {
					return jobs.NoResult{}, jobs.Retry(errors.New("not yet"))
				}
				return jobs.NoResult{}, nil
			}, &jobs.KindOpts{Retry: jobs.RetryPolicy{MaxAttempts: tc.attempts, BaseDelay: tc.backoff, MaxDelay: tc.backoff}})
			sealer, err := jobs.NewAESSealer(make([]byte, 32))
			if err != nil {
				t.Fatal(err)
			}
			cfg := jobs.Config{Registry: reg, Store: store, Clock: clock, Concurrency: 1, Sealer: sealer}
			svc, err := testroles.Service(cfg)
			if err != nil {
				t.Fatal(err)
			}
			worker, err := testroles.Worker(cfg)
			if err != nil {
				t.Fatal(err)
			}
			res, err := svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "alice", Kind: "cp", Payload: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			id := res.Job.ID
			var rec *driver.Record
			for range tc.attempts {
				worker.HandleSQS(context.Background(), sqsEvent(message.Encode(id)))
				if rec, err = store.Get(context.Background(), id); err != nil {
					t.Fatal(err)
				}
				if rec.Status != jobs.StatusQueued {
					break
				}
				clock.Set(rec.RunAt.Add(tc.late))
			}
			if rec.Status != jobs.StatusSucceeded || resumed[tc.attempts] != strings.Repeat("n", 2000) {
				t.Fatalf("job %s %q after %d attempts; the last resumed %d bytes of notes", rec.Status, rec.ErrorCode, rec.Attempt, len(resumed[tc.attempts]))
			}
		})
	}
}
