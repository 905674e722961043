package jobstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/storekey"
	"github.com/lambdajobs/lambdajobs/internal/wallclock"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// MemStore is an in-memory driver.Store with the same conditional semantics
// as the DynamoDB store. It passes RunStoreTests.
type MemStore struct {
	mu      sync.Mutex
	jobs    map[string]*driver.Record
	batches map[string]*driver.Batch
	// shards: batch id -> shard -> outcome -> the indexes counted.
	shards map[string]map[int]map[jobs.Status]map[int]bool
	done   map[string]map[int]bool             // batch id -> its done shards
	fires  map[string]string                   // schedule -> its last enqueued fire's job
	owned  map[string]map[string]jobs.Schedule // owner key -> name -> runtime schedule
	slots  map[string]*slotItem                // slot key -> its holders and waiters
	tokens map[string]time.Time                // bucket key -> its next token's time
	unique map[string]uniqueHold               // unique key -> its holder
	clock  jobs.Clock
	// apartOver and payloads: see KeepPayloadsApart (job id#ref -> item);
	// objectsOver: see KeepObjectsOver.
	apartOver, objectsOver int
	payloads               map[string]memPayload
	// uploads: see Uploads.
	uploads *MemUploads
	// pauses: the pause set, by ID.
	pauses map[string]driver.Pause
}

type uniqueHold struct {
	job   string
	until time.Time
}

var _ driver.Store = (*MemStore)(nil)
var _ driver.Signaller = (*MemStore)(nil)
var _ driver.ManyGetter = (*MemStore)(nil)

// NewMemStore returns an empty MemStore; clock may be nil for the wall clock.
func NewMemStore(clock jobs.Clock) *MemStore {
	if clock == nil {
		clock = wallclock.Clock{}
	}
	return &MemStore{jobs: map[string]*driver.Record{}, batches: map[string]*driver.Batch{}, clock: clock,
		shards: map[string]map[int]map[jobs.Status]map[int]bool{}, done: map[string]map[int]bool{},
		slots: map[string]*slotItem{}, tokens: map[string]time.Time{}, unique: map[string]uniqueHold{}, payloads: map[string]memPayload{}}
}

func clone(r *driver.Record) *driver.Record {
	c := *r
	c.Payload = bytes.Clone(r.Payload)
	c.Result = bytes.Clone(r.Result)
	c.After = slices.Clone(r.After)
	c.Checkpoint = bytes.Clone(r.Checkpoint)
	c.Parents, c.ParentsDone, c.Dependents = slices.Clone(r.Parents), slices.Clone(r.ParentsDone), slices.Clone(r.Dependents)
	c.Tags = maps.Clone(r.Tags)
	c.Signals = maps.Clone(r.Signals) // each signal's bytes are never changed
	c.SignalRefs = maps.Clone(r.SignalRefs)
	if r.BatchCounts != nil {
		bc := *r.BatchCounts
		c.BatchCounts = &bc
	}
	return &c
}

func (m *MemStore) live(id string) (*driver.Record, bool) {
	r, ok := m.jobs[id]
	if !ok || r.Expired(m.clock.Now()) {
		return nil, false
	}
	return r, true
}

// Create stores rec unless a live job with its id exists.
func (m *MemStore) Create(_ context.Context, rec *driver.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	// As DynamoDB's store: the payload's item (if it has one) is written
	// before the job's put, which may then find the id taken; an item
	// under the same name keeps the longer TTL.
	stored := clone(rec)
	stored.PayloadUntil = time.Time{}
	if rec.Payload == nil && rec.PayloadRef != "" && rec.PayloadBytes > 0 {
		// Staged (StagePayload): made to last as the job's payload.
		k := "payload#" + rec.ID + "#" + rec.PayloadRef
		item, ok := m.payloads[k]
		if !ok || !m.clock.Now().Before(item.until) {
			return fmt.Errorf("jobstest: staged payload of %s: %w", rec.ID, driver.ErrPartMissing)
		}
		if item.until.Before(rec.PayloadUntil) {
			item.until = rec.PayloadUntil
			m.payloads[k] = item
		}
	} else {
		m.setPart(stored, driver.PartPayload, rec.Payload, rec.PayloadUntil)
	}
	if cur, ok := m.live(rec.ID); ok {
		return &driver.ConflictError{Current: clone(cur)}
	}
	m.jobs[rec.ID] = stored
	return nil
}

// Get returns a copy of the job.
func (m *MemStore) Get(_ context.Context, id string) (*driver.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.live(id)
	if !ok {
		return nil, jobs.ErrNotFound
	}
	return clone(r), nil
}

// GetMany reads the jobs ids that are stored (driver.ManyGetter).
func (m *MemStore) GetMany(_ context.Context, ids []string) (map[string]*driver.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]*driver.Record{}
	for _, id := range ids {
		if r, ok := m.live(id); ok {
			out[id] = clone(r)
		}
	}
	return out, nil
}

// Claim moves a queued job to running.
func (m *MemStore) Claim(_ context.Context, id string, c driver.Claim) (*driver.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.live(id)
	if !ok {
		return nil, jobs.ErrNotFound
	}
	if r.Status != jobs.StatusQueued || r.RunAt.After(c.At) || slices.Contains(c.SkipKinds, r.Kind) || r.WaitingOn == driver.WaitParents {
		return nil, &driver.ConflictError{Current: clone(r)}
	}
	r.Status = jobs.StatusRunning
	r.ClaimToken = c.Token
	r.LeaseUntil = c.LeaseUntil
	r.StartedAt = c.At
	if r.FirstStartedAt.IsZero() {
		r.FirstStartedAt = c.At
	}
	r.UpdatedAt = c.At
	r.Attempt++
	claimed := clone(r)
	r.WaitingOn = "" // the claimed record says what it waited on; the job no longer waits
	return claimed, nil
}

func (m *MemStore) runningUnder(id, token string, allowCancel bool) (*driver.Record, error) {
	r, ok := m.live(id)
	if !ok {
		return nil, jobs.ErrNotFound
	}
	if r.Status != jobs.StatusRunning || r.ClaimToken != token {
		return nil, &driver.ConflictError{Current: clone(r)}
	}
	if r.CancelRequested && !allowCancel {
		return nil, &driver.ConflictError{Current: clone(r)}
	}
	return r, nil
}

// Publish stores a partial result.
func (m *MemStore) Publish(_ context.Context, id, token string, result []byte, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.runningUnder(id, token, false)
	if err != nil {
		return err
	}
	r.Result, r.ResultRef, r.ResultBytes = bytes.Clone(result), "", 0
	r.UpdatedAt = at
	return nil
}

// Heartbeat extends the run's lease.
func (m *MemStore) Heartbeat(_ context.Context, id, token string, hb driver.Heartbeat) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.runningUnder(id, token, true)
	if err != nil {
		return err
	}
	// A lease never moves back (a heartbeat the network held, landing
	// after a later one), but for the run's first heartbeat, which shrinks
	// the claim's lease to one heartbeat unless a later write landed.
	switch {
	case !hb.SweepAt.IsZero() && !r.UpdatedAt.After(hb.At):
		r.LeaseUntil = hb.LeaseUntil
	default:
		r.LeaseUntil = latest(r.LeaseUntil, hb.LeaseUntil)
	}
	r.UpdatedAt = latest(r.UpdatedAt, hb.At)
	if !hb.SweepAt.IsZero() {
		r.SweepAt = hb.SweepAt
	}
	if r.CancelRequested {
		return &driver.ConflictError{Current: clone(r)}
	}
	return nil
}

// Checkpoint stores the run's checkpoint and extends its lease.
func (m *MemStore) Checkpoint(_ context.Context, id, token string, c driver.Checkpoint) error {
	if len(c.Data) > driver.MaxCheckpointBytes {
		return fmt.Errorf("jobstest: checkpoint of %d bytes, over %d", len(c.Data), driver.MaxCheckpointBytes)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.runningUnder(id, token, false)
	if err != nil {
		return err
	}
	m.setPart(r, driver.PartCheckpoint, c.Data, c.Until)
	if c.Marks != "" {
		r.StepMarks = c.Marks
	}
	r.LeaseUntil, r.UpdatedAt = latest(r.LeaseUntil, c.LeaseUntil), c.At
	return nil
}

// latest is the later of a and b.
func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Finish records a final outcome.
func (m *MemStore) Finish(_ context.Context, id, token string, o driver.Outcome) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.runningUnder(id, token, o.Status == jobs.StatusCancelled)
	if err != nil {
		return err
	}
	if !o.LeaseExpiredBy.IsZero() && r.LeaseUntil.After(o.LeaseExpiredBy) || !seqFits(r, o.Seq) || len(r.Dependents) != o.Dependents {
		return &driver.ConflictError{Current: clone(r)}
	}
	if o.Seq > 0 {
		r.Outcomes = o.Seq
	}
	r.Status = o.Status
	if o.Marks != "" {
		r.StepMarks = o.Marks
	}
	r.WaitingOn = ""
	r.UpdatedAt = o.At
	r.FinishedAt = o.At
	r.ExpiresAt = o.ExpiresAt
	switch {
	case o.Result != nil && o.Staged.Ref != "":
		// Written ahead (StageResult): named, not written again.
		r.Result, r.ResultRef, r.ResultBytes = nil, o.Staged.Ref, o.Staged.Bytes
	case o.Result != nil:
		m.setPart(r, driver.PartResult, o.Result, o.ResultUntil)
	}
	if o.Code != "" {
		r.ErrorCode = o.Code
	}
	r.ClaimToken = ""
	if !o.KeepLease {
		r.LeaseUntil = time.Time{}
	}
	m.afterOutcome(r, o.At, o.After)
	return nil
}

// seqFits reports whether a final write counting outcome seq (0: none)
// may land on r.
func seqFits(r *driver.Record, seq int) bool { return seq == 0 || r.Outcomes == seq-1 }

// afterOutcome ends a final job's sweep schedule, or keeps it with its
// post-outcome steps pending.
func (m *MemStore) afterOutcome(r *driver.Record, at time.Time, steps []string) {
	if len(steps) == 0 {
		r.SweepAt = time.Time{}
		return
	}
	r.After = slices.Clone(steps)
	if r.SweepAt.IsZero() {
		r.SweepAt = at // one that waited on its parents: back in the schedule
	}
}

// DoneAfter clears a final job's post-outcome steps and sweep schedule,
// if it still holds the outcome of.
func (m *MemStore) DoneAfter(_ context.Context, id string, of driver.AfterOf) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.live(id); ok && len(r.After) > 0 && r.Outcomes == of.Outcomes && r.Attempt == of.Attempt &&
		r.FinishedAt.Truncate(time.Millisecond).Equal(of.FinishedAt.Truncate(time.Millisecond)) {
		r.After, r.SweepAt = nil, time.Time{}
	}
	return nil
}

// CountInBatch counts a job's outcome in its batch's shard (a set: once).
func (m *MemStore) CountInBatch(_ context.Context, b *driver.Batch, c driver.BatchCount) (driver.BatchShard, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if b.Shards < 1 || !c.Status.Final() {
		return driver.BatchShard{}, fmt.Errorf("jobstest: count in batch: status %q, %d shards", c.Status, b.Shards)
	}
	shard := c.Index % b.Shards
	if m.shards[b.ID] == nil {
		m.shards[b.ID] = map[int]map[jobs.Status]map[int]bool{}
	}
	if m.shards[b.ID][shard] == nil {
		m.shards[b.ID][shard] = map[jobs.Status]map[int]bool{}
	}
	sets := m.shards[b.ID][shard]
	if sets[c.Status] == nil {
		sets[c.Status] = map[int]bool{}
	}
	sets[c.Status][c.Index] = true
	return driver.BatchShard{Jobs: driver.ShardJobs(b.Total, b.Shards, shard), Succeeded: len(sets[jobs.StatusSucceeded]),
		Failed: len(sets[jobs.StatusFailed]), Cancelled: len(sets[jobs.StatusCancelled])}, nil
}

// ShardDone marks a batch's shard done (once) and returns how many are.
func (m *MemStore) ShardDone(_ context.Context, batchID string, shard int) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.batches[batchID]
	if !ok || b.Total == 0 {
		return 0, jobs.ErrNotFound
	}
	if m.done[batchID] == nil {
		m.done[batchID] = map[int]bool{}
	}
	m.done[batchID][shard] = true
	b.DoneShards = len(m.done[batchID])
	return b.DoneShards, nil
}

// CountBatch sums a batch's counts from its shards.
func (m *MemStore) CountBatch(_ context.Context, b *driver.Batch) (*driver.Batch, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := *b
	out.Succeeded, out.Failed, out.Cancelled = 0, 0, 0
	for _, sets := range m.shards[b.ID] {
		out.Succeeded += len(sets[jobs.StatusSucceeded])
		out.Failed += len(sets[jobs.StatusFailed])
		out.Cancelled += len(sets[jobs.StatusCancelled])
	}
	out.Remaining = max(0, out.Total-out.Succeeded-out.Failed-out.Cancelled)
	return &out, nil
}

// CreateBatch stores b, being created, unless a live batch with its id
// exists.
func (m *MemStore) CreateBatch(_ context.Context, b *driver.Batch) (*driver.Batch, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.batches[b.ID]
	if ok && cur.Total > 0 && !cur.Expired(m.clock.Now()) {
		c := *cur
		return &c, driver.ErrExists
	}
	nb := *b
	nb.Status, nb.Creating, nb.DoneShards = jobs.StatusRunning, true, 0
	nb.Remaining, nb.Succeeded, nb.Failed, nb.Cancelled = 0, 0, 0, 0
	nb.EndedAt, nb.ExpiresAt = time.Time{}, time.Time{}
	m.batches[b.ID] = &nb
	delete(m.done, b.ID)
	c := nb
	return &c, nil
}

// OpenBatch ends a batch's creation.
func (m *MemStore) OpenBatch(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.batches[id]
	switch {
	case !ok || b.Total == 0 || b.Expired(m.clock.Now()):
		return jobs.ErrNotFound
	case !b.Creating:
		return &driver.ConflictError{}
	}
	b.Creating = false
	return nil
}

// GetBatch returns a copy of the batch.
func (m *MemStore) GetBatch(_ context.Context, id string) (*driver.Batch, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.batches[id]
	if !ok || b.Total == 0 || b.Expired(m.clock.Now()) {
		return nil, jobs.ErrNotFound
	}
	c := *b
	return &c, nil
}

// EndBatch records a batch's end when every shard is done.
func (m *MemStore) EndBatch(_ context.Context, id string, status jobs.Status, at, expiresAt time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.batches[id]
	if ok && b.Status == status && b.EndedAt.Equal(at) {
		return nil // our own end, retried
	}
	if !ok || b.Status != jobs.StatusRunning || b.DoneShards < b.Shards || b.Creating {
		return &driver.ConflictError{}
	}
	b.Status, b.EndedAt, b.ExpiresAt, b.SweepAt = status, at, expiresAt, time.Time{}
	return nil
}

// RescheduleBatch moves a running batch's sweep time.
func (m *MemStore) RescheduleBatch(_ context.Context, id string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.batches[id]
	if !ok || b.Status != jobs.StatusRunning {
		return &driver.ConflictError{}
	}
	b.SweepAt = at
	return nil
}

// Requeue sends a run back to the queue for a retry.
func (m *MemStore) Requeue(_ context.Context, id, token string, q driver.Requeue) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.runningUnder(id, token, false)
	if err != nil {
		return err
	}
	if !q.LeaseExpiredBy.IsZero() && r.LeaseUntil.After(q.LeaseExpiredBy) {
		return &driver.ConflictError{Current: clone(r)}
	}
	if name, ok := driver.SignalWaitedOn(q.WaitingOn); ok && r.Signals[name] != nil {
		return &driver.ConflictError{Current: clone(r)}
	}
	r.Status = jobs.StatusQueued
	r.UpdatedAt = q.At
	r.RunAt = q.RunAt
	r.SweepAt = q.SweepAt
	if q.LastError != "" {
		r.LastError = q.LastError
	}
	if q.Continue {
		r.Attempt--
		r.Continuations++
	}
	if q.Checkpoint != nil {
		m.setPart(r, driver.PartCheckpoint, q.Checkpoint, q.CheckpointUntil)
	}
	if q.Marks != "" {
		r.StepMarks = q.Marks
	}
	r.WaitingOn = q.WaitingOn
	if q.WaitingOn != "" {
		r.Attempt--
	}
	if q.Unstart {
		r.FirstStartedAt, r.StartedAt = time.Time{}, time.Time{}
	}
	r.ClaimToken = ""
	r.LeaseUntil = time.Time{}
	r.Dispatches = 0
	return nil
}

// Signal stores a signal on a job that is not final, and wakes it when it
// waits for that signal: a write without Wake on a job that waits for it
// is refused (driver.Signaller).
func (m *MemStore) Signal(_ context.Context, id string, sg driver.Signal) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.live(id)
	if !ok {
		return jobs.ErrNotFound
	}
	if driver.SignalLanded(r, sg, memRef(sg.Data, m.apartOver)) {
		return nil // this write, tried again
	}
	waits := r.Status == jobs.StatusQueued && r.WaitingOn == driver.WaitSignalOn(sg.Name)
	if (r.Status != jobs.StatusQueued && r.Status != jobs.StatusRunning) || r.Signals[sg.Name] != nil || (!driver.IsChildSignal(sg.Name) && driver.CountedSignals(r.Signals) >= sg.Max) || sg.Wake != waits {
		return &driver.ConflictError{Current: clone(r)}
	}
	if r.Signals == nil {
		r.Signals = map[string][]byte{}
	}
	until := sg.Until
	if until.IsZero() {
		until = m.clock.Now().Add(jobs.DefaultRetention) // as dynamostore's
	}
	m.setPart(r, driver.SignalPart(sg.Name), sg.Data, until)
	if sg.Wake {
		r.RunAt, r.SweepAt = sg.RunAt, sg.SweepAt
	}
	return nil
}

// CancelQueued cancels a queued job.
func (m *MemStore) CancelQueued(_ context.Context, id string, c driver.CancelQueued) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.live(id)
	if !ok {
		return jobs.ErrNotFound
	}
	if r.Status != jobs.StatusQueued || !seqFits(r, c.Seq) || len(r.Dependents) != c.Dependents {
		return &driver.ConflictError{Current: clone(r)}
	}
	if c.Seq > 0 {
		r.Outcomes = c.Seq
	}
	r.Status = jobs.StatusCancelled
	r.WaitingOn = ""
	r.UpdatedAt, r.FinishedAt, r.ExpiresAt = c.At, c.At, c.ExpiresAt
	if c.Code != "" {
		r.ErrorCode = c.Code
	}
	if c.CancelledBy != "" {
		r.CancelledBy = c.CancelledBy
	}
	m.afterOutcome(r, c.At, c.After)
	if len(c.After) > 0 {
		r.SweepAt = c.At // its sweep time may be a park's, far ahead
	}
	return nil
}

// RequestCancel marks a running job's run as cancelled.
func (m *MemStore) RequestCancel(_ context.Context, id string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.live(id)
	if !ok {
		return jobs.ErrNotFound
	}
	if r.Status != jobs.StatusRunning {
		return &driver.ConflictError{Current: clone(r)}
	}
	r.CancelRequested = true
	r.UpdatedAt = at
	return nil
}

// Due returns jobs whose sweep time has come, oldest first.
func (m *MemStore) Due(_ context.Context, now time.Time, limit int) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var due []*driver.Record
	for _, r := range m.jobs {
		if !r.SweepAt.IsZero() && !r.SweepAt.After(now) {
			due = append(due, r)
		}
	}
	for _, b := range m.batches {
		if b.Status == jobs.StatusRunning && !b.SweepAt.IsZero() && !b.SweepAt.After(now) {
			due = append(due, &driver.Record{ID: storekey.BatchPrefix + b.ID, SweepAt: b.SweepAt})
		}
	}
	// In (time, id) order, so that a seeded simulation replays the same
	// sweep: map iteration and an unstable sort would not.
	sort.Slice(due, func(i, j int) bool {
		if !due[i].SweepAt.Equal(due[j].SweepAt) {
			return due[i].SweepAt.Before(due[j].SweepAt)
		}
		return due[i].ID < due[j].ID
	})
	ids := make([]string, 0, min(limit, len(due)))
	for _, r := range due[:min(limit, len(due))] {
		ids = append(ids, r.ID)
	}
	return ids, nil
}

// Reschedule moves a job's sweep time.
func (m *MemStore) Reschedule(_ context.Context, id string, expect driver.Expect, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.live(id)
	if !ok {
		return jobs.ErrNotFound
	}
	if r.Status != expect.Status || r.SweepAt.IsZero() ||
		(expect.Status == jobs.StatusRunning && r.ClaimToken != expect.Token) ||
		(expect.Status.Final() && len(r.After) == 0) || !expect.Status.Valid() {
		return &driver.ConflictError{Current: clone(r)}
	}
	r.SweepAt = at
	if expect.Status == jobs.StatusQueued {
		r.Dispatches++
	}
	return nil
}

// Len returns the number of stored jobs.
func (m *MemStore) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.jobs)
}

// All returns copies of every stored job, for assertions.
func (m *MemStore) All() []*driver.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*driver.Record, 0, len(m.jobs))
	for _, r := range m.jobs {
		out = append(out, clone(r))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// MemQueue is an in-memory driver.Queue that records what was sent, and a
// driver.DeadLetterQueue (see AddDeadLetter).
type MemQueue struct {
	mu   sync.Mutex
	sent []driver.Message
	fail error
	// dead are the lanes' dead-letter queues; receipts numbers their
	// receipts.
	dead     map[string][]*memDead
	receipts int
}

// SetFail makes every later send return err (nil: succeed again).
func (q *MemQueue) SetFail(err error) {
	q.mu.Lock()
	q.fail = err
	q.mu.Unlock()
}

// Send records msgs.
func (q *MemQueue) Send(_ context.Context, msgs ...driver.Message) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.fail != nil {
		return q.fail
	}
	q.sent = append(q.sent, msgs...)
	return nil
}

// Delay returns the delay of the last send of id (0 if none).
func (q *MemQueue) Delay(id string) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := len(q.sent) - 1; i >= 0; i-- {
		if q.sent[i].JobID == id {
			return q.sent[i].Delay
		}
	}
	return 0
}

// Messages returns the messages sent so far, in order.
func (q *MemQueue) Messages() []driver.Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.sent)
}

// Sent returns the ids sent so far, in order.
func (q *MemQueue) Sent() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	ids := make([]string, len(q.sent))
	for i, m := range q.sent {
		ids[i] = m.JobID
	}
	return ids
}

// LastFire returns the job of the schedule's last enqueued fire.
func (m *MemStore) LastFire(_ context.Context, schedule string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.fires[schedule], nil
}

// SetLastFire moves the schedule's last fire from prev to id.
func (m *MemStore) SetLastFire(_ context.Context, schedule, prev, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch cur := m.fires[schedule]; cur {
	case id:
		return nil
	case prev:
		if m.fires == nil {
			m.fires = map[string]string{}
		}
		m.fires[schedule] = id
		return nil
	}
	return &driver.ConflictError{}
}

// OwnerSchedules returns the owner's runtime schedules, by name.
func (m *MemStore) OwnerSchedules(_ context.Context, ownerKey string) ([]jobs.Schedule, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []jobs.Schedule
	for _, s := range m.owned[ownerKey] {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// AddOwnerSchedule adds s unless its name or the limit is taken.
func (m *MemStore) AddOwnerSchedule(_ context.Context, ownerKey string, s jobs.Schedule, max int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.owned == nil {
		m.owned = map[string]map[string]jobs.Schedule{}
	}
	have := m.owned[ownerKey]
	if old, ok := have[s.Name]; ok {
		if reflect.DeepEqual(old, s) {
			return nil
		}
		return driver.ErrExists
	}
	if len(have) >= max {
		return &driver.ConflictError{}
	}
	if have == nil {
		have = map[string]jobs.Schedule{}
		m.owned[ownerKey] = have
	}
	have[s.Name] = s
	return nil
}

// RemoveOwnerSchedule removes the owner's schedule name.
func (m *MemStore) RemoveOwnerSchedule(_ context.Context, ownerKey, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.owned[ownerKey][name]; !ok {
		return jobs.ErrNotFound
	}
	delete(m.owned[ownerKey], name)
	return nil
}

// List returns a page of the owner's jobs, newest first (by creation time,
// then id), with the filters of q. Its positions are the last job's
// (created, id); pages are always full.
func (m *MemStore) List(_ context.Context, q driver.ListQuery) (driver.ListPage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if q.OwnerKey == "" || q.Limit < 1 || q.Limit > 1000 {
		return driver.ListPage{}, errors.New("jobstest: list needs an owner key and a limit of 1 to 1000")
	}
	pos := func(r *driver.Record) string { return fmt.Sprintf("%015d#%s", r.CreatedAt.UnixMilli(), r.ID) }
	var all []*driver.Record
	for _, r := range m.jobs {
		if r.Expired(m.clock.Now()) || wire.OwnerKey(r.Owner) != q.OwnerKey ||
			(q.Status != "" && r.Status != q.Status) || (q.Kind != "" && r.Kind != q.Kind) ||
			(!q.CreatedBefore.IsZero() && !r.CreatedAt.Before(q.CreatedBefore)) ||
			(q.After != "" && pos(r) >= q.After) || !tagged(r, q.Tag) {
			continue
		}
		all = append(all, r)
	}
	sort.Slice(all, func(i, j int) bool { return pos(all[i]) > pos(all[j]) })
	var page driver.ListPage
	for _, r := range all {
		if len(page.Records) == q.Limit {
			page.Next = pos(page.Records[len(page.Records)-1])
			break
		}
		page.Records = append(page.Records, clone(r))
	}
	return page, nil
}

// tagged reports whether r has tag ("key=value"; "" for any job).
func tagged(r *driver.Record, tag string) bool {
	if tag == "" {
		return true
	}
	k, v, ok := strings.Cut(tag, "=")
	got, has := r.Tags[k]
	return ok && has && got == v
}

// CountUnfinished counts the owner's queued and running jobs by kind.
func (m *MemStore) CountUnfinished(_ context.Context, ownerKey string, max int) (jobs.UnfinishedCounts, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := jobs.UnfinishedCounts{Kinds: map[string]jobs.KindCounts{}}
	n := 0
	for _, r := range m.jobs {
		if r.Expired(m.clock.Now()) || wire.OwnerKey(r.Owner) != ownerKey || r.Status.Final() {
			continue
		}
		if n == max {
			out.Truncated = true
			break
		}
		n++
		c := out.Kinds[r.Kind]
		if r.Status == jobs.StatusRunning {
			c.Running++
		} else {
			c.Queued++
			if r.WaitingOn != "" {
				c.Waiting++
			}
		}
		out.Kinds[r.Kind] = c
	}
	return out, nil
}

var _ driver.QueueCounter = (*MemStore)(nil)

// CountQueued counts q.Kind's queued jobs: the owner's, or every owner's
// created QueueCapped.
func (m *MemStore) CountQueued(_ context.Context, q driver.QueueCount) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, r := range m.jobs {
		if r.Status != jobs.StatusQueued || r.Kind != q.Kind || r.Expired(m.clock.Now()) {
			continue
		}
		if (q.OwnerKey != "" && wire.OwnerKey(r.Owner) != q.OwnerKey) || (q.OwnerKey == "" && !r.QueueCapped) {
			continue
		}
		if n++; q.Limit > 0 && n >= q.Limit {
			break
		}
	}
	return n, nil
}

// Resubmit puts a failed or cancelled job outside a batch back to queued.
func (m *MemStore) Resubmit(_ context.Context, id string, rs driver.Resubmit) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.live(id)
	if !ok {
		return jobs.ErrNotFound
	}
	if (r.Status != jobs.StatusFailed && r.Status != jobs.StatusCancelled) || r.BatchID != "" || r.LeaseUntil.After(rs.At) || len(r.After) > 0 {
		return &driver.ConflictError{Current: clone(r)}
	}
	r.AttemptBase, r.Dispatches, r.LeaseUntil = r.Attempt, 0, time.Time{}
	r.FirstStartedAt = time.Time{} // its MaxRunTime counts from its own first start
	r.LastError = r.ErrorCode
	if r.LastError == "" {
		r.LastError = string(jobs.StatusCancelled)
	}
	r.Status, r.UpdatedAt, r.RunAt, r.SweepAt = jobs.StatusQueued, rs.At, rs.At, rs.SweepAt
	r.ErrorCode, r.Result, r.ResultRef, r.ResultBytes, r.CancelRequested, r.CancelledBy = "", nil, "", 0, false, ""
	r.FinishedAt, r.ExpiresAt = time.Time{}, time.Time{}
	if rs.WaitingOn != "" {
		r.WaitingOn = rs.WaitingOn
	}
	return nil
}
