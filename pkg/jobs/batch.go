package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/internal/errtypes"
)

// Batches: many jobs as one unit.
//
// A batch's jobs are ordinary jobs that carry the batch's id. The final
// write of each (succeeded, failed, cancelled) and the update of its batch's
// counters are one DynamoDB transaction, so a duplicate delivery or a
// retried final write never counts twice. When the last job ends, whoever
// wrote it (the worker, or the sweeper for a batch whose end was never
// recorded) creates the completion job, once (its id is derived from the
// batch's), and records the batch's end with a conditional write.

// MaxBatchJobs is the most jobs one batch holds (HTTP requests take at most
// MaxBatchJobsPerRequest).
const (
	MaxBatchJobs           = 10000
	MaxBatchJobsPerRequest = 1000
)

// JobSpec is a job of a batch, or its completion job.
type JobSpec struct {
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload"`
}

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
	Creating                     bool
	Total, Remaining             int
	Succeeded, Failed, Cancelled int
	CompletionKind               string
	CompletionPayload            json.RawMessage // canonical, sealed like a job's
	RequestHash                  string
	CreatedAt, EndedAt, SweepAt  time.Time
	ExpiresAt                    time.Time
}

// Expired reports whether the batch's retention has passed at now.
func (b *Batch) Expired(now time.Time) bool { return !b.ExpiresAt.IsZero() && !now.Before(b.ExpiresAt) }

// CompletionJobID is the id of the batch's completion job.
func (b *Batch) CompletionJobID() string {
	if b.CompletionKind == "" {
		return ""
	}
	return DerivedID("batch-completion", b.ID)
}

// BatchJobID returns the id of the i-th job of the batch batchID.
func BatchJobID(batchID string, i int) string { return DerivedID("batch-job", batchID, fmt.Sprint(i)) }

// BatchView is the batch as the API returns it.
type BatchView struct {
	ID     string `json:"id"`
	Status Status `json:"status"`
	Total  int    `json:"total"`
	Counts struct {
		Pending   int `json:"pending"`
		Succeeded int `json:"succeeded"`
		Failed    int `json:"failed"`
		Cancelled int `json:"cancelled"`
	} `json:"counts"`
	CompletionJobID *string    `json:"completion_job_id"`
	CreatedAt       time.Time  `json:"created_at"`
	EndedAt         *time.Time `json:"ended_at,omitempty"`
	JobIDs          []string   `json:"job_ids"`
	NextPageToken   *string    `json:"next_page_token"`
}

// View returns the public view of b with one page of its job ids, from
// offset on, at most limit.
func (b *Batch) View(offset, limit int) BatchView {
	v := BatchView{ID: b.ID, Status: b.Status, Total: b.Total, CreatedAt: b.CreatedAt.UTC(), JobIDs: []string{}}
	v.Counts.Pending, v.Counts.Succeeded, v.Counts.Failed, v.Counts.Cancelled = b.Remaining, b.Succeeded, b.Failed, b.Cancelled
	if id := b.CompletionJobID(); id != "" {
		v.CompletionJobID = &id
	}
	if !b.EndedAt.IsZero() {
		t := b.EndedAt.UTC()
		v.EndedAt = &t
	}
	for i := offset; i < b.Total && i < offset+limit; i++ {
		v.JobIDs = append(v.JobIDs, BatchJobID(b.ID, i))
	}
	if offset+limit < b.Total {
		next := fmt.Sprint(offset + limit)
		v.NextPageToken = &next
	}
	return v
}

// BatchRequest is a batch to enqueue.
type BatchRequest struct {
	Owner          string
	Jobs           []JobSpec
	Completion     *JobSpec
	IdempotencyKey string
}

// BatchJobError says which job of a batch request was refused; Index is -1
// for the completion job.
type BatchJobError struct {
	Index int
	Err   error
}

func (e *BatchJobError) Error() string {
	if e.Index < 0 {
		return "completion job: " + e.Err.Error()
	}
	return fmt.Sprintf("job %d: %v", e.Index, e.Err)
}

func (e *BatchJobError) Unwrap() error { return e.Err }

// ErrBatchSize: a batch with no jobs or too many.
var ErrBatchSize = errors.New("jobs: a batch holds 1 to 10000 jobs")

// ErrBatchNotDone: EndBatch found jobs still pending or the batch ended.
var ErrBatchNotDone = errors.New("jobs: batch not ready to end")

// ErrBatchOpened: OpenBatch found the batch's creation already ended.
var ErrBatchOpened = errors.New("jobs: batch already opened")

// EnqueueBatch validates every job of req (one refused job refuses the
// whole request and stores nothing), stores the batch as being created,
// then its jobs, then opens the batch and sends the jobs. It returns the
// batch and whether it was created now.
//
// The batch comes first so that its id, and with it the request, is taken
// once: a concurrent request with the same idempotency key and another body
// gets ErrIdempotencyConflict before it stores a job, and one with the same
// body finishes the same batch. If storing the jobs fails, the caller gets
// ErrUnavailable; a retry with the same idempotency key finishes the batch,
// and without one the sweeper aborts it after the dispatch grace: the jobs
// it stored that have not started are cancelled, and the batch ends with
// exact counts.
func (s *Service) EnqueueBatch(ctx context.Context, req BatchRequest) (*Batch, bool, error) {
	if err := checkOwner(req.Owner); err != nil {
		return nil, false, err
	}
	if err := checkIdempotencyKey(req.IdempotencyKey); err != nil {
		return nil, false, err
	}
	if len(req.Jobs) == 0 || len(req.Jobs) > MaxBatchJobs {
		return nil, false, ErrBatchSize
	}
	now := s.eng.now()
	batchID := NewID()
	if req.IdempotencyKey != "" {
		batchID = DerivedID("batch-idempotency", req.Owner, req.IdempotencyKey)
	}
	whole := request{[]byte("batch")}
	recs := make([]*Record, len(req.Jobs))
	reqs := make([]request, len(req.Jobs))
	for i, j := range req.Jobs {
		rec, r, err := s.prepareAs(EnqueueRequest{Owner: req.Owner, Kind: j.Kind, Payload: j.Payload}, BatchJobID(batchID, i), now)
		if err != nil {
			return nil, false, &BatchJobError{Index: i, Err: err}
		}
		rec.BatchID = batchID
		recs[i], reqs[i] = rec, r
		whole = append(whole, r...)
	}
	b := &Batch{ID: batchID, Owner: req.Owner, Status: StatusRunning, Creating: true, Total: len(recs), Remaining: len(recs),
		CreatedAt: now, SweepAt: now.Add(s.grace)}
	if req.Completion != nil {
		c, r, err := s.prepareAs(EnqueueRequest{Owner: req.Owner, Kind: req.Completion.Kind, Payload: req.Completion.Payload},
			DerivedID("batch-completion", batchID), now)
		if err != nil {
			return nil, false, &BatchJobError{Index: -1, Err: err}
		}
		b.CompletionKind, b.CompletionPayload = c.Kind, c.Payload
		whole = append(append(whole, []byte("completion")), r...)
	}
	b.RequestHash = s.hasher.sum(whole)
	stored, err := s.store.CreateBatch(ctx, b)
	created := err == nil
	switch {
	case err == nil:
	case errors.Is(err, ErrExists) && stored != nil:
		if stored.Owner != req.Owner || !s.hasher.matches(stored.RequestHash, whole) {
			return nil, false, ErrIdempotencyConflict
		}
		if !stored.Creating {
			return stored, false, nil // the first try finished it
		}
		// The first try stopped while storing the jobs (or runs now): finish it.
	default:
		return nil, false, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	if err := s.createAll(ctx, recs, reqs); err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "batch jobs not all stored; a retry with the same key finishes the batch, else the sweeper aborts it",
			slog.String("batch_id", batchID), slog.String("err_types", errtypes.Of(err)))
		return nil, false, err
	}
	if err := s.store.OpenBatch(ctx, batchID, 0); err != nil && !errors.Is(err, ErrBatchOpened) {
		return nil, false, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	stored.Creating = false
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	if err := s.queue.SendBatch(ctx, ids); err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "batch stored but not all sent; the sweeper will send the rest",
			slog.String("batch_id", batchID), slog.String("err_types", errtypes.Of(err)))
	}
	if !created {
		// A retry: jobs of the first try may all have ended already.
		s.eng.settleBatchOf(ctx, batchID)
	}
	return stored, created, nil
}

// createAll stores the batch's jobs, 16 at a time; a job that exists from
// an earlier try of the same request is fine, any other is a conflict.
func (s *Service) createAll(ctx context.Context, recs []*Record, reqs []request) error {
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	sem := make(chan struct{}, 16)
	for i, rec := range recs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := s.store.Create(ctx, rec)
			var ce *ConflictError
			switch {
			case err == nil:
				return
			case errors.As(err, &ce) && ce.Current != nil:
				if cur := ce.Current; cur.BatchID == rec.BatchID && cur.Owner == rec.Owner && s.hasher.matches(cur.RequestHash, reqs[i]) {
					return
				}
				err = ErrIdempotencyConflict
			default:
				err = fmt.Errorf("%w: store: %w", ErrUnavailable, err)
			}
			once.Do(func() { first = err })
		}()
	}
	wg.Wait()
	return first
}

// GetBatch returns owner's batch; another owner's, an unknown or a
// malformed id give ErrNotFound.
func (s *Service) GetBatch(ctx context.Context, owner, id string) (*Batch, error) {
	return ownedRead(ctx, owner, id, s.store.GetBatch, func(b *Batch) string { return b.Owner })
}
