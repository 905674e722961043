package sqsqueue_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/trace"

	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/internal/testenv"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	_ "github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn/tracing" // the current span's header (wire.SpanHeader)
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func receiveAll(t *testing.T, client *sqs.Client, url string, want int) []string {
	t.Helper()
	var ids []string
	deadline := time.Now().Add(10 * time.Second)
	for len(ids) < want && time.Now().Before(deadline) {
		out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			id, err := message.Decode(aws.ToString(m.Body))
			if err != nil {
				t.Fatalf("body %q: %v", aws.ToString(m.Body), err)
			}
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

func TestSendAndSendBatch(t *testing.T) {
	client := testenv.SQS(t)
	urls := testenv.NewQueues(t, client, sqsqueue.DefaultSpec(30*time.Second))
	q := sqsqueue.New(client, urls.Queue)
	ctx := context.Background()
	var want []string
	one := wire.NewID()
	if err := q.Send(ctx, one); err != nil {
		t.Fatal(err)
	}
	want = append(want, one)
	var batch []string
	for range 23 { // three requests: 10 + 10 + 3
		batch = append(batch, wire.NewID())
	}
	if err := q.SendBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	want = append(want, batch...)
	sort.Strings(want)
	got := receiveAll(t, client, urls.Queue, len(want))
	if len(got) != len(want) {
		t.Fatalf("received %d messages, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("received %v, want %v", got, want)
		}
	}
}

func TestCreateAppliesSpec(t *testing.T) {
	client := testenv.SQS(t)
	spec := sqsqueue.DefaultSpec(20 * time.Second)
	urls := testenv.NewQueues(t, client, spec)
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(urls.Queue),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := out.Attributes["VisibilityTimeout"]; got != "120" {
		t.Fatalf("visibility timeout %s, want 120 (6 x 20s)", got)
	}
	if got := out.Attributes["RedrivePolicy"]; got == "" {
		t.Fatal("no redrive policy")
	}
	if err := spec.Validate(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := spec.Validate(21 * time.Second); err == nil {
		t.Fatal("a visibility timeout under 6x the worker timeout was accepted")
	}
}

// recordingAPI records what the queue asks SQS to send, before passing it
// on: fauxqs accepts system attributes but never returns AWSTraceHeader on
// receive, so the test asserts the requests themselves.
type recordingAPI struct {
	sqsqueue.API
	attrs []map[string]types.MessageSystemAttributeValue
}

func (r *recordingAPI) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	r.attrs = append(r.attrs, in.MessageSystemAttributes)
	return r.API.SendMessage(ctx, in, opts...)
}

func (r *recordingAPI) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	for _, e := range in.Entries {
		r.attrs = append(r.attrs, e.MessageSystemAttributes)
	}
	return r.API.SendMessageBatch(ctx, in, opts...)
}

// Inside a traced Lambda invocation, every send carries the invocation's
// trace header as the AWSTraceHeader system attribute, so the worker's run
// joins the enqueue's trace; outside one, nothing is added.
func TestSendsCarryTheTraceHeader(t *testing.T) {
	client := testenv.SQS(t)
	urls := testenv.NewQueues(t, client, sqsqueue.DefaultSpec(30*time.Second))
	api := &recordingAPI{API: client}
	q := sqsqueue.New(api, urls.Queue)
	const header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	//lint:ignore SA1029 the key aws-lambda-go itself puts the trace header under
	ctx := context.WithValue(context.Background(), "x-amzn-trace-id", header)
	if err := q.Send(ctx, wire.NewID()); err != nil {
		t.Fatal(err)
	}
	if err := q.SendDelayed(ctx, wire.NewID(), time.Second); err != nil {
		t.Fatal(err)
	}
	if err := q.SendBatch(ctx, []string{wire.NewID(), wire.NewID()}); err != nil {
		t.Fatal(err)
	}
	if len(api.attrs) != 4 {
		t.Fatalf("%d sends recorded, want 4", len(api.attrs))
	}
	for i, a := range api.attrs {
		if v := a["AWSTraceHeader"]; aws.ToString(v.StringValue) != header || aws.ToString(v.DataType) != "String" {
			t.Fatalf("send %d: system attributes %v, want AWSTraceHeader", i, a)
		}
	}
	api.attrs = nil
	if err := q.Send(context.Background(), wire.NewID()); err != nil || api.attrs[0] != nil {
		t.Fatalf("a send outside a traced invocation: %v %v", err, api.attrs)
	}
}

// With tracing on, a send carries the current span's trace (the job's or
// the enqueue's span), not the invocation's header underneath it.
func TestSendsCarryTheCurrentSpan(t *testing.T) {
	client := testenv.SQS(t)
	urls := testenv.NewQueues(t, client, sqsqueue.DefaultSpec(30*time.Second))
	api := &recordingAPI{API: client}
	q := sqsqueue.New(api, urls.Queue)
	//lint:ignore SA1029 the key aws-lambda-go itself puts the trace header under
	ctx := context.WithValue(context.Background(), "x-amzn-trace-id", "Root=1-00000000-000000000000000000000000;Parent=0000000000000001;Sampled=1")
	tid, _ := trace.TraceIDFromHex("5759e988bd862e3fe1be46a994272793")
	sid, _ := trace.SpanIDFromHex("53995c3f42cd8ad8")
	ctx = trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	if err := q.Send(ctx, wire.NewID()); err != nil {
		t.Fatal(err)
	}
	const want = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	if got := aws.ToString(api.attrs[0]["AWSTraceHeader"].StringValue); got != want {
		t.Fatalf("AWSTraceHeader %q, want %q", got, want)
	}
}
