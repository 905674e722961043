package dynamostore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// conflicting is DynamoDB as it behaves while a transaction holds an item,
// which DynamoDB Local never shows: it refuses the first writes to each
// item with a TransactionConflictException, without writing anything.
type conflicting struct {
	dynamostore.API
	mu    sync.Mutex
	fails int // writes to refuse per item
	tries map[string]int
}

func (c *conflicting) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	key := in.Key["id"].(*types.AttributeValueMemberS).Value
	c.mu.Lock()
	c.tries[key]++
	n := c.tries[key]
	c.mu.Unlock()
	if n <= c.fails {
		return nil, &types.TransactionConflictException{Message: aws.String("Transaction is ongoing for the item (injected)")}
	}
	return c.API.UpdateItem(ctx, in, opts...)
}

// A write that meets a transaction holding its item (a team's own
// transaction) is retried: every job of a batch ends succeeded and is
// counted once, the batch ends.
func TestWritesSurviveTransactionConflicts(t *testing.T) {
	client := testenv.DynamoDB(t)
	api := &conflicting{API: client, fails: 2, tries: map[string]int{}}
	store := dynamostore.New(api, testenv.NewTable(t, client), dynamostore.Config{})
	ctx := context.Background()
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "ok", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) {
		return jobs.NoResult{}, nil
	}, nil)
	queue := &jobstest.MemQueue{}
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	worker, err := testroles.Worker(jobs.Config{Registry: reg, Store: store, Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	const n = 4
	specs := make([]jobs.JobSpec, n)
	for i := range specs {
		specs[i] = jobs.JobSpec{Kind: "ok", Payload: []byte(`{}`)}
	}
	b, _, err := enqueuedBatch(svc.EnqueueBatch(ctx, jobs.BatchRequest{Owner: "o", Jobs: specs}))
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	for i := range n {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: wire.BatchJobID(b.ID, i), Body: message.Encode(wire.BatchJobID(b.ID, i))})
	}
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	resp, _ := worker.HandleSQS(wctx, ev)
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v: a write refused for a transaction was not retried", resp.BatchItemFailures)
	}
	for i := range n {
		if rec, err := store.Get(ctx, wire.BatchJobID(b.ID, i)); err != nil || rec.Status != jobs.StatusSucceeded || len(rec.After) != 0 {
			t.Fatalf("job %d: %+v %v, want succeeded and counted", i, rec, err)
		}
	}
	got, err := svc.GetBatch(ctx, "o", b.ID, "", 0)
	if err != nil || got.Status != jobs.StatusSucceeded || got.Counts.Succeeded != n || got.Counts.Pending != 0 {
		t.Fatalf("batch %+v %v, want ended with %d succeeded, counted once each", got, err, n)
	}
}

// A conflict retried until the caller's budget is spent gives up in time.
func TestConflictRetriesStopAtTheCallersDeadline(t *testing.T) {
	client := testenv.DynamoDB(t)
	api := &conflicting{API: client, fails: 1 << 30, tries: map[string]int{}}
	store := dynamostore.New(api, testenv.NewTable(t, client), dynamostore.Config{})
	rec := jobstest.NewRecord(wire.NewID(), time.Now())
	if err := store.Create(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	api.mu.Lock()
	api.fails = 0
	api.mu.Unlock()
	if _, err := store.Claim(context.Background(), rec.ID, driver.Claim{Token: "t", At: time.Now(), LeaseUntil: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	api.mu.Lock()
	api.fails, api.tries = 1<<30, map[string]int{}
	api.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	deadline, _ := ctx.Deadline()
	err := store.Finish(ctx, rec.ID, "t", driver.Outcome{Status: jobs.StatusSucceeded, At: time.Now()})
	if err == nil || !time.Now().Before(deadline.Add(50*time.Millisecond)) || api.tries[rec.ID] < 2 {
		t.Fatalf("finish under endless conflicts: %v after %d tries, returned %v past the deadline", err, api.tries[rec.ID], time.Since(deadline))
	}
	if got, _ := store.Get(context.Background(), rec.ID); got.Status != jobs.StatusRunning {
		t.Fatalf("job %s, want still running (nothing written)", got.Status)
	}
}

// One shard full of due items (jobs that keep failing
// to dispatch) does not starve the others: every shard gets its share.
func TestDueServesEveryShard(t *testing.T) {
	client := testenv.DynamoDB(t)
	store := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{})
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	perShard := map[string]int{}
	for len(perShard) < dynamostore.Shards || perShard["0"] < 40 {
		id := wire.NewID()
		shard := dynamostore.ShardOf(id)
		if shard != "0" && perShard[shard] > 0 {
			continue
		}
		perShard[shard]++
		rec := jobstest.NewRecord(id, now.Add(-time.Hour))
		rec.SweepAt = now.Add(-time.Minute)
		if err := store.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := store.Due(ctx, now, 2*dynamostore.Shards)
	if err != nil {
		t.Fatal(err)
	}
	shards := map[string]bool{}
	for _, id := range ids {
		shards[dynamostore.ShardOf(id)] = true
	}
	if len(ids) != 2*dynamostore.Shards || len(shards) != dynamostore.Shards {
		t.Fatalf("Due returned %d ids from %d shards, want %d from all %d", len(ids), len(shards), 2*dynamostore.Shards, dynamostore.Shards)
	}
}
