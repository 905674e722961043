// Package sqsqueue sends job references to an Amazon SQS queue and holds the
// queue pair's one definition (queue + dead-letter queue), which the local
// stack and the CDK app both use.
package sqsqueue

import (
	"context"
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

// Queue is a driver.Queue on one SQS queue.
type Queue struct {
	api API
	url *string
}

var _ driver.Queue = (*Queue)(nil)

// New returns a Queue sending to the queue at url.
func New(api API, url string) *Queue { return &Queue{api: api, url: aws.String(url)} }

// Send sends one job reference.
func (q *Queue) Send(ctx context.Context, id string) error {
	_, err := q.api.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:                q.url,
		MessageBody:             aws.String(message.Encode(id)),
		MessageSystemAttributes: traceHeader(ctx),
	})
	if err != nil {
		return fmt.Errorf("sqsqueue: send %s: %w", id, err)
	}
	return nil
}

// SendDelayed sends one job reference, delivered after delay (rounded up to
// whole seconds, at most 15 minutes).
func (q *Queue) SendDelayed(ctx context.Context, id string, delay time.Duration) error {
	secs := int32((delay + time.Second - 1) / time.Second)
	secs = max(0, min(secs, int32(driver.MaxQueueDelay/time.Second)))
	_, err := q.api.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:                q.url,
		MessageBody:             aws.String(message.Encode(id)),
		DelaySeconds:            secs,
		MessageSystemAttributes: traceHeader(ctx),
	})
	if err != nil {
		return fmt.Errorf("sqsqueue: send %s delayed %ds: %w", id, secs, err)
	}
	return nil
}

// SendBatch sends job references ten to a request. Entries SQS reports as
// failed are sent once more; if any still fail it returns an error naming
// how many.
func (q *Queue) SendBatch(ctx context.Context, ids []string) error {
	for start := 0; start < len(ids); start += MaxBatch {
		chunk := ids[start:min(start+MaxBatch, len(ids))]
		failed, err := q.sendChunk(ctx, chunk)
		if err != nil {
			return err
		}
		if len(failed) > 0 {
			if failed, err = q.sendChunk(ctx, failed); err != nil {
				return err
			}
			if len(failed) > 0 {
				return fmt.Errorf("sqsqueue: %d of %d messages not sent", len(failed), len(chunk))
			}
		}
	}
	return nil
}

func (q *Queue) sendChunk(ctx context.Context, ids []string) ([]string, error) {
	entries := make([]types.SendMessageBatchRequestEntry, len(ids))
	for i, id := range ids {
		entries[i] = types.SendMessageBatchRequestEntry{
			Id:                      aws.String(strconv.Itoa(i)),
			MessageBody:             aws.String(message.Encode(id)),
			MessageSystemAttributes: traceHeader(ctx),
		}
	}
	out, err := q.api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: q.url, Entries: entries})
	if err != nil {
		return nil, fmt.Errorf("sqsqueue: send batch: %w", err)
	}
	var failed []string
	for _, f := range out.Failed {
		i, err := strconv.Atoi(aws.ToString(f.Id))
		if err != nil || i < 0 || i >= len(ids) {
			return nil, fmt.Errorf("sqsqueue: send batch: unexpected entry id %q", aws.ToString(f.Id))
		}
		failed = append(failed, ids[i])
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
