// Package message is the body of the queue message that references a job.
package message

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/lambdajobs/lambdajobs/internal/jsonin"
	"github.com/lambdajobs/lambdajobs/internal/wire"
)

// Message is the body of the queue message that references a job:
// {"job_id":"..."}. The job itself is in the store; the message carries
// nothing a producer could forge beyond the id.
type Message struct {
	JobID string `json:"job_id"`
}

// Encode returns the message body for the job id.
func Encode(id string) string {
	b, _ := json.Marshal(Message{JobID: id})
	return string(b)
}

// ErrNotJob: a message body is not a job reference.
var ErrNotJob = errors.New("not a job message")

// Decode parses a message body written by Encode.
func Decode(body string) (string, error) {
	var m Message
	if err := jsonin.Check([]byte(body), 4096); err != nil {
		return "", ErrNotJob
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil || !wire.ValidID(m.JobID) {
		return "", ErrNotJob
	}
	return m.JobID, nil
}
