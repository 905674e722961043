package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// SQSAPI is the part of the SQS client the dead-letter queue page uses.
type SQSAPI interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// SQSDLQ is DLQ over SQS: the jobs queue and its dead-letter queue.
type SQSDLQ struct {
	SQS      SQSAPI
	QueueURL string
	DLQURL   string
}

// Depths reads both queues' approximate visible and in-flight counts.
func (d *SQSDLQ) Depths(ctx context.Context) (int, int, error) {
	count := func(url string) (int, error) {
		out, err := d.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			return 0, err
		}
		a, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
		b, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
		return a + b, nil
	}
	q, err := count(d.QueueURL)
	if err != nil {
		return 0, 0, err
	}
	dl, err := count(d.DLQURL)
	return q, dl, err
}

func (d *SQSDLQ) receive(ctx context.Context, visibility int32) ([]types.Message, error) {
	out, err := d.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(d.DLQURL), MaxNumberOfMessages: 10, VisibilityTimeout: visibility, WaitTimeSeconds: 0,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount, types.MessageSystemAttributeNameSentTimestamp},
	})
	if err != nil {
		return nil, err
	}
	return out.Messages, nil
}

// release makes the messages visible again at once.
func (d *SQSDLQ) release(ctx context.Context, msgs []types.Message) {
	for _, m := range msgs {
		_, _ = d.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(d.DLQURL), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
	}
}

// Peek receives up to max messages for a few seconds and releases them at
// once, describing each by its shape.
func (d *SQSDLQ) Peek(ctx context.Context, max int) ([]DeadLetter, error) {
	seen := map[string]DeadLetter{}
	var held []types.Message
	defer func() { d.release(context.WithoutCancel(ctx), held) }()
	for round := 0; round < 10 && len(seen) < max; round++ {
		msgs, err := d.receive(ctx, 10)
		if err != nil {
			return nil, err
		}
		if len(msgs) == 0 {
			break
		}
		held = append(held, msgs...)
		for _, m := range msgs {
			id := aws.ToString(m.MessageId)
			rc, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
			ms, _ := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64)
			seen[id] = DeadLetter{ID: id, Shape: jobs.DescribeShape(aws.ToString(m.Body)), Why: Why(aws.ToString(m.Body)), Receives: rc, SentAt: time.UnixMilli(ms).UTC()}
		}
	}
	out := make([]DeadLetter, 0, len(seen))
	for _, dl := range seen {
		out = append(out, dl)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SentAt.Before(out[j].SentAt) })
	return out, nil
}

// move sends a message's body back to the queue, then deletes it from the
// dead-letter queue (a crash in between leaves a duplicate, which the
// worker makes one job of).
func (d *SQSDLQ) move(ctx context.Context, m types.Message) error {
	if _, err := d.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(d.QueueURL), MessageBody: m.Body}); err != nil {
		return err
	}
	_, err := d.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(d.DLQURL), ReceiptHandle: m.ReceiptHandle})
	return err
}

// Redrive moves the message with this id back to the queue.
func (d *SQSDLQ) Redrive(ctx context.Context, id string) error {
	var held []types.Message
	defer func() { d.release(context.WithoutCancel(ctx), held) }()
	for round := 0; round < 20; round++ {
		msgs, err := d.receive(ctx, 30)
		if err != nil {
			return err
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			if aws.ToString(m.MessageId) == id {
				return d.move(ctx, m)
			}
			held = append(held, m)
		}
	}
	return fmt.Errorf("message %s is no longer in the dead-letter queue", id)
}

// RedriveAll moves every message back to the queue (at most 1,000 per call).
func (d *SQSDLQ) RedriveAll(ctx context.Context) (int, error) {
	n := 0
	for n < 1000 {
		msgs, err := d.receive(ctx, 30)
		if err != nil {
			return n, err
		}
		if len(msgs) == 0 {
			return n, nil
		}
		for _, m := range msgs {
			if err := d.move(ctx, m); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// Why says why a message like body reaches the dead-letter queue, from
// what sort of message it is: a job's own message comes back while its job
// cannot be claimed or settled; a schedule's fire, while its job cannot be
// made; anything else is a message no route accepted. The worker logs the
// reason with the message id each time it gives a message back.
func Why(body string) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &obj) != nil {
		return "no route accepts a message that is not JSON"
	}
	switch {
	case len(obj) == 1 && obj["job_id"] != nil:
		return "a job's message: its job could not be found, claimed or settled in five receives (the worker's log names this message id)"
	case obj["lambdajobs_schedule"] != nil:
		return "a schedule's fire whose job could not be made in five receives (a bad scheduled time, or the store was unavailable)"
	}
	return "no route accepts a message of this shape (the worker logs \"no route accepts this message\" with its id)"
}
