package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

type miPayload struct {
	N int `json:"n"`
}

type miResult struct {
	N int `json:"n"`
}

func (r miResult) PublicJSON() ([]byte, error) { return json.Marshal(r) }

// Lambda Managed Instances run several invocations of one function in one
// process at once, which the Runtime Interface Emulator cannot (one
// invocation per process). Here the worker's own Lambda handler, as
// lambdafn.Build makes it for the runtime, serves 8 invocations at once
// in this process (under -race with make test) from a real queue and
// table: every job succeeds exactly once, partial results and a
// concurrency limit shared by the invocations hold, and the limit's peak
// is its value.
func TestWorkerHandlerServesConcurrentInvocationsInOneProcess(t *testing.T) {
	ctx := context.Background()
	ddb, sq := testenv.DynamoDB(t), testenv.SQS(t)
	table := testenv.NewTable(t, ddb)
	spec := sqsqueue.DefaultSpec(10 * time.Second)
	spec.VisibilityTimeout = 5 * time.Second
	urls := testenv.NewQueues(t, sq, spec)

	reg := jobs.NewRegistry()
	var runs sync.Map // job id -> *atomic.Int32
	count := func(id string) {
		v, _ := runs.LoadOrStore(id, new(atomic.Int32))
		v.(*atomic.Int32).Add(1)
	}
	var now, peak atomic.Int32
	plain := jobs.MustRegister(reg, "mi.plain", func(ctx context.Context, j *jobs.Job[miPayload]) (miResult, error) {
		count(j.ID)
		if err := j.Publish(ctx, miResult{N: j.Payload.N}); err != nil {
			return miResult{}, err
		}
		return miResult{N: j.Payload.N * 2}, nil
	}, nil)
	limited := jobs.MustRegister(reg, "mi.limited", func(ctx context.Context, j *jobs.Job[miPayload]) (jobs.NoResult, error) {
		count(j.ID)
		n := now.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		now.Add(-1)
		return jobs.NoResult{}, nil
	}, &jobs.KindOpts{Concurrency: 2})

	getenv := envOf(map[string]string{"JOBS_TABLE": table, "JOBS_QUEUE_URL": urls.Queue, "JOBS_FUNCTION": "worker",
		"AWS_ENDPOINT_URL_DYNAMODB": testenv.DynamoDBEndpoint(t), "AWS_ENDPOINT_URL_SQS": testenv.SQSEndpoint(t),
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "JOBS_WORKER_CONCURRENCY": "10"})
	h, err := lambdafn.Build(ctx, lambdafn.Worker, reg, getenv, nil)
	if err != nil {
		t.Fatal(err)
	}
	handler := lambda.NewHandler(h)
	invoke := func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		payload, err := json.Marshal(ev)
		if err != nil {
			return events.SQSEventResponse{}, err
		}
		out, err := handler.Invoke(ctx, payload)
		if err != nil {
			return events.SQSEventResponse{}, err
		}
		var resp events.SQSEventResponse
		err = json.Unmarshal(out, &resp)
		return resp, err
	}

	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: dynamostore.New(ddb, table, dynamostore.Config{}), Queue: sqsqueue.New(sq, urls.Queue)})
	if err != nil {
		t.Fatal(err)
	}
	var plainIDs, limitedIDs []string
	for i := range 60 {
		res, err := plain.Enqueue(ctx, svc, "o", miPayload{N: i}, nil)
		if err != nil {
			t.Fatal(err)
		}
		plainIDs = append(plainIDs, res.Job.ID)
	}
	for i := range 20 {
		res, err := limited.Enqueue(ctx, svc, "o", miPayload{N: i}, nil)
		if err != nil {
			t.Fatal(err)
		}
		limitedIDs = append(limitedIDs, res.Job.ID)
	}

	src := &localstack.EventSource{SQS: sq, QueueURL: urls.Queue, QueueARN: urls.QueueARN, Invoke: invoke,
		BatchSize: 5, Concurrency: 8, Timeout: 30 * time.Second}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { src.Run(rctx); close(done) }()
	defer func() { stop(); <-done }()

	deadline := time.Now().Add(90 * time.Second)
	for _, id := range append(append([]string{}, plainIDs...), limitedIDs...) {
		for {
			v, err := svc.Get(ctx, "o", id)
			if err != nil {
				t.Fatal(err)
			}
			if v.Status.Final() {
				if v.Status != jobs.StatusSucceeded || v.Attempt != 1 {
					t.Fatalf("job %s: %s on attempt %d, want succeeded on attempt 1", id, v.Status, v.Attempt)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s still %s after 90 s", id, v.Status)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, id := range append(append([]string{}, plainIDs...), limitedIDs...) {
		v, _ := runs.Load(id)
		if v == nil || v.(*atomic.Int32).Load() != 1 {
			t.Fatalf("job %s ran %v times, want once", id, v)
		}
	}
	for i, id := range plainIDs {
		v, err := svc.Get(ctx, "o", id)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(v.Result), fmt.Sprintf(`{"n":%d}`, 2*i); got != want {
			t.Fatalf("job %s result %s, want %s", id, got, want)
		}
	}
	if p := peak.Load(); p != 2 {
		t.Fatalf("a limit of 2 shared by 8 invocations in one process peaked at %d", p)
	}
}

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
