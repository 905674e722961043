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
// stack both build their queues from it.
type Spec struct {
	// VisibilityTimeout must be at least six times the worker's timeout
	// (AWS's advice for Lambda event sources), so a message is not handed to
	// a second worker while the first still runs it.
	VisibilityTimeout time.Duration
	// MaxReceiveCount is how many receives a message gets before it moves
	// to the dead-letter queue.
	MaxReceiveCount int
	// Retention is how long the queue keeps a message.
	Retention time.Duration
	// DLQRetention is how long the dead-letter queue keeps a message: the
	// SQS maximum, 14 days, so an operator has time to look.
	DLQRetention time.Duration
}

// DefaultSpec returns the queue pair definition for a worker with the given
// Lambda timeout.
func DefaultSpec(workerTimeout time.Duration) Spec {
	return Spec{
		VisibilityTimeout: 6 * workerTimeout,
		MaxReceiveCount:   5,
		Retention:         4 * 24 * time.Hour,
		DLQRetention:      14 * 24 * time.Hour,
	}
}

// Validate checks the rules above against the worker timeout.
func (s Spec) Validate(workerTimeout time.Duration) error {
	switch {
	case s.VisibilityTimeout < 6*workerTimeout:
		return fmt.Errorf("sqsqueue: visibility timeout %v is less than 6x the worker timeout %v", s.VisibilityTimeout, workerTimeout)
	case s.VisibilityTimeout > 12*time.Hour:
		return fmt.Errorf("sqsqueue: visibility timeout %v is over the SQS maximum of 12h", s.VisibilityTimeout)
	case s.MaxReceiveCount < 5:
		return fmt.Errorf("sqsqueue: maxReceiveCount %d is below 5", s.MaxReceiveCount)
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
