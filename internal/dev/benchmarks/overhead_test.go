package benchmarks_test

import (
	"context"
	"fmt"
	"io"
	"path"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/lambdalog"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

func TestMain(m *testing.M) { testenv.Main(m) }

type noopPayload struct {
	N int `json:"n"`
}

type env struct {
	ddb    *dynamodb.Client
	sqs    *sqs.Client
	table  string
	queue  string
	store  *dynamostore.Store
	api    *httpapi.API
	worker *jobs.Worker
}

func setup(b *testing.B) *env {
	b.Helper()
	e := &env{ddb: testenv.DynamoDB(b), sqs: testenv.SQS(b)}
	e.table = testenv.NewTable(b, e.ddb)
	e.queue = testenv.NewQueues(b, e.sqs, sqsqueue.DefaultSpec(30*time.Second)).Queue
	e.store = dynamostore.New(e.ddb, e.table, dynamostore.Config{})
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "noop", func(context.Context, *jobs.Job[noopPayload]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
	// As deployed: the functions' JSON log lines at INFO (Lambda's format)
	// and their metrics on, written where Lambda would send them (here
	// nowhere, but encoded all the same).
	logger := lambdalog.New(io.Discard, func(string) string { return "" })
	metrics := func(service string) *jobs.Metrics {
		return &jobs.Metrics{Namespace: "lambdajobs/bench", Service: service, Writer: io.Discard}
	}
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: e.store, Queue: sqsqueue.New(e.sqs, e.queue), Logger: logger, Metrics: metrics("enqueue")})
	if err != nil {
		b.Fatal(err)
	}
	e.api = httpapi.New(svc, httpapi.Config{Logger: logger})
	if e.worker, err = testroles.Worker(jobs.Config{Registry: reg, Store: e.store, CancelCheck: -1, Logger: logger, Metrics: metrics("worker")}); err != nil {
		b.Fatal(err)
	}
	return e
}

// request is a POST /v1/jobs, at the route table's path.
var request = events.APIGatewayV2HTTPRequest{
	RawPath: enqueueRoute.Path,
	Body:    `{"kind":"noop","payload":{"n":1}}`,
	Headers: map[string]string{"content-type": "application/json"},
	RequestContext: events.APIGatewayV2HTTPRequestContext{
		HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: enqueueRoute.Method},
		Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::000000000000:user/bench"}}},
}

var enqueueRoute, _ = deploy.RouteByID(deploy.RouteEnqueue)

// BenchmarkOverhead compares, in one run, each path of the system with the
// bare AWS calls it cannot avoid. The two are interleaved call by call, so
// that emulator warm-up, table growth and machine noise fall on both alike;
// each reports handler-ns/op, bare-ns/op and their ratio (the overhead).
func BenchmarkOverhead(b *testing.B) {
	e := setup(b)
	ctx := context.Background()
	// Warm the emulators and the JIT before anything is measured.
	for range 300 {
		e.enqueue(b, ctx)
		e.bareEnqueue(b, ctx)
	}

	b.Run("enqueue", func(b *testing.B) {
		var handler, bare time.Duration
		for b.Loop() {
			t0 := time.Now()
			e.enqueue(b, ctx)
			t1 := time.Now()
			e.bareEnqueue(b, ctx)
			handler, bare = handler+t1.Sub(t0), bare+time.Since(t1)
		}
		report(b, handler, bare)
	})

	b.Run("worker", func(b *testing.B) {
		// Two queued jobs per iteration: one for the worker, one for the
		// bare claim and finish.
		ids := make([]string, 2*b.N)
		for i := range ids {
			ids[i] = e.enqueue(b, ctx)
		}
		b.ResetTimer()
		var handler, bare time.Duration
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m", Body: fmt.Sprintf(`{"job_id":%q}`, ids[2*i])}}}
			if resp, _ := e.worker.HandleSQS(ctx, ev); len(resp.BatchItemFailures) != 0 {
				b.Fatal("failure")
			}
			t1 := time.Now()
			e.bareClaimFinish(b, ctx, ids[2*i+1])
			handler, bare = handler+t1.Sub(t0), bare+time.Since(t1)
		}
		report(b, handler, bare)
	})
}

func report(b *testing.B, handler, bare time.Duration) {
	b.ReportMetric(float64(handler.Nanoseconds())/float64(b.N), "handler-ns/op")
	b.ReportMetric(float64(bare.Nanoseconds())/float64(b.N), "bare-ns/op")
	b.ReportMetric(float64(handler)/float64(bare), "ratio")
}

// enqueue runs the enqueue function's handler and returns the job id.
func (e *env) enqueue(b *testing.B, ctx context.Context) string {
	resp, _ := e.api.Route(ctx, request)
	if resp.StatusCode != 202 {
		b.Fatalf("%d %s", resp.StatusCode, resp.Body)
	}
	return path.Base(resp.Headers["Location"])
}

// bareOwner is the owner of the benchmark's jobs.
const bareOwner = "arn:aws:iam::000000000000:user/bench"

// bareEnqueue makes the two calls enqueue must make, nothing else: a
// conditional PutItem of the same item (its index entries included: the
// sweep index, the owner's listing and the queued jobs') and a SendMessage
// of the same body.
func (e *env) bareEnqueue(b *testing.B, ctx context.Context) {
	id := wire.NewID()
	now := time.Now()
	list := dynamostore.ListKey(wire.OwnerKey(bareOwner), id)
	item, _ := attributevalue.MarshalMap(map[string]any{
		"id": id, "kind": "noop", "owner": bareOwner, "status": "queued",
		"payload": `{"n":1}`, "req_hash": "0123456789abcdef0123456789abcdef", "attempt": 0,
		"created_ms": now.UnixMilli(), "updated_ms": now.UnixMilli(),
		"sweep_shard": dynamostore.ShardOf(id), "sweep_at": now.Add(3 * time.Minute).UnixMilli(),
		dynamostore.AttrListOwner: list, dynamostore.AttrListCreated: fmt.Sprintf("%013d", now.UnixMilli()), dynamostore.AttrQueued: list,
	})
	if _, err := e.ddb.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(e.table), Item: item, ConditionExpression: aws.String("attribute_not_exists(id)"),
	}); err != nil {
		b.Fatal(err)
	}
	if _, err := e.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(e.queue), MessageBody: aws.String(fmt.Sprintf(`{"job_id":%q}`, id))}); err != nil {
		b.Fatal(err)
	}
}

// bareClaimFinish makes the two conditional updates the worker's per-job
// path must make: the claim (returning the item; the job moves from the
// queued jobs' index to the running ones') and the final write (out of the
// running jobs' and the sweep index).
func (e *env) bareClaimFinish(b *testing.B, ctx context.Context, id string) {
	key := map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}}
	token := wire.NewID()
	now := fmt.Sprint(time.Now().UnixMilli())
	if _, err := e.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(e.table), Key: key,
		UpdateExpression:         aws.String("SET #s = :r, #t = :t, lease_ms = :l, started_ms = :n, updated_ms = :n, ur = lo REMOVE uq ADD attempt :one"),
		ConditionExpression:      aws.String("#s = :q"),
		ExpressionAttributeNames: map[string]string{"#s": "status", "#t": "token"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":r": &types.AttributeValueMemberS{Value: "running"}, ":q": &types.AttributeValueMemberS{Value: "queued"},
			":t": &types.AttributeValueMemberS{Value: token}, ":l": &types.AttributeValueMemberN{Value: now},
			":n": &types.AttributeValueMemberN{Value: now}, ":one": &types.AttributeValueMemberN{Value: "1"},
		},
		ReturnValues: types.ReturnValueAllNew,
	}); err != nil {
		b.Fatal(err)
	}
	if _, err := e.ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(e.table), Key: key,
		UpdateExpression:         aws.String("SET #s = :d, updated_ms = :n, finished_ms = :n, expires = :e, #r = :res REMOVE #t, lease_ms, sweep_shard, sweep_at, ur"),
		ConditionExpression:      aws.String("#s = :r AND #t = :t"),
		ExpressionAttributeNames: map[string]string{"#s": "status", "#t": "token", "#r": "result"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":d": &types.AttributeValueMemberS{Value: "succeeded"}, ":r": &types.AttributeValueMemberS{Value: "running"},
			":t": &types.AttributeValueMemberS{Value: token}, ":n": &types.AttributeValueMemberN{Value: now},
			":e": &types.AttributeValueMemberN{Value: "9999999999"}, ":res": &types.AttributeValueMemberS{Value: "null"},
		},
	}); err != nil {
		b.Fatal(err)
	}
}
