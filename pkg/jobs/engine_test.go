package jobs_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// Tests of the transitions the engine owns, each named for what it
// guarantees (docs/reference/STATE_MACHINE.md). Time runs under testing/synctest: contexts, tickers
// and the wall clock are the bubble's fake ones, so no test sleeps.

// sleepPayload makes the "sleep" kind work for a while, honouring ctx.
type sleepPayload struct {
	For string `json:"for"`
}

func sleeper(ctx context.Context, j *jobs.Job[sleepPayload]) (jobs.NoResult, error) {
	d, _ := time.ParseDuration(j.Payload.For)
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return jobs.NoResult{}, ctx.Err()
	}
	return jobs.NoResult{}, nil
}

type engineRig struct {
	mem    *jobstest.MemStore
	queue  *jobstest.MemQueue
	svc    *jobs.Service
	worker *jobs.Worker
	logs   testenv.SyncBuffer
}

func (r *engineRig) log() string { return r.logs.String() }

// newEngineRig builds a service and a worker over store (a MemStore, or a
// wrapper of one); register adds kinds beside "sleep".
func newEngineRig(t *testing.T, mem *jobstest.MemStore, store driver.Store, cfg jobs.Config, register func(*jobs.Registry)) *engineRig {
	t.Helper()
	r := &engineRig{mem: mem, queue: &jobstest.MemQueue{}}
	logger := slog.New(slog.NewJSONHandler(&r.logs, nil))
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "sleep", sleeper, nil)
	if register != nil {
		register(reg)
	}
	var err error
	if r.svc, err = testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: r.queue, Logger: logger}); err != nil {
		t.Fatal(err)
	}
	cfg.Registry, cfg.Store, cfg.Queue, cfg.Logger = reg, store, r.queue, logger
	if r.worker, err = testroles.Worker(cfg); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *engineRig) enqueue(t *testing.T, kind, payload string) string {
	t.Helper()
	rec, _, err := enqueued(r.svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "o", Kind: kind, Payload: []byte(payload)}))
	if err != nil {
		t.Fatal(err)
	}
	return rec.ID
}

func (r *engineRig) get(t *testing.T, id string) *driver.Record {
	t.Helper()
	rec, err := r.mem.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// A record is not claimed when too little handler time is left;
// its job is handed to a later invocation unclaimed, no attempt spent,
// instead of failing timed_out without a fair run: its message is sent
// again (after a second) and this one acknowledged, so hand-backs never
// bring it nearer the dead-letter queue (docs/evidence/RELIABILITY.md).
func TestRecordsLeftWithoutTimeAreHandedBackUnclaimed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := jobstest.NewMemStore(nil)
		r := newEngineRig(t, mem, mem, jobs.Config{Concurrency: 1, CancelCheck: -1}, nil)
		first := r.enqueue(t, "sleep", `{"for":"10s"}`)
		second := r.enqueue(t, "sleep", `{"for":"1s"}`)
		// 15 s Lambda, 3 s reserve: 12 s of handler time. The first record
		// takes 10 s; 2 s would be left for the second, which needs more
		// than the default minimum only by a hair: give it 1.5 s more.
		ctx, cancel := context.WithTimeout(context.Background(), 13500*time.Millisecond)
		defer cancel()
		resp, _ := r.worker.HandleSQS(ctx, sqsEvent(message.Encode(first), message.Encode(second)))
		if got := failedIDs(resp); len(got) != 0 {
			t.Fatalf("failures %v, want none: the unstarted record is sent again, not given back", got)
		}
		if d := r.queue.Delay(second); d != time.Second {
			t.Fatalf("the unstarted job was sent again with a delay of %v, want 1s", d)
		}
		if rec := r.get(t, first); rec.Status != jobs.StatusSucceeded {
			t.Fatalf("first job %s, want succeeded", rec.Status)
		}
		if rec := r.get(t, second); rec.Status != jobs.StatusQueued || rec.Attempt != 0 {
			t.Fatalf("second job %s after %d attempts, want queued with no attempt spent", rec.Status, rec.Attempt)
		}
		// The redelivery, in a fresh invocation, runs it.
		ctx2, cancel2 := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel2()
		if resp, _ := r.worker.HandleSQS(ctx2, sqsEvent(message.Encode(second))); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("redelivery failures %v", failedIDs(resp))
		}
		if rec := r.get(t, second); rec.Status != jobs.StatusSucceeded || rec.Attempt != 1 {
			t.Fatalf("second job %s after %d attempts, want succeeded on attempt 1", rec.Status, rec.Attempt)
		}
	})
}

// A kind that states its minimum run time is not
// claimed with less left, while quicker kinds still are.
func TestKindMinimumRunTimeIsHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := jobstest.NewMemStore(nil)
		r := newEngineRig(t, mem, mem, jobs.Config{CancelCheck: -1}, func(reg *jobs.Registry) {
			jobs.MustRegister(reg, "report", sleeper, &jobs.KindOpts{MinRunTime: 30 * time.Second})
		})
		slow := r.enqueue(t, "report", `{"for":"20s"}`)
		quick := r.enqueue(t, "sleep", `{"for":"1s"}`)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // 17 s of handler time
		defer cancel()
		resp, _ := r.worker.HandleSQS(ctx, sqsEvent(message.Encode(slow), message.Encode(quick)))
		if got := failedIDs(resp); len(got) != 0 {
			t.Fatalf("failures %v, want none: the slow kind's record is sent again", got)
		}
		if d := r.queue.Delay(slow); d != time.Second {
			t.Fatalf("the slow kind's job was sent again with a delay of %v, want 1s", d)
		}
		if rec := r.get(t, slow); rec.Status != jobs.StatusQueued || rec.Attempt != 0 {
			t.Fatalf("slow job %s after %d attempts, want queued, no attempt spent", rec.Status, rec.Attempt)
		}
		if rec := r.get(t, quick); rec.Status != jobs.StatusSucceeded {
			t.Fatalf("quick job %s, want succeeded", rec.Status)
		}
		ctx2, cancel2 := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel2()
		if resp, _ := r.worker.HandleSQS(ctx2, sqsEvent(message.Encode(slow))); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("failures %v in an invocation with time enough", failedIDs(resp))
		}
		if rec := r.get(t, slow); rec.Status != jobs.StatusSucceeded || rec.Attempt != 1 {
			t.Fatalf("slow job %s after %d attempts, want succeeded on attempt 1", rec.Status, rec.Attempt)
		}
	})
}

// stallStore blocks the calls named in stall until their context ends,
// like a DynamoDB that stopped answering.
type stallStore struct {
	*jobstest.MemStore
	stall string
}

func (s stallStore) Claim(ctx context.Context, id string, c driver.Claim) (*driver.Record, error) {
	if s.stall == "claim" {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return s.MemStore.Claim(ctx, id, c)
}

func (s stallStore) Create(ctx context.Context, rec *driver.Record) error {
	if s.stall == "create" {
		<-ctx.Done()
		return ctx.Err()
	}
	return s.MemStore.Create(ctx, rec)
}

// A stalled claim (or create of a routed job) is bounded by its
// own deadline: the worker answers before the Lambda deadline and lists the
// record, instead of timing out and failing the whole batch.
func TestStalledCallsOnTheWorkerPathAreBounded(t *testing.T) {
	for _, stall := range []string{"claim", "create"} {
		t.Run(stall, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := jobstest.NewMemStore(nil)
				routes := &jobs.Routes{Envelope: []jobs.EnvelopeRoute{{Kinds: []string{"sleep"}, Owner: "envelope-sender"}}}
				r := newEngineRig(t, mem, stallStore{mem, stall}, jobs.Config{Routes: routes}, nil)
				body := `{"kind":"sleep","payload":{"for":"1s"},"idempotency_key":"k1"}`
				if stall == "claim" {
					body = message.Encode(r.enqueue(t, "sleep", `{"for":"1s"}`))
				}
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				defer cancel()
				deadline, _ := ctx.Deadline()
				resp, _ := r.worker.HandleSQS(ctx, sqsEvent(body))
				if now := time.Now(); !now.Before(deadline) {
					t.Fatalf("worker answered %v after the deadline", now.Sub(deadline))
				}
				if took := 15*time.Second - time.Until(deadline); took > 3*time.Second {
					t.Fatalf("worker took %v: the %s was not bounded by its own deadline", took, stall)
				}
				if got := failedIDs(resp); len(got) != 1 {
					t.Fatalf("failures %v, want the record listed", got)
				}
			})
		})
	}
}

// lostStore applies a write, then answers as if the answer were lost and
// the SDK retried it: the retry finds the job as the write left it.
type lostStore struct {
	*jobstest.MemStore
	lose string
}

func (s lostStore) Finish(ctx context.Context, id, token string, o driver.Outcome) error {
	if err := s.MemStore.Finish(ctx, id, token, o); err != nil || s.lose != "finish" {
		return err
	}
	return s.MemStore.Finish(ctx, id, token, o)
}

func (s lostStore) Requeue(ctx context.Context, id, token string, q driver.Requeue) error {
	if err := s.MemStore.Requeue(ctx, id, token, q); err != nil || s.lose != "requeue" {
		return err
	}
	return s.MemStore.Requeue(ctx, id, token, q)
}

func (s lostStore) CancelQueued(ctx context.Context, id string, c driver.CancelQueued) error {
	if err := s.MemStore.CancelQueued(ctx, id, c); err != nil || s.lose != "cancel" {
		return err
	}
	return s.MemStore.CancelQueued(ctx, id, c)
}

// A plain update whose answer was lost counts as done: the final
// write is not reported as someone else's, the requeue still sends the
// delayed retry, and the cancel answers the caller who cancelled.
func TestLostAnswersOnUpdatesCountAsDone(t *testing.T) {
	t.Run("finish", func(t *testing.T) {
		mem := jobstest.NewMemStore(nil)
		r := newEngineRig(t, mem, lostStore{mem, "finish"}, jobs.Config{}, nil)
		id := r.enqueue(t, "sleep", `{"for":"1ms"}`)
		if resp, _ := r.worker.HandleSQS(context.Background(), sqsEvent(message.Encode(id))); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("failures %v", failedIDs(resp))
		}
		if rec := r.get(t, id); rec.Status != jobs.StatusSucceeded {
			t.Fatalf("job %s, want succeeded", rec.Status)
		}
		if logs := r.log(); strings.Contains(logs, "settled by someone else") || !strings.Contains(logs, `"msg":"job succeeded"`) {
			t.Fatalf("a final write whose answer was lost is reported as someone else's:\n%s", logs)
		}
	})
	t.Run("requeue", func(t *testing.T) {
		mem := jobstest.NewMemStore(nil)
		r := newEngineRig(t, mem, lostStore{mem, "requeue"}, jobs.Config{}, func(reg *jobs.Registry) {
			jobs.MustRegister(reg, "flaky", func(context.Context, *jobs.Job[sleepPayload]) (jobs.NoResult, error) {
				return jobs.NoResult{}, jobs.RetryAfter(time.Minute, errors.New("later"))
			}, &jobs.KindOpts{Retry: jobs.RetryPolicy{MaxAttempts: 3}})
		})
		id := r.enqueue(t, "flaky", `{}`)
		sentBefore := len(r.queue.Sent())
		if resp, _ := r.worker.HandleSQS(context.Background(), sqsEvent(message.Encode(id))); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("failures %v", failedIDs(resp))
		}
		if rec := r.get(t, id); rec.Status != jobs.StatusQueued || rec.LastError != jobs.CodeInternal {
			t.Fatalf("job %s (last error %q), want queued for a retry", rec.Status, rec.LastError)
		}
		if sent := r.queue.Sent(); len(sent) != sentBefore+1 || r.queue.Delay(id) != time.Minute {
			t.Fatalf("sent %v (delay %v): the retry of a requeue whose answer was lost was not sent", sent, r.queue.Delay(id))
		}
	})
	t.Run("cancel", func(t *testing.T) {
		mem := jobstest.NewMemStore(nil)
		r := newEngineRig(t, mem, lostStore{mem, "cancel"}, jobs.Config{}, nil)
		id := r.enqueue(t, "sleep", `{"for":"1s"}`)
		rec, err := r.svc.Cancel(context.Background(), "o", id)
		if err != nil || rec.Status != jobs.StatusCancelled {
			t.Fatalf("cancel whose answer was lost: %v, %v; want the job cancelled and no error", rec, err)
		}
	})
}

// The redelivery and the sweeper settle an abandoned run the same
// way, because the engine decides for both: a run whose owner cancelled it
// ends cancelled even when its kind has attempts left; one not cancelled is
// retried by both.
func TestRedeliveryAndSweeperSettleAbandonedRunsAlike(t *testing.T) {
	for _, cancelled := range []bool{false, true} {
		for _, by := range []string{"redelivery", "sweeper"} {
			name := by
			if cancelled {
				name += "/cancelled"
			}
			t.Run(name, func(t *testing.T) {
				mem := jobstest.NewMemStore(nil)
				r := newEngineRig(t, mem, mem, jobs.Config{}, func(reg *jobs.Registry) {
					jobs.MustRegister(reg, "retried", sleeper, &jobs.KindOpts{Retry: jobs.RetryPolicy{MaxAttempts: 3}})
				})
				id := r.enqueue(t, "retried", `{"for":"1ms"}`)
				now := time.Now()
				if _, err := mem.Claim(context.Background(), id, driver.Claim{Token: "dead", At: now.Add(-time.Minute), LeaseUntil: now.Add(-time.Second)}); err != nil {
					t.Fatal(err)
				}
				if cancelled {
					if err := mem.RequestCancel(context.Background(), id, now); err != nil {
						t.Fatal(err)
					}
				}
				switch by {
				case "redelivery":
					if resp, _ := r.worker.HandleSQS(context.Background(), sqsEvent(message.Encode(id))); len(resp.BatchItemFailures) != 0 {
						t.Fatalf("failures %v", failedIDs(resp))
					}
				case "sweeper":
					reg := jobs.NewRegistry()
					jobs.MustRegister(reg, "retried", sleeper, &jobs.KindOpts{Retry: jobs.RetryPolicy{MaxAttempts: 3}})
					sw, _ := testroles.Sweeper(jobs.Config{Store: mem, Queue: r.queue, Registry: reg,
						Clock: jobstest.NewClock(now.Add(jobs.DefaultDispatchGrace + time.Minute))})
					if _, err := sw.Sweep(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				rec := r.get(t, id)
				want := jobs.StatusQueued // retried
				if cancelled {
					want = jobs.StatusCancelled
				}
				if rec.Status != want {
					t.Fatalf("settled by the %s: %s, want %s", by, rec.Status, want)
				}
			})
		}
	}
}

// A handler that ignores its deadline is abandoned and counted
// until it returns.
func TestAbandonedHandlersAreCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := jobstest.NewMemStore(nil)
		release := make(chan struct{})
		var emf testenv.SyncBuffer
		r := newEngineRig(t, mem, mem, jobs.Config{CancelCheck: -1, Metrics: &jobs.Metrics{Namespace: "n", Service: "worker", Writer: &emf}}, func(reg *jobs.Registry) {
			jobs.MustRegister(reg, "stubborn", func(context.Context, *jobs.Job[sleepPayload]) (jobs.NoResult, error) {
				<-release
				return jobs.NoResult{}, nil
			}, nil)
		})
		id := r.enqueue(t, "stubborn", `{}`)
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		r.worker.HandleSQS(ctx, sqsEvent(message.Encode(id)))
		if rec := r.get(t, id); rec.ErrorCode != jobs.CodeTimedOut {
			t.Fatalf("job %s %q, want failed timed_out", rec.Status, rec.ErrorCode)
		}
		if n := r.worker.Abandoned(); n != 1 {
			t.Fatalf("Abandoned() = %d, want 1 while the handler runs on", n)
		}
		if !strings.Contains(r.log(), `"abandoned_running":1`) {
			t.Fatalf("the abandonment is not logged with its count:\n%s", r.log())
		}
		if got, _ := value(parseEMF(t, emf.String()), "HandlersAbandoned", map[string]string{"kind": "stubborn"}); got != 1 {
			t.Fatalf("HandlersAbandoned = %v, want 1", got)
		}
		close(release)
		synctest.Wait()
		if n := r.worker.Abandoned(); n != 0 {
			t.Fatalf("Abandoned() = %d after the handler returned, want 0", n)
		}
	})
}

// stallGetStore blocks every Get until its context ends.
type stallGetStore struct{ *jobstest.MemStore }

func (s stallGetStore) Get(ctx context.Context, id string) (*driver.Record, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// The sweeper's pages are bounded by its stop time: a stalled
// read cannot keep it past its deadline.
func TestSweepCallsEndBeforeItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := jobstest.NewMemStore(nil)
		now := time.Now()
		rec := jobstest.NewRecord(wire.NewID(), now.Add(-time.Hour))
		rec.SweepAt = now.Add(-time.Minute)
		if err := mem.Create(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		sw, _ := testroles.Sweeper(jobs.Config{Registry: jobs.NewRegistry(), Store: stallGetStore{mem}, Queue: &jobstest.MemQueue{}})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		deadline, _ := ctx.Deadline()
		rep, err := sw.Sweep(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !time.Now().Before(deadline) {
			t.Fatal("the sweep ran past its deadline")
		}
		if rep.Errors != 1 || rep.Complete {
			t.Fatalf("report %+v, want the stalled job counted as an error and the sweep incomplete", rep)
		}
	})
}
