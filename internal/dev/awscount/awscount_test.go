package awscount_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/lambdajobs/lambdajobs/internal/dev/awscount"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestCountsEveryRequestByOperation(t *testing.T) {
	var c awscount.Counter
	client := testenv.DynamoDB(t, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, c.APIOption) })
	for range 3 {
		_, _ = client.ListTables(context.Background(), &dynamodb.ListTablesInput{Limit: aws.Int32(1)})
	}
	_, _ = client.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String("nope")})
	got := c.Counts()
	if got["DynamoDB.ListTables"] != 3 || got["DynamoDB.DescribeTable"] != 1 || len(got) != 2 {
		t.Fatalf("counts %v", got)
	}
	c.Reset()
	if len(c.Counts()) != 0 {
		t.Fatal("Reset kept counts")
	}
}

// The EventBridge client (the job events' PutEvents) is counted as the
// other SDK clients are, once per call.
func TestCountsEventBridgeCalls(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_, _ = io.WriteString(w, `{"FailedEntryCount":0,"Entries":[{"EventId":"1"}]}`)
	}))
	defer srv.Close()
	var c awscount.Counter
	client := eventbridge.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL), Credentials: aws.AnonymousCredentials{}},
		func(o *eventbridge.Options) { o.APIOptions = append(o.APIOptions, c.APIOption) })
	for range 2 {
		in := &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{{Source: aws.String("s"), DetailType: aws.String("d"), Detail: aws.String("{}")}}}
		if _, err := client.PutEvents(context.Background(), in); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Counts(); len(got) != 1 || got["EventBridge.PutEvents"] != 2 {
		t.Fatalf("counts %v", got)
	}
}
