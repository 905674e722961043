package sqsqueue_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// The dead-letter queue on SQS (fauxqs): depths read nothing else, a peek
// shows messages by shape, sort and sender and leaves them there; a
// redrive of all moves the job reference back to the queue in its group
// and leaves the rest; asked for any shape, a redrive moves a foreign
// message by id, and then what is left but an envelope without a key.
// (fauxqs answers SenderId with its account, 000000000000, for every
// message, and keeps no MessageGroupId on a standard queue:
// TestRedriveAllLeavesWhatIsNotAJobReference shows senders apart and the
// group kept.)
func TestDeadLettersOnSQS(t *testing.T) {
	client := testenv.SQS(t)
	urls := testenv.NewQueues(t, client, sqsqueue.DefaultSpec(30*time.Second))
	ctx := context.Background()
	bodies := []string{`{"job_id":"a"}`, `{"Records":[{"eventSource":"x","secret":"hunter2"}]}`, `not json`, `{"kind":"example.hash","payload":{}}`}
	var ids []string
	for _, b := range bodies {
		out, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(urls.DLQ), MessageBody: aws.String(b)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, aws.ToString(out.MessageId))
	}
	// Another lane's queue, holding one message: its depth is shown too.
	lane := testenv.NewQueues(t, client, sqsqueue.DefaultSpec(30*time.Second))
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(lane.Queue), MessageBody: aws.String(`{"job_id":"b"}`)}); err != nil {
		t.Fatal(err)
	}
	d := &sqsqueue.DeadLetters{SQS: client, QueueURL: urls.Queue, DLQURL: urls.DLQ, LaneQueueURLs: map[string]string{"bulk": lane.Queue}}
	depths, err := d.Depths(ctx)
	if err != nil || depths.DeadLetters != 4 || depths.Queue != 0 || depths.Lanes["bulk"] != 1 {
		t.Fatalf("depths %+v, %v; want 4 dead letters, 0 queued, 1 in the bulk lane", depths, err)
	}
	peeked, err := d.Peek(ctx, 10)
	if err != nil || len(peeked) != 4 {
		t.Fatalf("peek: %+v, %v", peeked, err)
	}
	sorts := map[string]string{}
	for _, dl := range peeked {
		if strings.Contains(dl.Shape+dl.Why, "hunter2") || dl.Shape == "" || dl.Why == "" || dl.Receives < 1 || dl.Sender == "" {
			t.Errorf("a dead letter is shown by its shape, sort and sender only: %+v", dl)
		}
		sorts[dl.ID] = dl.Sort + " " + dl.Redrive
	}
	if want := map[string]string{ids[0]: "job moves", ids[1]: "s3 only_any_shape", ids[2]: "other only_any_shape", ids[3]: "envelope_without_key never"}; !maps.Equal(sorts, want) {
		t.Errorf("sorts %v, want %v", sorts, want)
	}
	if depths, _ := d.Depths(ctx); depths.DeadLetters != 4 {
		t.Fatalf("after a peek the DLQ holds %d, want 4 (released at once)", depths.DeadLetters)
	}
	var refused *sqsqueue.RefusedError
	if err := d.Redrive(ctx, ids[1]); !errors.As(err, &refused) {
		t.Fatalf("redrive an S3 record without asking for any shape: %v", err)
	}
	if _, err := d.RedriveWith(ctx, sqsqueue.RedriveOpts{ID: ids[1], AnyShape: true}); err != nil {
		t.Fatal(err)
	}
	// The others, received while looking for it, are visible again at
	// once (not after the receive's visibility timeout).
	if out, _ := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(urls.DLQ),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}}); out.Attributes["ApproximateNumberOfMessages"] != "3" {
		t.Fatalf("after a redrive of one, %s of the others are visible, want 3", out.Attributes["ApproximateNumberOfMessages"])
	}
	if err := d.Redrive(ctx, ids[1]); !errors.Is(err, sqsqueue.ErrNoSuchDeadLetter) {
		t.Fatalf("redriving a message twice: %v", err)
	}
	n, err := d.RedriveAll(ctx)
	if err != nil || n != 1 {
		t.Fatalf("redrive all: %d, %v; want the job reference only", n, err)
	}
	res, err := d.RedriveWith(ctx, sqsqueue.RedriveOpts{AnyShape: true})
	if err != nil || res.Redriven != 1 || res.Skipped[wire.SortEnvelopeWithoutKey] != 1 {
		t.Fatalf("redrive of any shape: %+v, %v; want the non-JSON body moved and the envelope without a key left", res, err)
	}
	if depths, _ := d.Depths(ctx); depths.DeadLetters != 1 || depths.Queue != 3 {
		t.Fatalf("after the redrives: %+v", depths)
	}
}

func TestWhy(t *testing.T) {
	for body, want := range map[string]string{
		`{"job_id":"x"}`: "a job's message",
		`{"lambdajobs_schedule":"n","scheduled_time":"t"}`: "a schedule's fire",
		`{"Records":[]}`: "no route accepts a message of this shape",
		`not json`:       "not JSON",
	} {
		if got := sqsqueue.Why(body); !strings.Contains(got, want) {
			t.Errorf("Why(%s) = %q, want %q", body, got, want)
		}
	}
}

// waitRecorder answers every receive with nothing and records how long
// each asked to wait.
type waitRecorder struct {
	sqsqueue.DeadLetterAPI
	waits []int32
}

func (w *waitRecorder) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	w.waits = append(w.waits, in.WaitTimeSeconds)
	return &sqs.ReceiveMessageOutput{}, nil
}

// The sweeper's drain long-polls: a short poll samples some of SQS's
// servers and may answer nothing while a dead letter waits, so a lone one
// could be missed sweep after sweep.
func TestTheDrainLongPolls(t *testing.T) {
	rec := &waitRecorder{}
	d := &sqsqueue.DeadLetters{SQS: rec, QueueURL: "q", DLQURL: "dlq"}
	if got, err := d.ReceiveDead(context.Background(), "", 100); err != nil || len(got) != 0 {
		t.Fatalf("ReceiveDead = %v, %v", got, err)
	}
	if len(rec.waits) != 1 || rec.waits[0] < 1 {
		t.Fatalf("receives waited %v seconds, want one long poll (an empty long poll means an empty queue)", rec.waits)
	}
}
