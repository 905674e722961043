package integration_test

import (
	"context"
	"encoding/json"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// stack is the system wired as in Lambda, minus the runtime: the API and the
// worker are called in-process, the queue and table are real emulators.
type stack struct {
	t        *testing.T
	ddb      *dynamodb.Client
	sqs      *sqs.Client
	table    string
	urls     sqsqueue.URLs
	store    *dynamostore.Store
	queue    *sqsqueue.Queue
	reg      *jobs.Registry
	svc      *jobs.Service
	api      *httpapi.API
	worker   *jobs.Worker
	source   *localstack.EventSource
	sealer   *jobs.AESSealer
	runs     sync.Map // job id -> *atomic.Int32, for the "count" kind
	lambdaTO time.Duration
}

type options struct {
	ddbEndpoint string // a proxy in front of DynamoDB Local, if set
	deadlines   jobs.Deadlines
	lambdaTO    time.Duration
	extraKinds  func(*stack, *jobs.Registry)
}

type countPayload struct {
	N int `json:"n"`
}

func newStack(t *testing.T, o options) *stack {
	t.Helper()
	s := &stack{t: t, ddb: testenv.DynamoDB(t), sqs: testenv.SQS(t)}
	s.table = testenv.NewTable(t, s.ddb)
	spec := sqsqueue.DefaultSpec(5 * time.Second)
	spec.VisibilityTimeout = 2 * time.Second // short, so tests see redelivery quickly
	s.urls = testenv.NewQueues(t, s.sqs, spec)
	storeClient := s.ddb
	if o.ddbEndpoint != "" {
		storeClient = localaws.DynamoDBClient(o.ddbEndpoint)
	}
	s.store = dynamostore.New(storeClient, s.table, dynamostore.Config{})
	s.queue = sqsqueue.New(s.sqs, s.urls.Queue)
	s.reg = jobs.NewRegistry()
	if _, err := examplekinds.Register(s.reg); err != nil {
		t.Fatal(err)
	}
	jobs.MustRegister(s.reg, "test.count", func(_ context.Context, j *jobs.Job[countPayload]) (jobs.NoResult, error) {
		v, _ := s.runs.LoadOrStore(j.ID, new(atomic.Int32))
		v.(*atomic.Int32).Add(1)
		return jobs.NoResult{}, nil
	}, nil)
	if o.extraKinds != nil {
		o.extraKinds(s, s.reg)
	}
	var err error
	s.sealer, err = jobs.NewAESSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	s.svc, err = testroles.Service(jobs.Config{Registry: s.reg, Store: s.store, Queue: s.queue, Sealer: s.sealer, PageTokenKey: make([]byte, 32)})
	if err != nil {
		t.Fatal(err)
	}
	s.api = httpapi.New(s.svc, httpapi.Config{})
	if o.deadlines == (jobs.Deadlines{}) {
		o.deadlines = testDeadlines
	}
	s.worker, err = testroles.Worker(jobs.Config{Registry: s.reg, Store: s.store, Deadlines: o.deadlines, Sealer: s.sealer,
		Routes: examplekinds.Routes(alice), Queue: s.queue})
	if err != nil {
		t.Fatal(err)
	}
	s.lambdaTO = o.lambdaTO
	if s.lambdaTO == 0 {
		s.lambdaTO = 5 * time.Second
	}
	s.source = &localstack.EventSource{SQS: s.sqs, QueueURL: s.urls.Queue, QueueARN: s.urls.QueueARN, Invoke: s.worker.HandleSQS, BatchSize: 10, Timeout: s.lambdaTO}
	return s
}

func (s *stack) runs1(id string) int {
	v, ok := s.runs.Load(id)
	if !ok {
		return 0
	}
	return int(v.(*atomic.Int32).Load())
}

const alice = "arn:aws:iam::000000000000:user/alice"

var iamAuth = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
	IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: alice},
}

func (s *stack) post(kind, payload string) jobs.View {
	s.t.Helper()
	body, _ := json.Marshal(map[string]json.RawMessage{"kind": json.RawMessage(`"` + kind + `"`), "payload": json.RawMessage(payload)})
	req := events.APIGatewayV2HTTPRequest{
		RawPath: "/v1/jobs", Body: string(body),
		Headers:        map[string]string{"content-type": "application/json"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{Authorizer: iamAuth, HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/v1/jobs"}},
	}
	resp, err := s.api.Route(context.Background(), req)
	if err != nil || resp.StatusCode != 202 {
		s.t.Fatalf("POST %s %s: %d %s %v", kind, payload, resp.StatusCode, resp.Body, err)
	}
	var v jobs.View
	if err := json.Unmarshal([]byte(resp.Body), &v); err != nil {
		s.t.Fatal(err)
	}
	return v
}

func (s *stack) get(id string) (int, jobs.View) {
	s.t.Helper()
	req := events.APIGatewayV2HTTPRequest{
		RawPath:        "/v1/jobs/" + url.PathEscape(id),
		PathParameters: map[string]string{"id": id},
		RequestContext: events.APIGatewayV2HTTPRequestContext{Authorizer: iamAuth, HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET"}},
	}
	resp, err := s.api.Route(context.Background(), req)
	if err != nil {
		s.t.Fatal(err)
	}
	var v jobs.View
	if resp.StatusCode == 200 {
		if err := json.Unmarshal([]byte(resp.Body), &v); err != nil {
			s.t.Fatal(err)
		}
	}
	return resp.StatusCode, v
}

// drain polls the queue until it has been empty for one long poll.
func (s *stack) drain() {
	s.t.Helper()
	for i := 0; i < 1000; i++ {
		n := s.queueDepth()
		if n == 0 {
			return
		}
		if err := s.source.PollOnce(context.Background()); err != nil {
			s.t.Fatal(err)
		}
	}
	s.t.Fatal("queue did not drain")
}

// queueDepth counts visible plus in-flight messages.
func (s *stack) queueDepth() int {
	return depth(s.t, s.sqs, s.urls.Queue)
}

func depth(t *testing.T, client *sqs.Client, url string) int {
	t.Helper()
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl:       &url,
		AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"},
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, k := range []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"} {
		var v int
		_ = json.Unmarshal([]byte(out.Attributes[k]), &v)
		n += v
	}
	return n
}

// waitFor polls cond every 20ms for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testDeadlines fit the stack's short Lambda timeouts (3 to 5 s).
var testDeadlines = jobs.Deadlines{Reserve: time.Second, FinalWrite: 600 * time.Millisecond, Call: 600 * time.Millisecond,
	MinRun: 300 * time.Millisecond, Safety: 200 * time.Millisecond}
