package integration_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// TestGoAndHTTPPathsStoreIdenticalItems enqueues the same job (owner, kind,
// payload, idempotency key, clock) through the HTTP handler, through
// a typed Kind's Enqueue and through its Prepare + TransactPut, each into its own table,
// and compares the stored DynamoDB items attribute by attribute.
func TestGoAndHTTPPathsStoreIdenticalItems(t *testing.T) {
	ddb := testenv.DynamoDB(t)
	ctx := context.Background()
	clock := jobstest.NewClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	sealer, _ := jobs.NewAESSealer(make([]byte, 32))
	var kinds examplekinds.Kinds
	newService := func() (*jobs.Service, *dynamostore.Store, string) {
		table := testenv.NewTable(t, ddb)
		store := dynamostore.New(ddb, table, dynamostore.Config{Clock: clock})
		reg := jobs.NewRegistry()
		var err error
		if kinds, err = examplekinds.Register(reg); err != nil {
			t.Fatal(err)
		}
		svc, err := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: &jobstest.MemQueue{}, Clock: clock, Sealer: sealer})
		if err != nil {
			t.Fatal(err)
		}
		return svc, store, table
	}
	item := func(table, id string) map[string]types.AttributeValue {
		out, err := ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}}, ConsistentRead: aws.Bool(true)})
		if err != nil || out.Item == nil {
			t.Fatalf("get %s from %s: %v", id, table, err)
		}
		return out.Item
	}

	// HTTP.
	httpSvc, _, httpTable := newService()
	enqueue, _ := deploy.RouteByID(deploy.RouteEnqueue)
	resp, _ := httpapi.New(httpSvc, httpapi.Config{}).Route(ctx, events.APIGatewayV2HTTPRequest{
		RawPath: enqueue.Path,
		Body:    `{"kind":"example.hash","payload":{"rounds":2,"text":"hello"}}`,
		Headers: map[string]string{"content-type": "application/json", "idempotency-key": "same-input"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: enqueue.Method},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: alice}}},
	})
	if resp.StatusCode != 202 {
		t.Fatalf("HTTP: %d %s", resp.StatusCode, resp.Body)
	}
	id := wire.DerivedID("idempotency", alice, "same-input")

	// Go, direct.
	goSvc, _, goTable := newService()
	if _, err := kinds.Hash.Enqueue(ctx, goSvc, alice, examplekinds.HashPayload{Text: "hello", Rounds: 2}, &jobs.EnqueueOpts{IdempotencyKey: "same-input"}); err != nil {
		t.Fatal(err)
	}

	// Go, in a transaction.
	txSvc, txStore, txTable := newService()
	rec, err := kinds.Hash.Prepare(txSvc, alice, examplekinds.HashPayload{Text: "hello", Rounds: 2}, &jobs.EnqueueOpts{IdempotencyKey: "same-input"})
	if err != nil {
		t.Fatal(err)
	}
	put, err := txStore.TransactPut(rec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: put}); err != nil {
		t.Fatal(err)
	}

	want := item(httpTable, id)
	for path, table := range map[string]string{"Kind.Enqueue": goTable, "Kind.Prepare+TransactPut": txTable} {
		if got := item(table, id); !reflect.DeepEqual(got, want) {
			t.Errorf("%s stored\n%v\nthe HTTP path stored\n%v", path, got, want)
		}
	}
	if len(want) < 8 {
		t.Fatalf("suspiciously small item: %v", want)
	}

	// A handle whose kind the service has with another payload type (it
	// came from another registry) is refused before anything is stored.
	other := jobs.MustRegister(jobs.NewRegistry(), examplekinds.Hash, func(context.Context, *jobs.Job[examplekinds.SleepPayload]) (jobs.NoResult, error) {
		return jobs.NoResult{}, nil
	}, nil)
	if _, err := other.Enqueue(ctx, goSvc, alice, examplekinds.SleepPayload{MS: 1, Steps: 1}, nil); err == nil || !strings.Contains(err.Error(), "not of the kind's payload type") {
		t.Fatalf("a payload of another kind's type: %v, want ErrPayloadType", err)
	}
}
