package driver

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"time"
)

// Store keeps jobs. Every state change is one conditional write, so
// concurrent workers, duplicate deliveries and overlapping sweepers can race
// freely: at most one of them wins each transition. The DynamoDB
// implementation is in package dynamostore; jobstest has a fake for unit
// tests and the conformance suite every implementation must pass.
//
// Errors: ErrNotFound for an absent (or expired) job, a *ConflictError
// when a condition fails (see the Store errors below), anything else for a
// dependency failure.
type Store interface {
	// Create stores rec, which must be queued, unless a live job with the
	// same ID exists; then it returns a *ConflictError that carries the
	// existing job.
	Create(ctx context.Context, rec *Record) error

	// Get returns the job with the given id, or ErrNotFound.
	Get(ctx context.Context, id string) (*Record, error)

	// Claim moves a queued job whose run time has come (no RunAt, or RunAt
	// at or before c.At), that does not wait on its parents (WaitParents)
	// and whose kind is not one of c.SkipKinds to running, stamping c's
	// token and lease and counting an attempt, and returns the job as
	// claimed. If the job is not queued, not due or of a skipped kind it
	// returns a *ConflictError with the job as it is; if there is no such
	// job, ErrNotFound.
	Claim(ctx context.Context, id string, c Claim) (*Record, error)

	// Publish replaces the job's result with a partial result, provided the
	// job is running under token and no cancel was requested; otherwise it
	// returns a *ConflictError.
	Publish(ctx context.Context, id, token string, result []byte, at time.Time) error

	// Heartbeat extends the lease of the run named by token to
	// hb.LeaseUntil, never back (a heartbeat or checkpoint the network
	// held may land after a later one: the later lease stays), but for the
	// run's first heartbeat (hb.SweepAt set), which shrinks the claim's
	// lease unless a later write of the run landed; it moves its sweep time
	// to hb.SweepAt when set,
	// provided the job still runs under that token; otherwise it returns a
	// *ConflictError, and a heartbeat from a stale run changes nothing.
	// Once a cancel was requested it still extends the lease (the handler
	// may take a while to stop, and no retry may start beside it) and then
	// returns a *ConflictError whose Current is the job as written (running
	// under token, CancelRequested): the run must stop.
	Heartbeat(ctx context.Context, id, token string, hb Heartbeat) error

	// Checkpoint stores c.Data as the job's checkpoint and extends the
	// run's lease to c.LeaseUntil, with Heartbeat's conditions and errors.
	Checkpoint(ctx context.Context, id, token string, c Checkpoint) error

	// ReadPart reads part p of job rec that the store keeps in an item of
	// its own (its record names it: PayloadRef, CheckpointRef, ResultRef),
	// strongly consistent, and when that item expires; ErrPartMissing when
	// it is not there (it expired, or was never written). A part the
	// record carries itself (no name) is returned as it is, with a zero
	// time: a store that keeps every part in the job's item returns them
	// so.
	ReadPart(ctx context.Context, rec *Record, p Part) ([]byte, time.Time, error)

	// KeepPart makes the item of part p of job rec last until at least
	// until (never shorter than it was); a part in the job's item, or an
	// item that is not there (or expired), is left as it is.
	KeepPart(ctx context.Context, rec *Record, p Part, until time.Time) error

	// AcquireSlot takes a slot of the slot item key for c.Holder until
	// c.LeaseUntil, if fewer than c.Max holders hold one whose lease has
	// not ended at c.At (a holder that holds one renews it), and says
	// SlotHeld. When every slot is held it says SlotQueued after putting
	// the waiter (c.WaiterOf()) at the end of the item's waiters (once; at
	// most c.Waiters of them), or SlotFull when they are as many or
	// c.Waiters is 0. A waiter that takes a slot leaves the waiters. A
	// slot whose lease ended frees itself: a killed worker's run holds its
	// slot no longer than its lease.
	AcquireSlot(ctx context.Context, key string, c SlotClaim) (SlotState, error)
	// ReleaseSlot frees holder's slot of key (nothing when it holds none)
	// and takes the first of the item's waiters off, answering it ("" when
	// none): the caller wakes it, so a waiting job starts when a slot
	// frees rather than when it next looks.
	ReleaseSlot(ctx context.Context, key, holder string) (string, error)
	// TakeToken reserves the next token of the token bucket key (filled at
	// b.PerSecond, holding at most b.Burst) and returns how long after b.At
	// it is due: 0 when the bucket had one. A reservation is never given
	// back: the caller starts at its time, so the bucket's starts keep to
	// its rate however many callers queue (the generic cell rate
	// algorithm: one write, no read).
	TakeToken(ctx context.Context, key string, b TokenBucket) (time.Duration, error)
	// ClaimUnique takes the unique key for u.JobID unless a live holder
	// has it (one that is not released, and whose u.Until, when it was
	// set, has not passed at u.At); it returns the key's holder: u.JobID
	// when it took it.
	ClaimUnique(ctx context.Context, key string, u UniqueClaim) (string, error)
	// ReleaseUnique frees the unique key if jobID holds it.
	ReleaseUnique(ctx context.Context, key, jobID string) error
	// Debounce replaces the payload, request hash and run time of a job
	// that is still queued (a *ConflictError otherwise): a debounced
	// enqueue's later request.
	Debounce(ctx context.Context, id string, d Debounce) error

	// Finish records the outcome of the run named by token: the job must be
	// running under that token (and, when o.LeaseExpiredBy is set, its lease
	// must have ended by then), otherwise it returns a *ConflictError. Once
	// a cancel was requested, only a cancelled outcome lands; any other
	// returns a *ConflictError too. It clears the claim (the lease too, unless
	// o.KeepLease), and the sweep schedule, unless o.After names steps to
	// run after the outcome: then the job keeps its sweep schedule, with
	// the steps pending, until DoneAfter.
	Finish(ctx context.Context, id, token string, o Outcome) error

	// DoneAfter records that the post-outcome steps of the final job's
	// outcome of have all run: it clears them and the job's sweep
	// schedule. It is conditional on steps being pending and on the job
	// still holding that outcome (of's Outcomes, Attempt and FinishedAt),
	// and returns nil otherwise: another caller finished them, or the job
	// was retried and a later outcome holds steps of its own, which a late
	// write for an earlier outcome must not clear.
	DoneAfter(ctx context.Context, id string, of AfterOf) error

	// Requeue ends the run named by token with a retry: the job goes back to
	// queued, to run at r.RunAt, with r.LastError as the failed attempt's
	// code. Conditions and errors are those of Finish.
	Requeue(ctx context.Context, id, token string, r Requeue) error

	// CancelQueued moves a queued job to cancelled (a *ConflictError
	// otherwise), with the post-outcome steps c.After pending as Finish
	// does, due for the sweeper at c.At while they are: a job parked far
	// ahead (a sleep, a wait for a signal or a child) or out of the sweep
	// schedule (one that waited on its parents) is not left there.
	CancelQueued(ctx context.Context, id string, c CancelQueued) error

	// CreateBatch stores b, being created (b.Creating), unless a live batch
	// with its id exists; then it returns the existing batch and ErrExists.
	// An expired batch is replaced.
	CreateBatch(ctx context.Context, b *Batch) (*Batch, error)
	// OpenBatch ends the creation of a batch whose jobs are stored: it is
	// no longer Creating. A *ConflictError if it was opened before,
	// ErrNotFound if there is no such batch.
	OpenBatch(ctx context.Context, id string) error
	// GetBatch returns the batch as its own item holds it (its counts are
	// not read: see CountBatch), or ErrNotFound.
	GetBatch(ctx context.Context, id string) (*Batch, error)
	// CountInBatch counts the outcome c.Status of the job at index c.Index
	// of the batch b (b.ID, b.Total and b.Shards are read) in the batch's
	// shard c.Index % b.Shards, once however often it is called for that
	// job, and returns that shard's counts.
	CountInBatch(ctx context.Context, b *Batch, c BatchCount) (BatchShard, error)
	// ShardDone records that every job of the batch's shard has been
	// counted, once however often it is called, and returns how many of
	// the batch's shards are done.
	ShardDone(ctx context.Context, batchID string, shard int) (int, error)
	// CountBatch returns b with its counts summed from its shards (a read
	// of each).
	CountBatch(ctx context.Context, b *Batch) (*Batch, error)
	// EndBatch records a batch's end, provided it is running, opened, and
	// every shard is done (a *ConflictError otherwise). A batch's shard
	// counts carry no expiry while it runs (its jobs may end further apart
	// than the retention); EndBatch gives them expiresAt, the batch's.
	EndBatch(ctx context.Context, id string, status Status, at, expiresAt time.Time) error
	// RescheduleBatch moves a running batch's sweep time.
	RescheduleBatch(ctx context.Context, id string, at time.Time) error

	// RequestCancel marks a running job's run as cancelled: its handler's
	// context is cancelled when the worker notices, and the run can only end
	// cancelled (a *ConflictError otherwise).
	RequestCancel(ctx context.Context, id string, at time.Time) error

	// Due returns the ids of up to limit jobs (and batches, their ids
	// prefixed with storekey.BatchPrefix) whose sweep time is at or before now: jobs still queued or running that the sweeper must look
	// at. It reads an index that holds only such jobs, never the table.
	Due(ctx context.Context, now time.Time, limit int) ([]string, error)

	// Reschedule moves the sweep time of a job that is still as expected
	// (same status, and same token when running) to at. For a queued job it
	// also counts a dispatch. A final job can be rescheduled while its
	// post-outcome steps are pending (a sweep that could not run them
	// looks again later).
	Reschedule(ctx context.Context, id string, expect Expect, at time.Time) error

	// LastFire returns the id of the job the last enqueued fire of
	// schedule created ("" when none): what OverlapSkip checks.
	LastFire(ctx context.Context, schedule string) (string, error)
	// SetLastFire records id as that job if the recorded one is still
	// prev ("" for none), else returns a *ConflictError: another fire of
	// the schedule recorded its job first.
	SetLastFire(ctx context.Context, schedule, prev, id string) error

	// OwnerSchedules returns the runtime schedules of the owner whose key
	// is ownerKey (see OwnerKey), in one read.
	OwnerSchedules(ctx context.Context, ownerKey string) ([]Schedule, error)
	// AddOwnerSchedule adds s to the owner's schedules unless one has its
	// name (ErrExists) or the owner has max already (a *ConflictError).
	AddOwnerSchedule(ctx context.Context, ownerKey string, s Schedule, max int) error
	// RemoveOwnerSchedule removes the owner's schedule name (ErrNotFound
	// when there is none).
	RemoveOwnerSchedule(ctx context.Context, ownerKey, name string) error

	// List returns a page of an owner's jobs, newest first, as q selects
	// them. Following ListPage.Next until it is empty yields every match
	// once; a page may hold fewer than q.Limit jobs (even none) when q's
	// read budget ran out first.
	List(ctx context.Context, q ListQuery) (ListPage, error)
	// CountUnfinished counts the owner's queued and running jobs by kind,
	// reading at most max entries of the indexes that hold only unfinished
	// jobs (never the owner's history); Truncated says max was reached.
	CountUnfinished(ctx context.Context, ownerKey string, max int) (UnfinishedCounts, error)
	// AddDependent records d.Dependent as a dependent of the job parentID
	// (once however often it is called), provided that job belongs to
	// d.Owner, has not succeeded, and has fewer than d.Max dependents, and
	// returns the parent as written. A parent that succeeded, or one with
	// d.Max dependents, gives a *ConflictError with the parent (the caller
	// tells the two apart from it, and counts a succeeded one); another
	// owner's or no such job, ErrNotFound. A
	// failed or cancelled parent records it too: retried, its next outcome
	// reaches it. Recorded before the parent's final write, the dependent
	// is in the Dependents that write's post-outcome step reads: the two
	// are ordered by the parent's item.
	AddDependent(ctx context.Context, parentID string, d DependentOf) (*Record, error)
	// CountParents adds c.Done to the ParentsDone of the job id (a set:
	// once each), provided the job is queued and waits on its parents
	// (WaitingOn "parents"), and returns the job as written. With c.Await
	// it is also conditional on the job having c.Known parents counted
	// (what its writer read), and either takes the job out of the sweep
	// schedule (its parents now hold what must happen next) or, with
	// c.Release, ends its wait as ReleaseParents does, in the same write.
	// A failed condition gives a *ConflictError with the job as it is.
	CountParents(ctx context.Context, id string, c ParentCount) (*Record, error)
	// ReleaseParents ends the wait of a job whose parents are all counted:
	// WaitingOn is cleared and its sweep schedule set to r.SweepAt, so the
	// queue or the sweeper delivers it; a *ConflictError when it no longer
	// waits on its parents (released or cancelled meanwhile).
	ReleaseParents(ctx context.Context, id string, r ReleaseParents) error

	// Resubmit puts a failed or cancelled job that belongs to no batch,
	// and whose post-outcome steps have all run, back in the queue, for
	// another attempt under the same id, forgetting its first start (a
	// kind's MaxRunTime counts from the resubmitted run's); else a
	// *ConflictError (with the current job), or ErrNotFound.
	Resubmit(ctx context.Context, id string, r Resubmit) error
}

// ListQuery selects an owner's jobs for Store.List.
type ListQuery struct {
	// OwnerKey is OwnerKey(owner): required.
	OwnerKey string
	// Status and Kind filter ("" for any); CreatedBefore keeps the jobs
	// created strictly before it (zero for all).
	Status        Status
	Kind          string
	CreatedBefore time.Time
	// Tag, when set ("key=value", as Record.Tags holds it), keeps the
	// jobs with that tag. A store reads them from what it keeps of the
	// tagged jobs, never by filtering the owner's others; the status, when
	// given too, is checked on the jobs read (within MaxReads).
	Tag string
	// Limit bounds the page (1 to 1000).
	Limit int
	// After continues from a previous page's Next.
	After string
	// MaxReads bounds the job items read to fill the page when the
	// status cannot be read from an index (0: twice Limit).
	MaxReads int
}

// UnfinishedCounts are an owner's queued and running jobs, by kind.
type UnfinishedCounts struct {
	Kinds map[string]KindCounts `json:"kinds"`
	// Truncated: there were more entries than counted.
	Truncated bool `json:"truncated"`
}

// KindCounts are one kind's unfinished jobs.
type KindCounts struct {
	Queued  int `json:"queued"`
	Running int `json:"running"`
	// Waiting is how many of the queued wait on something before they can
	// start (Record.WaitingOn: a concurrency slot, a rate, ...), rather
	// than for a worker.
	Waiting int `json:"waiting"`
}

// ManyGetter is implemented by a Store that reads several jobs in one
// request (dynamostore: BatchGetItem, 100 a request, strongly
// consistent): a Map's answer reads its children through it. A job that
// is not stored is absent from the answer. jobstest.RunStoreTests checks
// it when a store has it.
type ManyGetter interface {
	GetMany(ctx context.Context, ids []string) (map[string]*Record, error)
}

// QueueCounter is implemented by a Store that counts queued jobs, for the
// caps on them (KindOpts.MaxQueued and MaxQueuedPerOwner): jobs.NewClient
// refuses a registry with a capped kind over a store without it.
// jobstest.RunStoreTests checks it when a store has it.
type QueueCounter interface {
	// CountQueued counts the queued jobs of q.Kind: those of the owner
	// whose key is q.OwnerKey (wire.OwnerKey), or, without one, every
	// owner's that were created QueueCapped. It may stop at q.Limit (0: no
	// limit), answering at least that. It reads only entries of queued
	// jobs, never the table, and may lag the latest writes by a moment.
	CountQueued(ctx context.Context, q QueueCount) (int, error)
}

// Part names a part of a job that a store may keep in an item of its own
// when the job's item would pass one write unit with it (Store.ReadPart):
// then reads of the job leave it out and the record names its item.
type Part string

const (
	// PartPayload: the payload (Record.PayloadRef), written once before
	// the job, until Record.PayloadUntil.
	PartPayload Part = "payload"
	// PartCheckpoint: the last checkpoint (Record.CheckpointRef), written
	// before the job's write that names it, until Checkpoint.Until or
	// Requeue.CheckpointUntil.
	PartCheckpoint Part = "checkpoint"
	// PartResult: a final result (Record.ResultRef), written before the
	// final write that names it, until Outcome.ResultUntil. Partial
	// results stay in the job's item.
	PartResult Part = "result"
)

// SignalPart is the part that holds the job's signal named name
// (Record.SignalRefs), written before the write that delivers it, until
// Signal.Until.
func SignalPart(name string) Part { return Part(signalPartPrefix + name) }

// Signal is the name of the signal part p holds (SignalPart), or false
// for another part.
func (p Part) Signal() (string, bool) { return strings.CutPrefix(string(p), signalPartPrefix) }

const signalPartPrefix = "signal:"

// PartLinker is implemented by a store that keeps large parts as objects
// (Record.PayloadBytes, Record.ResultBytes): PartURL returns a link that
// reads part p of rec for ttl without credentials ("" when the part is
// not an object). The engine links only final results, which are public
// JSON; a payload's sealed fields would leave with it.
type PartLinker interface {
	PartURL(ctx context.Context, rec *Record, p Part, ttl time.Duration) (string, error)
}

// ObjectKeeper is implemented by a store that says how large a payload or
// final result it keeps (MaxPartBytes): jobs.NewClient refuses a kind
// whose bounds (jobs.KindOpts's MaxPayloadBytes, MaxResultBytes) pass it.
type ObjectKeeper interface {
	MaxPartBytes() int
}

// QueueCount asks QueueCounter.CountQueued for a count.
type QueueCount struct {
	Kind     string
	OwnerKey string
	Limit    int
}

// ListPage is one page of Store.List.
type ListPage struct {
	Records []*Record
	// Next continues the listing ("" on the last page). It is the store's
	// position, not a secret: the service signs it into a page token.
	Next string
}

// Resubmit is what Store.Resubmit stamps on a job put back in the queue.
// The job must not have a lease ending after At (an abandoned handler of
// its last run may still be running): a *ConflictError otherwise. Its
// attempt count stays, and its retry policy counts from it again
// (Record.AttemptBase).
type Resubmit struct {
	At      time.Time
	SweepAt time.Time
	// WaitingOn, when set ("parents"), makes the job wait again: a job
	// with parents goes back to waiting on those not yet counted.
	WaitingOn string
}

// DependentOf asks Store.AddDependent to record a dependent.
type DependentOf struct {
	// Owner must own the parent; Max bounds its dependents.
	Owner string
	Max   int
	Dependent
}

// ParentCount is what Store.CountParents adds.
type ParentCount struct {
	Done  []int
	Await bool
	// Known is how many parents the writer read counted (with Await);
	// Release, when set, ends the wait in the same write (with Await).
	Known   int
	Release *ReleaseParents
	At      time.Time
}

// ReleaseParents is what Store.ReleaseParents stamps on a job whose
// parents are all counted.
type ReleaseParents struct {
	At, SweepAt time.Time
}

// WaitParents is the WaitingOn of a job that waits on its parents. A
// claim never takes such a job (Store.Claim answers a *ConflictError).
const WaitParents = "parents"

// WaitSignalOn is the WaitingOn of a job whose handler waits for the
// signal named name (jobs.WaitForSignal). A park with it (Requeue) is also
// conditional on the job having no signal of that name (a
// *ConflictError whose Current has it otherwise): a signal delivered
// while the run that waits for it was running is never missed.
func WaitSignalOn(name string) string { return waitSignalPrefix + name }

// SignalWaitedOn is the name of the signal a job that waits on on waits
// for, and whether it waits for one.
func SignalWaitedOn(on string) (string, bool) { return strings.CutPrefix(on, waitSignalPrefix) }

const waitSignalPrefix = "signal:"

// Signaller is implemented by a store that keeps signals for jobs
// (jobs.WaitForSignal, Record.Signals). Signal stores s on job id, on the
// conditions that the job is queued or running, has no signal named
// s.Name, and holds fewer than s.Max signals (a ChildSignal neither
// counts nor is bounded by it); with s.Wake, also that it is
// queued waiting for that signal (WaitingOn WaitSignalOn(s.Name)), and it
// makes the job due: RunAt and SweepAt as s says; without s.Wake, that it
// is not (so a job parked for the signal after the caller read it is
// woken, not left waiting). It leaves UpdatedAt alone (a run's first
// heartbeat is conditional on it). A condition that fails is a
// *ConflictError with the job as it is; a missing job ErrNotFound. A job
// whose signal of that name is s already (SignalLanded: this write, which
// landed and whose answer was lost, tried again) is no conflict: nil.
type Signaller interface {
	Signal(ctx context.Context, id string, s Signal) error
}

// ChildSignal is the name of the signal a child job a parent waits for
// (Record.AwaitedAs) sends the parent when it ends: never a name a kind
// declares (those have no ':'). Such signals carry no payload and do not
// count towards Signal.Max: a store counts the others alone.
func ChildSignal(name string) string { return childSignalPrefix + name }

// IsChildSignal reports whether name is a ChildSignal's.
func IsChildSignal(name string) bool { return strings.HasPrefix(name, childSignalPrefix) }

const childSignalPrefix = "child:"

// CountedSignals counts the signals of sigs that count towards
// Signal.Max: all but ChildSignal's.
func CountedSignals(sigs map[string][]byte) int {
	n := 0
	for name := range sigs {
		if !IsChildSignal(name) {
			n++
		}
	}
	return n
}

// SignalLanded reports whether cur holds s, as a store that names a signal
// kept apart ref (empty: in the job's item) would have written it: the
// sealed bytes carry a nonce of their own, so no other write holds them.
func SignalLanded(cur *Record, s Signal, ref string) bool {
	if ref != "" {
		return cur.SignalRefs[s.Name] == ref
	}
	got, ok := cur.Signals[s.Name]
	return ok && cur.SignalRefs[s.Name] == "" && bytes.Equal(got, s.Data)
}

// Signal is a signal delivered to a job (Signaller).
type Signal struct {
	Name string
	// Data is the signal's payload, sealed.
	Data []byte
	At   time.Time
	Max  int
	// Wake: the job waits for this signal; RunAt and SweepAt are its new
	// run and sweep times.
	Wake           bool
	RunAt, SweepAt time.Time
	// Until is how long the signal's item lasts when the store keeps it
	// apart (SignalPart): the engine makes it last longer at a claim
	// that finds it falling short, as a checkpoint's.
	Until time.Time
}

// Claim is what a worker stamps on a job it claims.
type Claim struct {
	Token      string
	At         time.Time
	LeaseUntil time.Time
	// SkipKinds are kinds the claim must not take: their minimum run time
	// is more than the invocation has left.
	SkipKinds []string
}

// ResultStager is implemented by a store that keeps large final results
// as objects (S3): StageResult writes result's object for job id ahead of
// the final write, lasting until until, so that writing many MB is paid
// from the run's time, not from the final write's budget; the final write
// then only names it (Outcome.Staged). A zero Staged: the result stays in
// items, and the final write stores it.
type ResultStager interface {
	StageResult(ctx context.Context, id string, result []byte, until time.Time) (Staged, error)
}

// Staged names a final result written ahead of its final write
// (ResultStager): its part's name and size.
type Staged struct {
	Ref   string
	Bytes int
}

// Outcome is the final write of a run.
type Outcome struct {
	Status Status // StatusSucceeded or StatusFailed
	// Result replaces the stored result when non-nil. A failed run keeps its
	// last partial result. ResultUntil is how long a result kept apart
	// (PartResult) lasts: the job's ExpiresAt.
	Result      []byte
	ResultUntil time.Time
	// Staged, when set, names Result's object, written ahead of this
	// write (ResultStager): the store names it instead of writing Result.
	Staged Staged
	// Marks, when set, replaces the job's Record.StepMarks.
	Marks string
	// Code is the failure code of a failed run.
	Code string
	At   time.Time
	// ExpiresAt is when the finished job may be deleted.
	ExpiresAt time.Time
	// LeaseExpiredBy, when set, makes the write also conditional on the
	// lease having ended by then (the sweeper's interrupted outcome).
	LeaseExpiredBy time.Time
	// KeepLease keeps the run's lease on the final job: its handler was
	// abandoned (it ignored its context) and may still be running until
	// the lease ends, so the job cannot be resubmitted before then.
	KeepLease bool
	// After names the post-outcome steps to run once the outcome has
	// landed (see engine.after): the job stays in the sweep index with
	// them pending until DoneAfter.
	After []string
	// Seq, when non-zero, counts the outcome: the write sets
	// Record.Outcomes to Seq, and is also conditional on it being Seq-1
	// (a *ConflictError otherwise). Zero leaves Outcomes alone and costs nothing.
	Seq int
	// Dependents is how many dependents the writer knows the job has
	// (len(Record.Dependents)): the write is also conditional on the job
	// having that many, so a dependent recorded since the job was read is
	// never missed by the post-outcome steps (a *ConflictError with the
	// job as it is otherwise: read its Dependents and write again).
	Dependents int
}

// AfterOf names one outcome of a job, for Store.DoneAfter: what its final
// write recorded. Two outcomes of a job differ in at least one of them
// unless a job is resubmitted and cancelled in the millisecond of its
// previous outcome without counting its outcomes (Record.Events and
// OnFailure unset).
type AfterOf struct {
	Outcomes   int
	Attempt    int
	FinishedAt time.Time
}

// AfterOfRecord is the outcome the final job rec holds.
func AfterOfRecord(rec *Record) AfterOf {
	return AfterOf{Outcomes: rec.Outcomes, Attempt: rec.Attempt, FinishedAt: rec.FinishedAt}
}

// CancelQueued is the write that cancels a queued job.
type CancelQueued struct {
	At, ExpiresAt time.Time
	// After and Seq: as Outcome's.
	After []string
	Seq   int
	// Code, when set, is the cancelled job's code (expired,
	// dependency_failed); CancelledBy names the parent that failed.
	Code, CancelledBy string
	// Dependents: as Outcome's.
	Dependents int
}

// Requeue is the write that sends a run back to the queue: a failed run
// for a retry, or one that asked to continue.
type Requeue struct {
	At    time.Time
	RunAt time.Time
	// SweepAt is when the sweeper looks at the queued job; zero takes it
	// out of the sweep index (its new message, sent by the caller, who
	// holds the old one until then, is its safety net).
	SweepAt   time.Time
	LastError string
	// LeaseExpiredBy, when set, makes the write also conditional on the
	// lease having ended by then (a retry of an interrupted run).
	LeaseExpiredBy time.Time
	// Continue marks a continuation: the run asked to go on in a new
	// invocation, so the attempt its claim counted is given back and
	// Continuations counts one more. Checkpoint, when set, replaces the
	// job's checkpoint in the same write; CheckpointUntil is how long it
	// lasts when kept apart (Checkpoint.Until).
	Continue        bool
	Checkpoint      []byte
	CheckpointUntil time.Time
	// WaitingOn parks the job: it could not start (a concurrency slot, a
	// rate), so the attempt its claim counted is given back and the job
	// waits until RunAt, saying on what; Unstart also forgets the claim's
	// start when it was the job's first (StartedAt, FirstStartedAt). The
	// next claim clears WaitingOn from the job and returns it on the
	// claimed record (the worker reads it then).
	WaitingOn string
	Unstart   bool
	// Marks, when set, replaces the job's Record.StepMarks.
	Marks string
}

// SlotClaim asks Store.AcquireSlot for a slot.
type SlotClaim struct {
	// Holder names who holds the slot: the worker passes its run's claim
	// token, so a later run of the same job never counts as holding it.
	Holder string
	// Waiter is the job queued among the waiters when every slot is held
	// (Holder when empty): what a release or a pop answers, to be woken.
	Waiter         string
	Max            int
	LeaseUntil, At time.Time
	// Waiters bounds the item's waiters (0: do not queue the holder).
	Waiters int
	// ExpectFull says the caller expects every slot held (its last
	// acquire of the key queued): the store may try to queue first, which
	// spares a write when it is right and costs one when it is wrong.
	ExpectFull bool
}

// WaiterOf is the waiter c queues: c.Waiter, or c.Holder when unset.
func (c SlotClaim) WaiterOf() string {
	if c.Waiter != "" {
		return c.Waiter
	}
	return c.Holder
}

// WaiterPopper is implemented by a Store whose slots can pass from run to
// run: a worker whose run ends takes the next waiter off the slot item
// and runs it under the slot it holds, one write instead of a release and
// the waiter's acquire, and no other job takes the slot in between. On a
// Store without it the worker releases the slot (ReleaseSlot) and the
// waiter it woke acquires one. jobstest.RunStoreTests checks it when the
// store has it.
type WaiterPopper interface {
	// PopWaiter takes the first of the slot item key's waiters off, if
	// holder holds a slot (whose lease it leaves as it is), and answers it
	// ("" when there is none, or holder holds no slot) and how many
	// waiters are left behind it.
	PopWaiter(ctx context.Context, key, holder string) (waiter string, left int, err error)
}

// SlotState is what Store.AcquireSlot did.
type SlotState int

const (
	// SlotFull: every slot is held and the holder was not queued.
	SlotFull SlotState = iota
	// SlotHeld: the holder holds a slot.
	SlotHeld
	// SlotQueued: every slot is held; the holder is among the waiters a
	// release wakes.
	SlotQueued
)

// TokenBucket is a rate: PerSecond tokens a second, at most Burst saved.
type TokenBucket struct {
	PerSecond, Burst float64
	At               time.Time
	// IfDue takes a token only when one is due at At: otherwise the
	// bucket is left as it is and TakeToken answers how long until one is
	// (a refusal, which reserves nothing, so a caller refused again and
	// again is never pushed further back).
	IfDue bool
}

// UniqueClaim asks Store.ClaimUnique for a unique key.
type UniqueClaim struct {
	JobID string
	// Until, when set, frees the key by itself then (a uniqueness for a
	// period).
	Until, At time.Time
}

// Debounce is what Store.Debounce writes on a queued job.
type Debounce struct {
	Payload []byte
	// PayloadUntil is Record.PayloadUntil for the new payload.
	PayloadUntil time.Time
	RequestHash  string
	RunAt        time.Time
	SweepAt      time.Time
	At           time.Time
}

// Heartbeat is what Store.Heartbeat stamps on a running job.
type Heartbeat struct {
	LeaseUntil, At time.Time
	// SweepAt, when set, moves the job's sweep time (and puts the job in
	// the sweep index if it was not): a run's first heartbeat moves it to
	// the lease's end, so the sweeper looks at the run one lease after it
	// started rather than at its message's redelivery.
	SweepAt time.Time
}

// Checkpoint is what Store.Checkpoint stamps on a running job.
type Checkpoint struct {
	// Data is the checkpoint, sealed by the caller (at most
	// MaxCheckpointBytes).
	Data       []byte
	LeaseUntil time.Time
	At         time.Time
	// Until is how long a checkpoint kept apart (PartCheckpoint) must
	// last at least: the engine's rule, as Record.PayloadUntil.
	Until time.Time
	// Marks, when set, replaces the job's Record.StepMarks in the same
	// write.
	Marks string
}

// MaxCheckpointBytes bounds a checkpoint as stored, so a job's item (its
// payload, result and checkpoint) stays under DynamoDB's 400 KB.
const MaxCheckpointBytes = 64 << 10

// Expect is the state a Reschedule is conditional on.
type Expect struct {
	Status Status
	Token  string
}

// Store errors. A Store answers ErrNotFound when what an operation needs
// is absent (or expired), ErrExists when what it creates by name (a batch,
// a schedule) exists, and a *ConflictError when a conditional write did not
// apply. It does not say why a condition failed: the engine (package jobs)
// reads that from the operation it asked for and from Current. Any other
// error is a dependency failure.
var (
	// ErrNotFound: no such job (or batch, or schedule), or it expired.
	ErrNotFound = errors.New("jobs: job not found")
	// ErrExists: CreateBatch found a live batch with the id,
	// AddOwnerSchedule a schedule of the name, Scheduler.CreateSchedule a
	// schedule of the id.
	ErrExists = errors.New("jobs: already exists")
	// ErrPartMissing: a part of a job kept in an item of its own
	// (Store.ReadPart) is not there.
	ErrPartMissing = errors.New("jobs: a job's part item is missing")
)

// ConflictError is returned when a conditional write did not apply: the
// item is not as the operation requires. Current is the job as the store
// found it (for Heartbeat and Checkpoint after a cancel request, as
// written), or nil when the store cannot say or the item is not a job;
// the engine reads the job again then.
type ConflictError struct {
	Current *Record
}

func (e *ConflictError) Error() string {
	if e.Current != nil {
		return "jobs: conditional write did not apply (status " + string(e.Current.Status) + ")"
	}
	return "jobs: conditional write did not apply"
}
