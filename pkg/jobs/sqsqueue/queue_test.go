package sqsqueue_test

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"go.opentelemetry.io/otel/trace"

	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/internal/oteltrace"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
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
	if err := q.Send(ctx, driver.Message{JobID: one}); err != nil {
		t.Fatal(err)
	}
	want = append(want, one)
	var batch []string
	for range 23 { // three requests: 10 + 10 + 3
		batch = append(batch, wire.NewID())
	}
	if err := q.Send(ctx, messages(batch...)...); err != nil {
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
	attrs := func(url string) map[string]string {
		out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
			QueueUrl:       aws.String(url),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
		})
		if err != nil {
			t.Fatal(err)
		}
		return out.Attributes
	}
	q, dlq := attrs(urls.Queue), attrs(urls.DLQ)
	if got := q["VisibilityTimeout"]; got != "40" {
		t.Fatalf("visibility timeout %s, want 40 (2 x 20s)", got)
	}
	var redrive struct {
		MaxReceiveCount json.Number `json:"maxReceiveCount"`
	}
	if err := json.Unmarshal([]byte(q["RedrivePolicy"]), &redrive); err != nil || redrive.MaxReceiveCount != "10" {
		t.Fatalf("redrive policy %q (%v), want maxReceiveCount 10", q["RedrivePolicy"], err)
	}
	const fourteenDays = "1209600"
	if q["MessageRetentionPeriod"] != fourteenDays || dlq["MessageRetentionPeriod"] != fourteenDays {
		t.Fatalf("retention %s, DLQ %s: want 14 days (%s s) for both", q["MessageRetentionPeriod"], dlq["MessageRetentionPeriod"], fourteenDays)
	}
}

// The visibility timeout is the dead-worker bound (twice the worker timeout,
// plus the event source's batching window, which a received message also
// waits out), and Validate holds a spec to it: a dead worker's message must
// not come back while its run may still write, nor be given up before
// redeliveries settle its job.
func TestSpecValidate(t *testing.T) {
	const worker = 60 * time.Second
	if got := sqsqueue.DefaultSpec(worker); got.VisibilityTimeout != 2*time.Minute || got.MaxReceiveCount != 10 ||
		got.Retention != 14*24*time.Hour || got.DLQRetention != 14*24*time.Hour {
		t.Fatalf("DefaultSpec(1m) = %+v", got)
	}
	if got := sqsqueue.SpecFor(worker, 20*time.Second).VisibilityTimeout; got != 2*time.Minute+20*time.Second {
		t.Fatalf("SpecFor(1m, 20s) visibility %v, want 2m20s", got)
	}
	if err := sqsqueue.DefaultSpec(worker).Validate(worker); err != nil {
		t.Fatal(err)
	}
	bad := map[string]func(*sqsqueue.Spec){
		"visibility under 2x the worker timeout": func(s *sqsqueue.Spec) { s.VisibilityTimeout = 2*worker - time.Second },
		"visibility over 12 hours":               func(s *sqsqueue.Spec) { s.VisibilityTimeout = 13 * time.Hour },
		"maxReceiveCount under 10":               func(s *sqsqueue.Spec) { s.MaxReceiveCount = 9 },
		"retention over 14 days":                 func(s *sqsqueue.Spec) { s.Retention = 15 * 24 * time.Hour },
		"no retention":                           func(s *sqsqueue.Spec) { s.Retention = 0 },
		"DLQ retention under the queue's":        func(s *sqsqueue.Spec) { s.DLQRetention = 13 * 24 * time.Hour },
	}
	for name, change := range bad {
		s := sqsqueue.DefaultSpec(worker)
		change(&s)
		if err := s.Validate(worker); err == nil {
			t.Errorf("%s: accepted %+v", name, s)
		}
	}
}

// recordingAPI records what the queue asks SQS to send, before passing it
// on: fauxqs accepts system attributes but never returns AWSTraceHeader on
// receive, so the test asserts the requests themselves.
type recordingAPI struct {
	sqsqueue.API
	attrs  []map[string]types.MessageSystemAttributeValue
	groups []string
}

func (r *recordingAPI) SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	r.attrs = append(r.attrs, in.MessageSystemAttributes)
	r.groups = append(r.groups, aws.ToString(in.MessageGroupId))
	return r.API.SendMessage(ctx, in, opts...)
}

func (r *recordingAPI) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	for _, e := range in.Entries {
		r.attrs = append(r.attrs, e.MessageSystemAttributes)
		r.groups = append(r.groups, aws.ToString(e.MessageGroupId))
	}
	return r.API.SendMessageBatch(ctx, in, opts...)
}

// A message's group (its job's tenant) is its MessageGroupId on the wire,
// in a single send and in a batch, which a standard queue takes (SQS fair
// queues; fauxqs accepts it too).
func TestSendsCarryTheGroupID(t *testing.T) {
	client := testenv.SQS(t)
	urls := testenv.NewQueues(t, client, sqsqueue.DefaultSpec(30*time.Second))
	api := &recordingAPI{API: client}
	q := sqsqueue.New(api, urls.Queue)
	ctx := context.Background()
	if err := q.Send(ctx, driver.Message{JobID: wire.NewID(), Group: "ta"}); err != nil {
		t.Fatal(err)
	}
	if err := q.Send(ctx, driver.Message{JobID: wire.NewID(), Group: "ta"}, driver.Message{JobID: wire.NewID(), Group: "tb", Delay: time.Second}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(api.groups, ","); got != "ta,ta,tb" {
		t.Fatalf("group ids sent: %s, want ta,ta,tb", got)
	}
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
	if err := q.Send(ctx, driver.Message{JobID: wire.NewID()}); err != nil {
		t.Fatal(err)
	}
	if err := q.Send(ctx, driver.Message{JobID: wire.NewID(), Delay: time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := q.Send(ctx, messages(wire.NewID(), wire.NewID())...); err != nil {
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
	if err := q.Send(context.Background(), driver.Message{JobID: wire.NewID()}); err != nil || api.attrs[0] != nil {
		t.Fatalf("a send outside a traced invocation: %v %v", err, api.attrs)
	}
}

// With tracing on (a traced invocation's context: oteltrace), a send
// carries the current span's trace (the job's or the enqueue's span), not
// the invocation's header underneath it.
func TestSendsCarryTheCurrentSpan(t *testing.T) {
	client := testenv.SQS(t)
	urls := testenv.NewQueues(t, client, sqsqueue.DefaultSpec(30*time.Second))
	api := &recordingAPI{API: client}
	q := sqsqueue.New(api, urls.Queue)
	//lint:ignore SA1029 the key aws-lambda-go itself puts the trace header under
	ctx := context.WithValue(context.Background(), "x-amzn-trace-id", "Root=1-00000000-000000000000000000000000;Parent=0000000000000001;Sampled=1")
	ctx = oteltrace.ContextWithSpanHeader(ctx)
	tid, _ := trace.TraceIDFromHex("5759e988bd862e3fe1be46a994272793")
	sid, _ := trace.SpanIDFromHex("53995c3f42cd8ad8")
	ctx = trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	if err := q.Send(ctx, driver.Message{JobID: wire.NewID()}); err != nil {
		t.Fatal(err)
	}
	const want = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	if got := aws.ToString(api.attrs[0]["AWSTraceHeader"].StringValue); got != want {
		t.Fatalf("AWSTraceHeader %q, want %q", got, want)
	}
}

func messages(ids ...string) []driver.Message {
	out := make([]driver.Message, len(ids))
	for i, id := range ids {
		out[i] = driver.Message{JobID: id}
	}
	return out
}

// Each lane's messages go to its own queue; a lane without a queue is
// refused, and nothing of the request is sent to another lane's queue.
func TestLanesGoToTheirQueues(t *testing.T) {
	client := testenv.SQS(t)
	def := testenv.NewQueues(t, client, sqsqueue.DefaultSpec(30*time.Second))
	urgent := testenv.NewQueues(t, client, sqsqueue.DefaultSpec(30*time.Second))
	q := sqsqueue.NewLanes(client, map[string]string{"": def.Queue, "urgent": urgent.Queue})
	ctx := context.Background()
	a, b, c := wire.NewID(), wire.NewID(), wire.NewID()
	if err := q.Send(ctx, driver.Message{JobID: a}, driver.Message{JobID: b, Lane: "urgent"}, driver.Message{JobID: c, Lane: "urgent"}); err != nil {
		t.Fatal(err)
	}
	if got := receiveAll(t, client, def.Queue, 1); len(got) != 1 || got[0] != a {
		t.Fatalf("default lane received %v, want [%s]", got, a)
	}
	want := []string{b, c}
	sort.Strings(want)
	if got := receiveAll(t, client, urgent.Queue, 2); len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("urgent lane received %v, want %v", got, want)
	}
	if err := q.Send(ctx, driver.Message{JobID: wire.NewID(), Lane: "bulk"}); err == nil || !strings.Contains(err.Error(), `lane "bulk"`) {
		t.Fatalf("a lane without a queue: %v, want it refused", err)
	}
}
