package testenv

import (
	"context"
	"slices"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// FakeSQS holds queues in memory, as SQS keeps them: each message with its
// id, its sender (SenderId) and its group (MessageGroupId); a received
// message is hidden until it is released or deleted. Every send is
// recorded.
type FakeSQS struct {
	// Sent are the sends, in order.
	Sent   []sqs.SendMessageInput
	mu     sync.Mutex
	queues map[string][]*fakeMsg
	next   int
}

type fakeMsg struct {
	id, body, sender, group string
	hidden                  bool
	receives                int
}

// Plant puts a message on queue, as sender sent it in group ("": none),
// and returns its id.
func (f *FakeSQS) Plant(queue, body, sender, group string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.plant(queue, body, sender, group)
}

func (f *FakeSQS) plant(queue, body, sender, group string) string {
	if f.queues == nil {
		f.queues = map[string][]*fakeMsg{}
	}
	f.next++
	id := "m" + strconv.Itoa(f.next)
	f.queues[queue] = append(f.queues[queue], &fakeMsg{id: id, body: body, sender: sender, group: group})
	return id
}

// Bodies are the bodies of the messages on queue.
func (f *FakeSQS) Bodies(queue string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, m := range f.queues[queue] {
		out = append(out, m.body)
	}
	return out
}

func (f *FakeSQS) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
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

func (f *FakeSQS) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
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

func (f *FakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Sent = append(f.Sent, *in)
	id := f.plant(aws.ToString(in.QueueUrl), aws.ToString(in.MessageBody), "cancel", aws.ToString(in.MessageGroupId))
	return &sqs.SendMessageOutput{MessageId: aws.String(id)}, nil
}

func (f *FakeSQS) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := aws.ToString(in.QueueUrl)
	f.queues[q] = slices.DeleteFunc(f.queues[q], func(m *fakeMsg) bool { return m.id == aws.ToString(in.ReceiptHandle) })
	return &sqs.DeleteMessageOutput{}, nil
}

func (f *FakeSQS) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.queues[aws.ToString(in.QueueUrl)] {
		if m.id == aws.ToString(in.ReceiptHandle) && in.VisibilityTimeout == 0 {
			m.hidden = false
		}
	}
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

// IDs are the ids of the messages on queue.
func (f *FakeSQS) IDs(queue string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, m := range f.queues[queue] {
		out = append(out, m.id)
	}
	return out
}
