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
	"github.com/aws/smithy-go/middleware"

	"github.com/lambdajobs/lambdajobs/internal/testenv"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// conflicting is DynamoDB as it behaves under contention, which DynamoDB
// Local never shows: it cancels the first tries of each transaction with
// reason TransactionConflict (or ThrottlingError), without writing
// anything, and records the client request token of every try.
type conflicting struct {
	dynamostore.API
	mu     sync.Mutex
	fails  int    // tries to cancel per transaction (by its first item's key)
	reason string // the cancellation reason
	tries  map[string]int
	tokens map[string][]string
}

func (c *conflicting) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	// The SDK fills the token during the call; read it as the server would.
	var token string
	opts = append(opts, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, tokenRecorder(&token))
	})
	key := in.TransactItems[0].Update.Key["id"].(*types.AttributeValueMemberS).Value
	c.mu.Lock()
	c.tries[key]++
	n := c.tries[key]
	c.mu.Unlock()
	if n <= c.fails {
		// Let the SDK build the request (filling the token) but send nothing.
		_, err := c.API.TransactWriteItems(ctx, in, append(opts, func(o *dynamodb.Options) {
			o.APIOptions = append(o.APIOptions, shortCircuit(c.reason, len(in.TransactItems)))
		})...)
		c.record(key, token)
		return nil, err
	}
	out, err := c.API.TransactWriteItems(ctx, in, opts...)
	c.record(key, token)
	return out, err
}

func (c *conflicting) record(key, token string) {
	c.mu.Lock()
	c.tokens[key] = append(c.tokens[key], token)
	c.mu.Unlock()
}

func TestBatchFinalWritesSurviveTransactionConflicts(t *testing.T) {
	for _, reason := range []string{"TransactionConflict", "ThrottlingError"} {
		t.Run(reason, func(t *testing.T) {
			client := testenv.DynamoDB(t)
			api := &conflicting{API: client, fails: 3, reason: reason, tries: map[string]int{}, tokens: map[string][]string{}}
			store := dynamostore.New(api, testenv.NewTable(t, client), dynamostore.Options{})
			ctx := context.Background()
			reg := jobs.NewRegistry()
			jobs.MustRegister(reg, "ok", jobs.HandlerFunc[struct{}, jobs.NoResult](func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) {
				return jobs.NoResult{}, nil
			}))
			queue := &jobstest.MemQueue{}
			svc, err := jobs.NewService(jobs.ServiceConfig{Registry: reg, Store: store, Queue: queue})
			if err != nil {
				t.Fatal(err)
			}
			worker, err := jobs.NewWorker(jobs.WorkerConfig{Registry: reg, Store: store, Queue: queue})
			if err != nil {
				t.Fatal(err)
			}
			const n = 4
			specs := make([]jobs.JobSpec, n)
			for i := range specs {
				specs[i] = jobs.JobSpec{Kind: "ok", Payload: []byte(`{}`)}
			}
			b, _, err := svc.EnqueueBatch(ctx, jobs.BatchRequest{Owner: "o", Jobs: specs})
			if err != nil {
				t.Fatal(err)
			}
			var ev events.SQSEvent
			for i := range n {
				ev.Records = append(ev.Records, events.SQSMessage{MessageId: jobs.BatchJobID(b.ID, i), Body: message.Encode(jobs.BatchJobID(b.ID, i))})
			}
			wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			resp, _ := worker.HandleSQS(wctx, ev)
			if len(resp.BatchItemFailures) != 0 {
				t.Fatalf("failures %v: a final write cancelled for %s was not retried", resp.BatchItemFailures, reason)
			}
			for i := range n {
				id := jobs.BatchJobID(b.ID, i)
				rec, err := store.Get(ctx, id)
				if err != nil || rec.Status != jobs.StatusSucceeded {
					t.Fatalf("job %d: %v %v, want succeeded", i, rec, err)
				}
				tokens := api.tokens[id]
				if len(tokens) != api.fails+1 {
					t.Fatalf("job %d: %d tries, want %d", i, len(tokens), api.fails+1)
				}
				seen := map[string]bool{}
				for _, tok := range tokens {
					if tok == "" || seen[tok] {
						t.Fatalf("job %d: client request tokens %q: each try must be a new request", i, tokens)
					}
					seen[tok] = true
				}
			}
			got, err := store.GetBatch(ctx, b.ID)
			if err != nil || got.Status != jobs.StatusSucceeded || got.Succeeded != n || got.Remaining != 0 {
				t.Fatalf("batch %+v %v, want ended with %d succeeded, counted once each", got, err, n)
			}
		})
	}
}

// A cancellation for a failed condition is final: it is not retried.
func TestFailedConditionInATransactionIsNotRetried(t *testing.T) {
	client := testenv.DynamoDB(t)
	api := &conflicting{API: client, fails: 5, reason: "ConditionalCheckFailed", tries: map[string]int{}, tokens: map[string][]string{}}
	store := dynamostore.New(api, testenv.NewTable(t, client), dynamostore.Options{})
	ctx := context.Background()
	rec := jobstest.NewRecord(jobs.NewID(), time.Now())
	rec.BatchID = jobs.NewID()
	if err := store.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(ctx, rec.ID, jobs.Claim{Token: "t", At: time.Now(), LeaseUntil: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	err := store.Finish(ctx, rec.ID, "t", jobs.Outcome{Status: jobs.StatusSucceeded, At: time.Now(), BatchID: rec.BatchID})
	if err == nil || api.tries[rec.ID] != 1 {
		t.Fatalf("finish: %v after %d tries, want a failure after 1", err, api.tries[rec.ID])
	}
}

// A conflict retried until the caller's budget is spent gives up in time.
func TestConflictRetriesStopAtTheCallersDeadline(t *testing.T) {
	client := testenv.DynamoDB(t)
	api := &conflicting{API: client, fails: 1 << 30, reason: "TransactionConflict", tries: map[string]int{}, tokens: map[string][]string{}}
	store := dynamostore.New(api, testenv.NewTable(t, client), dynamostore.Options{})
	rec := jobstest.NewRecord(jobs.NewID(), time.Now())
	if err := store.Create(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(context.Background(), rec.ID, jobs.Claim{Token: "t", At: time.Now(), LeaseUntil: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	deadline, _ := ctx.Deadline()
	err := store.Finish(ctx, rec.ID, "t", jobs.Outcome{Status: jobs.StatusSucceeded, At: time.Now(), BatchID: jobs.NewID()})
	if err == nil || !time.Now().Before(deadline.Add(50*time.Millisecond)) || api.tries[rec.ID] < 2 {
		t.Fatalf("finish under endless conflicts: %v after %d tries, returned %v past the deadline", err, api.tries[rec.ID], time.Since(deadline))
	}
	if got, _ := store.Get(context.Background(), rec.ID); got.Status != jobs.StatusRunning {
		t.Fatalf("job %s, want still running (nothing written)", got.Status)
	}
}

// tokenRecorder records the client request token the SDK put in a
// TransactWriteItems request.
func tokenRecorder(dst *string) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("recordToken",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if p, ok := in.Parameters.(*dynamodb.TransactWriteItemsInput); ok {
					*dst = aws.ToString(p.ClientRequestToken)
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
	}
}

// shortCircuit answers the request with a TransactionCanceledException for
// reason on its last item (None on the others), as DynamoDB does, without
// sending it.
func shortCircuit(reason string, items int) func(*middleware.Stack) error {
	return func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("cancelTransaction",
			func(context.Context, middleware.InitializeInput, middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				reasons := make([]types.CancellationReason, items)
				for i := range reasons {
					reasons[i].Code = aws.String("None")
				}
				reasons[items-1].Code = aws.String(reason)
				return middleware.InitializeOutput{}, middleware.Metadata{}, &types.TransactionCanceledException{
					Message: aws.String("Transaction cancelled (injected)"), CancellationReasons: reasons}
			}), middleware.After)
	}
}

// Finding 8 of issue 14: one shard full of due items (jobs that keep failing
// to dispatch) does not starve the others: every shard gets its share.
func TestDueServesEveryShard(t *testing.T) {
	client := testenv.DynamoDB(t)
	store := dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Options{})
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	perShard := map[string]int{}
	for len(perShard) < dynamostore.Shards || perShard["0"] < 40 {
		id := jobs.NewID()
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
