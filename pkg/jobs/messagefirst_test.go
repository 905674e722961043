package jobs_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// firstRig is a Client of one MemStore and a queue that records, for each
// message, whether its job was stored when it was sent, and the receipts
// the worker hid.
type firstRig struct {
	clock *jobstest.Clock
	mem   *jobstest.MemStore
	queue *probeQueue
	c     *jobs.Client
}

type probeQueue struct {
	jobstest.MemQueue
	mem *jobstest.MemStore

	mu       sync.Mutex
	storedAt map[string]bool // job id -> stored when its first message was sent
	hidden   map[string]time.Duration
	sends    int // Send calls
}

func (q *probeQueue) Send(ctx context.Context, msgs ...driver.Message) error {
	q.mu.Lock()
	q.sends++
	for _, m := range msgs {
		if _, seen := q.storedAt[m.JobID]; !seen {
			_, err := q.mem.Get(ctx, m.JobID)
			q.storedAt[m.JobID] = err == nil
		}
	}
	q.mu.Unlock()
	return q.MemQueue.Send(ctx, msgs...)
}

func (q *probeQueue) Hide(_ context.Context, _, receipt string, d time.Duration) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.hidden[receipt] = d
	return nil
}

// flakyPolicy retries every failure, up to 3 runs.
var flakyPolicy = jobs.RetryPolicy{MaxAttempts: 3, RetryErrors: true}

func newFirstRig(t *testing.T, first bool, store func(*jobstest.MemStore) driver.Store) *firstRig {
	t.Helper()
	clock := jobstest.NewClock(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	mem := jobstest.NewMemStore(clock)
	r := &firstRig{clock: clock, mem: mem, queue: &probeQueue{mem: mem, storedAt: map[string]bool{}, hidden: map[string]time.Duration{}}}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "sleep", sleeper, nil)
	jobs.MustRegister(reg, "flaky", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) {
		return jobs.NoResult{}, errors.New("boom")
	}, &jobs.KindOpts{Retry: flakyPolicy})
	var s driver.Store = mem
	if store != nil {
		s = store(mem)
	}
	c, err := jobs.NewClient(jobs.Config{Registry: reg, Store: s, Queue: r.queue, Clock: clock, MessageFirst: first, CancelCheck: -1})
	if err != nil {
		t.Fatal(err)
	}
	r.c = c
	return r
}

func (r *firstRig) enqueue(t *testing.T, kind, payload string) string {
	t.Helper()
	res, err := r.c.Service().Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "o", Kind: kind, Payload: []byte(payload)})
	if err != nil {
		t.Fatal(err)
	}
	return res.Job.ID
}

func (r *firstRig) rec(t *testing.T, id string) *driver.Record {
	t.Helper()
	rec, err := r.mem.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// deliver hands the worker the last message sent for id, as SQS would.
func (r *firstRig) deliver(t *testing.T, id string) events.SQSEventResponse {
	t.Helper()
	msgs := r.queue.Messages()
	for i := len(msgs) - 1; i >= 0; i-- {
		if m := msgs[i]; m.JobID == id {
			resp, _ := r.c.Worker().HandleSQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
				{MessageId: "m-" + id, ReceiptHandle: "r-" + id, Body: message.EncodeSent(m.JobID, m.SentAt)}}})
			return resp
		}
	}
	t.Fatalf("no message was sent for %s", id)
	return events.SQSEventResponse{}
}

// With message first an enqueue sends the job's message before it stores
// the job, which then has no sweep entry (2 write units less: in and out
// of the index); a send that fails falls back to a put with one, and the
// job is accepted all the same. Off, the job is stored first, in the
// index.
func TestMessageFirstSendsBeforeItStores(t *testing.T) {
	r := newFirstRig(t, true, nil)
	id := r.enqueue(t, "sleep", `{"for":"0s"}`)
	if r.queue.storedAt[id] {
		t.Fatal("the job was stored before its message was sent")
	}
	m := r.queue.Messages()[0]
	if !m.SentAt.Equal(r.clock.Now().Truncate(time.Millisecond)) {
		t.Fatalf("the message carries sent %v, want the enqueue's time", m.SentAt)
	}
	if rec := r.rec(t, id); !rec.SweepAt.IsZero() {
		t.Fatalf("a job sent first has a sweep entry at %v", rec.SweepAt)
	}
	if due, _ := r.mem.Due(context.Background(), r.clock.Now().Add(24*time.Hour), 10); len(due) != 0 {
		t.Fatalf("due: %v", due)
	}
	if resp := r.deliver(t, id); len(resp.BatchItemFailures) != 0 || r.rec(t, id).Status != jobs.StatusSucceeded {
		t.Fatalf("failures %v, status %s", failedIDs(resp), r.rec(t, id).Status)
	}

	r.queue.SetFail(errors.New("sqs down"))
	id = r.enqueue(t, "sleep", `{"for":"0s"}`)
	if rec := r.rec(t, id); rec.SweepAt.IsZero() || rec.Status != jobs.StatusQueued {
		t.Fatalf("a job whose send failed: %s, sweep at %v; want queued with a sweep entry", rec.Status, rec.SweepAt)
	}

	off := newFirstRig(t, false, nil)
	id = off.enqueue(t, "sleep", `{"for":"0s"}`)
	if !off.queue.storedAt[id] || off.rec(t, id).SweepAt.IsZero() {
		t.Fatal("without message first the job is stored first, with a sweep entry")
	}
}

// The sweeper sees no job sent first, however long its message waits in a
// backlog: no re-send deepens it. Without message first every job older
// than the dispatch grace is re-sent.
func TestABacklogOfJobsSentFirstIsNotReSent(t *testing.T) {
	for _, first := range []bool{true, false} {
		r := newFirstRig(t, first, nil)
		for range 50 {
			r.enqueue(t, "sleep", `{"for":"0s"}`)
		}
		sent := len(r.queue.Messages())
		for range 3 {
			r.clock.Advance(2 * jobs.DefaultDispatchGrace)
			rep, err := r.c.Sweeper().Sweep(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if first && (rep.Due != 0 || rep.Resent != 0) {
				t.Fatalf("message first: a sweep read %d and re-sent %d", rep.Due, rep.Resent)
			}
		}
		resent := len(r.queue.Messages()) - sent
		if first && resent != 0 {
			t.Fatalf("message first: %d re-sends", resent)
		}
		if !first && resent < 50 {
			t.Fatalf("put first: %d re-sends, want every job's (the cost message first removes)", resent)
		}
	}
}

// notYet is a store whose claims find no job until misses have passed:
// the put of a job sent first has not landed yet.
type notYet struct {
	driver.Store
	mu     sync.Mutex
	misses int
}

func (s *notYet) Claim(ctx context.Context, id string, c driver.Claim) (*driver.Record, error) {
	s.mu.Lock()
	miss := s.misses > 0
	s.misses--
	s.mu.Unlock()
	if miss {
		return nil, jobs.ErrNotFound
	}
	return s.Store.Claim(ctx, id, c)
}

// A worker that finds no job for a message sent first looks again once
// after 100 ms; then it hands the message back, delayed by how old it is,
// and it drops it once older than the enqueue's bound and 2 minutes. A
// message that does not say when it was sent comes back as before.
func TestAMessageSentFirstWaitsForItsPut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ny *notYet
		r := newFirstRig(t, true, func(mem *jobstest.MemStore) driver.Store { ny = &notYet{Store: mem}; return ny })
		id := r.enqueue(t, "sleep", `{"for":"0s"}`)
		ny.misses = 1
		start := time.Now()
		if resp := r.deliver(t, id); len(resp.BatchItemFailures) != 0 || r.rec(t, id).Status != jobs.StatusSucceeded {
			t.Fatalf("looked again: failures %v, status %s; want it run", failedIDs(resp), r.rec(t, id).Status)
		}
		if waited := time.Since(start); waited != 100*time.Millisecond {
			t.Fatalf("waited %v before looking again, want 100ms", waited)
		}

		for _, tt := range []struct {
			age       time.Duration
			wantDelay time.Duration // 0: dropped
		}{{0, time.Second}, {5 * time.Second, 15 * time.Second}, {time.Minute, 2 * time.Minute}, {2*time.Minute + 29*time.Second, 2 * time.Minute}, {2*time.Minute + 31*time.Second, 0}} {
			ny.misses = 2
			body := message.EncodeSent(wire.NewID(), r.clock.Now().Add(-tt.age))
			before := len(r.queue.Messages())
			resp, _ := r.c.Worker().HandleSQS(context.Background(), sqsEvent(body))
			if len(resp.BatchItemFailures) != 0 {
				t.Fatalf("age %v: the message came back as it is (towards the DLQ)", tt.age)
			}
			sent := r.queue.Messages()[before:]
			switch {
			case tt.wantDelay == 0 && len(sent) != 0:
				t.Fatalf("age %v: handed back %+v, want dropped", tt.age, sent)
			case tt.wantDelay != 0 && (len(sent) != 1 || sent[0].Delay != tt.wantDelay || sent[0].SentAt.IsZero()):
				t.Fatalf("age %v: handed back %+v, want one message after %v that still says when it was first sent", tt.age, sent, tt.wantDelay)
			}
		}

		ny.misses = 2
		if resp, _ := r.c.Worker().HandleSQS(context.Background(), sqsEvent(message.Encode(wire.NewID()))); len(resp.BatchItemFailures) != 1 {
			t.Fatal("a reference that does not say when it was sent was acknowledged")
		}
	})
}

// A second delivery of a running job's message is never acknowledged: SQS
// deletes a message with its latest receipt handle, so acknowledging it
// could delete the message the run holds, its net. It is hidden until the
// run's lease ends.
func TestADuplicateDeliveryOfARunningJobIsHiddenUntilItsLeaseEnds(t *testing.T) {
	r := newFirstRig(t, true, nil)
	id := r.enqueue(t, "sleep", `{"for":"0s"}`)
	lease := r.clock.Now().Add(40 * time.Second)
	if _, err := r.mem.Claim(context.Background(), id, driver.Claim{Token: "first", At: r.clock.Now(), LeaseUntil: lease}); err != nil {
		t.Fatal(err)
	}
	resp := r.deliver(t, id)
	if got := failedIDs(resp); len(got) != 1 {
		t.Fatalf("failures %v: the duplicate was acknowledged", got)
	}
	if d, ok := r.queue.hidden["r-"+id]; !ok || d != 40*time.Second {
		t.Fatalf("hidden for %v (%v), want until the lease's end, 40s", d, ok)
	}
	// A run in the sweep index (a first heartbeat put it there): the
	// sweeper settles it if its worker dies, so its duplicate is hidden
	// longer than its short, renewed lease.
	if err := r.mem.Heartbeat(context.Background(), id, "first", driver.Heartbeat{LeaseUntil: lease, At: r.clock.Now(), SweepAt: lease}); err != nil {
		t.Fatal(err)
	}
	r.deliver(t, id)
	if d := r.queue.hidden["r-"+id]; d != 15*time.Minute {
		t.Fatalf("a duplicate of a run in the sweep index hidden for %v, want 15m", d)
	}
}

// A retry of a run that holds its message is stored without a sweep entry
// once its new message is sent; when that send fails, the held message
// comes back instead (it brings the job to a worker), so the job is never
// left with neither.
func TestARetrySentFirstKeepsItsNet(t *testing.T) {
	for _, fail := range []bool{false, true} {
		r := newFirstRig(t, true, nil)
		id := r.enqueue(t, "flaky", `{}`)
		if fail {
			r.queue.SetFail(errors.New("sqs down"))
		}
		resp := r.deliver(t, id)
		rec := r.rec(t, id)
		if rec.Status != jobs.StatusQueued || rec.Attempt != 1 || !rec.SweepAt.IsZero() {
			t.Fatalf("fail=%v: %s attempt %d sweep %v; want queued for a retry, no sweep entry", fail, rec.Status, rec.Attempt, rec.SweepAt)
		}
		if comesBack := len(resp.BatchItemFailures) == 1; comesBack != fail {
			t.Fatalf("fail=%v: the held message comes back: %v", fail, comesBack)
		}
		if !fail && r.queue.Delay(id) == 0 {
			t.Fatal("the retry's message was not sent with its backoff")
		}
	}
}

// A batch's jobs are sent first too, ten to a send, each send just before
// its jobs' puts: a backlog of batch jobs (a bulk lane's normal day) is
// not re-sent either, and the batch ends though its jobs may run before it
// is opened.
func TestABatchsJobsAreSentFirst(t *testing.T) {
	slow := &slowPuts{}
	r := newFirstRig(t, true, func(mem *jobstest.MemStore) driver.Store { slow.Store = mem; return slow })
	slow.clock = r.clock
	start := r.clock.Now()
	specs := make([]jobs.JobSpec, 25)
	for i := range specs {
		specs[i] = jobs.JobSpec{Kind: "sleep", Payload: []byte(`{"for":"0s"}`)}
	}
	res, err := r.c.Service().EnqueueBatch(context.Background(), jobs.BatchRequest{Owner: "o", Jobs: specs})
	if err != nil {
		t.Fatal(err)
	}
	if r.queue.sends != 3 {
		t.Fatalf("%d sends for 25 jobs, want 3 (ten to a send)", r.queue.sends)
	}
	for i, m := range r.queue.Messages() {
		// Each chunk says when it was sent, not when the batch began (the
		// third is sent once puts of the first have taken their seconds):
		// a worker waits for its put by that age.
		if r.queue.storedAt[m.JobID] || m.SentAt.Before(start) || (i >= 20 && !m.SentAt.After(start)) {
			t.Fatalf("job %d %s: stored before its send %v, sent at %v (the batch began at %v)", i, m.JobID, r.queue.storedAt[m.JobID], m.SentAt, start)
		}
		if rec := r.rec(t, m.JobID); !rec.SweepAt.IsZero() {
			t.Fatalf("a batch job sent first has a sweep entry at %v", rec.SweepAt)
		}
	}
	r.clock.Advance(4 * jobs.DefaultDispatchGrace)
	if rep, err := r.c.Sweeper().Sweep(context.Background()); err != nil || rep.Resent != 0 {
		t.Fatalf("sweep: %+v %v; want no re-send", rep, err)
	}
	for _, m := range r.queue.Messages() {
		if resp := r.deliver(t, m.JobID); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("failures %v", failedIDs(resp))
		}
	}
	b, err := r.c.Service().GetBatch(context.Background(), "o", res.Batch.ID, "", 0)
	if err != nil || b.Status != jobs.StatusSucceeded {
		t.Fatalf("batch %+v %v, want succeeded", b, err)
	}
}

// A job with a unique key is sent first too, once its key is its.
func TestAUniqueJobIsSentFirst(t *testing.T) {
	r := newFirstRig(t, true, nil)
	res, err := r.c.Service().Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "o", Kind: "sleep", Payload: []byte(`{"for":"0s"}`),
		EnqueueOpts: jobs.EnqueueOpts{UniqueKey: "nightly"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.queue.storedAt[res.Job.ID] || !r.rec(t, res.Job.ID).SweepAt.IsZero() || len(r.queue.Messages()) != 1 {
		t.Fatalf("stored before its send %v, sweep at %v, %d messages; want sent first, once, no sweep entry",
			r.queue.storedAt[res.Job.ID], r.rec(t, res.Job.ID).SweepAt, len(r.queue.Messages()))
	}
}

// slowPuts is a store whose every put takes a second of the clock.
type slowPuts struct {
	driver.Store
	clock *jobstest.Clock
}

func (s *slowPuts) Create(ctx context.Context, rec *driver.Record) error {
	s.clock.Advance(time.Second)
	return s.Store.Create(ctx, rec)
}
