package sqsqueue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdajobs/lambdajobs/internal/testenv"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// The dead-letter queue on SQS (fauxqs): depths read nothing else, a peek
// shows messages by shape and leaves them there, a redrive moves one by id
// and then the rest back to the queue.
func TestDeadLettersOnSQS(t *testing.T) {
	client := testenv.SQS(t)
	urls := testenv.NewQueues(t, client, sqsqueue.DefaultSpec(30*time.Second))
	ctx := context.Background()
	bodies := []string{`{"job_id":"a"}`, `{"Records":[{"eventSource":"x","secret":"hunter2"}]}`, `not json`}
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
	if err != nil || depths.DeadLetters != 3 || depths.Queue != 0 || depths.Lanes["bulk"] != 1 {
		t.Fatalf("depths %+v, %v; want 3 dead letters, 0 queued, 1 in the bulk lane", depths, err)
	}
	peeked, err := d.Peek(ctx, 10)
	if err != nil || len(peeked) != 3 {
		t.Fatalf("peek: %+v, %v", peeked, err)
	}
	for _, dl := range peeked {
		if strings.Contains(dl.Shape+dl.Why, "hunter2") || dl.Shape == "" || dl.Why == "" || dl.Receives < 1 {
			t.Errorf("a dead letter is shown by its shape only: %+v", dl)
		}
	}
	if depths, _ := d.Depths(ctx); depths.DeadLetters != 3 {
		t.Fatalf("after a peek the DLQ holds %d, want 3 (released at once)", depths.DeadLetters)
	}
	if err := d.Redrive(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	// The others, received while looking for it, are visible again at
	// once (not after the receive's visibility timeout).
	if out, _ := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(urls.DLQ),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}}); out.Attributes["ApproximateNumberOfMessages"] != "2" {
		t.Fatalf("after a redrive of one, %s of the others are visible, want 2", out.Attributes["ApproximateNumberOfMessages"])
	}
	if err := d.Redrive(ctx, ids[1]); !errors.Is(err, sqsqueue.ErrNoSuchDeadLetter) {
		t.Fatalf("redriving a message twice: %v", err)
	}
	n, err := d.RedriveAll(ctx)
	if err != nil || n != 2 {
		t.Fatalf("redrive all: %d, %v", n, err)
	}
	if depths, _ := d.Depths(ctx); depths.DeadLetters != 0 || depths.Queue != 3 {
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
