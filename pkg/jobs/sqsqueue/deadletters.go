package sqsqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/lambdajobs/lambdajobs/internal/wire"
)

// DeadLetterAPI is the part of the SQS client DeadLetters uses.
type DeadLetterAPI interface {
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, opts ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// DeadLetters reads and redrives the dead-letter queue of the jobs queue.
// The operators' API routes serve it from a function that is one of the
// queue's known senders, so that no person needs sqs:SendMessage on the
// queue (whose policy denies it to anyone else): SQS's own redrive (the
// console's "Start DLQ redrive", StartMessageMoveTask) sends with the
// caller's identity and is denied.
type DeadLetters struct {
	SQS      DeadLetterAPI
	QueueURL string
	DLQURL   string
	// LaneQueueURLs are the other lanes' queues, by lane, whose depths
	// Depths reads too.
	LaneQueueURLs map[string]string
}

// DeadLetter is one message of the dead-letter queue, described by its
// shape, never its body (which may hold anything).
type DeadLetter struct {
	ID       string    `json:"id"`
	Shape    string    `json:"shape"`
	Receives int       `json:"receives"`
	SentAt   time.Time `json:"sent_at"`
	// Why says why a message of this sort reaches the dead-letter queue
	// (SQS keeps no reason; the worker's log line names the message id).
	Why string `json:"why"`
}

// Depths are the approximate numbers of messages (visible and in flight)
// in the queue and in its dead-letter queue, and in each other lane's
// queue (DeadLetters.LaneQueueURLs).
type Depths struct {
	Queue       int            `json:"queue"`
	DeadLetters int            `json:"dead_letters"`
	Lanes       map[string]int `json:"lanes,omitempty"`
}

// ErrNoSuchDeadLetter: Redrive did not find the message (redriven or
// expired meanwhile).
var ErrNoSuchDeadLetter = errors.New("sqsqueue: the message is no longer in the dead-letter queue")

// MaxRedrive is the most messages one RedriveAll moves: a caller repeats
// it while it moves that many.
const MaxRedrive = 100

// Depths reads both queues' attributes; it changes nothing.
func (d *DeadLetters) Depths(ctx context.Context) (Depths, error) {
	count := func(url string) (int, error) {
		out, err := d.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			return 0, fmt.Errorf("sqsqueue: queue attributes: %w", err)
		}
		a, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
		b, _ := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
		return a + b, nil
	}
	q, err := count(d.QueueURL)
	if err != nil {
		return Depths{}, err
	}
	dl, err := count(d.DLQURL)
	if err != nil {
		return Depths{}, err
	}
	out := Depths{Queue: q, DeadLetters: dl}
	for lane, url := range d.LaneQueueURLs {
		n, err := count(url)
		if err != nil {
			return Depths{}, err
		}
		if out.Lanes == nil {
			out.Lanes = map[string]int{}
		}
		out.Lanes[lane] = n
	}
	return out, nil
}

func (d *DeadLetters) receive(ctx context.Context, visibility int32) ([]types.Message, error) {
	out, err := d.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(d.DLQURL), MaxNumberOfMessages: 10, VisibilityTimeout: visibility, WaitTimeSeconds: 0,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount, types.MessageSystemAttributeNameSentTimestamp},
	})
	if err != nil {
		return nil, fmt.Errorf("sqsqueue: receive dead letters: %w", err)
	}
	return out.Messages, nil
}

// release makes the messages visible again at once.
func (d *DeadLetters) release(ctx context.Context, msgs []types.Message) {
	for _, m := range msgs {
		_, _ = d.SQS.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(d.DLQURL), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
	}
}

// Peek receives up to max messages for a few seconds and releases them at
// once, describing each by its shape. (Receiving is the only way SQS shows
// a message: it counts a receive, and hides the message from others for
// those seconds.)
func (d *DeadLetters) Peek(ctx context.Context, max int) ([]DeadLetter, error) {
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
			body := aws.ToString(m.Body)
			seen[id] = DeadLetter{ID: id, Shape: wire.DescribeShape(body), Why: Why(body), Receives: rc, SentAt: time.UnixMilli(ms).UTC()}
		}
	}
	out := make([]DeadLetter, 0, len(seen))
	for _, dl := range seen {
		out = append(out, dl)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SentAt.Before(out[j].SentAt) })
	if len(out) > max {
		out = out[:max]
	}
	return out, nil
}

// move sends a message's body back to the queue, then deletes it from the
// dead-letter queue (a crash in between leaves a duplicate, which the
// worker makes one job of).
func (d *DeadLetters) move(ctx context.Context, m types.Message) error {
	if _, err := d.SQS.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(d.QueueURL), MessageBody: m.Body}); err != nil {
		return fmt.Errorf("sqsqueue: redrive: %w", err)
	}
	if _, err := d.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(d.DLQURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
		return fmt.Errorf("sqsqueue: redrive: %w", err)
	}
	return nil
}

// Redrive moves the message with this id back to the queue, or returns
// ErrNoSuchDeadLetter.
func (d *DeadLetters) Redrive(ctx context.Context, id string) error {
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
		var found *types.Message
		for _, m := range msgs {
			if aws.ToString(m.MessageId) == id {
				found = &m
			} else {
				held = append(held, m) // released at once, whichever came after it
			}
		}
		if found != nil {
			return d.move(ctx, *found)
		}
	}
	return ErrNoSuchDeadLetter
}

// RedriveAll moves up to MaxRedrive messages back to the queue and returns
// how many it moved.
func (d *DeadLetters) RedriveAll(ctx context.Context) (int, error) {
	n := 0
	for n < MaxRedrive {
		msgs, err := d.receive(ctx, 30)
		if err != nil || len(msgs) == 0 {
			return n, err
		}
		for i, m := range msgs {
			if n == MaxRedrive {
				d.release(context.WithoutCancel(ctx), msgs[i:])
				return n, nil
			}
			if err := d.move(ctx, m); err != nil {
				d.release(context.WithoutCancel(ctx), msgs[i:])
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
