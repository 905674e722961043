package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

type ResizePayload struct {
	URL   string `json:"url"`
	Width int    `json:"width"`
}

type ResizeResult struct {
	Location  string // public
	SignedURL string // private: never stored
}

func (r ResizeResult) PublicJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"location": r.Location})
}

func resize(ctx context.Context, job *jobs.Job[ResizePayload]) (ResizeResult, error) {
	if job.Payload.Width <= 0 {
		return ResizeResult{}, jobs.Fail("bad_width", nil)
	}
	if err := job.Publish(ctx, jobs.JSON[map[string]int]{V: map[string]int{"percent": 50}}); err != nil {
		return ResizeResult{}, err
	}
	return ResizeResult{Location: fmt.Sprintf("s3://thumbs/%d/%s", job.Payload.Width, job.ID[:8]), SignedURL: "https://secret"}, nil
}

// Register a kind, enqueue a job and run it, on the in-memory store and
// queue from jobstest (production uses dynamostore and sqsqueue).
func Example() {
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "image.resize", resize, &jobs.KindOpts{FailureCodes: []string{"bad_width"}})

	store, queue := jobstest.NewMemStore(nil), &jobstest.MemQueue{}
	svc, _ := jobs.NewService(jobs.ServiceConfig{Registry: reg, Store: store, Queue: queue})
	worker, _ := jobs.NewWorker(jobs.WorkerConfig{Registry: reg, Store: store})
	ctx := context.Background()

	// An unknown field is refused, and nothing is stored.
	_, _, err := enqueued(svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "alice", Kind: "image.resize",
		Payload: []byte(`{"url":"s3://in/a.png","width":64,"height":64}`)}))
	fmt.Println(err)

	job, _, _ := enqueued(svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "alice", Kind: "image.resize",
		Payload: []byte(`{"url":"s3://in/a.png","width":64}`)}))
	bad, _, _ := enqueued(svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "alice", Kind: "image.resize",
		Payload: []byte(`{"url":"s3://in/b.png","width":0}`)}))

	// What the worker Lambda does with an SQS batch.
	var batch events.SQSEvent
	for i, id := range queue.Sent() {
		batch.Records = append(batch.Records, events.SQSMessage{MessageId: fmt.Sprint(i), Body: message.Encode(id)})
	}
	resp, _ := worker.HandleSQS(ctx, batch)
	fmt.Println("messages to retry:", len(resp.BatchItemFailures))

	done, _ := svc.Get(ctx, "alice", job.ID)
	fmt.Println(done.Status, strings.Replace(string(done.Result), job.ID[:8], "<id>", 1))
	failed, _ := svc.Get(ctx, "alice", bad.ID)
	fmt.Println(failed.Status, code(failed))
	// Output:
	// invalid payload: unknown field "height"
	// messages to retry: 0
	// succeeded {"location":"s3://thumbs/64/<id>"}
	// failed bad_width
}
