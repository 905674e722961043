package integration_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

func foreign(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "pkg", "jobs", "testdata", "foreign", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestForeignMessagesBecomeJobs drops each shape another AWS service
// produces on the real (emulated) queue, twice, and reads the jobs through
// the HTTP handlers as their owner.
func TestForeignMessagesBecomeJobs(t *testing.T) {
	s := newStack(t, options{})
	ctx := context.Background()
	bodies := map[string]string{
		"S3 (two records)":        foreign(t, "s3-two-records.json"),
		"EventBridge":             foreign(t, "eventbridge.json"),
		"SNS-wrapped EventBridge": foreign(t, "sns-wrapped-eventbridge.json"),
		"plain envelope":          `{"kind":"example.hash","payload":{"text":"hello","rounds":1},"idempotency_key":"k-1"}`,
		"S3 test event":           foreign(t, "s3-test-event.json"),
	}
	want := map[string]string{}
	for name, body := range bodies {
		for range 2 { // every message delivered twice
			out, err := s.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(s.urls.Queue), MessageBody: aws.String(body)})
			if err != nil {
				t.Fatal(err)
			}
			ids, _ := wire.DerivedJobIDs(body, aws.ToString(out.MessageId), alice)
			for _, id := range ids {
				want[id] = name
			}
		}
	}
	s.drain()
	// S3: 2 jobs; EventBridge direct and through SNS: the same event, 1 job;
	// the keyed envelope: 1 job; the test event: none.
	if len(want) != 4 {
		t.Fatalf("%d distinct jobs expected from the ids, want 4: %v", len(want), want)
	}
	for id, name := range want {
		st, v := s.get(id)
		if st != 200 || v.Status != jobs.StatusSucceeded || v.Attempt != 1 {
			t.Errorf("%s: job %s: %d %+v", name, id, st, v)
		}
	}
	if n := depth(t, s.sqs, s.urls.DLQ); n != 0 {
		t.Fatalf("%d messages in the DLQ", n)
	}
}
