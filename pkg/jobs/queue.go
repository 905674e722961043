package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
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

// Message is the body of the queue message that references a job:
// {"job_id":"..."}. The job itself is in the store; the message carries
// nothing a producer could forge beyond the id.
type Message struct {
	JobID string `json:"job_id"`
}

// EncodeMessage returns the message body for the job id.
func EncodeMessage(id string) string {
	b, _ := json.Marshal(Message{JobID: id})
	return string(b)
}

// ErrNotJobMessage: a message body is not a job reference.
var ErrNotJobMessage = errors.New("jobs: not a job message")

// DecodeMessage parses a message body written by EncodeMessage.
func DecodeMessage(body string) (string, error) {
	var m Message
	if err := CheckJSON([]byte(body), 4096); err != nil {
		return "", ErrNotJobMessage
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil || !ValidID(m.JobID) {
		return "", ErrNotJobMessage
	}
	return m.JobID, nil
}
