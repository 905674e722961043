package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// raceStore holds Service.Signal's write (after its read) until the run
// has parked for the signal: the read saw the job running (no wake), the
// write lands on a job that now waits for that very signal.
type raceStore struct {
	*jobstest.MemStore
	entered, parked    chan struct{}
	onceIn, onceParked sync.Once
}

func (s *raceStore) Signal(ctx context.Context, id string, sg driver.Signal) error {
	s.onceIn.Do(func() { close(s.entered) })
	select {
	case <-s.parked:
	case <-time.After(5 * time.Second):
	}
	return s.MemStore.Signal(ctx, id, sg)
}

func (s *raceStore) Requeue(ctx context.Context, id, token string, q driver.Requeue) error {
	err := s.MemStore.Requeue(ctx, id, token, q)
	if _, ok := driver.SignalWaitedOn(q.WaitingOn); ok && err == nil {
		s.onceParked.Do(func() { close(s.parked) })
	}
	return err
}

// A signal whose delivery read the job running, and whose write lands
// after the run parked for it, wakes the job: a write without a wake is
// refused on a job that waits for the signal, and the delivery decides
// again on the job as it is.
func TestSignalRacingThePark(t *testing.T) {
	clock := jobstest.NewClock(jobstest.Epoch)
	mem := jobstest.NewMemStore(clock)
	st := &raceStore{MemStore: mem, entered: make(chan struct{}), parked: make(chan struct{})}
	q := &jobstest.MemQueue{}
	sealer, err := jobs.NewAESSealer([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	var svc *jobs.Service
	type answer struct {
		res *jobs.SignalResult
		err error
	}
	got := make(chan answer, 1)
	runs := 0
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "approve", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.NoResult, error) {
		runs++
		if runs == 1 {
			go func() {
				res, err := svc.Signal(context.Background(), "o", job.ID, "approval", []byte(`{"approved":true,"by":"ana"}`))
				got <- answer{res, err}
			}()
			<-st.entered // the signal read the job as running
		}
		_, _, err := jobs.WaitForSignal[approval](ctx, job, "approval", 48*time.Hour)
		return jobs.NoResult{}, err
	}, &jobs.KindOpts{Signals: map[string]any{"approval": approval{}}})
	cfg := jobs.Config{Registry: reg, Store: st, Queue: q, Clock: clock, Sealer: sealer, PageTokenKey: []byte(strings.Repeat("p", 32))}
	if svc, err = testroles.Service(cfg); err != nil {
		t.Fatal(err)
	}
	w, err := testroles.Worker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "o", Kind: "approve", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Job.ID
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := w.HandleSQS(ctx, sqsEvent(message.Encode(id))); err != nil {
		t.Fatal(err)
	}
	a := <-got
	if a.err != nil {
		t.Fatal(a.err)
	}
	rec, _ := mem.Get(context.Background(), id)
	t.Logf("signal answered %+v; job %s waiting_on %q run_at now+%v, has signal %v",
		*a.res, rec.Status, rec.WaitingOn, rec.RunAt.Sub(clock.Now()), rec.Signals["approval"] != nil)
	if rec.Signals["approval"] != nil && rec.RunAt.After(clock.Now()) {
		t.Fatalf("lost wakeup: the signal is stored, yet the job waits on %q until %v from now", rec.WaitingOn, rec.RunAt.Sub(clock.Now()))
	}
}

// A callback token names its job's creation too: a later job under the
// same id (an idempotency key reused once the first job's retention
// ended) does not take the earlier job's token.
func TestCallbackTokenOfAnEarlierJobUnderItsID(t *testing.T) {
	var tokens []string
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "pay", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.JSON[approval], error) {
		if _, err := jobs.Step(ctx, job, "charge", func(context.Context) (int, error) {
			tok, err := job.CallbackToken("paid", 30*24*time.Hour)
			tokens = append(tokens, tok)
			return 1, err
		}); err != nil {
			return jobs.JSON[approval]{}, err
		}
		a, ok, err := jobs.WaitForSignal[approval](ctx, job, "paid", 20*24*time.Hour)
		if err != nil || !ok {
			return jobs.JSON[approval]{}, jobs.Fail("unpaid", err)
		}
		return jobs.JSON[approval]{V: a}, nil
	}, &jobs.KindOpts{FailureCodes: []string{"unpaid"}, Signals: map[string]any{"paid": approval{}}})
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	enqueue := func() string {
		res, err := r.Service.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "pay", Payload: []byte(`{}`), EnqueueOpts: jobs.EnqueueOpts{IdempotencyKey: "order-42"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Work(ctx); err != nil {
			t.Fatal(err)
		}
		return res.Job.ID
	}
	first := enqueue()
	if _, err := r.Service.Callback(ctx, tokens[0], []byte(`{"approved":true,"by":"provider"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	r.Clock.Advance(jobs.DefaultRetention + time.Hour) // the first job is gone
	second := enqueue()
	if second != first {
		t.Fatalf("the second job's id %s, want the first's %s (the same idempotency key)", second, first)
	}
	got, err := r.Service.Callback(ctx, tokens[0], []byte(`{"approved":true,"by":"replayed"}`))
	if !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("the first job's token on the second job under its id: %+v %v, want ErrNotFound", got, err)
	}
}

// During a key rotation the API's ring has the new key first while a
// worker still holds only the old one: a signal sealed under the new key
// sends the job back, waiting on "key" with no attempt spent, and a worker
// that holds the key runs it on with the signal.
func TestSignalUnderANewKeyWaitsForIt(t *testing.T) {
	clock := jobstest.NewClock(jobstest.Epoch)
	mem := jobstest.NewMemStore(clock)
	q := &jobstest.MemQueue{}
	oldKey, newKey := []byte(strings.Repeat("o", 32)), []byte(strings.Repeat("n", 32))
	apiSealer, _ := jobs.NewAESSealer(newKey, oldKey)
	workerSealer, _ := jobs.NewAESSealer(oldKey)
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "approve", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.JSON[approval], error) {
		a, _, err := jobs.WaitForSignal[approval](ctx, job, "approval", time.Hour)
		return jobs.JSON[approval]{V: a}, err
	}, &jobs.KindOpts{Signals: map[string]any{"approval": approval{}}})
	base := jobs.Config{Registry: reg, Store: mem, Queue: q, Clock: clock, PageTokenKey: []byte(strings.Repeat("p", 32))}
	apiCfg, workerCfg := base, base
	apiCfg.Sealer, workerCfg.Sealer = apiSealer, workerSealer
	svc, err := testroles.Service(apiCfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := testroles.Worker(workerCfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "o", Kind: "approve", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Signal(context.Background(), "o", res.Job.ID, "approval", []byte(`{"approved":true}`)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := w.HandleSQS(ctx, sqsEvent(message.Encode(res.Job.ID))); err != nil {
		t.Fatal(err)
	}
	if v, _ := svc.Get(context.Background(), "o", res.Job.ID); v.Status != jobs.StatusQueued || v.WaitingOn != "key" || v.Attempt != 0 {
		t.Fatalf("a signal under a key the worker lacks: %s on %q, attempt %d; want queued on key, attempt 0", v.Status, v.WaitingOn, v.Attempt)
	}
	workerCfg.Sealer = apiSealer // the rotation reached the workers
	w2, err := testroles.Worker(workerCfg)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if _, err := w2.HandleSQS(ctx, sqsEvent(message.Encode(res.Job.ID))); err != nil {
		t.Fatal(err)
	}
	if v, _ := svc.Get(context.Background(), "o", res.Job.ID); v.Status != jobs.StatusSucceeded || string(v.Result) != `{"approved":true,"by":""}` {
		t.Fatalf("with the key: %s %s", v.Status, v.Result)
	}
}

// retriedSignal writes a Signal twice, as the SDK does when the first
// try's answer is lost, and answers the second try: whose condition
// fails on the signal the first stored.
type retriedSignal struct{ *jobstest.MemStore }

func (s retriedSignal) Signal(ctx context.Context, id string, sg driver.Signal) error {
	if err := s.MemStore.Signal(ctx, id, sg); err != nil {
		return err
	}
	return s.MemStore.Signal(ctx, id, sg)
}

// A callback whose write landed and whose answer was lost (the SDK tried
// it again, and the condition found the signal) is this delivery's own:
// it answers delivered, and the job it woke is sent at once.
func TestSignalWhoseAnswerWasLost(t *testing.T) {
	for _, apart := range []int{0, 16} { // in the job's item, in one of its own
		t.Run(fmt.Sprintf("apart_over_%d", apart), func(t *testing.T) { signalAnswerLost(t, apart) })
	}
}

func signalAnswerLost(t *testing.T, apartOver int) {
	clock := jobstest.NewClock(jobstest.Epoch)
	mem := jobstest.NewMemStore(clock)
	mem.KeepPayloadsApart(apartOver)
	q := &jobstest.MemQueue{}
	sealer, _ := jobs.NewAESSealer([]byte(strings.Repeat("k", 32)))
	var token string
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "pay", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.NoResult, error) {
		if _, err := jobs.Step(ctx, job, "charge", func(context.Context) (int, error) {
			tok, err := job.CallbackToken("paid", time.Hour)
			token = tok
			return 1, err
		}); err != nil {
			return jobs.NoResult{}, err
		}
		_, _, err := jobs.WaitForSignal[approval](ctx, job, "paid", time.Hour)
		return jobs.NoResult{}, err
	}, &jobs.KindOpts{Signals: map[string]any{"paid": approval{}}})
	cfg := jobs.Config{Registry: reg, Store: retriedSignal{mem}, Queue: q, Clock: clock, Sealer: sealer, PageTokenKey: []byte(strings.Repeat("p", 32))}
	svc, err := testroles.Service(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := testroles.Worker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "o", Kind: "pay", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := w.HandleSQS(ctx, sqsEvent(message.Encode(res.Job.ID))); err != nil {
		t.Fatal(err)
	}
	sent := len(q.Sent())
	_, err = svc.Callback(context.Background(), token, []byte(`{"approved":true}`))
	rec, _ := mem.Get(context.Background(), res.Job.ID)
	t.Logf("callback: %v; signal stored %v (item %q), run_at now+%v, messages sent %d", err, rec.Signals["paid"] != nil, rec.SignalRefs["paid"], rec.RunAt.Sub(clock.Now()), len(q.Sent())-sent)
	if (apartOver > 0) != (rec.SignalRefs["paid"] != "") {
		t.Fatalf("signal item %q with parts apart over %d bytes", rec.SignalRefs["paid"], apartOver)
	}
	if err != nil || len(q.Sent()) == sent {
		t.Fatalf("the callback's own write, retried: answered %v, %d messages sent", err, len(q.Sent())-sent)
	}
}

// A signal larger than the store keeps in the job's item goes into an item
// of its own, named by the job (driver.SignalPart): the run that passes
// the wait reads it from there, a claim long after the signal makes the
// item last longer, and an item that outlived its keep fails the job
// payload_unreadable, as a payload's would.
func TestLargeSignalsAreKeptApart(t *testing.T) {
	clock := jobstest.NewClock(jobstest.Epoch)
	mem := jobstest.NewMemStore(clock)
	mem.KeepPayloadsApart(64)
	q := &jobstest.MemQueue{}
	sealer, _ := jobs.NewAESSealer([]byte(strings.Repeat("k", 32)))
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "approve.big", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.JSON[approval], error) {
		a, ok, err := jobs.WaitForSignal[approval](ctx, job, "approval", time.Hour)
		if err == nil && !ok {
			err = errors.New("timed out")
		}
		return jobs.JSON[approval]{V: a}, err
	}, &jobs.KindOpts{Signals: map[string]any{"approval": approval{}}})
	cfg := jobs.Config{Registry: reg, Store: mem, Queue: q, Clock: clock, Sealer: sealer, PageTokenKey: []byte(strings.Repeat("p", 32))}
	svc, err := testroles.Service(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := testroles.Worker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	enqueue := func() string {
		res, err := svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "approve.big", Payload: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		return res.Job.ID
	}
	work := func(id string) *jobs.View {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := w.HandleSQS(wctx, sqsEvent(message.Encode(id))); err != nil {
			t.Fatal(err)
		}
		v, err := svc.Get(ctx, "o", id)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	by := strings.Repeat("ana ", 100)
	big := []byte(`{"approved":true,"by":"` + by + `"}`)

	id := enqueue()
	if v := work(id); v.WaitingOn != "signal" {
		t.Fatalf("the first run: %s waiting on %q, want the wait", v.Status, v.WaitingOn)
	}
	if res, err := svc.Signal(ctx, "o", id, "approval", big); err != nil || !res.Woke {
		t.Fatalf("the signal: %+v %v", res, err)
	}
	rec, _ := mem.Get(ctx, id)
	kept, ok := mem.PartItem(id, driver.SignalPart("approval"))
	if rec.SignalRefs["approval"] == "" || rec.Signals["approval"] == nil || len(rec.Signals["approval"]) != 0 || !ok {
		t.Fatalf("the job's item: signal %d bytes, item %q (kept %v); want it named, in an item of its own", len(rec.Signals["approval"]), rec.SignalRefs["approval"], ok)
	}
	// Its run comes two days late: the claim reads the signal from its
	// item and makes the item last as long as a payload's would from now.
	clock.Advance(48 * time.Hour)
	if v := work(id); v.Status != jobs.StatusSucceeded || !strings.Contains(string(v.Result), by) {
		t.Fatalf("after the signal: %s %.80s", v.Status, v.Result)
	}
	if later, _ := mem.PartItem(id, driver.SignalPart("approval")); !later.After(kept) {
		t.Fatalf("the signal's item lasts until %v after a claim two days on, as before it (%v)", later, kept)
	}

	// A signal before the wait, whose item outlives its keep before the
	// job runs: the job fails payload_unreadable, the signal unread.
	id = enqueue()
	if _, err := svc.Signal(ctx, "o", id, "approval", big); err != nil {
		t.Fatal(err)
	}
	gone, _ := mem.PartItem(id, driver.SignalPart("approval"))
	clock.Set(gone.Add(time.Second))
	if v := work(id); v.Status != jobs.StatusFailed || v.Error == nil || *v.Error != jobs.CodePayloadUnreadable {
		t.Fatalf("a job whose signal's item is gone: %s %v, want failed %s", v.Status, v.Error, jobs.CodePayloadUnreadable)
	}
}
