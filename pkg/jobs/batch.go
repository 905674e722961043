package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/errtypes"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Batches: many jobs as one unit.
//
// A batch's jobs are ordinary jobs that carry the batch's id and their
// place in it. A job's final write is its own (one item: it lands within
// its budget however large the batch); counting it in its batch is a
// post-outcome step (engine.after) that runs once the outcome has landed,
// by the worker, or by the sweeper if the worker died first. The counts
// are spread over the batch's shards (job i in shard i % Shards, at most
// MaxBatchShards), so no item takes more than its share of the writes
// however fast the batch's jobs end; counting a job adds its index to a
// set, so counting it twice counts it once. The job that completes a
// shard marks the shard done on the batch item (a set again); the one that
// marks the last creates the completion job, once (its id is derived from
// the batch's), and records the batch's end with a conditional write.

// MaxBatchJobs is the most jobs one batch holds (an HTTP request carries
// at most 1,000 of them).
const MaxBatchJobs = 10000

// JobSpec is a job of a batch, or its completion job.
type JobSpec struct {
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload"`
	// Tags: EnqueueOpts.Tags (a batch's jobs only, not its completion
	// job).
	Tags map[string]string `json:"tags,omitempty"`
}

// Batch is a batch as the API returns it, with one page of its job ids.
type Batch struct {
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

// BatchResult is what EnqueueBatch did.
type BatchResult struct {
	// Batch is the batch with every one of its job ids, and no
	// next_page_token: its page tokens are signed (GetBatch), and the
	// functions that enqueue have no page token key.
	Batch Batch
	// Replayed is set when a retry with the same idempotency key returned
	// the first request's batch.
	Replayed bool
}

// Default and largest page of a batch's job ids.
const (
	defaultBatchPage = 100
	maxBatchPage     = 1000
)

// BatchRequest is a batch to enqueue.
type BatchRequest struct {
	Owner          string
	Jobs           []JobSpec
	Completion     *JobSpec
	IdempotencyKey string
	// wake: the batch's end signals a job instead of creating a
	// completion job (Map).
	wake *parentWake
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

// EnqueueBatch validates every job of req (one refused job refuses the
// whole request and stores nothing, as do jobs that would pass a cap of
// their kind on queued jobs: a *QueueFullError), stores the batch as being created,
// then its jobs, then opens the batch and sends the jobs.
//
// The batch comes first so that its id, and with it the request, is taken
// once: a concurrent request with the same idempotency key and another body
// gets ErrIdempotencyConflict before it stores a job, and one with the same
// body finishes the same batch. If storing the jobs fails, the caller gets
// ErrUnavailable; a retry with the same idempotency key finishes the batch,
// and without one the sweeper aborts it after the dispatch grace: the jobs
// it stored that have not started are cancelled, and the batch ends with
// exact counts.
func (s *Service) EnqueueBatch(ctx context.Context, req BatchRequest) (*BatchResult, error) {
	b, created, err := s.enqueueBatch(ctx, req)
	if err != nil {
		return nil, err
	}
	return &BatchResult{Batch: batchView(b, 0, b.Total), Replayed: !created}, nil
}

// batchIDOf is the id of owner's batch made with idempotency key key.
func batchIDOf(owner, key string) string { return wire.DerivedID("batch-idempotency", owner, key) }

func (s *Service) enqueueBatch(ctx context.Context, req BatchRequest) (*driver.Batch, bool, error) {
	if err := checkOwner(req.Owner); err != nil {
		return nil, false, err
	}
	if err := checkIdempotencyKey(req.IdempotencyKey); err != nil {
		return nil, false, err
	}
	if len(req.Jobs) == 0 || len(req.Jobs) > MaxBatchJobs {
		return nil, false, refuse(codeInvalidRequest, "a batch holds 1 to 10000 jobs")
	}
	now := s.eng.now()
	batchID := s.eng.newID()
	if req.IdempotencyKey != "" {
		batchID = batchIDOf(req.Owner, req.IdempotencyKey)
	}
	n := len(req.Jobs)
	b := &driver.Batch{ID: batchID, Owner: req.Owner, Status: StatusRunning, Creating: true, Total: n, Shards: driver.Shards(n),
		Remaining: n, CreatedAt: now, SweepAt: now.Add(s.grace)}
	whole := request{[]byte("batch")}
	specs := make([]newJob, n)
	reqs := make([]request, n)
	for i, spec := range req.Jobs {
		j, r, err := s.prepareAs(EnqueueRequest{Owner: req.Owner, Kind: spec.Kind, Payload: spec.Payload, EnqueueOpts: EnqueueOpts{Tags: spec.Tags}},
			wire.BatchJobID(batchID, i), now)
		if err != nil {
			return nil, false, &BatchJobError{Index: i, Err: err}
		}
		j.batch, j.index = b, i
		specs[i], reqs[i] = j, r
		whole = append(whole, r...)
	}
	if req.Completion != nil && len(req.Completion.Tags) > 0 {
		return nil, false, &BatchJobError{Index: -1, Err: refuse(codeInvalidRequest, "a batch's completion job takes no tags")}
	}
	if req.Completion != nil {
		c, r, err := s.prepareAs(EnqueueRequest{Owner: req.Owner, Kind: req.Completion.Kind, Payload: req.Completion.Payload},
			wire.DerivedID("batch-completion", batchID), now)
		if err != nil {
			return nil, false, &BatchJobError{Index: -1, Err: err}
		}
		b.CompletionKind, b.CompletionPayload = c.kind, c.payload
		whole = append(append(whole, []byte("completion")), r...)
	}
	if req.wake != nil {
		raw, err := json.Marshal(req.wake)
		if err != nil {
			return nil, false, err
		}
		b.CompletionKind, b.CompletionPayload = driver.WakesParent, raw
		whole = append(append(whole, []byte("wakes")), raw)
	}
	b.RequestHash = s.hasher.sum(whole)
	if err := s.checkEnqueueRate(ctx, req.Owner); err != nil {
		return nil, false, err
	}
	queued := map[*kindDef]int{} // the batch's jobs of capped kinds
	for _, j := range specs {
		if k, _ := s.reg.lookup(j.kind); k.caps.any() {
			queued[k]++
		}
	}
	for k, n := range queued {
		if err := s.checkCaps(ctx, k, req.Owner, n); err != nil {
			if !errors.Is(err, ErrQueueFull) || req.IdempotencyKey == "" {
				return nil, false, err
			}
			if _, gerr := s.store.GetBatch(ctx, batchID); gerr != nil {
				return nil, false, err // not a retry of a stored batch
			}
			break // a retry: it finishes or answers the first request's batch
		}
	}
	stored, err := s.store.CreateBatch(ctx, b)
	created := err == nil
	switch {
	case err == nil:
	case errors.Is(err, driver.ErrExists) && stored != nil:
		if stored.Owner != req.Owner || !s.hasher.matches(stored.RequestHash, whole) {
			return nil, false, ErrIdempotencyConflict
		}
		if !stored.Creating {
			// The first try finished it.
			if counted, err := s.store.CountBatch(ctx, stored); err == nil {
				stored = counted
			}
			return stored, false, nil
		}
		// The first try stopped while storing the jobs (or runs now): finish it.
	default:
		return nil, false, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	recs, sent, err := s.createAll(ctx, specs, reqs)
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "batch jobs not all stored; a retry with the same key finishes the batch, else the sweeper aborts it",
			slog.String("batch_id", batchID), slog.String("err_types", errtypes.Of(err)))
		return nil, false, err
	}
	if err := s.store.OpenBatch(ctx, batchID); err != nil && !errors.Is(err, errBatchOpened) {
		return nil, false, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	stored.Creating = false
	if created {
		stored.Remaining = stored.Total
		for k, n := range queued {
			s.noteQueued(k, req.Owner, n)
		}
	} else if counted, err := s.store.CountBatch(ctx, stored); err == nil {
		stored = counted
	}
	var unsent []*driver.Record
	for i, rec := range recs {
		if !sent[i] {
			unsent = append(unsent, rec)
		}
	}
	if err := s.eng.deliverAll(ctx, now, unsent); err != nil {
		s.log.LogAttrs(ctx, slog.LevelWarn, "batch stored but not all sent; the sweeper will send the rest",
			slog.String("batch_id", batchID), slog.String("err_types", errtypes.Of(err)))
	}
	if !created {
		// A retry: jobs of the first try may all have ended already. (Jobs
		// sent first that all end before their batch is opened leave it
		// to the sweeper, which ends it at its sweep time: settling it here
		// too would race the last job's worker for every batch.)
		s.eng.settleBatchOf(ctx, batchID)
	}
	return stored, created, nil
}

// createAll stores the batch's jobs, 16 at a time, and returns their
// records and which of them were sent first (sendFirst, ten to a send,
// each send just before its jobs' puts); a job that exists from an
// earlier try of the same request is fine, any other is a conflict.
func (s *Service) createAll(ctx context.Context, specs []newJob, reqs []request) ([]*driver.Record, []bool, error) {
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	recs := make([]*driver.Record, len(specs))
	sent := make([]bool, len(specs))
	sem := make(chan struct{}, 16)
	var cancels []context.CancelFunc
	for lo := 0; lo < len(specs); lo += sendChunk {
		chunk := specs[lo:min(lo+sendChunk, len(specs))]
		pctx := ctx
		if s.sendFirst(ctx, chunk) {
			var cancel context.CancelFunc
			pctx, cancel = context.WithTimeout(ctx, sendToPut)
			cancels = append(cancels, cancel)
		}
		for c, j := range chunk {
			i := lo + c
			sent[i] = j.sentFirst
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				rec, err := s.createOne(pctx, j, reqs[i])
				recs[i] = rec
				if err != nil {
					once.Do(func() { first = err })
				}
			}()
		}
	}
	wg.Wait()
	for _, cancel := range cancels {
		cancel()
	}
	return recs, sent, first
}

// sendChunk is how many of a batch's jobs one send carries (SQS's
// SendMessageBatch takes ten).
const sendChunk = 10

// createOne stores the batch's job j, whose request is r: a job that
// exists from an earlier try of the same request is fine (nil), any other
// is a conflict.
func (s *Service) createOne(ctx context.Context, j newJob, r request) (*driver.Record, error) {
	rec, err := s.eng.create(ctx, j)
	var ce *driver.ConflictError
	switch {
	case err == nil:
		return rec, nil
	case errors.As(err, &ce) && ce.Current != nil:
		if cur := ce.Current; cur.BatchID == rec.BatchID && cur.Owner == rec.Owner && s.hasher.matches(cur.RequestHash, r) {
			return rec, nil
		}
		return rec, ErrIdempotencyConflict
	default:
		return rec, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
}

// GetBatch returns owner's batch with its counts (a read of each of its
// shards) and the page of its job ids that pageToken names ("" for the
// first), at most limit of them (1 to 1000; 0 means 100). Another owner's,
// an unknown or a malformed id give ErrNotFound. Page tokens are signed
// like the listing's (Config.PageTokenKey) and bound to the owner
// and the batch: one that is malformed, altered, or was given for another
// owner or another batch is ErrInvalidRequest (invalid_request). A service
// without a PageTokenKey answers the batch and the page without a token
// for the next one (its counts need none), and refuses a token.
func (s *Service) GetBatch(ctx context.Context, owner, id, pageToken string, limit int) (*Batch, error) {
	page := batchPage{svc: s, scope: tokenScope(batchTokenUse, owner, id)}
	offset, err := page.open(pageToken)
	if err != nil {
		return nil, err
	}
	switch {
	case limit == 0:
		limit = defaultBatchPage
	case limit < 1 || limit > maxBatchPage:
		return nil, refuse(codeInvalidRequest, "limit is 1 to 1000")
	}
	b, err := ownedRead(ctx, owner, id, s.store.GetBatch, func(b *driver.Batch) string { return b.Owner })
	if err != nil {
		return nil, err
	}
	if b, err = s.store.CountBatch(ctx, b); err != nil {
		return nil, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	v := batchView(b, offset, limit)
	if offset+limit < b.Total && s.pageKey != nil {
		next := page.sign(offset + limit)
		v.NextPageToken = &next
	}
	return &v, nil
}

// batchTokenUse is the use of a batch's page tokens.
const batchTokenUse = "batch"

// batchPage makes and opens the page tokens of one owner's batch: the
// listing's signed tokens (signToken), bound to the owner and the batch
// id, whose position is the offset of the page's first job.
type batchPage struct {
	svc   *Service
	scope string // tokenScope of the owner and the batch
}

// open returns the offset tok names (0 for "", the first page).
func (p batchPage) open(tok string) (int, error) {
	if tok == "" {
		return 0, nil
	}
	if p.svc.pageKey == nil {
		return 0, errBatchPagesNeedKey
	}
	pos, err := p.svc.openToken(tok, batchTokenUse, p.scope)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(pos)
	if err != nil || n < 0 {
		return 0, errPageToken
	}
	return n, nil
}

// sign returns the token of the page that begins at offset (the service
// has a page token key).
func (p batchPage) sign(offset int) string {
	return p.svc.signToken(pageToken{V: 1, Use: batchTokenUse, Filter: p.scope, Pos: strconv.Itoa(offset)})
}

var errBatchPagesNeedKey = errors.New("jobs: opening a batch's page token needs Config.PageTokenKey")

// batchView returns the public view of b with one page of its job ids,
// from offset on, at most limit (GetBatch adds the next page's token).
func batchView(b *driver.Batch, offset, limit int) Batch {
	v := Batch{ID: b.ID, Status: b.Status, Total: b.Total, CreatedAt: b.CreatedAt.UTC(), JobIDs: []string{}}
	v.Counts.Pending, v.Counts.Succeeded, v.Counts.Failed, v.Counts.Cancelled = b.Remaining, b.Succeeded, b.Failed, b.Cancelled
	if id := b.CompletionJobID(); id != "" {
		v.CompletionJobID = &id
	}
	if !b.EndedAt.IsZero() {
		t := b.EndedAt.UTC()
		v.EndedAt = &t
	}
	for i := offset; i < b.Total && i < offset+limit; i++ {
		v.JobIDs = append(v.JobIDs, wire.BatchJobID(b.ID, i))
	}
	return v
}
