// Package sqsqueue sends job references to an Amazon SQS queue and holds the
// queue pair's one definition (queue + dead-letter queue), which the local
// stack and the CDK app both use.
package sqsqueue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// API is the part of the SQS client the queue uses.
type API interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// MaxBatch is the most entries SQS takes in one SendMessageBatch.
const MaxBatch = 10

// Queue is a driver.Queue over SQS: one queue per lane.
type Queue struct {
	api  API
	urls map[string]*string
}

var _ driver.Queue = (*Queue)(nil)

// New returns a Queue sending the default lane's messages to the queue at
// url (and refusing any other lane's).
func New(api API, url string) *Queue { return NewLanes(api, map[string]string{"": url}) }

// NewLanes returns a Queue sending each lane's messages to its queue, by
// lane name ("" the default lane).
func NewLanes(api API, urls map[string]string) *Queue {
	q := &Queue{api: api, urls: map[string]*string{}}
	for lane, u := range urls {
		q.urls[lane] = aws.String(u)
	}
	return q
}

// Send sends msgs, each to its lane's queue, ten to a request. Entries SQS
// reports as failed are sent once more; if any still fail it returns an
// error naming how many.
func (q *Queue) Send(ctx context.Context, msgs ...driver.Message) error {
	if len(msgs) == 1 {
		return q.sendOne(ctx, msgs[0])
	}
	byLane := map[string][]driver.Message{}
	var order []string
	for _, m := range msgs {
		if _, seen := byLane[m.Lane]; !seen {
			order = append(order, m.Lane)
		}
		byLane[m.Lane] = append(byLane[m.Lane], m)
	}
	for _, lane := range order {
		url, ok := q.urls[lane]
		if !ok {
			return fmt.Errorf("sqsqueue: no queue for lane %q", lane)
		}
		lm := byLane[lane]
		for start := 0; start < len(lm); start += MaxBatch {
			chunk := lm[start:min(start+MaxBatch, len(lm))]
			failed, err := q.sendChunk(ctx, url, chunk)
			if err != nil {
				return err
			}
			if len(failed) > 0 {
				if failed, err = q.sendChunk(ctx, url, failed); err != nil {
					return err
				}
				if len(failed) > 0 {
					return fmt.Errorf("sqsqueue: %d of %d messages not sent", len(failed), len(chunk))
				}
			}
		}
	}
	return nil
}

// delaySeconds is d rounded up to whole seconds, at most 15 minutes.
func delaySeconds(d time.Duration) int32 {
	secs := int32((d + time.Second - 1) / time.Second)
	return max(0, min(secs, int32(driver.MaxQueueDelay/time.Second)))
}

func groupID(m driver.Message) *string {
	if m.Group == "" {
		return nil
	}
	return aws.String(m.Group)
}

// hints are m's message attributes (message.AttrKind and the others):
// what a worker reads before it claims.
func hints(m driver.Message) map[string]types.MessageAttributeValue {
	attrs := map[string]types.MessageAttributeValue{}
	str := func(name, v string) {
		if v != "" {
			attrs[name] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
		}
	}
	str(message.AttrKind, m.Kind)
	str(message.AttrOwner, m.OwnerKey)
	if m.Paused > 0 {
		attrs[message.AttrPaused] = types.MessageAttributeValue{DataType: aws.String("Number"), StringValue: aws.String(strconv.FormatInt(m.Paused.Milliseconds(), 10))}
	}
	if len(attrs) == 0 {
		return nil
	}
	return attrs
}

func (q *Queue) sendOne(ctx context.Context, m driver.Message) error {
	url, ok := q.urls[m.Lane]
	if !ok {
		return fmt.Errorf("sqsqueue: no queue for lane %q", m.Lane)
	}
	_, err := q.api.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:                url,
		MessageBody:             aws.String(message.EncodeSent(m.JobID, m.SentAt)),
		DelaySeconds:            delaySeconds(m.Delay),
		MessageGroupId:          groupID(m),
		MessageAttributes:       hints(m),
		MessageSystemAttributes: traceHeader(ctx),
	})
	if err != nil {
		return fmt.Errorf("sqsqueue: send %s: %w", m.JobID, err)
	}
	return nil
}

func (q *Queue) sendChunk(ctx context.Context, url *string, msgs []driver.Message) ([]driver.Message, error) {
	entries := make([]types.SendMessageBatchRequestEntry, len(msgs))
	for i, m := range msgs {
		entries[i] = types.SendMessageBatchRequestEntry{
			Id:                      aws.String(strconv.Itoa(i)),
			MessageBody:             aws.String(message.EncodeSent(m.JobID, m.SentAt)),
			DelaySeconds:            delaySeconds(m.Delay),
			MessageGroupId:          groupID(m),
			MessageAttributes:       hints(m),
			MessageSystemAttributes: traceHeader(ctx),
		}
	}
	out, err := q.api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: url, Entries: entries})
	if err != nil {
		return nil, fmt.Errorf("sqsqueue: send batch: %w", err)
	}
	var failed []driver.Message
	for _, f := range out.Failed {
		i, err := strconv.Atoi(aws.ToString(f.Id))
		if err != nil || i < 0 || i >= len(msgs) {
			return nil, fmt.Errorf("sqsqueue: send batch: unexpected entry id %q", aws.ToString(f.Id))
		}
		failed = append(failed, msgs[i])
	}
	return failed, nil
}

// traceHeader carries the trace of ctx to the message, as the
// AWSTraceHeader system attribute: the current span's when tracing is on
// (wire.TraceHeader), else the invocation's X-Ray header that the Lambda
// runtime puts in the context. With active tracing on the functions, the
// enqueue, the wait in the queue and the worker's run then share one trace.
// Without a trace (outside Lambda, tracing off) it adds nothing.
func traceHeader(ctx context.Context) map[string]types.MessageSystemAttributeValue {
	h := wire.TraceHeader(ctx)
	if h == "" {
		h, _ = ctx.Value("x-amzn-trace-id").(string)
	}
	if h == "" {
		return nil
	}
	return map[string]types.MessageSystemAttributeValue{
		string(types.MessageSystemAttributeNameForSendsAWSTraceHeader): {DataType: aws.String("String"), StringValue: aws.String(h)},
	}
}

// visibilityAPI is the part of the SQS client Hide uses: an API that
// lacks it (a test double) makes Hide refuse, and the message comes back
// after its visibility timeout instead.
type visibilityAPI interface {
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

var _ driver.Visibility = (*Queue)(nil)

// errNoVisibility: the Queue's API cannot change a message's visibility.
var errNoVisibility = errors.New("sqsqueue: the SQS client cannot change a message's visibility")

// Hide keeps the received message of lane whose receipt handle is receipt
// hidden for d from now (whole seconds, rounded up; SQS allows up to 12
// hours from its receipt).
func (q *Queue) Hide(ctx context.Context, lane, receipt string, d time.Duration) error {
	url, ok := q.urls[lane]
	if !ok {
		return fmt.Errorf("sqsqueue: no queue for lane %q", lane)
	}
	api, ok := q.api.(visibilityAPI)
	if !ok {
		return errNoVisibility
	}
	secs := int32((d + time.Second - 1) / time.Second)
	_, err := api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: url, ReceiptHandle: aws.String(receipt), VisibilityTimeout: secs})
	if err != nil {
		return fmt.Errorf("sqsqueue: hide a message of lane %q: %w", lane, err)
	}
	return nil
}
