package driver

import (
	"context"
	"time"
)

// Message is one job's reference as a queue carries it.
type Message struct {
	JobID string
	// Lane names the job's lane: each lane is its own queue with its own
	// workers ("" is the default lane; see ValidLane).
	Lane string
	// Group, when set, is the message's group id: the job's tenant, which
	// SQS fair queues serve fairly against the others.
	Group string
	// Delay holds the message back this long (at most MaxQueueDelay).
	Delay time.Duration
	// SentAt, when set, is when the job's first message was sent, before
	// its job was stored (message first): the message carries it, so that
	// a worker that finds no job knows how long to wait for the put.
	SentAt time.Time
	// Kind and OwnerKey, when set, are the job's kind and its owner's key
	// (wire.OwnerKey): hints, carried as message attributes, that let a
	// worker hand back a paused job without claiming it. The job as stored
	// decides; a message without them is claimed and parked.
	Kind, OwnerKey string
	// Paused is how long the job has been held back by pauses so far
	// (left out of its queue latency).
	Paused time.Duration
}

// Queue sends job references to the workers: each message to its lane's
// queue. The SQS implementation is in package sqsqueue.
type Queue interface {
	// Send sends msgs, in as few requests as the queues allow; it returns
	// an error saying how many were not sent if any was not.
	Send(ctx context.Context, msgs ...Message) error
}

// MaxQueueDelay is the longest delivery delay SQS allows. Longer delays
// (delayed jobs, retries with long backoffs) wait in the sweep index; the
// sweeper sends them when they are due.
const MaxQueueDelay = 15 * time.Minute

// DefaultLaneName is reserved: the default lane is "", so that "default"
// cannot name a second lane that a reader would take for it.
const DefaultLaneName = "default"

// ValidLane reports whether lane can name a lane: "" (the default lane), or
// a lower-case letter then up to 15 lower-case letters, digits or '-',
// other than DefaultLaneName.
func ValidLane(lane string) bool {
	if lane == "" {
		return true
	}
	if lane == DefaultLaneName || len(lane) > 16 || lane[0] < 'a' || lane[0] > 'z' {
		return false
	}
	for _, c := range []byte(lane) {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// Visibility is a Queue that can keep a received message hidden for
// longer (SQS's ChangeMessageVisibility): a worker hides a second
// delivery of a running job's message until the run's lease ends rather
// than acknowledge it (which would delete the message the run holds).
// lane is the queue's lane, receipt the delivery's receipt handle.
type Visibility interface {
	Hide(ctx context.Context, lane, receipt string, d time.Duration) error
}
