package integration_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

type summaryPayload struct {
	Note string `json:"note"`
}

// batchStack is the stack with a completion kind that records the counts
// it receives.
func batchStack(t *testing.T) (*stack, *sync.Map) {
	t.Helper()
	seen := &sync.Map{} // batch id -> []jobs.BatchCounts
	s := newStack(t, options{extraKinds: func(_ *stack, reg *jobs.Registry) {
		jobs.MustRegister(reg, "test.summary", func(_ context.Context, j *jobs.Job[summaryPayload]) (jobs.NoResult, error) {
			if j.Batch == nil {
				return jobs.NoResult{}, errors.New("no batch counts")
			}
			v, _ := seen.LoadOrStore(j.Batch.BatchID, &[]jobs.BatchCounts{})
			*(v.(*[]jobs.BatchCounts)) = append(*(v.(*[]jobs.BatchCounts)), *j.Batch)
			return jobs.NoResult{}, nil
		}, nil)
	}})
	return s, seen
}

func specs(n int, kind string, payload func(i int) string) []jobs.JobSpec {
	out := make([]jobs.JobSpec, n)
	for i := range out {
		out[i] = jobs.JobSpec{Kind: kind, Payload: []byte(payload(i))}
	}
	return out
}

func TestBatchOfAThousandSettlesWithExactCounts(t *testing.T) {
	s, seen := batchStack(t)
	ctx := context.Background()
	b, created, err := enqueuedBatch(s.svc.EnqueueBatch(ctx, jobs.BatchRequest{
		Owner: alice, IdempotencyKey: "thousand",
		Jobs:       specs(1000, "example.hash", func(i int) string { return fmt.Sprintf(`{"text":"%d","rounds":1}`, i) }),
		Completion: &jobs.JobSpec{Kind: "test.summary", Payload: []byte(`{"note":"done"}`)},
	}))
	if err != nil || !created || b.Total != 1000 || b.Counts.Pending != 1000 {
		t.Fatalf("EnqueueBatch: %+v %v", b, err)
	}
	// Every message delivered twice: duplicates must not count twice.
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = wire.BatchJobID(b.ID, i)
	}
	msgs := make([]driver.Message, len(ids))
	for i, id := range ids {
		msgs[i] = driver.Message{JobID: id}
	}
	if err := s.queue.Send(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	s.drain()
	s.settleLeftToTheSweeper(b.ID)
	got, err := s.svc.GetBatch(ctx, alice, b.ID, "", 0)
	if err != nil || got.Status != jobs.StatusSucceeded || got.Counts.Succeeded != 1000 || got.Counts.Failed != 0 || got.Counts.Pending != 0 || got.EndedAt.IsZero() {
		t.Fatalf("batch %+v %v, want succeeded with 1000 succeeded", got, err)
	}
	v, ok := seen.Load(b.ID)
	if !ok || len(*(v.(*[]jobs.BatchCounts))) != 1 || (*(v.(*[]jobs.BatchCounts)))[0].Succeeded != 1000 {
		t.Fatalf("completion job runs: %v", v)
	}
	// A retry of the same request returns the batch and stores nothing new.
	again, created, err := enqueuedBatch(s.svc.EnqueueBatch(ctx, jobs.BatchRequest{Owner: alice, IdempotencyKey: "thousand",
		Jobs:       specs(1000, "example.hash", func(i int) string { return fmt.Sprintf(`{"text":"%d","rounds":1}`, i) }),
		Completion: &jobs.JobSpec{Kind: "test.summary", Payload: []byte(`{"note":"done"}`)}}))
	if err != nil || created || again.ID != b.ID {
		t.Fatalf("idempotent retry: %v created=%v", err, created)
	}
}

// settleLeftToTheSweeper sweeps, as the deployment's sweeper would, when
// every job of the batch has ended but its end is not recorded: a step of
// the settle ran past its call deadline (600 ms here) on a loaded machine
// and left it to the sweeper, as it should
// (TestBatchWhoseEndWasNeverRecordedIsSettledBySweeper).
func (s *stack) settleLeftToTheSweeper(batchID string) {
	s.t.Helper()
	ctx := context.Background()
	got, err := s.svc.GetBatch(ctx, alice, batchID, "", 0)
	if err != nil || got.Status != jobs.StatusRunning || got.Counts.Pending != 0 {
		return
	}
	s.t.Log("the batch's end was left to the sweeper: sweeping")
	sweeper, _ := testroles.Sweeper(jobs.Config{Store: s.store, Queue: s.queue, Registry: s.reg, Sealer: s.sealer,
		Clock: jobstest.NewClock(time.Now().Add(jobs.DefaultDispatchGrace + time.Minute))})
	if _, err := sweeper.Sweep(ctx); err != nil {
		s.t.Fatal(err)
	}
	s.drain()
}

func TestBatchWithFailuresEndsFailed(t *testing.T) {
	s, seen := batchStack(t)
	ctx := context.Background()
	jobsSpec := specs(10, "example.hash", func(i int) string { return `{"text":"x","rounds":1}` })
	jobsSpec[3] = jobs.JobSpec{Kind: "example.fail", Payload: []byte(`{"mode":"declared","secret":"s"}`)}
	jobsSpec[7] = jobs.JobSpec{Kind: "example.fail", Payload: []byte(`{"mode":"declared","secret":"s"}`)}
	b, _, err := enqueuedBatch(s.svc.EnqueueBatch(ctx, jobs.BatchRequest{Owner: alice, Jobs: jobsSpec, Completion: &jobs.JobSpec{Kind: "test.summary", Payload: []byte(`{}`)}}))
	if err != nil {
		t.Fatal(err)
	}
	s.drain()
	s.settleLeftToTheSweeper(b.ID)
	got, _ := s.svc.GetBatch(ctx, alice, b.ID, "", 0)
	if got.Status != jobs.StatusFailed || got.Counts.Succeeded != 8 || got.Counts.Failed != 2 || got.Counts.Pending != 0 {
		t.Fatalf("batch %+v", got)
	}
	if v, ok := seen.Load(b.ID); !ok || (*(v.(*[]jobs.BatchCounts)))[0].Failed != 2 {
		t.Fatalf("completion counts %v", v)
	}
	if _, err := s.svc.GetBatch(ctx, "arn:aws:iam::000000000000:user/mallory", b.ID, "", 0); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("another owner's batch: %v", err)
	}
}

// endlessStore refuses every batch end, as a worker whose last write
// timed out. It is the whole store otherwise (its queued-job counter
// included, which a Client whose kinds have caps needs).
type endlessStore struct{ *dynamostore.Store }

func (endlessStore) EndBatch(context.Context, string, jobs.Status, time.Time, time.Time) error {
	return errors.New("timeout")
}

func TestBatchWhoseEndWasNeverRecordedIsSettledBySweeper(t *testing.T) {
	s, seen := batchStack(t)
	ctx := context.Background()
	blocked, err := testroles.Worker(jobs.Config{Registry: s.reg, Store: endlessStore{s.store}, Sealer: s.sealer, Queue: s.queue, Deadlines: testDeadlines})
	if err != nil {
		t.Fatal(err)
	}
	s.source.Invoke = blocked.HandleSQS
	b, _, err := enqueuedBatch(s.svc.EnqueueBatch(ctx, jobs.BatchRequest{Owner: alice, Jobs: specs(5, "test.count", func(int) string { return `{"n":1}` }),
		Completion: &jobs.JobSpec{Kind: "test.summary", Payload: []byte(`{}`)}}))
	if err != nil {
		t.Fatal(err)
	}
	s.drain()
	if got, _ := s.svc.GetBatch(ctx, alice, b.ID, "", 0); got.Status != jobs.StatusRunning || got.Counts.Pending != 0 {
		t.Fatalf("before the sweep: %+v, want every job ended and the end unrecorded", got)
	}
	s.source.Invoke = s.worker.HandleSQS
	sweeper, _ := testroles.Sweeper(jobs.Config{Store: s.store, Queue: s.queue, Registry: s.reg, Sealer: s.sealer,
		Clock: jobstest.NewClock(time.Now().Add(jobs.DefaultDispatchGrace + time.Minute))})
	for range 2 { // overlapping or repeated sweeps settle it once
		if _, err := sweeper.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s.drain()
	got, _ := s.svc.GetBatch(ctx, alice, b.ID, "", 0)
	if got.Status != jobs.StatusSucceeded || got.Counts.Succeeded != 5 {
		t.Fatalf("after the sweep: %+v", got)
	}
	v, ok := seen.Load(b.ID)
	if !ok || len(*(v.(*[]jobs.BatchCounts))) != 1 {
		t.Fatalf("completion job ran %v times, want once", v)
	}
}

func TestBatchWithOneInvalidJobStoresNothing(t *testing.T) {
	s, _ := batchStack(t)
	ctx := context.Background()
	sp := specs(50, "example.hash", func(int) string { return `{"text":"x","rounds":1}` })
	sp[17] = jobs.JobSpec{Kind: "example.hash", Payload: []byte(`{"text":"x","rounds":1,"extra":true}`)}
	_, _, err := enqueuedBatch(s.svc.EnqueueBatch(ctx, jobs.BatchRequest{Owner: alice, Jobs: sp, IdempotencyKey: "bad"}))
	var be *jobs.BatchJobError
	if !errors.As(err, &be) || be.Index != 17 || !errors.Is(err, jobs.ErrInvalidPayload) {
		t.Fatalf("got %v, want job 17 refused", err)
	}
	batchID := wire.DerivedID("batch-idempotency", alice, "bad")
	for _, id := range []string{wire.BatchJobID(batchID, 0), wire.BatchJobID(batchID, 49)} {
		if _, err := s.store.Get(ctx, id); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("job %s stored: %v", id, err)
		}
	}
	if n := s.queueDepth(); n != 0 {
		t.Fatalf("%d messages sent", n)
	}
}
