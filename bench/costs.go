package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/apiclient"
	"github.com/lambdajobs/lambdajobs/internal/dev/awscount"
	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/internal/lambdalog"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/eventbus"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// List prices (us-east-1), per million units.
const (
	priceWRU        = 0.625
	priceRRU        = 0.125
	priceSQS        = 0.40
	priceLambdaReq  = 0.20
	priceHTTPAPI    = 1.00
	priceGBSecond   = 0.0000133334 // arm64, per GB-second
	priceLogsGB     = 0.50         // CloudWatch Logs ingestion, per GB
	enqueueMemoryGB = 0.25         // the dev configuration
	workerMemoryGB  = 0.5
	priceEvents     = 1.00 // EventBridge PutEvents, per million entries of up to 64 KB
	floorPerMillion = 3.7
	sfnPerMillion   = 76.0
)

// deployedNamespace is a metrics namespace as long as the construct
// derives one for a stack named lambdajobs-dev ("lambdajobs/" and the
// stack's and construct's unique name): every EMF record carries it, so
// its length counts.
const deployedNamespace = "lambdajobs/lambdajobs-dev-Jobs-CDA8A673"

// cost is one scenario's measured requests and units, per job.
type cost struct {
	Name           string
	Jobs           int
	Requests       map[string]float64 // "Service.Operation" -> per job
	WRU, RRU       float64            // per job
	Invocations    float64            // Lambda invocations per job
	GBSeconds      float64            // per job, measured locally
	APICalls       float64
	LogBytes       float64            // per job: the functions' log lines and metrics (EMF), as CloudWatch Logs would ingest them
	LogBytesAtWarn float64            // the same with the functions' log level at WARN
	LogLines       map[string]float64 // LogBytes by line: each service's metrics, each log message
	Entries        float64            // EventBridge entries per job (job events)
	// PauseReads are the reads of the pause set in all (an instance's
	// cost, not a job's: left out of Requests and RRU), by Instances
	// function instances over Elapsed.
	PauseReads int
	Instances  int
	Elapsed    time.Duration
}

// events is the EventBridge entries per job: one per PutEvents entry the
// counter saw (ten to a request).
func (c cost) events() float64 { return c.Entries }

// totalRequests is the AWS requests per job.
func (c cost) totalRequests() float64 {
	var n float64
	for _, v := range c.Requests {
		n += v
	}
	return n
}

func (c cost) sqsRequests() float64 {
	var n float64
	for k, v := range c.Requests {
		if len(k) > 4 && k[:4] == "SQS." {
			n += v
		}
	}
	return n
}

// dollars returns the cost per million jobs, by part.
func (c cost) dollars() (ddb, sqsCost, lambdaReq, lambdaDur, api, logs, total float64) {
	ddb = c.WRU*priceWRU + c.RRU*priceRRU
	sqsCost = c.sqsRequests() * priceSQS
	lambdaReq = c.Invocations * priceLambdaReq
	lambdaDur = c.GBSeconds * priceGBSecond * 1e6
	api = c.APICalls * priceHTTPAPI
	logs = c.LogBytes / 1e9 * priceLogsGB * 1e6
	total = ddb + sqsCost + lambdaReq + lambdaDur + api + logs + c.events()*priceEvents
	return ddb, sqsCost, lambdaReq, lambdaDur, api, logs, total
}

// byteCounter counts what the functions would write to CloudWatch Logs:
// all of it (at the default level, INFO), and what is left at WARN (the
// warnings, errors and the metrics, which no level filters), and by line:
// each service's metrics, each log message.
type byteCounter struct {
	n, atWarn atomic.Int64
	mu        sync.Mutex
	byLine    map[string]int64
}

func (b *byteCounter) Write(p []byte) (int, error) {
	b.n.Add(int64(len(p)))
	for line := range bytes.Lines(p) {
		if bytes.Contains(line, []byte(`"_aws":`)) || bytes.Contains(line, []byte(`"level":"WARN"`)) || bytes.Contains(line, []byte(`"level":"ERROR"`)) {
			b.atWarn.Add(int64(len(line)))
		}
		var fields struct {
			AWS     json.RawMessage `json:"_aws"`
			Service string          `json:"service"`
			Message string          `json:"message"`
			Level   string          `json:"level"`
		}
		_ = json.Unmarshal(line, &fields)
		what := fmt.Sprintf("%s log line %q", fields.Level, fields.Message)
		switch {
		case fields.AWS != nil && fields.Service == "" && bytes.Contains(line, []byte(`"JobsEnqueued"`)):
			what = "metrics of enqueue (EMF, JobsEnqueued by kind)"
		case fields.AWS != nil:
			what = fmt.Sprintf("metrics of %s (EMF)", fields.Service)
		}
		b.mu.Lock()
		if b.byLine == nil {
			b.byLine = map[string]int64{}
		}
		b.byLine[what] += int64(len(line))
		b.mu.Unlock()
	}
	return len(p), nil
}

// harness is the system in-process against the emulators, every AWS request
// counted and every capacity unit summed.
type harness struct {
	ddb     *dynamodb.Client
	sqs     *sqs.Client
	counter *awscount.Counter
	mu      sync.Mutex
	wru     float64
	rru     float64
	table   string
	urls    sqsqueue.URLs
	api     *httpapi.API
	client  *apiclient.Client // served by api, in-process
	worker  *jobs.Worker
	source  *localstack.EventSource
	logs    byteCounter
	invokes int
	// pauseReads counts the pause set's reads; began is when the scenario
	// began (reset).
	pauseReads int
	began      time.Time
	workerD    time.Duration
	enqD       time.Duration
	closers    []func()
	bus        *localstack.EventBus // with allEvents
}

// newHarness builds the system on the emulators, with table and queue
// name; allEvents announces every outcome on a local event bus (its
// PutEvents counted as the other requests are).
func newHarness(ctx context.Context, ddbEndpoint, sqsEndpoint, name string, allEvents bool) (*harness, error) {
	h := &harness{counter: &awscount.Counter{}}
	h.ddb = localaws.DynamoDBClient(ddbEndpoint, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, h.counter.APIOption) })
	h.sqs = localaws.SQSClient(sqsEndpoint, func(o *sqs.Options) { o.APIOptions = append(o.APIOptions, h.counter.APIOption) })
	h.table = name
	if _, err := h.ddb.CreateTable(ctx, dynamostore.CreateTableInput(name)); err != nil {
		return nil, err
	}
	var err error
	if h.urls, err = sqsqueue.Create(ctx, h.sqs, name, sqsqueue.DefaultSpec(60*time.Second)); err != nil {
		return nil, err
	}
	store := dynamostore.New(h.ddb, name, dynamostore.Config{OnCapacity: func(op string, cc *ddbtypes.ConsumedCapacity) {
		units := aws.ToFloat64(cc.CapacityUnits)
		h.mu.Lock()
		defer h.mu.Unlock()
		switch {
		case op == "pauses":
			h.pauseReads++
		case slices.Contains([]string{"get", "get_many", "due", "list", "list_get", "count_batch", "count_queued", "count_unfinished"}, op),
			strings.HasPrefix(op, "get_"):
			// The store's reads (GetItem, BatchGetItem, Query; a part's
			// own item, get_<part>): every other op writes.
			h.rru += units
		default:
			h.wru += units
		}
	}})
	reg := jobs.NewRegistry()
	if _, err := examplekinds.Register(reg); err != nil {
		return nil, err
	}
	sealer, _ := jobs.NewAESSealer(make([]byte, 32))
	queue := sqsqueue.New(h.sqs, h.urls.Queue)
	// The functions' logs as Lambda ingests them (their own logger, at
	// INFO; the request id on warnings comes from the invocation's context,
	// set by invoke) and their metrics (EMF), counted.
	logger := lambdalog.New(&h.logs, func(string) string { return "" })
	metrics := func(service string) *jobs.Metrics {
		return &jobs.Metrics{Namespace: deployedNamespace, Service: service, Writer: &h.logs}
	}
	var bus driver.Bus
	if allEvents {
		h.bus = &localstack.EventBus{}
		srv := httptest.NewServer(h.bus)
		h.closers = append(h.closers, srv.Close)
		client := eventbridge.NewFromConfig(aws.Config{Region: localaws.Region, BaseEndpoint: aws.String(srv.URL + localstack.EventBusPath),
			Credentials: aws.AnonymousCredentials{}}, func(o *eventbridge.Options) { o.APIOptions = append(o.APIOptions, h.counter.APIOption) })
		bus = eventbus.New(client, localstack.LocalEventBus, eventbus.Config{})
	}
	// MessageFirst as every deployed function runs (the construct's
	// default).
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: queue, Sealer: sealer, Logger: logger, Metrics: metrics("enqueue"),
		AllEvents: allEvents, Bus: bus, MessageFirst: true})
	if err != nil {
		return nil, err
	}
	h.api = httpapi.New(svc, httpapi.Config{Logger: logger})
	h.client = &apiclient.Client{Base: &url.URL{Scheme: "http", Host: "in-process"}, Do: h.serve}
	h.worker, err = testroles.Worker(jobs.Config{Registry: reg, Store: store, Queue: queue, Sealer: sealer, Logger: logger, Metrics: metrics("worker"),
		Routes: examplekinds.Routes("arn:aws:iam::000000000000:user/bench"), CancelCheck: -1, AllEvents: allEvents, Bus: bus, MessageFirst: true})
	if err != nil {
		return nil, err
	}
	h.source = &localstack.EventSource{SQS: h.sqs, QueueURL: h.urls.Queue, BatchSize: 10, Invoke: func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		t := time.Now()
		resp, err := h.worker.HandleSQS(invocation(ctx), ev)
		h.mu.Lock()
		h.invokes++
		h.workerD += time.Since(t)
		h.mu.Unlock()
		return resp, err
	}}
	return h, nil
}

// invocation is ctx as Lambda gives it to a handler: with the invocation's
// request id, which the functions' warnings carry.
func invocation(ctx context.Context) context.Context {
	return lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "00000000-0000-0000-0000-000000000000"})
}

func (h *harness) close() {
	for _, c := range h.closers {
		c()
	}
}

// The scenarios that cost what a feature adds to a plain API job (the
// first scenario): its outcome announced, or run after another job.
const (
	scenarioEvents = "API-enqueued job announcing its outcome (job events for every kind)"
	scenarioAfter  = "API-enqueued jobs, half of them after the other half (one parent each)"
	scenarioMap    = "children a handler waits for: one example.nightly maps example.hash over all the jobs, a quarter at a time (jobs.Map; per child, the parent's share included)"
)

func (h *harness) reset() {
	h.counter.Reset()
	h.mu.Lock()
	h.wru, h.rru, h.invokes, h.workerD, h.enqD = 0, 0, 0, 0, 0
	h.pauseReads, h.began = 0, time.Now()
	h.mu.Unlock()
}

func (h *harness) enqueue(ctx context.Context, body string) error {
	_, err := h.enqueueID(ctx, body)
	return err
}

// enqueueID is enqueue, returning the job's id: a POST /v1/jobs of the
// API client, served in-process by the enqueue function's handler.
func (h *harness) enqueueID(ctx context.Context, body string) (string, error) {
	var v struct {
		ID string `json:"id"`
	}
	if _, err := h.client.Call(ctx, apiclient.Request{Route: deploy.RouteEnqueue, Body: json.RawMessage(body)}, &v); err != nil {
		return "", fmt.Errorf("enqueue: %w", err)
	}
	return v.ID, nil
}

// serve is the API client's Do: it hands the request to the enqueue
// function's handler as API Gateway's event of the bench's caller, and
// times the handler alone (the function's duration).
func (h *harness) serve(r *http.Request) (*http.Response, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	headers := map[string]string{}
	for k := range r.Header {
		headers[strings.ToLower(k)] = r.Header.Get(k)
	}
	ev := events.APIGatewayV2HTTPRequest{RawPath: r.URL.EscapedPath(), Body: string(body), Headers: headers,
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: r.Method, Path: r.URL.Path},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::000000000000:user/bench"}}}}
	t := time.Now()
	resp, _ := h.api.Route(invocation(r.Context()), ev)
	h.mu.Lock()
	h.enqD += time.Since(t)
	h.mu.Unlock()
	out := &http.Response{StatusCode: resp.StatusCode, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(resp.Body)), Request: r}
	for k, v := range resp.Headers {
		out.Header.Set(k, v)
	}
	return out, nil
}

// drain runs the event source until the queue is empty. The depth checks
// are the benchmark's own calls, not the system's: they are not counted.
func (h *harness) drain(ctx context.Context) error {
	probe := localaws.SQSClient(*h.sqs.Options().BaseEndpoint)
	for i := 0; i < 100000; i++ {
		out, err := probe.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(h.urls.Queue),
			AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"}})
		if err != nil {
			return err
		}
		a, _ := strconv.Atoi(out.Attributes["ApproximateNumberOfMessages"])
		b, _ := strconv.Atoi(out.Attributes["ApproximateNumberOfMessagesNotVisible"])
		if a+b == 0 {
			return nil
		}
		if err := h.source.PollOnce(ctx); err != nil {
			return err
		}
	}
	return fmt.Errorf("queue did not drain")
}

func (h *harness) result(name string, n int, enqueueInvokes, apiCalls float64) cost {
	c := cost{Name: name, Jobs: n, Requests: map[string]float64{}}
	for k, v := range h.counter.Counts() {
		c.Requests[k] = float64(v) / float64(n)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	// The pause set's reads are GetItems of the two instances (the enqueue
	// function's, the worker's), not of any job.
	c.PauseReads, c.Instances, c.Elapsed = h.pauseReads, 2, time.Since(h.began)
	if c.Requests["DynamoDB.GetItem"] -= float64(h.pauseReads) / float64(n); c.Requests["DynamoDB.GetItem"] < 1e-9 {
		delete(c.Requests, "DynamoDB.GetItem")
	}
	c.WRU, c.RRU = h.wru/float64(n), h.rru/float64(n)
	c.Invocations = enqueueInvokes + float64(h.invokes)/float64(n)
	c.GBSeconds = (h.enqD.Seconds()*enqueueMemoryGB + h.workerD.Seconds()*workerMemoryGB) / float64(n)
	c.APICalls = apiCalls
	c.LogBytes = float64(h.logs.n.Load()) / float64(n)
	c.LogBytesAtWarn = float64(h.logs.atWarn.Load()) / float64(n)
	if h.bus != nil {
		c.Entries = float64(len(h.bus.Events())) / float64(n)
	}
	c.LogLines = map[string]float64{}
	h.logs.mu.Lock()
	for k, v := range h.logs.byLine {
		c.LogLines[k] = float64(v) / float64(n)
	}
	h.logs.mu.Unlock()
	return c
}

// costs measures three scenarios of n jobs each.
func costs(ctx context.Context, n int) ([]cost, error) {
	ddbP, err := localaws.StartDynamoDB(ctx, localaws.Options{})
	if err != nil {
		return nil, err
	}
	defer ddbP.Stop()
	sqsP, err := localaws.StartSQS(ctx, localaws.Options{})
	if err != nil {
		return nil, err
	}
	defer sqsP.Stop()
	var out []cost
	scenarios := []struct {
		name string
		run  func(h *harness) (enqueueInvokes, api float64, err error)
	}{
		{"API-enqueued job (example.hash, 1 round)", func(h *harness) (float64, float64, error) {
			for i := range n {
				if err := h.enqueue(ctx, fmt.Sprintf(`{"kind":"example.hash","payload":{"text":"job %d","rounds":1}}`, i)); err != nil {
					return 0, 0, err
				}
			}
			return 1, 1, h.drain(ctx)
		}},
		{"job dropped on the queue by another service (plain envelope)", func(h *harness) (float64, float64, error) {
			for i := 0; i < n; i += 10 {
				var entries []sqstypes.SendMessageBatchRequestEntry
				for j := i; j < min(i+10, n); j++ {
					body, _ := json.Marshal(map[string]any{"kind": "example.hash", "payload": map[string]any{"text": fmt.Sprint("job ", j), "rounds": 1}})
					entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String(string(body))})
				}
				if _, err := h.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(h.urls.Queue), Entries: entries}); err != nil {
					return 0, 0, err
				}
			}
			return 0, 0, h.drain(ctx)
		}},
		{"API-enqueued job publishing 5 partial results (example.sleep, 6 steps)", func(h *harness) (float64, float64, error) {
			for range n {
				if err := h.enqueue(ctx, `{"kind":"example.sleep","payload":{"ms":0,"steps":6}}`); err != nil {
					return 0, 0, err
				}
			}
			return 1, 1, h.drain(ctx)
		}},
		{scenarioEvents, func(h *harness) (float64, float64, error) {
			for i := range n {
				if err := h.enqueue(ctx, fmt.Sprintf(`{"kind":"example.hash","payload":{"text":"job %d","rounds":1}}`, i)); err != nil {
					return 0, 0, err
				}
			}
			return 1, 1, h.drain(ctx)
		}},
		{scenarioAfter, func(h *harness) (float64, float64, error) {
			parents := make([]string, n/2)
			for i := range parents {
				id, err := h.enqueueID(ctx, fmt.Sprintf(`{"kind":"example.hash","payload":{"text":"parent %d","rounds":1}}`, i))
				if err != nil {
					return 0, 0, err
				}
				parents[i] = id
			}
			for i, p := range parents {
				if err := h.enqueue(ctx, fmt.Sprintf(`{"kind":"example.hash","payload":{"text":"child %d","rounds":1},"after":[%q]}`, i, p)); err != nil {
					return 0, 0, err
				}
			}
			return 1, 1, h.drain(ctx)
		}},
		{scenarioMap, func(h *harness) (float64, float64, error) {
			if err := h.enqueue(ctx, fmt.Sprintf(`{"kind":"example.nightly","payload":{"accounts":%d,"window":%d}}`, n, max(1, n/4))); err != nil {
				return 0, 0, err
			}
			return 1.0 / float64(n), 1.0 / float64(n), h.drain(ctx)
		}},
	}
	for i, sc := range scenarios {
		h, err := newHarness(ctx, ddbP.Endpoint, sqsP.Endpoint, fmt.Sprintf("bench-cost-%d", i), sc.name == scenarioEvents)
		if err != nil {
			return nil, err
		}
		defer h.close()
		h.reset()
		enq, api, err := sc.run(h)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sc.name, err)
		}
		out = append(out, h.result(sc.name, n, enq, api))
	}
	return out, nil
}
