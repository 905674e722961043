package driver

import (
	"encoding/json"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
)

// BatchCounts is how a batch's jobs ended; a completion job receives them
// (Job.Batch).
type BatchCounts struct {
	BatchID   string `json:"batch_id"`
	Total     int    `json:"total"`
	Succeeded int    `json:"succeeded"`
	Failed    int    `json:"failed"`
	Cancelled int    `json:"cancelled"`
}

// Batch is a batch as the store keeps it.
type Batch struct {
	ID    string
	Owner string
	// Status is running until every job ended, then succeeded (all of them
	// succeeded) or failed.
	Status Status
	// Creating is set while the enqueue that made the batch stores its
	// jobs; the batch cannot end before its creation does.
	Creating bool
	Total    int
	// Shards is how many shards count the batch's jobs; DoneShards how
	// many of them have counted all of theirs.
	Shards, DoneShards int
	// The counts, summed from the shards by Store.CountBatch (zero as
	// Store.GetBatch returns the batch): Remaining is Total less the jobs
	// counted.
	Remaining, Succeeded, Failed, Cancelled int
	CompletionKind                          string
	CompletionPayload                       json.RawMessage // canonical, sealed like a job's
	RequestHash                             string
	CreatedAt, EndedAt, SweepAt             time.Time
	ExpiresAt                               time.Time
}

// MaxBatchShards is the most shards a batch's counts are spread over: a
// batch of 64 jobs or more has 64, each taking a 64th of its jobs' counts.
const MaxBatchShards = 64

// Shards is the number of shards of a batch of total jobs.
func Shards(total int) int { return max(1, min(total, MaxBatchShards)) }

// BatchShard is the counts of one shard of a batch.
type BatchShard struct {
	// Jobs is how many of the batch's jobs the shard counts.
	Jobs                         int
	Succeeded, Failed, Cancelled int
}

// Done reports whether every job of the shard has been counted.
func (s BatchShard) Done() bool { return s.Succeeded+s.Failed+s.Cancelled >= s.Jobs }

// ShardJobs is how many of the jobs of a batch of total jobs over shards
// shards fall in shard (job i is in shard i % shards).
func ShardJobs(total, shards, shard int) int {
	n := total / shards
	if shard < total%shards {
		n++
	}
	return n
}

// BatchCount is a job's outcome counted in its batch (Store.CountInBatch).
type BatchCount struct {
	// Index is the job's place in the batch; Status its outcome.
	Index  int
	Status Status
	// ExpiresAt is unused: a shard carries no TTL while its batch runs
	// (Store.EndBatch gives it the batch's).
	ExpiresAt time.Time
}

// Expired reports whether the batch's retention has passed at now.
func (b *Batch) Expired(now time.Time) bool { return !b.ExpiresAt.IsZero() && !now.Before(b.ExpiresAt) }

// WakesParent is the CompletionKind of a batch whose end wakes the job
// that made it (jobs.Map) instead of creating a completion job: its
// CompletionPayload names the job and the signal that wakes it.
const WakesParent = "lambdajobs.wakes_parent"

// CompletionJobID is the id of the batch's completion job ("" for none).
func (b *Batch) CompletionJobID() string {
	if b.CompletionKind == "" || b.CompletionKind == WakesParent {
		return ""
	}
	return wire.CompletionJobID(b.ID)
}
