package tracing_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"google.golang.org/protobuf/proto"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/internal/xrayudp"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn/tracing"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

type paid struct {
	Receipt string `json:"receipt"`
}

// A callback token is its own authority, so it must not leak: a traced
// enqueue function (JOBS_TRACING=on, tracing.XRay(), against DynamoDB
// Local and fauxqs) that serves POST /v1/callbacks/{token}, with the
// token in its event's path, route parameters and raw path as API
// Gateway sends them, sends spans (the invocation's, each DynamoDB and
// SQS call's) in which neither the token nor half of it appears, in any
// attribute, name or event: a span of an SDK call records the operation
// and the table or queue, never the request that carried the token. The
// local stack's TestACallbackTokenNeverShows searches the rest (the
// gateway's and the functions' output, the API's answers, the table).
func TestACallbackTokenIsInNoSpan(t *testing.T) {
	ctx := context.Background()
	ddb := testenv.DynamoDB(t)
	table := testenv.NewTable(t, ddb)
	urls := testenv.NewQueues(t, testenv.SQS(t), sqsqueue.DefaultSpec(10*time.Second))
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	sealer, err := jobs.NewAESSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	reg := jobs.NewRegistry()
	tokens := make(chan string, 1)
	kind := jobs.MustRegister(reg, "pay", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.JSON[paid], error) {
		tok, err := jobs.Step(ctx, job, "charge", func(context.Context) (string, error) { return job.CallbackToken("paid", time.Hour) })
		if err != nil {
			return jobs.JSON[paid]{}, err
		}
		select {
		case tokens <- tok:
		default:
		}
		p, _, err := jobs.WaitForSignal[paid](ctx, job, "paid", time.Hour)
		return jobs.JSON[paid]{V: p}, err
	}, &jobs.KindOpts{Signals: map[string]any{"paid": paid{}}})
	store := dynamostore.New(ddb, table, dynamostore.Config{})
	queue := sqsqueue.New(testenv.SQS(t), urls.Queue)
	cfg := jobs.Config{Registry: reg, Store: store, Queue: queue, Sealer: sealer}
	svc, err := testroles.Service(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := testroles.Worker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := kind.Enqueue(ctx, svc, "shop", struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := w.HandleSQS(wctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: message.Encode(res.Job.ID)}}}); err != nil {
		t.Fatal(err)
	}
	token := <-tokens
	if v, err := svc.Get(ctx, "shop", res.Job.ID); err != nil || v.WaitingOn != "signal" {
		t.Fatalf("the job before the callback: %+v %v", v, err)
	}

	daemon, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer daemon.Close()
	vars := map[string]string{
		deploy.EnvTable.Name: table, deploy.EnvQueueURL.Name: urls.Queue, deploy.EnvFunction.Name: deploy.Enqueue,
		deploy.EnvTracing.Name: "on", deploy.EnvPayloadKey.Name: base64.StdEncoding.EncodeToString(key),
		"AWS_XRAY_DAEMON_ADDRESS":   "udp:" + daemon.LocalAddr().String(),
		"AWS_ENDPOINT_URL_DYNAMODB": testenv.DynamoDBEndpoint(t), "AWS_ENDPOINT_URL_SQS": testenv.SQSEndpoint(t),
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
	}
	handler, err := lambdafn.Build(ctx, lambdafn.Enqueue, reg, func(k string) string { return vars[k] }, &lambdafn.Opts{Tracing: tracing.XRay()})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := handler.(io.Closer); ok {
		defer func() { _ = c.Close() }()
	}
	route, _ := deploy.RouteByID(deploy.RouteCallback)
	path, err := route.PathFor(map[string]string{"token": token})
	if err != nil {
		t.Fatal(err)
	}
	ev, _ := json.Marshal(events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: route.Key(), RawPath: path,
		Headers:        map[string]string{"content-type": "application/json"},
		PathParameters: map[string]string{"token": token},
		Body:           `{"receipt":"r-1"}`,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey: route.Key(), Stage: "$default", RequestID: "req-1",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: path, Protocol: "HTTP/1.1", SourceIP: "192.0.2.1"},
		},
	})
	//lint:ignore SA1029 the key aws-lambda-go itself puts the trace header under
	ictx := context.WithValue(ctx, "x-amzn-trace-id", "Root=1-674f0002-cccccccccccccccccccccccc;Parent=1234567890abcdef;Sampled=1")
	ictx, icancel := context.WithTimeout(ictx, 30*time.Second)
	defer icancel()
	out, err := handler.Invoke(ictx, ev)
	if err != nil {
		t.Fatal(err)
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode != 202 {
		t.Fatalf("the callback: %v %d %s", err, resp.StatusCode, resp.Body)
	}

	// The spans were flushed before Invoke returned: read every datagram.
	var names []string
	var spans []byte
	buf := make([]byte, 70000)
	for {
		_ = daemon.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		n, _, err := daemon.ReadFrom(buf)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		rs, err := xrayudp.Decode(buf[:n])
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			b, err := proto.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			spans = append(spans, b...)
			for _, ss := range r.ScopeSpans {
				for _, s := range ss.Spans {
					names = append(names, s.Name)
				}
			}
		}
	}
	all := strings.Join(names, " ")
	for _, want := range []string{deploy.Enqueue, "DynamoDB.GetItem", "DynamoDB.UpdateItem", "SQS.SendMessage"} {
		if !strings.Contains(all, want) {
			t.Fatalf("spans %q: want one named %s (the search below would prove nothing)", names, want)
		}
	}
	for _, part := range []string{token, token[:len(token)/2], token[len(token)/2:]} {
		if strings.Contains(string(spans), part) {
			t.Errorf("a span (of %q) holds the callback token or half of it", names)
		}
	}
	t.Logf("%d spans searched (%d bytes): %s", len(names), len(spans), all)
}
