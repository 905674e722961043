package sqsqueue_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// fakeSQS holds queues in memory, as SQS keeps them: each message with its
// id, its sender (SenderId) and its group (MessageGroupId); a received
// message is hidden until it is released or deleted. Every send is
// recorded.
type fakeSQS struct {
	queues map[string][]*fakeMsg
	sent   []sqs.SendMessageInput
	next   int
}

type fakeMsg struct {
	id, body, sender, group string
	hidden                  bool
	receives                int
}

func (f *fakeSQS) plant(queue, body, sender, group string) string {
	if f.queues == nil {
		f.queues = map[string][]*fakeMsg{}
	}
	f.next++
	id := "m" + strconv.Itoa(f.next)
	f.queues[queue] = append(f.queues[queue], &fakeMsg{id: id, body: body, sender: sender, group: group})
	return id
}

func (f *fakeSQS) bodies(queue string) []string {
	var out []string
	for _, m := range f.queues[queue] {
		out = append(out, m.body)
	}
	return out
}

func (f *fakeSQS) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	visible, hidden := 0, 0
	for _, m := range f.queues[aws.ToString(in.QueueUrl)] {
		if m.hidden {
			hidden++
		} else {
			visible++
		}
	}
	return &sqs.GetQueueAttributesOutput{Attributes: map[string]string{
		"ApproximateNumberOfMessages": strconv.Itoa(visible), "ApproximateNumberOfMessagesNotVisible": strconv.Itoa(hidden)}}, nil
}

func (f *fakeSQS) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	out := &sqs.ReceiveMessageOutput{}
	for _, m := range f.queues[aws.ToString(in.QueueUrl)] {
		if m.hidden || len(out.Messages) == int(in.MaxNumberOfMessages) {
			continue
		}
		m.hidden = true
		m.receives++
		attrs := map[string]string{"ApproximateReceiveCount": strconv.Itoa(m.receives), "SentTimestamp": "1700000000000"}
		for _, name := range in.MessageSystemAttributeNames {
			switch name {
			case types.MessageSystemAttributeNameSenderId:
				attrs["SenderId"] = m.sender
			case types.MessageSystemAttributeNameMessageGroupId:
				if m.group != "" {
					attrs["MessageGroupId"] = m.group
				}
			}
		}
		out.Messages = append(out.Messages, types.Message{MessageId: aws.String(m.id), Body: aws.String(m.body), ReceiptHandle: aws.String(m.id), Attributes: attrs})
	}
	return out, nil
}

func (f *fakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.sent = append(f.sent, *in)
	id := f.plant(aws.ToString(in.QueueUrl), aws.ToString(in.MessageBody), "cancel", aws.ToString(in.MessageGroupId))
	return &sqs.SendMessageOutput{MessageId: aws.String(id)}, nil
}

func (f *fakeSQS) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	q := aws.ToString(in.QueueUrl)
	f.queues[q] = slices.DeleteFunc(f.queues[q], func(m *fakeMsg) bool { return m.id == aws.ToString(in.ReceiptHandle) })
	return &sqs.DeleteMessageOutput{}, nil
}

func (f *fakeSQS) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	for _, m := range f.queues[aws.ToString(in.QueueUrl)] {
		if m.id == aws.ToString(in.ReceiptHandle) && in.VisibilityTimeout == 0 {
			m.hidden = false
		}
	}
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

// What an insider able to send to a dead-letter queue could plant there,
// one of each sort the worker would trust, by sort.
var forged = map[string]string{
	wire.SortEnvelope:           `{"kind":"example.hash","payload":{"text":"x","rounds":1},"idempotency_key":"k1"}`,
	wire.SortEnvelopeWithoutKey: `{"kind":"example.hash","payload":{"text":"x","rounds":1}}`,
	wire.SortS3:                 `{"Records":[{"eventSource":"aws:s3","eventName":"ObjectCreated:Put","s3":{"bucket":{"name":"b"},"object":{"key":"k"}}}]}`,
	wire.SortEventBridge:        `{"version":"0","id":"e1","source":"acme.orders","detail-type":"Order Placed","detail":{}}`,
	wire.SortSNS:                `{"Type":"Notification","MessageId":"s1","TopicArn":"arn:aws:sns:us-east-1:1:t","Message":"{}"}`,
	wire.SortFire:               wire.FireMessage("nightly", "2026-01-01T00:00:00Z"),
}

// A redrive of all moves only job references, in their group, and leaves
// the forged messages in the dead-letter queue, counting them by sort; a
// peek shows each one's sender and sort. Asked for any shape, it moves
// them too, except an envelope without an idempotency key, which no
// redrive moves (it would become a second job).
func TestRedriveAllLeavesWhatIsNotAJobReference(t *testing.T) {
	ctx := context.Background()
	f := &fakeSQS{}
	job := `{"job_id":"` + wire.NewID() + `"}`
	f.plant("dlq", job, "AROAWORKER:worker", "tabc")
	for _, s := range slices.Sorted(maps.Keys(forged)) {
		f.plant("dlq", forged[s], "AIDAINSIDER", "")
	}
	d := &sqsqueue.DeadLetters{SQS: f, QueueURL: "queue", DLQURL: "dlq"}

	peeked, err := d.Peek(ctx, 20)
	if err != nil || len(peeked) != 1+len(forged) {
		t.Fatalf("peek: %d, %v", len(peeked), err)
	}
	for _, p := range peeked {
		want := "AIDAINSIDER"
		if p.Sort == wire.SortJob {
			want = "AROAWORKER:worker"
		}
		if p.Sender != want {
			t.Errorf("a %s dead letter shows sender %q, want %q", p.Sort, p.Sender, want)
		}
		if _, isForged := forged[p.Sort]; !isForged && p.Sort != wire.SortJob {
			t.Errorf("a dead letter of sort %q", p.Sort)
		}
	}

	n, err := d.RedriveAll(ctx)
	if err != nil || n != 1 {
		t.Fatalf("redrive all: %d, %v; want the job reference only", n, err)
	}
	if len(f.sent) != 1 || aws.ToString(f.sent[0].MessageBody) != job || aws.ToString(f.sent[0].MessageGroupId) != "tabc" || aws.ToString(f.sent[0].QueueUrl) != "queue" {
		t.Fatalf("sent %+v, want the job reference to the queue in its group tabc", f.sent)
	}
	if got := f.bodies("dlq"); len(got) != len(forged) {
		t.Fatalf("the dead-letter queue holds %d messages, want the %d forged ones", len(got), len(forged))
	}
	if depths, _ := d.Depths(ctx); depths.DeadLetters != len(forged) {
		t.Fatalf("depths after the redrive: %+v (the messages left are visible again)", depths)
	}
	res, err := d.RedriveWith(ctx, sqsqueue.RedriveOptions{})
	want := map[string]int{}
	for s := range forged {
		want[s] = 1
	}
	if err != nil || res.Redriven != 0 || res.More || !maps.Equal(res.Skipped, want) {
		t.Fatalf("a second redrive of all: %+v, %v; want none moved and each forged sort skipped once", res, err)
	}

	// One by id: refused, and left where it is.
	var envelope string
	for _, p := range peeked {
		if p.Sort == wire.SortEnvelope {
			envelope = p.ID
		}
	}
	var refused *sqsqueue.RefusedError
	if err := d.Redrive(ctx, envelope); !errors.As(err, &refused) || refused.Sort != wire.SortEnvelope || refused.Never {
		t.Fatalf("redrive a planted envelope by id: %v", err)
	}

	// Asked for any shape: all but the envelope without a key.
	res, err = d.RedriveWith(ctx, sqsqueue.RedriveOptions{AnyShape: true})
	if err != nil || res.Redriven != len(forged)-1 || res.Skipped[wire.SortEnvelopeWithoutKey] != 1 {
		t.Fatalf("redrive of any shape: %+v, %v", res, err)
	}
	if got := f.bodies("dlq"); !slices.Equal(got, []string{forged[wire.SortEnvelopeWithoutKey]}) {
		t.Fatalf("left %v, want the envelope without a key", got)
	}
	left := f.queues["dlq"][0].id
	if _, err := d.RedriveWith(ctx, sqsqueue.RedriveOptions{ID: left, AnyShape: true}); !errors.As(err, &refused) || !refused.Never {
		t.Fatalf("redrive an envelope without a key by id, any shape: %v", err)
	}
}

// Each lane's dead letters go back to the lane's own queue.
func TestRedriveServesEachLane(t *testing.T) {
	ctx := context.Background()
	f := &fakeSQS{}
	job := `{"job_id":"` + wire.NewID() + `"}`
	id := f.plant("dlq-bulk", job, "AROABULK:worker-bulk", "")
	f.plant("dlq", `{"job_id":"`+wire.NewID()+`"}`, "AROAWORKER:worker", "")
	d := &sqsqueue.DeadLetters{SQS: f, QueueURL: "queue", DLQURL: "dlq",
		LaneQueueURLs: map[string]string{"bulk": "queue-bulk"}, LaneDLQURLs: map[string]string{"bulk": "dlq-bulk"}}
	if got := d.Lanes(); !slices.Equal(got, []string{"", "bulk"}) {
		t.Fatalf("lanes %q", got)
	}
	depths, err := d.Depths(ctx)
	if err != nil || depths.DeadLetters != 1 || depths.LaneDeadLetters["bulk"] != 1 || depths.Lanes["bulk"] != 0 {
		t.Fatalf("depths %+v, %v", depths, err)
	}
	peeked, err := d.PeekLane(ctx, "bulk", 10)
	if err != nil || len(peeked) != 1 || peeked[0].ID != id || peeked[0].Sender != "AROABULK:worker-bulk" {
		t.Fatalf("peek bulk: %+v, %v", peeked, err)
	}
	res, err := d.RedriveWith(ctx, sqsqueue.RedriveOptions{Lane: "bulk"})
	if err != nil || res.Redriven != 1 || len(f.sent) != 1 || aws.ToString(f.sent[0].QueueUrl) != "queue-bulk" {
		t.Fatalf("redrive bulk: %+v, %v, sent %+v", res, err, f.sent)
	}
	if len(f.bodies("dlq")) != 1 {
		t.Fatalf("the default lane's dead letter moved with the bulk lane's")
	}
	for _, lane := range []string{"urgent", "default"} {
		if _, err := d.PeekLane(ctx, lane, 10); !errors.Is(err, sqsqueue.ErrNoSuchLane) {
			t.Errorf("peek lane %q: %v", lane, err)
		}
		if _, err := d.RedriveWith(ctx, sqsqueue.RedriveOptions{Lane: lane}); !errors.Is(err, sqsqueue.ErrNoSuchLane) {
			t.Errorf("redrive lane %q: %v", lane, err)
		}
	}
	if len(f.sent) != 1 {
		t.Fatalf("unknown lanes sent %d messages", len(f.sent)-1)
	}
}
