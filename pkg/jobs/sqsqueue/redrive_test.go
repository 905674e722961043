package sqsqueue_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

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
	f := &testenv.FakeSQS{}
	job := `{"job_id":"` + wire.NewID() + `"}`
	f.Plant("dlq", job, "AROAWORKER:worker", "tabc")
	for _, s := range slices.Sorted(maps.Keys(forged)) {
		f.Plant("dlq", forged[s], "AIDAINSIDER", "")
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
	if len(f.Sent) != 1 || aws.ToString(f.Sent[0].MessageBody) != job || aws.ToString(f.Sent[0].MessageGroupId) != "tabc" || aws.ToString(f.Sent[0].QueueUrl) != "queue" {
		t.Fatalf("sent %+v, want the job reference to the queue in its group tabc", f.Sent)
	}
	if got := f.Bodies("dlq"); len(got) != len(forged) {
		t.Fatalf("the dead-letter queue holds %d messages, want the %d forged ones", len(got), len(forged))
	}
	if depths, _ := d.Depths(ctx); depths.DeadLetters != len(forged) {
		t.Fatalf("depths after the redrive: %+v (the messages left are visible again)", depths)
	}
	res, err := d.RedriveWith(ctx, sqsqueue.RedriveOpts{})
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
	res, err = d.RedriveWith(ctx, sqsqueue.RedriveOpts{AnyShape: true})
	if err != nil || res.Redriven != len(forged)-1 || res.Skipped[wire.SortEnvelopeWithoutKey] != 1 {
		t.Fatalf("redrive of any shape: %+v, %v", res, err)
	}
	if got := f.Bodies("dlq"); !slices.Equal(got, []string{forged[wire.SortEnvelopeWithoutKey]}) {
		t.Fatalf("left %v, want the envelope without a key", got)
	}
	left := f.IDs("dlq")[0]
	if _, err := d.RedriveWith(ctx, sqsqueue.RedriveOpts{ID: left, AnyShape: true}); !errors.As(err, &refused) || !refused.Never {
		t.Fatalf("redrive an envelope without a key by id, any shape: %v", err)
	}
}

// Each lane's dead letters go back to the lane's own queue.
func TestRedriveServesEachLane(t *testing.T) {
	ctx := context.Background()
	f := &testenv.FakeSQS{}
	job := `{"job_id":"` + wire.NewID() + `"}`
	id := f.Plant("dlq-bulk", job, "AROABULK:worker-bulk", "")
	f.Plant("dlq", `{"job_id":"`+wire.NewID()+`"}`, "AROAWORKER:worker", "")
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
	res, err := d.RedriveWith(ctx, sqsqueue.RedriveOpts{Lane: "bulk"})
	if err != nil || res.Redriven != 1 || len(f.Sent) != 1 || aws.ToString(f.Sent[0].QueueUrl) != "queue-bulk" {
		t.Fatalf("redrive bulk: %+v, %v, sent %+v", res, err, f.Sent)
	}
	if len(f.Bodies("dlq")) != 1 {
		t.Fatalf("the default lane's dead letter moved with the bulk lane's")
	}
	for _, lane := range []string{"urgent", "default"} {
		if _, err := d.PeekLane(ctx, lane, 10); !errors.Is(err, sqsqueue.ErrNoSuchLane) {
			t.Errorf("peek lane %q: %v", lane, err)
		}
		if _, err := d.RedriveWith(ctx, sqsqueue.RedriveOpts{Lane: lane}); !errors.Is(err, sqsqueue.ErrNoSuchLane) {
			t.Errorf("redrive lane %q: %v", lane, err)
		}
	}
	if len(f.Sent) != 1 {
		t.Fatalf("unknown lanes sent %d messages", len(f.Sent)-1)
	}
}
