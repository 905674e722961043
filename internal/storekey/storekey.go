// Package storekey is how batches and schedules are keyed in the store,
// beside jobs.
package storekey

import "strings"

// BatchPrefix starts the store key of a batch, so batch and job ids never
// collide in the table and a batch id is never a valid job id. Store.Due
// returns batches with it.
const BatchPrefix = "batch#"

// BatchShardPrefix starts the store key of one of a batch's count shards:
// followed by the batch's id, '#' and the shard's number. Never in the
// sweep index, never a job.
const BatchShardPrefix = "batchshard#"

// SchedulePrefix starts the store key of a schedule's state (its last
// enqueued fire's job), which is never in the sweep index.
const SchedulePrefix = "schedule#"

// OwnerSchedulesPrefix starts the store key of an owner's runtime
// schedules (followed by wire.OwnerKey of the owner).
const OwnerSchedulesPrefix = "schedules#"

// IsBatch reports whether a key from Store.Due is a batch's.
func IsBatch(key string) bool { return strings.HasPrefix(key, BatchPrefix) }

// SlotPrefix, RatePrefix and UniquePrefix start the store keys of flow
// control's items: a concurrency limit's slots, a rate limit's token
// bucket, a unique key. Never in the sweep index, never a job.
const (
	SlotPrefix   = "slots#"
	RatePrefix   = "rate#"
	UniquePrefix = "unique#"
)

// PayloadPrefix starts the store key of a job's payload item (a payload
// too large for its job's item): followed by the job's id, '#' and the
// payload's hash. Never in an index, never a job.
const PayloadPrefix = "payload#"

// CheckpointPrefix starts the store key of a job's checkpoint item (a
// large checkpoint): followed by the job's id, '#' and the checkpoint's
// hash. Never in an index, never a job.
const CheckpointPrefix = "checkpoint#"

// ResultPrefix starts the store key of a job's result item (a large final
// result): followed by the job's id, '#' and the result's hash. Never in
// an index, never a job.
const ResultPrefix = "result#"

// SignalPrefix starts the store key of a job's signal item (a large
// signal): followed by the job's id, '#' and the sealed signal's hash.
// Never in an index, never a job.
const SignalPrefix = "signal#"

// PausesKey is the store key of the pause set: every pause of a kind, a
// lane or an owner's jobs of a kind, in one item. Never in an index.
const PausesKey = "pauses"
