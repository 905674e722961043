package sqsqueue_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdajobs/lambdajobs/internal/testenv"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/internal/message"
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
	one := jobs.NewID()
	if err := q.Send(ctx, one); err != nil {
		t.Fatal(err)
	}
	want = append(want, one)
	var batch []string
	for range 23 { // three requests: 10 + 10 + 3
		batch = append(batch, jobs.NewID())
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
