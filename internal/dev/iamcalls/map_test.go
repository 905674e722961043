package iamcalls

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

var names = Names{Table: "jobs-local", Queue: "http://q/000000000000/jobs", DLQ: "http://q/000000000000/jobs-dlq"}

// captured runs one call of the real SDK client against a server that
// answers nothing useful, and returns what the client sent: the mapping is
// tested on the SDK's own wire format, not on bodies written by hand.
type captured struct {
	principal, target string
	body              []byte
}

func capture(t *testing.T, principal string, call func(ctx context.Context, ddb *dynamodb.Client, q *sqs.Client)) captured {
	t.Helper()
	var got captured
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.principal = PrincipalOf(r)
		got.target = r.Header.Get("X-Amz-Target")
		got.body, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = io.WriteString(w, "{}")
	}))
	defer srv.Close()
	creds := credentials.NewStaticCredentialsProvider(AccessKeyID(principal), "secret", "")
	ddb := dynamodb.New(dynamodb.Options{Region: "us-east-1", Credentials: creds, BaseEndpoint: aws.String(srv.URL),
		RetryMaxAttempts: 1, DisableValidateResponseChecksum: true})
	q := sqs.New(sqs.Options{Region: "us-east-1", Credentials: creds, BaseEndpoint: aws.String(srv.URL), RetryMaxAttempts: 1})
	call(context.Background(), ddb, q)
	if got.target == "" {
		t.Fatal("the client sent nothing")
	}
	return got
}

func TestMapFollowsWhatAWSAuthorises(t *testing.T) {
	tbl := aws.String(names.Table)
	key := map[string]ddbtypes.AttributeValue{"id": &ddbtypes.AttributeValueMemberS{Value: "x"}}
	tx := map[string]string{"dynamodb:EnclosingOperation": "TransactWriteItems"}
	tests := []struct {
		name string
		call func(context.Context, *dynamodb.Client, *sqs.Client)
		want []Call
	}{
		{"put", func(ctx context.Context, d *dynamodb.Client, _ *sqs.Client) {
			_, _ = d.PutItem(ctx, &dynamodb.PutItemInput{TableName: tbl, Item: key})
		}, []Call{{Principal: "worker", Action: "dynamodb:PutItem", Resource: "table"}}},
		{"a query of an index is checked on the index's ARN", func(ctx context.Context, d *dynamodb.Client, _ *sqs.Client) {
			_, _ = d.Query(ctx, &dynamodb.QueryInput{TableName: tbl, IndexName: aws.String("sweep"), KeyConditionExpression: aws.String("a = :a"),
				ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":a": &ddbtypes.AttributeValueMemberS{Value: "0"}}})
		}, []Call{{Principal: "worker", Action: "dynamodb:Query", Resource: "table/index/sweep"}}},
		{"a query of the table", func(ctx context.Context, d *dynamodb.Client, _ *sqs.Client) {
			_, _ = d.Query(ctx, &dynamodb.QueryInput{TableName: tbl, KeyConditionExpression: aws.String("id = :a"),
				ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":a": &ddbtypes.AttributeValueMemberS{Value: "0"}}})
		}, []Call{{Principal: "worker", Action: "dynamodb:Query", Resource: "table"}}},
		{"a transaction is authorised item by item", func(ctx context.Context, d *dynamodb.Client, _ *sqs.Client) {
			_, _ = d.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
				{Update: &ddbtypes.Update{TableName: tbl, Key: key, UpdateExpression: aws.String("SET a = :a"),
					ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":a": &ddbtypes.AttributeValueMemberN{Value: "1"}}}},
				{Put: &ddbtypes.Put{TableName: tbl, Item: key}},
				{ConditionCheck: &ddbtypes.ConditionCheck{TableName: tbl, Key: key, ConditionExpression: aws.String("attribute_exists(id)")}},
				{Delete: &ddbtypes.Delete{TableName: tbl, Key: key}},
			}})
		}, []Call{
			{Principal: "worker", Action: "dynamodb:UpdateItem", Resource: "table", Context: tx},
			{Principal: "worker", Action: "dynamodb:PutItem", Resource: "table", Context: tx},
			{Principal: "worker", Action: "dynamodb:ConditionCheckItem", Resource: "table", Context: tx},
			{Principal: "worker", Action: "dynamodb:DeleteItem", Resource: "table", Context: tx},
		}},
		{"batch get", func(ctx context.Context, d *dynamodb.Client, _ *sqs.Client) {
			_, _ = d.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]ddbtypes.KeysAndAttributes{names.Table: {Keys: []map[string]ddbtypes.AttributeValue{key}}}})
		}, []Call{{Principal: "worker", Action: "dynamodb:BatchGetItem", Resource: "table"}}},
		{"a batch send is a send", func(_ context.Context, _ *dynamodb.Client, q *sqs.Client) {
			_, _ = q.SendMessageBatch(context.Background(), &sqs.SendMessageBatchInput{QueueUrl: aws.String(names.Queue),
				Entries: []sqstypes.SendMessageBatchRequestEntry{{Id: aws.String("1"), MessageBody: aws.String("{}")}}})
		}, []Call{{Principal: "worker", Action: "sqs:SendMessage", Resource: "queue"}}},
		{"receive from the dead-letter queue", func(_ context.Context, _ *dynamodb.Client, q *sqs.Client) {
			_, _ = q.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(names.DLQ)})
		}, []Call{{Principal: "worker", Action: "sqs:ReceiveMessage", Resource: "dlq"}}},
		{"a batch delete is a delete", func(_ context.Context, _ *dynamodb.Client, q *sqs.Client) {
			_, _ = q.DeleteMessageBatch(context.Background(), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(names.Queue),
				Entries: []sqstypes.DeleteMessageBatchRequestEntry{{Id: aws.String("1"), ReceiptHandle: aws.String("r")}}})
		}, []Call{{Principal: "worker", Action: "sqs:DeleteMessage", Resource: "queue"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := capture(t, "worker", tt.call)
			if c.principal != "worker" {
				t.Errorf("principal %q, want worker", c.principal)
			}
			got, err := Map(c.principal, c.target, c.body, names)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Map(%s) = %+v, want %+v", c.target, got, tt.want)
			}
		})
	}
}

func TestMapRefusesWhatItCannotCheck(t *testing.T) {
	for _, tt := range []struct{ name, target, body string }{
		{"unknown DynamoDB operation", "DynamoDB_20120810.ExecuteStatement", `{"Statement":"SELECT"}`},
		{"unknown SQS operation", "AmazonSQS.StartMessageMoveTask", `{"SourceArn":"x"}`},
		{"another table", "DynamoDB_20120810.GetItem", `{"TableName":"someone-elses"}`},
		{"another queue", "AmazonSQS.SendMessage", `{"QueueUrl":"http://q/1/other"}`},
		{"another service", "AWSEvents.PutEvents", `{}`},
		{"an empty transaction", "DynamoDB_20120810.TransactWriteItems", `{}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, err := Map("worker", tt.target, []byte(tt.body), names); err == nil {
				t.Errorf("Map(%s) = %+v, want an error", tt.target, got)
			}
		})
	}
}

func TestProxyRecordsEachPrincipalsCallsOnce(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = io.WriteString(w, "{}")
	}))
	defer backend.Close()
	dir := t.TempDir()
	rec, err := NewRecorder(dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := StartProxy(backend.URL, names, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	send := func(principal, target, body string) {
		req, _ := http.NewRequest("POST", p.URL(), strings.NewReader(body))
		req.Header.Set("X-Amz-Target", target)
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+principal+"/20261201/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=x")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	send("cancel", "AmazonSQS.SendMessage", `{"QueueUrl":"`+names.Queue+`"}`)
	send("cancel", "AmazonSQS.SendMessage", `{"QueueUrl":"`+names.Queue+`"}`)
	send(Harness, "AmazonSQS.CreateQueue", `{"QueueName":"x"}`)
	send("getjob", "DynamoDB_20120810.ExecuteStatement", `{}`)
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []Call{
		{Principal: "cancel", Action: "sqs:SendMessage", Resource: "queue"},
		{Principal: "getjob", Action: Unmapped, Resource: "DynamoDB_20120810.ExecuteStatement: iamcalls: DynamoDB operation ExecuteStatement has no mapping"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("recorded %+v, want %+v", got, want)
	}
	files, _ := os.ReadDir(dir)
	if len(files) != 1 {
		t.Errorf("%d files, want 1", len(files))
	}
}

// PutEvents is events:PutEvents on the bus its entries name, once per
// bus; a bus that is not the stack's, or an entry on the default bus, is
// an error, not an unchecked call.
func TestMapPutEvents(t *testing.T) {
	t.Parallel()
	n := Names{Table: "t", Queue: "q", DLQ: "d", EventBus: "arn:aws:events:us-east-1:000000000000:event-bus/jobs-events"}
	body := `{"Entries":[{"EventBusName":"` + n.EventBus + `","Source":"lambdajobs","DetailType":"Job Finished","Detail":"{}"},{"EventBusName":"` + n.EventBus + `"}]}`
	got, err := Map("worker", "AWSEvents.PutEvents", []byte(body), n)
	if err != nil {
		t.Fatal(err)
	}
	if want := []Call{{Principal: "worker", Action: "events:PutEvents", Resource: "bus"}}; len(got) != 1 || got[0].Principal != want[0].Principal || got[0].Action != want[0].Action || got[0].Resource != want[0].Resource {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for _, bad := range []string{`{"Entries":[{"EventBusName":"other"}]}`, `{"Entries":[{"Source":"x"}]}`, `{"Entries":[]}`} {
		if _, err := Map("worker", "AWSEvents.PutEvents", []byte(bad), n); err == nil {
			t.Errorf("%s mapped; want an error", bad)
		}
	}
	if _, err := Map("worker", "AWSEvents.PutRule", []byte(`{}`), n); err == nil {
		t.Error("PutRule mapped; want an error")
	}
}

// S3's REST calls map to the actions S3 authorises them as: a tagged
// write needs s3:PutObjectTagging too, a copy reads its source, a
// presigned link is signed by the role that made it; an object outside the
// stack's bucket or parts/ is refused.
func TestMapS3(t *testing.T) {
	n := Names{Bucket: "e2e-parts"}
	req := func(method, target string, header map[string]string) *http.Request {
		r := httptest.NewRequest(method, target, nil)
		for k, v := range header {
			r.Header.Set(k, v)
		}
		return r
	}
	const obj = "/e2e-parts/parts/ab12/job/payload-x"
	for _, tc := range []struct {
		r    *http.Request
		want string
	}{
		{req("GET", obj, nil), "s3:GetObject"},
		{req("PUT", obj, map[string]string{"X-Amz-Tagging": "lj-keep=32"}), "s3:PutObject s3:PutObjectTagging"},
		{req("POST", obj+"?uploads", map[string]string{"X-Amz-Tagging": "lj-keep=32"}), "s3:PutObject s3:PutObjectTagging"},
		{req("PUT", obj+"?partNumber=2&uploadId=u", nil), "s3:PutObject"},
		{req("POST", obj+"?uploadId=u", nil), "s3:PutObject"},
		{req("DELETE", obj+"?uploadId=u", nil), "s3:AbortMultipartUpload"},
		{req("PUT", obj, map[string]string{"X-Amz-Copy-Source": "e2e-parts/parts/ab12/job/payload-x", "X-Amz-Tagging-Directive": "REPLACE", "X-Amz-Tagging": "lj-keep=64"}), "s3:PutObject s3:GetObject s3:PutObjectTagging"},
	} {
		calls, err := MapS3("worker", tc.r, n)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.r.Method, tc.r.URL, err)
		}
		var got []string
		for _, c := range calls {
			if c.Resource != "bucket/parts" || c.Principal != "worker" {
				t.Errorf("%s %s: %+v", tc.r.Method, tc.r.URL, c)
			}
			got = append(got, c.Action)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("%s %s: %v, want %s", tc.r.Method, tc.r.URL, got, tc.want)
		}
	}
	// An upload's object and parts are recorded as the uploads'.
	up := "/e2e-parts/uploads/0123abcd/an-upload/payload"
	for _, tc := range []struct {
		r    *http.Request
		want string
	}{
		{req("POST", up+"?uploads", nil), "s3:PutObject"},
		{req("PUT", up+"?partNumber=1&uploadId=u", nil), "s3:PutObject"},
		{req("POST", up+"?uploadId=u", nil), "s3:PutObject"},
		{req("GET", up, nil), "s3:GetObject"},
		{req("DELETE", up, nil), "s3:DeleteObject"},
		{req("DELETE", up+"?uploadId=u", nil), "s3:AbortMultipartUpload"},
	} {
		calls, err := MapS3("worker", tc.r, n)
		if err != nil || len(calls) != 1 || calls[0].Resource != "bucket/uploads" || calls[0].Action != tc.want {
			t.Errorf("%s %s: %+v, %v; want %s on bucket/uploads", tc.r.Method, tc.r.URL, calls, err, tc.want)
		}
	}
	for _, bad := range []string{"/other-bucket/parts/x", "/e2e-parts/elsewhere/x", "/e2e-parts"} {
		if _, err := MapS3("worker", req("GET", bad, nil), n); err == nil {
			t.Errorf("GET %s mapped", bad)
		}
	}
	link := req("GET", obj+"?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=getjob%2F20261205%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Expires=300", nil)
	if p := PrincipalOf(link); p != "getjob" {
		t.Errorf("a presigned link's principal %q, want getjob", p)
	}
}
