package driver

import (
	"context"
	"time"
)

// Queue sends job references to the workers. The SQS implementation is in
// package sqsqueue.
type Queue interface {
	// Send sends one job's reference.
	Send(ctx context.Context, id string) error
	// SendBatch sends several job references, in as few requests as the
	// queue allows; it returns an error if any was not sent.
	SendBatch(ctx context.Context, ids []string) error
	// SendDelayed sends one job's reference to be delivered after delay
	// (at most MaxQueueDelay).
	SendDelayed(ctx context.Context, id string, delay time.Duration) error
}

// MaxQueueDelay is the longest delivery delay SQS allows. Longer delays
// (delayed jobs, retries with long backoffs) wait in the sweep index; the
// sweeper sends them when they are due.
const MaxQueueDelay = 15 * time.Minute
