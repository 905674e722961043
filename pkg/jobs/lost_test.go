package jobs_test

import (
	"context"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// lostAnswers is a store whose create and claim land but whose answers are
// lost, so the SDK retries them: the retry then sees its own write.
type lostAnswers struct{ *jobstest.MemStore }

func (s lostAnswers) Create(ctx context.Context, rec *driver.Record) error {
	if err := s.MemStore.Create(ctx, rec); err != nil {
		return err
	}
	return s.MemStore.Create(ctx, rec) // the retry: a conflict, with our own job
}

func (s lostAnswers) Claim(ctx context.Context, id string, c driver.Claim) (*driver.Record, error) {
	if _, err := s.MemStore.Claim(ctx, id, c); err != nil {
		return nil, err
	}
	return s.MemStore.Claim(ctx, id, c) // the retry: a conflict, running under our token
}

func TestOwnWritesWithLostAnswersCountAsDone(t *testing.T) {
	t.Parallel()
	mem := jobstest.NewMemStore(nil)
	store := lostAnswers{mem}
	reg := jobs.NewRegistry()
	var runs int
	jobs.MustRegister(reg, "echo", func(ctx context.Context, j *jobs.Job[echoPayload]) (echoResult, error) {
		runs++
		return echo(ctx, j)
	}, nil)
	queue := &jobstest.MemQueue{}
	svc, _ := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: queue})
	w, _ := testroles.Worker(jobs.Config{Registry: reg, Store: store})
	rec, created, err := enqueued(svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "o", Kind: "echo", Payload: []byte(`{"text":"x"}`)}))
	if err != nil || !created || len(queue.Sent()) != 1 {
		t.Fatalf("enqueue whose put answer was lost: %v created=%v sent=%v; want accepted and sent", err, created, queue.Sent())
	}
	resp, _ := w.HandleSQS(context.Background(), sqsEvent(message.Encode(rec.ID)))
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", failedIDs(resp))
	}
	if got, _ := mem.Get(context.Background(), rec.ID); got.Status != jobs.StatusSucceeded || runs != 1 {
		t.Fatalf("claim whose answer was lost: job %s after %d runs; want it run once", got.Status, runs)
	}
}
