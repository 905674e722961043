// Package message is the body of the queue message that references a job.
package message

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/jsonin"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
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

// The message attributes a job reference may carry beside its body: hints
// a worker reads before it claims (the job as stored decides). Old workers
// ignore them, so adding them needs no two-step deploy.
const (
	// AttrKind is the job's kind (String).
	AttrKind = "lj.kind"
	// AttrOwner is its owner's key, wire.OwnerKey (String).
	AttrOwner = "lj.owner"
	// AttrPaused is how long pauses have held it so far, in milliseconds
	// (Number).
	AttrPaused = "lj.paused_ms"
)

// EventAttributes are the hints of m as a Lambda SQS event carries them:
// what an in-memory queue (jobstest's Runner, the simulator) gives the
// worker, as SQS would.
func EventAttributes(m driver.Message) map[string]events.SQSMessageAttribute {
	attrs := map[string]events.SQSMessageAttribute{}
	str := func(name, typ, v string) {
		if v != "" {
			attrs[name] = events.SQSMessageAttribute{DataType: typ, StringValue: &v}
		}
	}
	str(AttrKind, "String", m.Kind)
	str(AttrOwner, "String", m.OwnerKey)
	if m.Paused > 0 {
		str(AttrPaused, "Number", strconv.FormatInt(m.Paused.Milliseconds(), 10))
	}
	return attrs
}
