package wire

import (
	"bytes"
	"encoding/json"

	"github.com/lambdajobs/lambdajobs/internal/jsonin"
)

// The sorts of queue message, as the worker's routes tell them apart
// (package jobs, route.go) and as a dead-letter redrive judges them.
const (
	// SortJob is a job reference {"job_id": ...} (with "sent" when it was
	// sent before its job was stored): what enqueue, the
	// sweeper and the worker send. It names a job in the store and
	// carries nothing else, so whoever sent it, the worker trusts only
	// the store.
	SortJob = "job"
	// SortFire is a schedule's fire (Fire).
	SortFire = "schedule_fire"
	// SortS3 is an S3 event notification (or its s3:TestEvent).
	SortS3 = "s3"
	// SortEventBridge is an EventBridge event.
	SortEventBridge = "eventbridge"
	// SortSNS is an SNS notification (and whatever it wraps).
	SortSNS = "sns"
	// SortEnvelope is a plain envelope {"kind", "payload",
	// "idempotency_key"} with an idempotency key: its job's id derives
	// from the key, so a second delivery makes no second job.
	SortEnvelope = "envelope"
	// SortEnvelopeWithoutKey is a plain envelope without an idempotency
	// key: its job's id derives from the SQS message id, so the same body
	// sent again as a new message makes a second job.
	SortEnvelopeWithoutKey = "envelope_without_key"
	// SortOther is anything else: no route accepts it.
	SortOther = "other"
)

// MessageSort names the sort of a message body (one of the Sort
// constants) from its shape alone; it reads no more of the body than
// the keys that tell the sorts apart.
func MessageSort(body string) string {
	if jsonin.Check([]byte(body), 256<<10) != nil {
		return SortOther
	}
	if _, ok := DecodeFire(body); ok {
		return SortFire
	}
	var probe struct {
		JobID          *string           `json:"job_id"`
		Type           string            `json:"Type"`
		TopicArn       string            `json:"TopicArn"`
		Records        []json.RawMessage `json:"Records"`
		Event          string            `json:"Event"`
		Source         string            `json:"source"`
		DetailType     *string           `json:"detail-type"`
		Detail         json.RawMessage   `json:"detail"`
		ID             string            `json:"id"`
		Kind           *string           `json:"kind"`
		IdempotencyKey string            `json:"idempotency_key"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	if dec.Decode(&probe) != nil {
		return SortOther
	}
	var obj map[string]json.RawMessage
	_ = json.Unmarshal([]byte(body), &obj)
	switch {
	case probe.JobID != nil && (len(obj) == 1 || len(obj) == 2 && obj["sent"] != nil):
		// {"job_id"} or, sent before its job was stored, {"job_id","sent"}.
		return SortJob
	case probe.Type == "Notification" && probe.TopicArn != "":
		return SortSNS
	case len(probe.Records) > 0 || probe.Event == "s3:TestEvent":
		return SortS3
	case probe.Source != "" && probe.DetailType != nil && probe.ID != "" && probe.Detail != nil:
		return SortEventBridge
	case probe.Kind != nil && probe.IdempotencyKey != "":
		return SortEnvelope
	case probe.Kind != nil:
		return SortEnvelopeWithoutKey
	}
	return SortOther
}
