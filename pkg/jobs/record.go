package jobs

import (
	"encoding/json"
	"time"
)

// Record is a job as the [Store] keeps it. Payload and Result hold JSON
// (Result is nil until a result is published). ErrorCode is set only on a
// failed job. ClaimToken and LeaseUntil are set only while the job runs.
type Record struct {
	ID      string
	Kind    string
	Owner   string
	Status  Status
	Payload json.RawMessage
	Result  json.RawMessage
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
	// still queued or running by then. Zero once the job is final.
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

	CreatedAt  time.Time
	UpdatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	// ExpiresAt is when a final job may be deleted (DynamoDB TTL). Reads
	// treat an expired job as absent.
	ExpiresAt time.Time
}

// Expired reports whether the job's retention has passed at now.
func (r *Record) Expired(now time.Time) bool {
	return !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)
}

// View is the job as the API returns it: no payload, no owner, no claim
// details, and a failure code rather than any error text.
type View struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Status Status `json:"status"`
	// Result is the latest partial result while the job runs, the final one
	// after; null until one is published.
	Result json.RawMessage `json:"result"`
	// Error is the failure code of a failed job, null otherwise.
	Error   *string `json:"error"`
	Attempt int     `json:"attempt"`
	// RunAt is when a queued job runs next (a delayed job, or a retry after
	// its backoff); absent when it can run now.
	RunAt *time.Time `json:"run_at,omitempty"`
	// LastError is the failure code of the previous attempt while a retry
	// waits; absent otherwise.
	LastError *string `json:"last_error,omitempty"`
	// CancelRequested is true once the owner cancelled a running job, until
	// it ends cancelled.
	CancelRequested bool `json:"cancel_requested,omitempty"`
	// BatchID names the job's batch, if any.
	BatchID *string `json:"batch_id,omitempty"`
	// Payload is the job's payload with its jobs:"secret" fields masked
	// ("[secret]"): in GET /v1/jobs/{id} only (Service.PayloadView).
	Payload    json.RawMessage `json:"payload,omitempty"`
	CreatedAt  time.Time       `json:"created_at"`
	UpdatedAt  time.Time       `json:"updated_at"`
	StartedAt  *time.Time      `json:"started_at,omitempty"`
	FinishedAt *time.Time      `json:"finished_at,omitempty"`
}

// View returns the public view of r.
func (r *Record) View() View {
	v := View{
		ID:        r.ID,
		Kind:      r.Kind,
		Status:    r.Status,
		Result:    r.Result,
		Attempt:   r.Attempt,
		CreatedAt: r.CreatedAt.UTC(),
		UpdatedAt: r.UpdatedAt.UTC(),
	}
	if len(v.Result) == 0 {
		v.Result = json.RawMessage("null")
	}
	if r.Status == StatusFailed && r.ErrorCode != "" {
		code := r.ErrorCode
		v.Error = &code
	}
	if !r.StartedAt.IsZero() {
		t := r.StartedAt.UTC()
		v.StartedAt = &t
	}
	if r.Status == StatusQueued && !r.RunAt.IsZero() {
		t := r.RunAt.UTC()
		v.RunAt = &t
	}
	if r.Status == StatusQueued && r.LastError != "" {
		code := r.LastError
		v.LastError = &code
	}
	v.CancelRequested = r.CancelRequested && r.Status == StatusRunning
	if r.BatchID != "" {
		id := r.BatchID
		v.BatchID = &id
	}
	if !r.FinishedAt.IsZero() {
		t := r.FinishedAt.UTC()
		v.FinishedAt = &t
	}
	return v
}
