package jobs

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
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

// BatchPrefix starts the store key of a batch, so batch and job ids never
// collide in the table and a batch id is never a valid job id.
const BatchPrefix = "batch#"

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
	Status                       Status
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

// EnqueueBatch validates every job of req (one refused job refuses the
// whole request and stores nothing), stores the jobs, then the batch, then
// sends the jobs. A crash before the batch is stored leaves jobs that run
// alone; a retry with the same idempotency key finishes the batch. It
// returns the batch and whether it was created now.
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
	now := s.clock.Now().Truncate(time.Millisecond)
	batchID := NewID()
	if req.IdempotencyKey != "" {
		batchID = DerivedID("batch-idempotency", req.Owner, req.IdempotencyKey)
	}
	hash := hmac.New(sha256.New, append([]byte("batch"), s.hkey...))
	recs := make([]*Record, len(req.Jobs))
	for i, j := range req.Jobs {
		rec, err := s.prepareAs(EnqueueRequest{Owner: req.Owner, Kind: j.Kind, Payload: j.Payload}, BatchJobID(batchID, i), now)
		if err != nil {
			return nil, false, &BatchJobError{Index: i, Err: err}
		}
		rec.BatchID = batchID
		recs[i] = rec
		hash.Write([]byte(rec.RequestHash))
	}
	b := &Batch{ID: batchID, Owner: req.Owner, Status: StatusRunning, Total: len(recs), Remaining: len(recs),
		CreatedAt: now, SweepAt: now.Add(s.grace)}
	if req.Completion != nil {
		c, err := s.prepareAs(EnqueueRequest{Owner: req.Owner, Kind: req.Completion.Kind, Payload: req.Completion.Payload},
			DerivedID("batch-completion", batchID), now)
		if err != nil {
			return nil, false, &BatchJobError{Index: -1, Err: err}
		}
		b.CompletionKind, b.CompletionPayload = c.Kind, c.Payload
		hash.Write([]byte("completion" + c.RequestHash))
	}
	b.RequestHash = hex.EncodeToString(hash.Sum(nil)[:16])
	if req.IdempotencyKey != "" {
		cur, err := s.store.GetBatch(ctx, batchID)
		switch {
		case err == nil && (cur.Owner != req.Owner || cur.RequestHash != b.RequestHash):
			return nil, false, ErrIdempotencyConflict
		case err == nil:
			return cur, false, nil
		case !errors.Is(err, ErrNotFound):
			return nil, false, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
		}
	}
	// The jobs first: a batch exists only once all its jobs do.
	if err := s.createAll(ctx, recs); err != nil {
		return nil, false, err
	}
	stored, err := s.store.CreateBatch(ctx, b)
	switch {
	case err == nil:
	case errors.Is(err, ErrExists) && stored != nil && stored.RequestHash == b.RequestHash:
	case errors.Is(err, ErrExists):
		return nil, false, ErrIdempotencyConflict
	default:
		return nil, false, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	if err := s.queue.SendBatch(ctx, ids); err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "batch stored but not all sent; the sweeper will send the rest",
			slog.String("batch_id", batchID), slog.String("err_types", ErrorTypes(err)))
	}
	// Only a retry can find every job already ended.
	settleBatch(ctx, s.store, s.queue, s.log, stored, s.grace, s.retention)
	return stored, err == nil, nil
}

// createAll stores the batch's jobs, 16 at a time; a job that exists from
// an earlier try of the same batch is fine.
func (s *Service) createAll(ctx context.Context, recs []*Record) error {
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	sem := make(chan struct{}, 16)
	for _, rec := range recs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := s.store.Create(ctx, rec)
			var ce *ConflictError
			if err == nil || (errors.As(err, &ce) && ce.Current != nil && ce.Current.BatchID == rec.BatchID) {
				return
			}
			once.Do(func() { first = fmt.Errorf("%w: store: %w", ErrUnavailable, err) })
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

// settleBatch ends a batch whose jobs have all ended: it creates the
// completion job (once: its id is derived from the batch's), records the
// end with a write conditional on nothing pending, then sends the
// completion job. Anyone may call it any number of times; a crash between
// the steps is finished by the sweeper.
func settleBatch(ctx context.Context, store Store, queue Queue, log *slog.Logger, b *Batch, grace, retention time.Duration) {
	if b == nil || b.Status != StatusRunning || b.Remaining > 0 {
		return
	}
	now := time.Now().Truncate(time.Millisecond)
	if id := b.CompletionJobID(); id != "" {
		counts := BatchCounts{BatchID: b.ID, Total: b.Total, Succeeded: b.Succeeded, Failed: b.Failed, Cancelled: b.Cancelled}
		rec := &Record{ID: id, Kind: b.CompletionKind, Owner: b.Owner, Status: StatusQueued, Payload: b.CompletionPayload,
			RequestHash: "completion-" + b.ID, BatchCounts: &counts, CreatedAt: now, UpdatedAt: now, SweepAt: now.Add(grace)}
		if err := store.Create(ctx, rec); err != nil && !errors.Is(err, ErrExists) {
			log.LogAttrs(ctx, slog.LevelWarn, "batch completion job not created; the sweeper will", slog.String("batch_id", b.ID), slog.String("err_types", ErrorTypes(err)))
			return
		}
	}
	status := StatusSucceeded
	if b.Failed > 0 || b.Cancelled > 0 {
		status = StatusFailed
	}
	err := store.EndBatch(ctx, b.ID, status, now, now.Add(retention))
	switch {
	case err == nil:
		log.LogAttrs(ctx, slog.LevelInfo, "batch ended", slog.String("batch_id", b.ID), slog.String("status", string(status)),
			slog.Int("total", b.Total), slog.Int("failed", b.Failed), slog.Int("cancelled", b.Cancelled))
	case errors.Is(err, ErrBatchNotDone):
		return // someone else ended it
	default:
		log.LogAttrs(ctx, slog.LevelWarn, "batch end not recorded; the sweeper will", slog.String("batch_id", b.ID), slog.String("err_types", ErrorTypes(err)))
		return
	}
	if id := b.CompletionJobID(); id != "" && queue != nil {
		_ = queue.Send(ctx, id) // if lost, the sweeper sends the queued completion job
	}
}

func isBatchKey(id string) bool { return strings.HasPrefix(id, BatchPrefix) }
