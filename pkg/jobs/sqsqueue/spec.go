package sqsqueue

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Spec is the one definition of the queue pair. The CDK app and the local
// stack both build their queues from it (SpecFor).
type Spec struct {
	// VisibilityTimeout must be at least twice the worker's timeout. A
	// queued or running job's safety net is its message: a dead worker's
	// message comes back after the visibility timeout and that redelivery
	// settles its job (the lease of a claim ends at the worker's deadline,
	// so the redelivery finds it ended), so the visibility timeout is the
	// dead-worker bound and is kept short. Twice, not the six times AWS
	// advises for Lambda event sources: the margin covers a batch that
	// Lambda's poller holds while it retries a throttled invocation; past
	// it a second worker may receive a message the first still holds,
	// which is a duplicate delivery: its claim finds the job running and
	// does not run it again.
	VisibilityTimeout time.Duration
	// MaxReceiveCount is how many receives a message gets before it moves
	// to the dead-letter queue: at least 10, so that the redeliveries a
	// job's message may see (after a dead worker, a final write that did
	// not land, a duplicate refused while the job runs: each a receive)
	// settle the job long before its message is given up.
	MaxReceiveCount int
	// Retention is how long the queue keeps a message: the SQS maximum,
	// 14 days, as a message is a job's only record of being due (an alarm
	// fires when the oldest message is 10 days old).
	Retention time.Duration
	// DLQRetention is how long the dead-letter queue keeps a message: the
	// SQS maximum, 14 days, so an operator has time to look.
	DLQRetention time.Duration
}

// The limits Validate enforces, and SQS's own.
const (
	// minVisibilityFactor is the least visibility timeout, in worker
	// timeouts.
	minVisibilityFactor = 2
	// minReceiveCount is the least maxReceiveCount.
	minReceiveCount = 10
	// maxRetention is SQS's longest retention, a queue's and a DLQ's.
	maxRetention = 14 * 24 * time.Hour
	// maxVisibility is SQS's longest visibility timeout.
	maxVisibility = 12 * time.Hour
)

// DefaultSpec returns the queue pair definition for a worker with the given
// Lambda timeout, its event source without a batching window.
func DefaultSpec(workerTimeout time.Duration) Spec {
	return SpecFor(workerTimeout, 0)
}

// SpecFor returns the queue pair definition for a worker with the given
// Lambda timeout whose event source waits up to batchWindow to fill a
// batch: a received message is invisible for that wait too, so the
// visibility timeout is twice the worker timeout plus the window. Its
// visibility timeout is the dead-worker bound (docs/evidence/RELIABILITY.md).
func SpecFor(workerTimeout, batchWindow time.Duration) Spec {
	return Spec{
		VisibilityTimeout: minVisibilityFactor*workerTimeout + batchWindow,
		MaxReceiveCount:   minReceiveCount,
		Retention:         maxRetention,
		DLQRetention:      maxRetention,
	}
}

// Validate checks the rules above against the worker timeout.
func (s Spec) Validate(workerTimeout time.Duration) error {
	switch {
	case s.VisibilityTimeout < minVisibilityFactor*workerTimeout:
		return fmt.Errorf("sqsqueue: visibility timeout %v is less than %dx the worker timeout %v", s.VisibilityTimeout, minVisibilityFactor, workerTimeout)
	case s.VisibilityTimeout > maxVisibility:
		return fmt.Errorf("sqsqueue: visibility timeout %v is over the SQS maximum of 12h", s.VisibilityTimeout)
	case s.MaxReceiveCount < minReceiveCount:
		return fmt.Errorf("sqsqueue: maxReceiveCount %d is below %d", s.MaxReceiveCount, minReceiveCount)
	case s.Retention <= 0 || s.Retention > maxRetention || s.DLQRetention > maxRetention:
		return fmt.Errorf("sqsqueue: retention %v (DLQ %v): at most the SQS maximum of 14 days", s.Retention, s.DLQRetention)
	case s.DLQRetention < s.Retention:
		return fmt.Errorf("sqsqueue: DLQ retention %v is shorter than the queue's %v", s.DLQRetention, s.Retention)
	}
	return nil
}

// URLs names a created queue pair.
type URLs struct {
	Queue, QueueARN, DLQ, DLQARN string
}

// Create creates the queue named name and its dead-letter queue
// name+"-dlq" from s (for the local stack and tests; the CDK app creates
// them in AWS). It is idempotent like CreateQueue.
func Create(ctx context.Context, api interface {
	CreateQueue(context.Context, *sqs.CreateQueueInput, ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}, name string, s Spec) (URLs, error) {
	secs := func(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }
	dlq, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName:  aws.String(name + "-dlq"),
		Attributes: map[string]string{string(types.QueueAttributeNameMessageRetentionPeriod): secs(s.DLQRetention)},
	})
	if err != nil {
		return URLs{}, fmt.Errorf("sqsqueue: create DLQ: %w", err)
	}
	attrs, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       dlq.QueueUrl,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return URLs{}, fmt.Errorf("sqsqueue: DLQ attributes: %w", err)
	}
	dlqARN := attrs.Attributes[string(types.QueueAttributeNameQueueArn)]
	redrive, _ := json.Marshal(map[string]string{
		"deadLetterTargetArn": dlqARN,
		"maxReceiveCount":     strconv.Itoa(s.MaxReceiveCount),
	})
	q, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{
		QueueName: aws.String(name),
		Attributes: map[string]string{
			string(types.QueueAttributeNameVisibilityTimeout):      secs(s.VisibilityTimeout),
			string(types.QueueAttributeNameMessageRetentionPeriod): secs(s.Retention),
			string(types.QueueAttributeNameRedrivePolicy):          string(redrive),
		},
	})
	if err != nil {
		return URLs{}, fmt.Errorf("sqsqueue: create queue: %w", err)
	}
	qattrs, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       q.QueueUrl,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return URLs{}, fmt.Errorf("sqsqueue: queue attributes: %w", err)
	}
	return URLs{
		Queue: aws.ToString(q.QueueUrl), QueueARN: qattrs.Attributes[string(types.QueueAttributeNameQueueArn)],
		DLQ: aws.ToString(dlq.QueueUrl), DLQARN: dlqARN,
	}, nil
}
