package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"
)

// Fire is the message a schedule's fire puts on the queue. Scheduler
// fills ScheduledTime from its context attribute
// <aws.scheduler.scheduled-time>.
type Fire struct {
	Schedule string `json:"lambdajobs_schedule"`
	// OwnerKey is set for a runtime schedule (see OwnerKey).
	OwnerKey      string `json:"owner_key,omitempty"`
	ScheduledTime string `json:"scheduled_time"`
}

// ScheduledTimeAttribute is Scheduler's context attribute for the time a
// fire was scheduled for.
const ScheduledTimeAttribute = "<aws.scheduler.scheduled-time>"

// FireMessage is the body a fire of schedule name at scheduledTime sends
// (scheduledTime is ScheduledTimeAttribute in Scheduler's target input).
func FireMessage(name, scheduledTime string) string {
	return EncodeFire(Fire{Schedule: name, ScheduledTime: scheduledTime})
}

// EncodeFire encodes f without HTML escaping: Scheduler replaces the
// literal "<aws.scheduler.scheduled-time>", not "\u003caws...".
func EncodeFire(f Fire) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(f)
	return strings.TrimSuffix(b.String(), "\n")
}

// DecodeFire recognises a fire message.
func DecodeFire(body string) (Fire, bool) {
	var f Fire
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if dec.Decode(&f) != nil || f.Schedule == "" {
		return Fire{}, false
	}
	return f, true
}

// FireJobID is the id of the job a fire of the declared schedule name at
// t creates.
func FireJobID(name string, t time.Time) string {
	return DerivedID("schedule", name, t.UTC().Format(time.RFC3339))
}

// RuntimeFireJobID is the id of the job a fire of an owner's runtime
// schedule name at t creates.
func RuntimeFireJobID(ownerKey, name string, t time.Time) string {
	return DerivedID("runtime-schedule", ownerKey, name, t.UTC().Format(time.RFC3339))
}

// OwnerKey is the store's and Scheduler's key for an owner: a hash, so an
// owner (an ARN, a subject) never appears in a schedule's name.
func OwnerKey(owner string) string {
	h := sha256.Sum256([]byte("lambdajobs-owner\x00" + owner))
	return hex.EncodeToString(h[:16])
}

// SchedulerName is the Scheduler schedule of an owner's runtime schedule.
func SchedulerName(ownerKey, name string) string { return ownerKey[:16] + "-" + name }

// RuntimeFireMessage is the body a runtime schedule's fires send.
func RuntimeFireMessage(ownerKey, name, scheduledTime string) string {
	return EncodeFire(Fire{Schedule: name, OwnerKey: ownerKey, ScheduledTime: scheduledTime})
}
