package driver

import (
	"encoding/json"
	"time"
)

// Record is a job as the [Store] keeps it. Payload and Result hold JSON
// (Result is nil until a result is published). ErrorCode is set only on a
// failed job. ClaimToken and LeaseUntil are set only while the job runs.
type Record struct {
	ID    string
	Kind  string
	Owner string
	// Lane is the lane the job runs in ("" the default): its messages go to
	// that lane's queue, its retries and re-sends too.
	Lane string
	// Tenant is who the job is for when not its owner (a service role
	// enqueueing for its customers): every message of the job carries its
	// group id, which SQS fair queues serve fairly ("" is the owner).
	Tenant  string
	Status  Status
	Payload json.RawMessage
	// PayloadRef, set by a store that keeps this job's payload in an item
	// of its own (when the job's item would pass one write unit with it),
	// names that item: Payload is then nil in what the store returns
	// until Store.ReadPart reads it (PartPayload). Empty when the payload
	// is in Payload.
	PayloadRef string
	// PayloadUntil, given to Create, is how long a payload kept apart
	// must last at least (its item's TTL): the engine's one rule
	// (payloadKeep). A store that keeps every payload inline ignores it.
	PayloadUntil time.Time
	// PayloadBytes is the payload's size when its store keeps it as an
	// object rather than an item (a claim check: S3 beyond a few KB, by
	// price): Store.ReadPart reads it for a run or a replay, while a
	// reader that only shows the job (a GET, a listing) shows this size
	// instead. 0 when the payload is in an item.
	PayloadBytes int
	Result       json.RawMessage
	// ResultRef, set by a store that keeps a large final result in an
	// item of its own, names that item: Result is then nil in what the
	// store returns until Store.ReadPart reads it (PartResult).
	ResultRef string
	// ResultBytes is a final result's size when its store keeps it as an
	// object (as PayloadBytes): readers show it, and a link to it
	// (PartLinker), instead of reading it. 0 otherwise.
	ResultBytes int
	// ErrorCode is the failure code of a failed job: one the kind declared or
	// a reserved one. Never error text.
	ErrorCode string
	// Attempt counts the claims of the job; the first run is attempt 1.
	Attempt int
	// AttemptBase is Attempt when the job was last resubmitted (a manual
	// retry): its kind's retry policy counts the attempts after it.
	AttemptBase int
	// ClaimToken names the current run; every write after the claim is
	// conditional on it.
	ClaimToken string
	// LeaseUntil is when the current run's lease ends: the worker's Lambda
	// deadline. A job still running after it was abandoned.
	LeaseUntil time.Time
	// RequestHash identifies the enqueue request (kind, payload) so a retry
	// with the same idempotency key can be told from a different request.
	RequestHash string
	// SweepAt is when the sweeper should next look at the job if it is
	// still queued or running by then. Zero: the job is not in the sweep
	// index (it is final, or its message is its safety net: sent before it
	// was stored, or by the run that holds the message before it is
	// acknowledged).
	SweepAt time.Time
	// Dispatches counts the extra sends of the job's message by the sweeper.
	Dispatches int
	// RunAt is when a queued job may run: set for a delayed job and for a
	// retry waiting out its backoff; zero means now.
	RunAt time.Time
	// LastError is the failure code of the previous attempt of a job that
	// is being retried.
	LastError string
	// CancelRequested is set when the owner cancelled the job while it ran:
	// its run ends cancelled and no other outcome can be recorded.
	CancelRequested bool
	// BatchID names the batch the job belongs to, BatchIndex its place in
	// it, BatchSize its number of jobs and BatchShards its number of shards:
	// its outcome is counted in shard BatchIndex % BatchShards after its
	// final write.
	BatchID                            string
	BatchIndex, BatchSize, BatchShards int
	// After names the post-outcome steps still to run for a final job
	// (see Outcome.After); empty once they have run.
	After []string
	// BatchCounts are the counts of the batch a completion job completes.
	BatchCounts *BatchCounts
	// Checkpoint is the last checkpoint a run of the job stored (sealed:
	// private state, never returned by the API), nil before the first.
	Checkpoint []byte
	// CheckpointRef, set by a store that keeps a large checkpoint in an
	// item of its own, names that item: Checkpoint is then nil in what the
	// store returns until Store.ReadPart reads it (PartCheckpoint).
	CheckpointRef string
	// Continuations counts the runs that ended asking to continue
	// (Requeue.Continue): they spent no attempt.
	Continuations int
	// FirstStartedAt is when the job's first run was claimed: a kind's
	// longest total run time counts from it.
	FirstStartedAt time.Time
	// WaitingOn says what a parked job waits for: "concurrency" (a slot),
	// "rate" (its reserved start under a rate limit, at RunAt) or "store"
	// (a limit's item could not be read; it tries again). A queued job
	// with WaitingOn set (whatever its value) is counted as waiting
	// (KindCounts.Waiting). The next claim clears it from the job, and
	// the record the claim returns still says it (the worker reads it).
	// A job whose handler waits for a signal waits on WaitSignalOn(name).
	WaitingOn string
	// Signals are the signals delivered to the job (Signaller), by name,
	// each sealed: what its handler's waits for them return
	// (jobs.WaitForSignal). Never shown; they last as long as the job.
	// A signal the store keeps in an item of its own (SignalRefs) is
	// here empty, not nil, until Store.ReadPart(SignalPart(name)) reads
	// it: a nil entry is a signal that has not come.
	Signals map[string][]byte
	// SignalRefs, set by a store that keeps a large signal in an item of
	// its own, names that item by the signal's name.
	SignalRefs map[string]string
	// StepMarks are what the job's views show of its durable steps (their
	// names, kinds, states and times; never their results), encoded by
	// package jobs, written with the job's state (Checkpoint.Marks,
	// Requeue.Marks, Outcome.Marks).
	StepMarks string
	// QueueCapped: the job's kind caps how many of its jobs are queued
	// (KindOpts.MaxQueued), so the store counts the job among its kind's
	// queued jobs while it is queued (QueueCounter). Set at creation, never
	// changed; a job of a kind without a cap pays nothing for it.
	QueueCapped bool
	// UniqueKey is the unique key the job holds (see Store.ClaimUnique),
	// released when UniqueUntil says ("finished" or "started"; "" for a key
	// that frees itself at its time).
	UniqueKey, UniqueUntil string
	// StartBy, when set, is when a job that has not started ends cancelled
	// (code expired) instead.
	StartBy time.Time
	// Parents are the jobs this one runs after (EnqueueOpts.After), in the
	// order given, and ParentsDone the indexes among them of those that
	// succeeded and were counted: the job waits (WaitingOn "parents")
	// until every parent is counted. CancelledBy names the parent whose
	// failure or cancel cancelled it (its code then "dependency_failed").
	Parents     []string
	ParentsDone []int
	CancelledBy string
	// Dependents are the jobs that run after this one: each a job id and
	// its index among that job's Parents. The job's final write names the
	// post-outcome step that counts it in each (or cancels them).
	Dependents []Dependent
	// ReplayOf names the job this one replays (Service.Replay).
	ReplayOf string
	// ManualRunOf names the schedule whose job this is, made by hand
	// (Service.RunNow) rather than by a fire.
	ManualRunOf string
	// ChildOf names the job whose handler enqueued this one
	// (Kind.EnqueueChild). AwaitedAs, set for a child its parent waits
	// for (jobs.Invoke), is the name the parent gave it: its final
	// outcome signals the parent (ChildSignal(AwaitedAs)).
	ChildOf   string
	AwaitedAs string
	// Tags are the job's tags (EnqueueOpts.Tags), set at creation and
	// never changed: a store indexes each, for ListQuery.Tag.
	Tags map[string]string
	// Events: the job's outcomes are announced on the event bus (its kind
	// opted in, or the deployment did). OnFailure names the kind of the
	// follow-up job each failed outcome creates ("" none). A job with
	// either counts its final writes in Outcomes (Outcome.Seq): an
	// outcome's event id and follow-up job id derive from the job's id and
	// that count. A job with neither pays nothing for them.
	Events    bool
	OnFailure string
	Outcomes  int

	CreatedAt  time.Time
	UpdatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	// ExpiresAt is when a final job may be deleted (DynamoDB TTL). Reads
	// treat an expired job as absent.
	ExpiresAt time.Time
}

// Dependent is a job that runs after another: its id, and the other's
// index among its Parents.
type Dependent struct {
	JobID string
	Index int
}

// ParentsLeft is how many of the job's parents are not counted yet.
func (r *Record) ParentsLeft() int { return len(r.Parents) - len(r.ParentsDone) }

// Expired reports whether the job's retention has passed at now.
func (r *Record) Expired(now time.Time) bool {
	return !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)
}
