package localstack_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/internal/iamcalls"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// A team's own function given the construct's GrantEnqueue enqueues with
// the library under its own role (its calls are recorded for infra's
// policy evaluation), and the job runs like any other.
func TestEnqueueFromAFunctionGivenGrantEnqueue(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, examplekinds.Hash, jobs.HandlerFunc[examplekinds.HashPayload, examplekinds.HashResult](examplekinds.HashText))
	store := dynamostore.New(stack.DynamoDBAs(iamcalls.Enqueuer), stack.Table, dynamostore.Options{})
	svc, err := jobs.NewService(jobs.ServiceConfig{Registry: reg, Store: store, Queue: sqsqueue.New(stack.SQSAs(iamcalls.Enqueuer), stack.Queues.Queue)})
	if err != nil {
		t.Fatal(err)
	}
	owner := "arn:aws:iam::000000000000:user/local"
	rec, created, err := svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: owner, Kind: examplekinds.Hash, Payload: json.RawMessage(`{"text":"granted","rounds":1}`)})
	if err != nil || !created {
		t.Fatalf("enqueue from another function: created %v, %v", created, err)
	}
	if v, _ := waitFinal(t, "local", rec.ID, 30*time.Second); v.Status != jobs.StatusSucceeded {
		t.Fatalf("job %s: %s, want succeeded", rec.ID, v.Status)
	}
}
