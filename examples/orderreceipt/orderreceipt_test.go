package orderreceipt_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdajobs/lambdajobs/examples/orderreceipt"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const owner = "arn:aws:iam::000000000000:role/shop"

type env struct {
	shop   *orderreceipt.Shop
	sqs    *sqs.Client
	queue  *sqsqueue.Queue
	urls   sqsqueue.URLs
	worker *jobs.Worker
	source *localstack.EventSource
}

func setup(t *testing.T) *env {
	t.Helper()
	ddb, sqsClient := testenv.DynamoDB(t), testenv.SQS(t)
	spec := sqsqueue.DefaultSpec(5 * time.Second)
	urls := testenv.NewQueues(t, sqsClient, spec)
	store := dynamostore.New(ddb, testenv.NewTable(t, ddb), dynamostore.Config{})
	orders := testenv.UniqueName(t, "orders")
	if err := orderreceipt.CreateOrdersTable(context.Background(), ddb, orders); err != nil {
		t.Fatal(err)
	}
	reg := jobs.NewRegistry()
	receipts := jobs.MustRegister(reg, examplekinds.Receipt, examplekinds.SendReceipt, nil)
	queue := sqsqueue.New(sqsClient, urls.Queue)
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	worker, err := testroles.Worker(jobs.Config{Registry: reg, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	return &env{
		shop: &orderreceipt.Shop{DDB: ddb, OrdersTable: orders, Jobs: svc, Store: store, Receipts: receipts, Owner: owner},
		sqs:  sqsClient, queue: queue, urls: urls, worker: worker,
		source: &localstack.EventSource{SQS: sqsClient, QueueURL: urls.Queue, Invoke: worker.HandleSQS, BatchSize: 10},
	}
}

func (e *env) depth(t *testing.T) int {
	t.Helper()
	out, err := e.sqs.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(e.urls.Queue), AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"},
	})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := strconv.Atoi(out.Attributes["ApproximateNumberOfMessages"])
	b, _ := strconv.Atoi(out.Attributes["ApproximateNumberOfMessagesNotVisible"])
	return a + b
}

func (e *env) drain(t *testing.T) {
	t.Helper()
	for i := 0; i < 20 && e.depth(t) > 0; i++ {
		if err := e.source.PollOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCommitThenTheJobRuns(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	job, err := e.shop.PlaceOrder(ctx, orderreceipt.Order{ID: "o-1", Email: "ada@example.com", Cents: 4999})
	if err != nil {
		t.Fatal(err)
	}
	e.drain(t)
	rec, err := e.shop.Jobs.Get(ctx, owner, job.ID)
	if err != nil || rec.Status != jobs.StatusSucceeded || string(rec.Result) != `{"order_id":"o-1","sent_to":"a***@example.com"}` {
		t.Fatalf("job %+v %v", rec, err)
	}
	order, _ := e.shop.DDB.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(e.shop.OrdersTable), Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "o-1"}}})
	if got := order.Item["receipt_job_id"].(*types.AttributeValueMemberS).Value; got != job.ID {
		t.Fatalf("order names job %s, want %s", got, job.ID)
	}
}

func TestTransactionCancelledByTheCallerLeavesNoJobAndNoMessage(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	// The order exists already (written without a job).
	if _, err := e.shop.DDB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.shop.OrdersTable), Item: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: "o-2"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.shop.PlaceOrder(ctx, orderreceipt.Order{ID: "o-2", Email: "ada@example.com"}); !errors.Is(err, orderreceipt.ErrOrderExists) {
		t.Fatalf("got %v, want ErrOrderExists", err)
	}
	wouldBe := wire.DerivedID("idempotency", owner, "receipt-o-2")
	if _, err := e.shop.Jobs.Get(ctx, owner, wouldBe); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("a job exists after a cancelled transaction: %v", err)
	}
	if n := e.depth(t); n != 0 {
		t.Fatalf("%d messages sent for a cancelled transaction", n)
	}
}

func TestCommitWithoutDispatchIsSentByTheSweeper(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.shop.SkipDispatch = true // the process dies right after the commit
	job, err := e.shop.PlaceOrder(ctx, orderreceipt.Order{ID: "o-3", Email: "bob@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if n := e.depth(t); n != 0 {
		t.Fatalf("%d messages before the sweep", n)
	}
	clock := jobstest.NewClock(time.Now().Add(jobs.DefaultDispatchGrace + time.Second))
	sweeper, _ := testroles.Sweeper(jobs.Config{Registry: jobs.NewRegistry(), Store: e.shop.Store, Queue: e.queue, Clock: clock})
	if rep, err := sweeper.Sweep(ctx); err != nil || rep.Resent != 1 {
		t.Fatalf("sweep %+v %v", rep, err)
	}
	e.drain(t)
	rec, _ := e.shop.Jobs.Get(ctx, owner, job.ID)
	if rec.Status != jobs.StatusSucceeded || rec.Attempt != 1 {
		t.Fatalf("job %+v", rec)
	}
}
