// Package message is the body of the queue message that references a job.
package message

import (
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/jsonin"
	"github.com/lambdajobs/lambdajobs/internal/wire"
)

// Message is the body of the queue message that references a job:
// {"job_id":"..."}, and {"job_id":"...","sent":<unix ms>} when it was sent
// before its job was stored (message first): a worker that finds no job
// for it waits for the put by how old the message is. The job itself is in
// the store; the message carries nothing a producer could forge beyond the
// id and a time that only bounds how long a worker waits for it.
type Message struct {
	JobID string `json:"job_id"`
	Sent  int64  `json:"sent,omitempty"`
}

// Encode returns the message body for the job id.
func Encode(id string) string { return EncodeSent(id, time.Time{}) }

// EncodeSent returns the message body for the job id, first sent at sent
// (zero: the job was stored before the message was sent).
func EncodeSent(id string, sent time.Time) string {
	m := Message{JobID: id}
	if !sent.IsZero() {
		m.Sent = sent.UnixMilli()
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// ErrNotJob: a message body is not a job reference.
var ErrNotJob = errors.New("not a job message")

// Decode parses a message body written by Encode or EncodeSent.
func Decode(body string) (string, error) {
	id, _, err := DecodeSent(body)
	return id, err
}

// DecodeSent parses a message body written by Encode or EncodeSent and
// returns its job id and when it was first sent (zero if it does not say).
func DecodeSent(body string) (string, time.Time, error) {
	var m Message
	if err := jsonin.Check([]byte(body), 4096); err != nil {
		return "", time.Time{}, ErrNotJob
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil || !wire.ValidID(m.JobID) || m.Sent < 0 {
		return "", time.Time{}, ErrNotJob
	}
	if m.Sent == 0 {
		return m.JobID, time.Time{}, nil
	}
	return m.JobID, time.UnixMilli(m.Sent), nil
}
