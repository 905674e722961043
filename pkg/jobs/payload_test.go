package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// apartStore is a MemStore that keeps every payload over 16 bytes in an
// item of its own, whose reads fail while failing is set.
type apartStore struct {
	*jobstest.MemStore
	failing atomic.Bool
	reads   atomic.Int32
}

func (s *apartStore) ReadPart(ctx context.Context, rec *driver.Record, p driver.Part) ([]byte, time.Time, error) {
	if p == driver.PartPayload {
		s.reads.Add(1)
		if s.failing.Load() {
			return nil, time.Time{}, errors.New("ProvisionedThroughputExceededException")
		}
	}
	return s.MemStore.ReadPart(ctx, rec, p)
}

// apartSetup is a Service and a Worker over an apartStore, on clock.
type apartSetup struct {
	store  *apartStore
	clock  *jobstest.Clock
	svc    *jobs.Service
	worker *jobs.Worker
	ran    map[string]string // job id -> the text its handler saw
}

func newApartSetup(t *testing.T) *apartSetup {
	t.Helper()
	clock := jobstest.NewClock(jobstest.Epoch)
	s := &apartSetup{store: &apartStore{MemStore: jobstest.NewMemStore(clock)}, clock: clock, ran: map[string]string{}}
	s.store.KeepPayloadsApart(16)
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "echo", func(ctx context.Context, job *jobs.Job[echoPayload]) (echoResult, error) {
		s.ran[job.ID] = job.Payload.Text
		return echo(ctx, job)
	}, nil)
	// "resume" checkpoints a large state on its first run (Continue), and
	// its next run reports what it resumed.
	jobs.MustRegister(reg, "resume", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.JSON[string], error) {
		var st struct{ Notes string }
		if ok, err := job.Resume(&st); err != nil || !ok {
			return jobs.JSON[string]{}, jobs.Continue(struct{ Notes string }{strings.Repeat("n", 2000)})
		}
		s.ran[job.ID] = st.Notes
		return jobs.JSON[string]{V: "resumed"}, nil
	}, nil)
	// "later" fails its first run, to be retried 60 days on.
	const farBackoff = 60 * 24 * time.Hour
	jobs.MustRegister(reg, "later", func(ctx context.Context, job *jobs.Job[echoPayload]) (jobs.NoResult, error) {
		if job.Attempt == 1 {
			return jobs.NoResult{}, jobs.Retry(errors.New("not yet"))
		}
		s.ran[job.ID] = job.Payload.Text
		return jobs.NoResult{}, nil
	}, &jobs.KindOpts{Retry: jobs.RetryPolicy{MaxAttempts: 2, BaseDelay: farBackoff, MaxDelay: farBackoff}})
	sealer, err := jobs.NewAESSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	cfg := jobs.Config{Registry: reg, Store: s.store, Clock: clock, Concurrency: 1, Sealer: sealer}
	if s.svc, err = testroles.Service(cfg); err != nil {
		t.Fatal(err)
	}
	if s.worker, err = testroles.Worker(cfg); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *apartSetup) enqueue(t *testing.T, text string, opts jobs.EnqueueOpts) string {
	t.Helper()
	payload, _ := json.Marshal(echoPayload{Text: text})
	res, err := s.svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "alice", Kind: "echo", Payload: payload, EnqueueOpts: opts})
	if err != nil {
		t.Fatal(err)
	}
	return res.Job.ID
}

func (s *apartSetup) run(t *testing.T, id string) *driver.Record {
	t.Helper()
	s.worker.HandleSQS(context.Background(), sqsEvent(message.Encode(id)))
	rec, err := s.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestPayloadApartRunsAndShows: a payload kept in an item of its own
// reaches the handler (read at the claim), GET and a replay; the job's
// own reads leave it out.
func TestPayloadApartRunsAndShows(t *testing.T) {
	t.Parallel()
	s := newApartSetup(t)
	text := strings.Repeat("big ", 40)
	id := s.enqueue(t, text, jobs.EnqueueOpts{})
	if rec, _ := s.store.Get(context.Background(), id); rec.PayloadRef == "" || len(rec.Payload) != 0 {
		t.Fatalf("stored with ref %q and %d bytes of payload, want it apart", rec.PayloadRef, len(rec.Payload))
	}
	if rec := s.run(t, id); rec.Status != jobs.StatusSucceeded || s.ran[id] != text {
		t.Fatalf("job %s, handler saw %q", rec.Status, s.ran[id])
	}
	if s.store.reads.Load() != 1 {
		t.Fatalf("%d payload reads for one run, want 1 (the claim's)", s.store.reads.Load())
	}
	v, err := s.svc.Get(context.Background(), "alice", id)
	if err != nil || !strings.Contains(string(v.Payload), text) {
		t.Fatalf("GET shows payload %s, %v", v.Payload, err)
	}
	res, err := s.svc.Replay(context.Background(), jobs.ReplayRequest{Owner: "alice", ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if rec := s.run(t, res.Job.ID); rec.Status != jobs.StatusSucceeded || s.ran[res.Job.ID] != text {
		t.Fatalf("the replay %s, handler saw %q", rec.Status, s.ran[res.Job.ID])
	}
}

// TestPayloadNotReadWaits: a claim whose payload read fails does not run
// the job nor spend its attempt: it waits (waiting_on "store") and runs
// once the read works.
func TestPayloadNotReadWaits(t *testing.T) {
	t.Parallel()
	s := newApartSetup(t)
	id := s.enqueue(t, strings.Repeat("x", 40), jobs.EnqueueOpts{})
	s.store.failing.Store(true)
	rec := s.run(t, id)
	if rec.Status != jobs.StatusQueued || rec.WaitingOn != "store" || rec.Attempt != 0 || s.ran[id] != "" {
		t.Fatalf("after a failed payload read: %s waiting on %q, attempt %d, ran %v", rec.Status, rec.WaitingOn, rec.Attempt, s.ran[id] != "")
	}
	s.store.failing.Store(false)
	s.clock.Advance(time.Minute)
	if rec := s.run(t, id); rec.Status != jobs.StatusSucceeded || rec.Attempt != 1 {
		t.Fatalf("once the read works: %s, attempt %d", rec.Status, rec.Attempt)
	}
}

// TestPayloadMissing: a payload item that is not there waits as a late
// one would (a replica behind) while the job is young, then fails the job
// payload_unreadable; GET shows its payload as null and a replay is
// refused.
func TestPayloadMissing(t *testing.T) {
	t.Parallel()
	s := newApartSetup(t)
	id := s.enqueue(t, strings.Repeat("x", 40), jobs.EnqueueOpts{})
	s.store.DropPayload(id)
	if rec := s.run(t, id); rec.Status != jobs.StatusQueued || rec.WaitingOn != "store" {
		t.Fatalf("a young job without its payload: %s waiting on %q, want queued waiting on store", rec.Status, rec.WaitingOn)
	}
	s.clock.Advance(31 * time.Minute)
	rec := s.run(t, id)
	if rec.Status != jobs.StatusFailed || rec.ErrorCode != jobs.CodePayloadUnreadable || s.ran[id] != "" {
		t.Fatalf("past the grace: %s %q, ran %v; want failed %s without a run", rec.Status, rec.ErrorCode, s.ran[id] != "", jobs.CodePayloadUnreadable)
	}
	v, err := s.svc.Get(context.Background(), "alice", id)
	if err != nil || string(v.Payload) != "null" {
		t.Fatalf("GET shows payload %s, %v; want null", v.Payload, err)
	}
	var re *jobs.RequestError
	if _, err := s.svc.Replay(context.Background(), jobs.ReplayRequest{Owner: "alice", ID: id}); !errors.As(err, &re) || re.Code != jobs.CodeInvalidPayload {
		t.Fatalf("replay of a job whose payload is gone: %v, want %s", err, jobs.CodeInvalidPayload)
	}
}

// TestPayloadOutlivesALongWait: a payload item lasts the horizon and the
// retention past the job's run time (a year more for a dependent); a claim
// that finds it more than a day short of that (a job whose message waited
// in a backlog) extends it.
func TestPayloadOutlivesALongWait(t *testing.T) {
	t.Parallel()
	s := newApartSetup(t)
	const horizon, retention = 15 * 24 * time.Hour, jobs.DefaultRetention
	start := s.clock.Now()
	delayed := s.enqueue(t, strings.Repeat("d", 40), jobs.EnqueueOpts{Delay: 100 * 24 * time.Hour})
	if until, ok := s.store.PartItem(delayed, driver.PartPayload); !ok || until.Before(start.Add(100*24*time.Hour+horizon+retention).Truncate(time.Second)) {
		t.Fatalf("a job delayed 100 days: payload item until %v (%v), want its run time plus %v", until, ok, horizon+retention)
	}
	// A dependent's wait is its parents': a year more.
	parent := s.enqueue(t, strings.Repeat("p", 40), jobs.EnqueueOpts{})
	dependent := s.enqueue(t, strings.Repeat("q", 40), jobs.EnqueueOpts{After: []string{parent}})
	if until, ok := s.store.PartItem(dependent, driver.PartPayload); !ok || until.Before(start.Add(jobs.MaxDelay+horizon+retention).Truncate(time.Second)) {
		t.Fatalf("a dependent: payload item until %v (%v), want a year, %v and the retention after its creation", until, ok, horizon)
	}
	id := s.enqueue(t, strings.Repeat("b", 40), jobs.EnqueueOpts{})
	first, _ := s.store.PartItem(id, driver.PartPayload)
	s.clock.Advance(10 * 24 * time.Hour) // its message waited 10 days
	if rec := s.run(t, id); rec.Status != jobs.StatusSucceeded {
		t.Fatalf("job %s", rec.Status)
	}
	until, ok := s.store.PartItem(id, driver.PartPayload)
	if want := s.clock.Now().Add(horizon + retention); !ok || until.Before(want.Truncate(time.Second)) || !until.After(first) {
		t.Fatalf("after a claim 10 days on: payload item until %v (was %v), want %v", until, first, want)
	}
}

// TestCheckpointApartResumes: a continuation's large checkpoint, kept in
// an item of its own, is what the next run resumes from; the job's item
// only names it.
func TestCheckpointApartResumes(t *testing.T) {
	t.Parallel()
	s := newApartSetup(t)
	res, err := s.svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "alice", Kind: "resume", Payload: json.RawMessage(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Job.ID
	rec := s.run(t, id)
	if rec.Status != jobs.StatusQueued || rec.CheckpointRef == "" || len(rec.Checkpoint) != 0 {
		t.Fatalf("after the first run: %s, checkpoint ref %q and %d bytes inline; want queued, the checkpoint apart", rec.Status, rec.CheckpointRef, len(rec.Checkpoint))
	}
	if rec := s.run(t, id); rec.Status != jobs.StatusSucceeded || s.ran[id] != strings.Repeat("n", 2000) {
		t.Fatalf("the continuation: %s, resumed %d bytes of notes", rec.Status, len(s.ran[id]))
	}
}

// TestARetryFarAheadKeepsItsPayload: a run that fails and is retried 60
// days on extends its payload item past the retry's run time, and the
// retry runs with it.
func TestARetryFarAheadKeepsItsPayload(t *testing.T) {
	t.Parallel()
	s := newApartSetup(t)
	payload, _ := json.Marshal(echoPayload{Text: strings.Repeat("l", 40)})
	res, err := s.svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "alice", Kind: "later", Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Job.ID
	rec := s.run(t, id)
	if rec.Status != jobs.StatusQueued || rec.RunAt.Sub(s.clock.Now()) < 30*24*time.Hour {
		t.Fatalf("after the first run: %s, due %v", rec.Status, rec.RunAt)
	}
	if until, ok := s.store.PartItem(id, driver.PartPayload); !ok || until.Before(rec.RunAt.Add(15*24*time.Hour)) {
		t.Fatalf("payload item until %v (%v), want past the retry's run time %v and the horizon", until, ok, rec.RunAt)
	}
	s.clock.Set(rec.RunAt.Add(time.Minute))
	if rec := s.run(t, id); rec.Status != jobs.StatusSucceeded || s.ran[id] != strings.Repeat("l", 40) {
		t.Fatalf("the retry: %s %q", rec.Status, rec.ErrorCode)
	}
}
