package localstack

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// unansweredSQS never answers a receive (as the SQS emulator once did,
// for minutes), until its caller gives up; the second receive answers
// one message.
type unansweredSQS struct{ receives int }

func (s *unansweredSQS) ReceiveMessage(ctx context.Context, _ *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	s.receives++
	if s.receives == 1 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &sqs.ReceiveMessageOutput{Messages: []types.Message{{MessageId: new("m"), ReceiptHandle: new("r"), Body: new("{}")}}}, nil
}

func (s *unansweredSQS) DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	return &sqs.DeleteMessageBatchOutput{}, nil
}

// A receive the emulator leaves unanswered is given up after
// receiveTimeout, as an empty one: the poller goes on and gets the next.
func TestAnUnansweredReceiveDoesNotHoldThePoller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := &unansweredSQS{}
		invoked := 0
		src := &EventSource{SQS: fake, QueueURL: "q", Invoke: func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
			invoked++
			return events.SQSEventResponse{}, nil
		}}
		for range 2 {
			if err := src.PollOnce(t.Context()); err != nil {
				t.Fatalf("PollOnce: %v", err)
			}
		}
		if fake.receives != 2 || invoked != 1 {
			t.Fatalf("%d receives, %d invocations; want the unanswered receive given up and the next one's message run", fake.receives, invoked)
		}
	})
}
