package awscount_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambdajobs/lambdajobs/internal/awscount"
	"github.com/lambdajobs/lambdajobs/internal/testenv"
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

// A client that is not the SDK's is counted by its requests' target.
func TestHTTPClientCountsByTarget(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	var c awscount.Counter
	hc := c.HTTPClient("EventBridge", nil)
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
		req.Header.Set("X-Amz-Target", "AWSEvents.PutEvents")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if got := c.Counts(); len(got) != 1 || got["EventBridge.PutEvents"] != 2 {
		t.Fatalf("counts %v", got)
	}
}
