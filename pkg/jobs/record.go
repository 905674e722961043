package jobs

import (
	"encoding/json"
	"maps"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

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
	// Lane is the job's lane, when it is not the default lane.
	Lane string `json:"lane,omitempty"`
	// WaitingOn says what a queued job that could not start waits for:
	// "concurrency" (a slot of its kind's concurrency limit), "rate" (its
	// reserved start under a rate limit, at RunAt), "store" (a limit's
	// item could not be read; it tries again), "parents" (the jobs it
	// runs after: see After), "kind" (no worker that got it knows its
	// kind yet), "key" (its payload's key is not in that worker's ring
	// yet), "paused" (a pause holds it: Service.Pause), "sleep" (its
	// handler sleeps until RunAt: Job.Sleep) or "signal" (its handler
	// waits for the signal Signal names, at most until RunAt:
	// WaitForSignal). A job whose signal has come waits on nothing: it
	// is due.
	WaitingOn string `json:"waiting_on,omitempty"`
	// Signal names the signal a job waiting on "signal" waits for.
	Signal string `json:"signal,omitempty"`
	// Steps are a durable job's steps, sleeps and waits for signals (its
	// last 32), in order, as they stood at its last write: names, states
	// and times, never results (StepMark). The last is where it is.
	Steps []StepMark `json:"steps,omitempty"`
	// After names the jobs this one runs after (EnqueueOpts.After);
	// ParentsLeft counts those not succeeded yet while it waits on them
	// (WaitingOn "parents").
	After       []string `json:"after,omitempty"`
	ParentsLeft int      `json:"parents_left,omitempty"`
	// ReplayOf names the job this one replays (Service.Replay).
	ReplayOf string `json:"replay_of,omitempty"`
	// ManualRunOf names the schedule this job was run by hand of
	// (Service.RunNow), rather than made by one of its fires.
	ManualRunOf string `json:"manual_run_of,omitempty"`
	// ChildOf names the job whose handler enqueued this one
	// (Kind.EnqueueChild).
	ChildOf string `json:"child_of,omitempty"`
	// Tags are the job's tags (EnqueueOpts.Tags).
	Tags map[string]string `json:"tags,omitempty"`
	// BatchID names the job's batch, if any.
	BatchID *string `json:"batch_id,omitempty"`
	// Payload is the job's payload with its jobs:"secret" fields masked
	// ("[secret]"): set by Service.Get (GET /v1/jobs/{id}) only, and not
	// for a payload kept as an object (PayloadBytes).
	Payload json.RawMessage `json:"payload,omitempty"`
	// PayloadBytes is the size of a payload too large to show, kept as
	// an object (KindOpts.MaxPayloadBytes); absent otherwise.
	PayloadBytes int `json:"payload_bytes,omitempty"`
	// ResultBytes is the size of a final result kept as an object (Result
	// is then null), and ResultURL a link that reads it for 5 minutes, set
	// by Service.Get only; both absent otherwise.
	ResultBytes int    `json:"result_bytes,omitempty"`
	ResultURL   string `json:"result_url,omitempty"`
	// Owner is set by Service.GetAny only (the operators' view); the API
	// never returns it to the job's caller.
	Owner     string    `json:"-"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// StartedAt is when the job's latest run was claimed (each run is a
	// claim: a retry, a continuation, a wake after a sleep or a wait);
	// nil before its first.
	StartedAt *time.Time `json:"started_at,omitempty"`
	// FinishedAt is when its outcome was written (the final write, or the
	// cancel of a queued job): after its handler returned, so a
	// concurrency slot may pass to the next job before this one's
	// FinishedAt. Nil until it ends.
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// View returns the public view of r.
func viewOf(r *driver.Record) View {
	v := View{
		ID:        r.ID,
		Kind:      r.Kind,
		Status:    r.Status,
		Lane:      r.Lane,
		Result:    r.Result,
		Attempt:   r.Attempt,
		CreatedAt: r.CreatedAt.UTC(),
		UpdatedAt: r.UpdatedAt.UTC(),
	}
	if len(v.Result) == 0 {
		v.Result = json.RawMessage("null")
	}
	if (r.Status == StatusFailed || r.Status == StatusCancelled) && r.ErrorCode != "" {
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
	if r.Status == StatusQueued {
		v.WaitingOn = r.WaitingOn
		name, ok := driver.SignalWaitedOn(r.WaitingOn)
		switch {
		case ok && r.Signals[name] != nil:
			// Woken: the signal came and the job is due; the record says
			// what it waited on until a worker claims it.
			v.WaitingOn = ""
		case ok && driver.IsChildSignal(name):
			v.WaitingOn = waitChild
		case ok:
			v.WaitingOn, v.Signal = waitSignal, name
		}
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
	v.Steps = stepMarks(r.StepMarks)
	parentsView(&v, r)
	v.ReplayOf, v.ManualRunOf, v.ChildOf = r.ReplayOf, r.ManualRunOf, r.ChildOf
	v.PayloadBytes, v.ResultBytes = r.PayloadBytes, r.ResultBytes
	if len(r.Tags) > 0 {
		v.Tags = maps.Clone(r.Tags)
	}
	return v
}
