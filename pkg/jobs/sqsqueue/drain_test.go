package sqsqueue_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// visible is the number of visible messages of the queue at url.
func visible(t *testing.T, client *sqs.Client, url string) string {
	t.Helper()
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)]
}

// The Sweeper's side of DeadLetters on SQS (fauxqs): every lane's DLQ is
// read; a receive takes each message once, up to its bound, and hides what
// it took; a delete removes a message, a release shows it again at once.
func TestDeadLettersServeTheSweeperOnSQS(t *testing.T) {
	client := testenv.SQS(t)
	ctx := context.Background()
	def := testenv.NewQueues(t, client, sqsqueue.DefaultSpec(30*time.Second))
	bulk := testenv.NewQueues(t, client, sqsqueue.DefaultSpec(30*time.Second))
	d := &sqsqueue.DeadLetters{SQS: client, QueueURL: def.Queue, DLQURL: def.DLQ,
		LaneQueueURLs: map[string]string{"bulk": bulk.Queue}, LaneDLQURLs: map[string]string{"bulk": bulk.DLQ}}
	if got := d.Lanes(); !slices.Equal(got, []string{"", "bulk"}) {
		t.Fatalf("lanes %q", got)
	}
	var bodies []string
	for i := range 13 {
		b := message.Encode(wire.NewID())
		if i == 12 {
			b = `{"Records":[]}`
		}
		bodies = append(bodies, b)
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(def.DLQ), MessageBody: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(bulk.DLQ), MessageBody: aws.String(bodies[0])}); err != nil {
		t.Fatal(err)
	}
	first, err := d.ReceiveDead(ctx, "", 11)
	if err != nil || len(first) != 11 {
		t.Fatalf("receive 11: %d, %v", len(first), err)
	}
	rest, err := d.ReceiveDead(ctx, "", 11)
	if err != nil || len(rest) != 2 {
		t.Fatalf("a second receive got %d, %v; want the 2 the first did not take (those it took are hidden)", len(rest), err)
	}
	var got []string
	for _, dl := range append(first, rest...) {
		if dl.Receipt == "" {
			t.Fatalf("no receipt: %+v", dl)
		}
		got = append(got, dl.Body)
	}
	slices.Sort(got)
	want := slices.Clone(bodies)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("received %q, want each message once: %q", got, want)
	}
	for _, dl := range first {
		if err := d.DeleteDead(ctx, "", dl.Receipt); err != nil {
			t.Fatal(err)
		}
	}
	for _, dl := range rest {
		if err := d.ReleaseDead(ctx, "", dl.Receipt); err != nil {
			t.Fatal(err)
		}
	}
	if n := visible(t, client, def.DLQ); n != "2" {
		t.Fatalf("after deleting 11 and releasing 2, %s visible; want 2", n)
	}
	lane, err := d.ReceiveDead(ctx, "bulk", 100)
	if err != nil || len(lane) != 1 || lane[0].Body != bodies[0] {
		t.Fatalf("bulk lane: %+v, %v", lane, err)
	}
	if _, err := d.ReceiveDead(ctx, "nosuch", 10); err == nil {
		t.Fatal("a lane it does not serve: no error")
	}
}

// A sweep over SQS: a dead letter naming a job that was never claimed is
// sent again to its lane's queue and deleted; a foreign message stays in
// the DLQ, visible.
func TestSweepDrainsTheDeadLettersOfSQS(t *testing.T) {
	client := testenv.SQS(t)
	ctx := context.Background()
	urls := testenv.NewQueues(t, client, sqsqueue.DefaultSpec(30*time.Second))
	clock := jobstest.NewClock(time.Now())
	store := jobstest.NewMemStore(clock)
	rec := jobstest.NewRecord(wire.NewID(), clock.Now())
	rec.SweepAt = time.Time{}
	if err := store.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{message.Encode(rec.ID), `{"Records":[{"eventSource":"aws:s3"}]}`} {
		if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(urls.DLQ), MessageBody: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
	sw, err := testroles.Sweeper(jobs.Config{Registry: jobs.NewRegistry(), Store: store, Clock: clock, Queue: sqsqueue.New(client, urls.Queue),
		DeadLetters: &sqsqueue.DeadLetters{SQS: client, QueueURL: urls.Queue, DLQURL: urls.DLQ}})
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rep, err := sw.Sweep(sctx)
	if err != nil || rep.DeadLettersSettled != 1 || rep.DeadLettersLeft != 1 || rep.Resent != 1 {
		t.Fatalf("sweep: %+v, %v", rep, err)
	}
	if n := visible(t, client, urls.DLQ); n != "1" {
		t.Fatalf("DLQ: %s visible, want the foreign message, visible at once", n)
	}
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(urls.Queue), MaxNumberOfMessages: 10})
	if err != nil || len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != message.Encode(rec.ID) {
		t.Fatalf("queue: %+v, %v; want the job's reference sent again", out, err)
	}
}
