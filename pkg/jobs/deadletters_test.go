package jobs_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// deadRig is a sweeper over an in-memory store, queue (with its lanes'
// dead-letter queues) and bus; plain jobs fail at once, flaky ones may be
// retried.
type deadRig struct {
	clock   *jobstest.Clock
	store   *jobstest.MemStore
	queue   *jobstest.MemQueue
	bus     *jobstest.MemBus
	sweeper *jobs.Sweeper
	metrics *testenv.SyncBuffer
}

func newDeadRig(t *testing.T, perLane int) *deadRig {
	t.Helper()
	r := &deadRig{clock: jobstest.NewClock(time.Now()), queue: &jobstest.MemQueue{}, bus: &jobstest.MemBus{}, metrics: &testenv.SyncBuffer{}}
	r.store = jobstest.NewMemStore(r.clock)
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "plain", sleeper, nil)
	jobs.MustRegister(reg, "flaky", sleeper, &jobs.KindOpts{Retry: jobs.RetryPolicy{MaxAttempts: 3}})
	var err error
	r.sweeper, err = testroles.Sweeper(jobs.Config{Registry: reg, Store: r.store, Queue: r.queue, Bus: r.bus, Clock: r.clock,
		DeadLetters: r.queue, DeadLettersPerLane: perLane, Metrics: &jobs.Metrics{Namespace: "lambdajobs/test", Service: "sweeper", Writer: r.metrics}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// job stores a job of kind as message first leaves it: no sweep entry, so
// its message (here, its dead letter) is all that names it.
func (r *deadRig) job(t *testing.T, kind string, edit func(*driver.Record)) string {
	t.Helper()
	rec := jobstest.NewRecord(wire.NewID(), r.clock.Now())
	rec.Kind, rec.SweepAt = kind, time.Time{}
	if edit != nil {
		edit(rec)
	}
	if err := r.store.Create(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	return rec.ID
}

// running claims id under a lease of lease from now.
func (r *deadRig) running(t *testing.T, id string, lease time.Duration) {
	t.Helper()
	if _, err := r.store.Claim(context.Background(), id, driver.Claim{Token: "dead-worker", At: r.clock.Now(), LeaseUntil: r.clock.Now().Add(lease)}); err != nil {
		t.Fatal(err)
	}
}

func (r *deadRig) get(t *testing.T, id string) *driver.Record {
	t.Helper()
	rec, err := r.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// Every case of the sweeper's decision, reached through a dead letter
// alone: each job reference is settled and deleted, every other message
// stays (visible again), and each settled one counts DeadLettersSettled
// by kind and lane.
func TestSweeperSettlesEveryLanesDeadLetters(t *testing.T) {
	t.Parallel()
	r := newDeadRig(t, 0)
	ctx := context.Background()

	// Running, lease ended: interrupted, retried, or cancelled as asked.
	interrupted := r.job(t, "plain", nil)
	r.running(t, interrupted, time.Minute)
	retried := r.job(t, "flaky", nil)
	r.running(t, retried, time.Minute)
	cancelled := r.job(t, "plain", nil)
	r.running(t, cancelled, time.Minute)
	if err := r.store.RequestCancel(ctx, cancelled, r.clock.Now()); err != nil {
		t.Fatal(err)
	}
	// Queued and never claimed (in the bulk lane); queued on its parents.
	neverClaimed := r.job(t, "plain", func(rec *driver.Record) { rec.Lane = "bulk" })
	// Queued with a sweep entry (made before message first, or by a path
	// that holds no message), due in the index later.
	indexed := r.job(t, "plain", func(rec *driver.Record) { rec.SweepAt = r.clock.Now().Add(time.Hour) })
	onParents := r.job(t, "plain", func(rec *driver.Record) { rec.WaitingOn = driver.WaitParents })
	// Final with its event pending; final with nothing pending; no job.
	pending := r.job(t, "plain", func(rec *driver.Record) { rec.Events = true })
	r.running(t, pending, time.Minute)
	if err := r.store.Finish(ctx, pending, "dead-worker", driver.Outcome{Status: jobs.StatusSucceeded, Result: []byte(`1`), At: r.clock.Now(),
		After: []string{"event"}, Seq: 1}); err != nil {
		t.Fatal(err)
	}
	done := r.job(t, "plain", nil)
	r.running(t, done, time.Minute)
	if err := r.store.Finish(ctx, done, "dead-worker", driver.Outcome{Status: jobs.StatusSucceeded, Result: []byte(`1`), At: r.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	gone := wire.NewID()

	r.clock.Advance(2 * time.Minute) // every lease above has ended
	// Running, lease live: a fresh message for its lease's end.
	live := r.job(t, "plain", nil)
	r.running(t, live, 5*time.Minute)

	for _, id := range []string{interrupted, retried, cancelled, indexed, onParents, pending, done, gone, live} {
		r.queue.AddDeadLetter("", message.Encode(id))
	}
	r.queue.AddDeadLetter("bulk", message.Encode(neverClaimed))
	foreign := []string{`{"Records":[{"eventSource":"aws:s3"}]}`, `not json`, `{"kind":"plain","payload":{}}`, `{"lambdajobs_schedule":"n","scheduled_time":"t"}`}
	for _, body := range foreign {
		r.queue.AddDeadLetter("", body)
	}

	rep, err := r.sweeper.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rep.DeadLettersSettled != 10 || rep.DeadLettersLeft != len(foreign) || rep.Errors != 0 {
		t.Fatalf("report %+v: want 10 dead letters settled, %d left, no error", rep, len(foreign))
	}
	if rep.Interrupted != 1 || rep.Retried != 1 || rep.Cancelled != 1 || rep.Resent != 2 || rep.After != 1 || rep.Deferred != 1 {
		t.Errorf("report %+v: want two re-sent, one each of interrupted, retried, cancelled, after, deferred", rep)
	}
	if got := r.queue.DeadLetters(""); !slices.Equal(got, foreign) {
		t.Errorf("default lane's DLQ holds %q, want only the foreign messages %q", got, foreign)
	}
	if got := r.queue.DeadLetters("bulk"); len(got) != 0 {
		t.Errorf("bulk lane's DLQ holds %q", got)
	}
	// What stays is visible again at once: the operators' peek sees it.
	left, _ := r.queue.ReceiveDead(ctx, "", 100)
	if len(left) != len(foreign) {
		t.Errorf("%d of the %d messages left are visible", len(left), len(foreign))
	}
	for _, dl := range left {
		_ = r.queue.ReleaseDead(ctx, "", dl.Receipt)
	}

	if got := r.get(t, interrupted); got.Status != jobs.StatusFailed || got.ErrorCode != jobs.CodeInterrupted {
		t.Errorf("interrupted job: %s %q", got.Status, got.ErrorCode)
	}
	if got := r.get(t, retried); got.Status != jobs.StatusQueued || got.Attempt != 1 {
		t.Errorf("retried job: %s, attempt %d; want queued for its second attempt", got.Status, got.Attempt)
	}
	if got := r.get(t, cancelled); got.Status != jobs.StatusCancelled {
		t.Errorf("cancelled job: %s", got.Status)
	}
	sent := r.queue.Messages()
	var resent, resentIndexed, liveMsg *driver.Message
	for i, m := range sent {
		switch m.JobID {
		case neverClaimed:
			resent = &sent[i]
		case indexed:
			resentIndexed = &sent[i]
		case live:
			liveMsg = &sent[i]
		case onParents, done, gone, pending, interrupted, cancelled:
			t.Errorf("job %s was sent: %+v", m.JobID, m)
		}
	}
	if resent == nil || resent.Lane != "bulk" || resent.Delay != 0 {
		t.Errorf("the never-claimed job's message: %+v, want one to the bulk lane at once", resent)
	}
	if got := r.get(t, neverClaimed); got.Status != jobs.StatusQueued || !got.SweepAt.IsZero() {
		t.Errorf("never-claimed job: %s, sweep at %v; want queued, its new message its only net (no sweep entry written)", got.Status, got.SweepAt)
	}
	if got := r.get(t, indexed); resentIndexed == nil || got.Dispatches != 1 || !got.SweepAt.After(r.clock.Now()) {
		t.Errorf("indexed job: message %+v, %d dispatches, sweep at %v; want it sent, its entry backed off as a re-send", resentIndexed, got.Dispatches, got.SweepAt)
	}
	if liveMsg == nil || liveMsg.Delay < 5*time.Minute || liveMsg.Delay > 5*time.Minute+2*time.Second {
		t.Errorf("the running job's fresh message: %+v, want one delayed to its lease's end (5m)", liveMsg)
	}
	if got := r.get(t, live); got.Status != jobs.StatusRunning {
		t.Errorf("running job within its lease: %s", got.Status)
	}
	if got := r.get(t, pending); len(got.After) != 0 || len(r.bus.Events()) != 1 {
		t.Errorf("final job's steps %v pending, %d events sent; want its one event sent", got.After, len(r.bus.Events()))
	}

	recs := parseEMF(t, r.metrics.String())
	for _, c := range []struct {
		kind, lane string
		want       float64
	}{{"plain", "default", 7}, {"flaky", "default", 1}, {"(none)", "default", 1}, {"plain", "bulk", 1}} {
		if got, _ := value(recs, "DeadLettersSettled", map[string]string{"kind": c.kind, "lane": c.lane}); got != c.want {
			t.Errorf("DeadLettersSettled{kind=%s, lane=%s} = %v, want %v", c.kind, c.lane, got, c.want)
		}
	}

	// Nothing left to settle: the next sweep leaves the foreign ones again.
	rep, _ = r.sweeper.Sweep(ctx)
	if rep.DeadLettersSettled != 0 || rep.DeadLettersLeft != len(foreign) {
		t.Errorf("second sweep: %+v", rep)
	}
}

// A dependency failing during a decision leaves its dead letter for the
// next sweep (not deleted, visible again); the next sweep settles it.
func TestSweeperLeavesADeadLetterOnATransientError(t *testing.T) {
	t.Parallel()
	r := newDeadRig(t, 0)
	ctx := context.Background()
	queued := r.job(t, "plain", nil)
	pending := r.job(t, "plain", func(rec *driver.Record) { rec.Events = true })
	r.running(t, pending, time.Minute)
	if err := r.store.Finish(ctx, pending, "dead-worker", driver.Outcome{Status: jobs.StatusSucceeded, At: r.clock.Now(), After: []string{"event"}, Seq: 1}); err != nil {
		t.Fatal(err)
	}
	r.queue.AddDeadLetter("", message.Encode(queued))
	r.queue.AddDeadLetter("", message.Encode(pending))
	r.queue.SetFail(errors.New("sqs down"))
	r.bus.SetFail(errors.New("eventbridge down"))
	rep, _ := r.sweeper.Sweep(ctx)
	if rep.DeadLettersSettled != 0 || rep.DeadLettersLeft != 2 || rep.Errors < 2 {
		t.Fatalf("sweep with SQS and EventBridge down: %+v, want both dead letters left, as errors", rep)
	}
	if got := r.queue.DeadLetters(""); len(got) != 2 {
		t.Fatalf("DLQ holds %q, want both", got)
	}
	if got := r.get(t, queued); !got.SweepAt.IsZero() {
		t.Errorf("a re-send that failed moved the sweep entry to %v", got.SweepAt)
	}
	r.queue.SetFail(nil)
	r.bus.SetFail(nil)
	rep, _ = r.sweeper.Sweep(ctx)
	if rep.DeadLettersSettled != 2 || len(r.queue.DeadLetters("")) != 0 || !slices.Contains(r.queue.Sent(), queued) {
		t.Fatalf("next sweep: %+v, DLQ %q, sent %v", rep, r.queue.DeadLetters(""), r.queue.Sent())
	}
}

// A sweep receives at most DeadLettersPerLane of each lane's dead letters;
// the next sweep takes the rest.
func TestSweeperDrainsABoundedNumberPerLane(t *testing.T) {
	t.Parallel()
	r := newDeadRig(t, 3)
	ctx := context.Background()
	for range 5 {
		r.queue.AddDeadLetter("", message.Encode(wire.NewID()))
		r.queue.AddDeadLetter("bulk", message.Encode(wire.NewID()))
	}
	rep, _ := r.sweeper.Sweep(ctx)
	if rep.DeadLettersSettled != 6 || len(r.queue.DeadLetters("")) != 2 || len(r.queue.DeadLetters("bulk")) != 2 {
		t.Fatalf("first sweep: %+v, left %d and %d; want 3 of each lane settled", rep, len(r.queue.DeadLetters("")), len(r.queue.DeadLetters("bulk")))
	}
	rep, _ = r.sweeper.Sweep(ctx)
	if rep.DeadLettersSettled != 4 || len(r.queue.DeadLetters(""))+len(r.queue.DeadLetters("bulk")) != 0 {
		t.Fatalf("second sweep: %+v", rep)
	}
}

// A job that was never claimed, whose message reached the dead-letter
// queue, is sent again by the sweeper and then runs.
func TestNeverClaimedDeadLetterIsResentAndRuns(t *testing.T) {
	t.Parallel()
	r := newDeadRig(t, 0)
	ctx := context.Background()
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "plain", sleeper, nil)
	w, err := testroles.Worker(jobs.Config{Registry: reg, Store: r.store, Queue: r.queue, Clock: r.clock, CancelCheck: -1})
	if err != nil {
		t.Fatal(err)
	}
	id := r.job(t, "plain", func(rec *driver.Record) { rec.Payload = []byte(`{}`) })
	r.queue.AddDeadLetter("", message.Encode(id))
	if _, err := r.sweeper.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(r.queue.Sent(), id) {
		t.Fatalf("the dead letter's job was not sent again: %v", r.queue.Sent())
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if res, err := w.HandleSQS(wctx, sqsEvent(message.Encode(id))); err != nil || len(res.BatchItemFailures) != 0 {
		t.Fatalf("worker: %+v, %v", res, err)
	}
	if got := r.get(t, id); got.Status != jobs.StatusSucceeded {
		t.Fatalf("the re-sent job ended %s, want succeeded", got.Status)
	}
}
