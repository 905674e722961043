package jobs_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

type exportPayload struct{ Chunks, PerRun int }

type exportState struct{ Next int }

// chunkLog records each chunk a handler processed, to show none ran twice.
type chunkLog struct {
	mu   sync.Mutex
	runs map[int]int
}

func (l *chunkLog) did(i int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.runs == nil {
		l.runs = map[int]int{}
	}
	l.runs[i]++
}

func (l *chunkLog) twice() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int
	for i, n := range l.runs {
		if n > 1 {
			out = append(out, i)
		}
	}
	return out
}

// A job longer than one run goes on through continuations: each run
// resumes from the checkpoint the last one stored, none spends an attempt,
// no chunk is processed twice, and the checkpoint never shows in the API.
func TestContinuationsResumeFromTheCheckpoint(t *testing.T) {
	ctx := context.Background()
	reg := jobs.NewRegistry()
	var chunks chunkLog
	runs := 0
	export := jobs.MustRegister(reg, "export", func(ctx context.Context, job *jobs.Job[exportPayload]) (jobs.JSON[int], error) {
		runs++
		var st exportState
		if _, err := job.Resume(&st); err != nil {
			return jobs.JSON[int]{}, err
		}
		for done := 0; st.Next < job.Payload.Chunks; done++ {
			if done == job.Payload.PerRun {
				return jobs.JSON[int]{}, jobs.Continue(st)
			}
			chunks.did(st.Next)
			st.Next++
			if err := job.Checkpoint(ctx, st); err != nil {
				return jobs.JSON[int]{}, err
			}
		}
		return jobs.JSON[int]{V: st.Next}, nil
	}, nil)
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := export.Enqueue(ctx, r.Service, "o", exportPayload{Chunks: 10, PerRun: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	v, err := r.Service.Get(ctx, "o", res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != jobs.StatusSucceeded || v.Attempt != 1 || string(v.Result) != "10" || runs != 4 {
		t.Fatalf("%s attempt %d result %s after %d runs, want succeeded on attempt 1 with 10 chunks in 4 runs", v.Status, v.Attempt, v.Result, runs)
	}
	if twice := chunks.twice(); len(twice) > 0 {
		t.Fatalf("chunks %v processed twice", twice)
	}
	if strings.Contains(string(v.Payload)+string(v.Result), "Next") {
		t.Fatalf("the checkpoint shows in the API: %s %s", v.Payload, v.Result)
	}
}

// A run that dies after storing a checkpoint is retried from it: the
// chunks whose checkpoint landed do not run again.
func TestARetryResumesFromTheLastLandedCheckpoint(t *testing.T) {
	ctx := context.Background()
	reg := jobs.NewRegistry()
	var chunks chunkLog
	export := jobs.MustRegister(reg, "export", func(ctx context.Context, job *jobs.Job[exportPayload]) (jobs.JSON[int], error) {
		var st exportState
		if _, err := job.Resume(&st); err != nil {
			return jobs.JSON[int]{}, err
		}
		for ; st.Next < job.Payload.Chunks; st.Next++ {
			chunks.did(st.Next)
			if job.Attempt == 1 && st.Next == 4 {
				panic("the worker dies with chunk 4 done but not checkpointed")
			}
			if err := job.Checkpoint(ctx, exportState{Next: st.Next + 1}); err != nil {
				return jobs.JSON[int]{}, err
			}
		}
		return jobs.JSON[int]{V: st.Next}, nil
	}, &jobs.KindOpts{Retry: jobs.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Second, RetryErrors: true}})
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	res, _ := export.Enqueue(ctx, r.Service, "o", exportPayload{Chunks: 8}, nil)
	for range 3 {
		if _, err := r.Work(ctx); err != nil {
			t.Fatal(err)
		}
		r.Clock.Advance(time.Minute)
	}
	v, _ := r.Service.Get(ctx, "o", res.Job.ID)
	if v.Status != jobs.StatusSucceeded || v.Attempt != 2 || string(v.Result) != "8" {
		t.Fatalf("%s attempt %d result %s, want succeeded on attempt 2", v.Status, v.Attempt, v.Result)
	}
	// Chunk 4 ran twice (its checkpoint never landed); no other did.
	if twice := chunks.twice(); len(twice) != 1 || twice[0] != 4 {
		t.Fatalf("chunks processed twice: %v, want only 4 (its checkpoint never landed)", twice)
	}
}

// A kind's longest run time bounds a job through its continuations: past
// it the job ends timed_out, not retried.
func TestMaxRunTimeEndsAJobThatGoesOnTooLong(t *testing.T) {
	ctx := context.Background()
	reg := jobs.NewRegistry()
	var r *jobstest.Runner
	forever := jobs.MustRegister(reg, "forever", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.NoResult, error) {
		r.Clock.Advance(time.Minute) // each run takes a minute
		return jobs.NoResult{}, jobs.Continue(nil)
	}, &jobs.KindOpts{MaxRunTime: 10 * time.Minute, Retry: jobs.RetryPolicy{MaxAttempts: 5}})
	var err error
	if r, err = jobstest.NewRunner(reg); err != nil {
		t.Fatal(err)
	}
	res, _ := forever.Enqueue(ctx, r.Service, "o", struct{}{}, nil)
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	v, _ := r.Service.Get(ctx, "o", res.Job.ID)
	if v.Status != jobs.StatusFailed || v.Error == nil || *v.Error != jobs.CodeTimedOut || v.Attempt != 1 {
		t.Fatalf("%s %v attempt %d, want failed timed_out on attempt 1 (not retried)", v.Status, v.Error, v.Attempt)
	}
}

// A manual retry of a job that ended timed_out past its kind's longest run
// counts that bound from its own first start: it runs (rather than ending
// timed_out at its claim, as it did when the bound counted from the first
// run's start), and is bounded again by MaxRunTime.
func TestMaxRunTimeOfAManualRetryCountsFromItsOwnStart(t *testing.T) {
	ctx := context.Background()
	reg := jobs.NewRegistry()
	var r *jobstest.Runner
	runs := 0
	forever := jobs.MustRegister(reg, "forever", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.NoResult, error) {
		runs++
		r.Clock.Advance(time.Minute)
		return jobs.NoResult{}, jobs.Continue(nil)
	}, &jobs.KindOpts{MaxRunTime: 10 * time.Minute})
	var err error
	if r, err = jobstest.NewRunner(reg); err != nil {
		t.Fatal(err)
	}
	res, _ := forever.Enqueue(ctx, r.Service, "o", struct{}{}, nil)
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	first := runs
	r.Clock.Advance(time.Hour)
	if _, err := r.Service.Resubmit(ctx, "o", res.Job.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	v, _ := r.Service.Get(ctx, "o", res.Job.ID)
	if again := runs - first; again < 9 || v.Status != jobs.StatusFailed || v.Error == nil || *v.Error != jobs.CodeTimedOut {
		t.Fatalf("the retry ran %d times and ended %s %v; want about ten runs (its own 10 minutes), then failed timed_out", again, v.Status, v.Error)
	}
}

// A run that heartbeats holds its job by a short lease it keeps renewing:
// for five dispatch graces the sweeper leaves it running; once it stops,
// the sweeper interrupts it within one lease.
func TestHeartbeatsKeepALongRunAliveAndTheirAbsenceEndsIt(t *testing.T) {
	ctx := context.Background()
	clock := jobstest.NewClock(jobstest.Epoch)
	store := jobstest.NewMemStore(clock)
	const grace, lease = time.Minute, 20 * time.Second
	sweeper, err := testroles.Sweeper(jobs.Config{Registry: jobs.NewRegistry(), Store: store, Queue: &jobstest.MemQueue{}, Clock: clock, DispatchGrace: grace})
	if err != nil {
		t.Fatal(err)
	}
	rec := jobstest.NewRecord(wire.NewID(), clock.Now())
	rec.SweepAt = clock.Now().Add(grace)
	if err := store.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	token := wire.NewID()
	if _, err := store.Claim(ctx, rec.ID, driver.Claim{Token: token, At: clock.Now(), LeaseUntil: clock.Now().Add(lease)}); err != nil {
		t.Fatal(err)
	}
	for clock.Now().Before(jobstest.Epoch.Add(5 * grace)) {
		clock.Advance(lease / 2)
		if err := store.Heartbeat(ctx, rec.ID, token, driver.Heartbeat{LeaseUntil: clock.Now().Add(lease), At: clock.Now()}); err != nil {
			t.Fatalf("heartbeat at %v: %v", clock.Now().Sub(jobstest.Epoch), err)
		}
		if _, err := sweeper.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if got, _ := store.Get(ctx, rec.ID); got.Status != jobs.StatusRunning {
			t.Fatalf("a heartbeating run was %s at %v", got.Status, clock.Now().Sub(jobstest.Epoch))
		}
	}
	last := clock.Now()
	for clock.Now().Before(last.Add(lease)) {
		clock.Advance(time.Second)
		if _, err := sweeper.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(time.Second)
	if _, err := sweeper.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := store.Get(ctx, rec.ID)
	if got.Status != jobs.StatusFailed || got.ErrorCode != jobs.CodeInterrupted {
		t.Fatalf("%v after its last heartbeat: %s %q, want failed interrupted within one lease (%v)", clock.Now().Sub(last), got.Status, got.ErrorCode, lease)
	}
	// A heartbeat from the stale run changes nothing.
	if err := store.Heartbeat(ctx, rec.ID, token, driver.Heartbeat{LeaseUntil: clock.Now().Add(lease), At: clock.Now()}); !errors.As(err, new(*driver.ConflictError)) {
		t.Fatalf("a stale run's heartbeat: %v, want a *driver.ConflictError", err)
	}
}

// A kind with heartbeats starts its run with one (its lease shrinks from
// the invocation's deadline to a heartbeat), and Job.Heartbeat renews it.
func TestAHeartbeatKindsRunHoldsAShortLease(t *testing.T) {
	ctx := context.Background()
	reg := jobs.NewRegistry()
	var r *jobstest.Runner
	var leases []time.Duration
	beat := jobs.MustRegister(reg, "beat", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.NoResult, error) {
		rec, _ := jobs.DriverOf(r.Service).Get(ctx, job.ID)
		leases = append(leases, rec.LeaseUntil.Sub(r.Clock.Now()))
		r.Clock.Advance(10 * time.Second)
		if err := job.Heartbeat(ctx); err != nil {
			return jobs.NoResult{}, err
		}
		rec, _ = jobs.DriverOf(r.Service).Get(ctx, job.ID)
		leases = append(leases, rec.LeaseUntil.Sub(r.Clock.Now()))
		return jobs.NoResult{}, nil
	}, &jobs.KindOpts{Heartbeat: 30 * time.Second})
	var err error
	if r, err = jobstest.NewRunner(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := beat.Enqueue(ctx, r.Service, "o", struct{}{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	if len(leases) != 2 || leases[0] != 30*time.Second || leases[1] != 30*time.Second {
		t.Fatalf("leases left %v, want 30s at the start and 30s after a heartbeat", leases)
	}
}

// A kind with AutoContinue whose handler runs out of handler time goes on
// in a new invocation from its last checkpoint, no attempt spent, instead
// of failing timed_out.
func TestAutoContinueWhenTheHandlerTimeRunsOut(t *testing.T) {
	store, queue := jobstest.NewMemStore(nil), &jobstest.MemQueue{}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "slow", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.NoResult, error) {
		if err := job.Checkpoint(ctx, exportState{Next: 7}); err != nil {
			return jobs.NoResult{}, err
		}
		<-ctx.Done()
		return jobs.NoResult{}, ctx.Err()
	}, &jobs.KindOpts{AutoContinue: true})
	key := make([]byte, 32)
	sealer, _ := jobs.NewAESSealer(key)
	svc, _ := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: queue, Sealer: sealer})
	w, err := testroles.Worker(jobs.Config{Registry: reg, Store: store, Queue: queue, Sealer: sealer,
		Deadlines: jobs.Deadlines{Reserve: 600 * time.Millisecond, FinalWrite: 100 * time.Millisecond, Call: 100 * time.Millisecond, MinRun: 100 * time.Millisecond, Safety: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "o", Kind: "slow", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	if resp, _ := w.HandleSQS(ctx, sqsEvent(message.Encode(res.Job.ID))); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	got, _ := store.Get(context.Background(), res.Job.ID)
	if got.Status != jobs.StatusQueued || got.Attempt != 0 || got.Continuations != 1 || len(got.Checkpoint) == 0 {
		t.Fatalf("%s attempt %d continuations %d checkpoint %d bytes, want queued to continue with its checkpoint, no attempt spent",
			got.Status, got.Attempt, got.Continuations, len(got.Checkpoint))
	}
	if sent := queue.Sent(); len(sent) != 2 || sent[1] != res.Job.ID {
		t.Fatalf("sent %v, want the enqueue and the continuation", sent)
	}
}

// Lambda Managed Instances run several invocations of the worker in one
// process at once, which the Runtime Interface Emulator cannot: one
// Worker's HandleSQS called from many goroutines at once (under -race in
// make test) runs every job once, its long-run handles included.
func TestOneWorkerServesConcurrentInvocations(t *testing.T) {
	store, queue := jobstest.NewMemStore(nil), &jobstest.MemQueue{}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "export", func(ctx context.Context, job *jobs.Job[exportPayload]) (jobs.JSON[int], error) {
		var st exportState
		if _, err := job.Resume(&st); err != nil {
			return jobs.JSON[int]{}, err
		}
		for ; st.Next < job.Payload.Chunks; st.Next++ {
			if err := job.Checkpoint(ctx, exportState{Next: st.Next + 1}); err != nil {
				return jobs.JSON[int]{}, err
			}
			if err := job.Heartbeat(ctx); err != nil {
				return jobs.JSON[int]{}, err
			}
		}
		return jobs.JSON[int]{V: st.Next}, nil
	}, &jobs.KindOpts{Heartbeat: time.Minute})
	key := make([]byte, 32)
	sealer, _ := jobs.NewAESSealer(key)
	svc, _ := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: queue, Sealer: sealer})
	w, err := testroles.Worker(jobs.Config{Registry: reg, Store: store, Queue: queue, Sealer: sealer, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	const invocations, perBatch = 8, 5
	var ids []string
	for range invocations * perBatch {
		res, err := svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "o", Kind: "export", Payload: []byte(`{"Chunks":20}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Job.ID)
	}
	var wg sync.WaitGroup
	for i := range invocations {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var msgs []string
			for _, id := range ids[i*perBatch : (i+1)*perBatch] {
				msgs = append(msgs, message.Encode(id))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if resp, _ := w.HandleSQS(ctx, sqsEvent(msgs...)); len(resp.BatchItemFailures) != 0 {
				t.Errorf("invocation %d: failures %v", i, resp.BatchItemFailures)
			}
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if rec, _ := store.Get(context.Background(), id); rec.Status != jobs.StatusSucceeded || rec.Attempt != 1 {
			t.Fatalf("job %s: %s attempt %d", id, rec.Status, rec.Attempt)
		}
	}
}

// Every message the system sends for a job carries its tenant's group id
// (SQS fair queues serve tenants fairly by it): the enqueue, a batch's
// jobs, a retry, a continuation, the sweeper's re-send and a resubmit.
func TestEverySendCarriesTheTenantsGroup(t *testing.T) {
	ctx := context.Background()
	clock := jobstest.NewClock(jobstest.Epoch)
	store, queue := jobstest.NewMemStore(clock), &jobstest.MemQueue{}
	reg := jobs.NewRegistry()
	first := map[string]bool{}
	var mu sync.Mutex
	jobs.MustRegister(reg, "steps", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.NoResult, error) {
		mu.Lock()
		defer mu.Unlock()
		if !first[job.ID] {
			first[job.ID] = true
			return jobs.NoResult{}, jobs.Continue(nil) // a continuation
		}
		return jobs.NoResult{}, jobs.Retry(errors.New("again")) // then retries until out of attempts
	}, &jobs.KindOpts{Retry: jobs.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Second}})
	svc, _ := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: queue, Clock: clock})
	w, _ := testroles.Worker(jobs.Config{Registry: reg, Store: store, Queue: queue, Clock: clock})
	sw, _ := testroles.Sweeper(jobs.Config{Registry: jobs.NewRegistry(), Store: store, Queue: queue, Clock: clock})
	a, err := svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "service-role", Kind: "steps", Payload: []byte(`{}`), EnqueueOpts: jobs.EnqueueOpts{Tenant: "customer-a"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := svc.EnqueueBatch(ctx, jobs.BatchRequest{Owner: "service-role", Jobs: []jobs.JobSpec{{Kind: "steps", Payload: []byte(`{}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{a.Job.ID: wire.GroupID(wire.TenantOf("service-role", "customer-a")), wire.BatchJobID(b.Batch.ID, 0): wire.GroupID("service-role")}
	for range 4 { // run what was sent: continuations, retries
		for _, m := range queue.Messages() {
			_, _ = w.HandleSQS(ctx, sqsEvent(message.Encode(m.JobID)))
		}
		clock.Advance(time.Minute)
	}
	clock.Advance(time.Hour)
	if _, err := sw.Sweep(ctx); err != nil { // re-sends what is still queued
		t.Fatal(err)
	}
	if _, err := svc.Resubmit(ctx, "service-role", a.Job.ID); err != nil {
		t.Fatal(err)
	}
	msgs := queue.Messages()
	if len(msgs) < 6 {
		t.Fatalf("only %d messages sent: the scenario did not exercise the paths", len(msgs))
	}
	for _, m := range msgs {
		if m.Group == "" || m.Group != want[m.JobID] {
			t.Errorf("message %+v: group %q, want %q", m, m.Group, want[m.JobID])
		}
	}
}

type paddedState struct {
	Next int
	Pad  string
}

// A checkpoint is bounded: over 64 KiB sealed, Job.Checkpoint refuses it
// as too large and stores nothing (the next run resumes
// from the last one that fitted); one under the cap is stored. A run that
// ends with Continue and an oversized checkpoint fails internal_error.
func TestAnOversizedCheckpointIsRefused(t *testing.T) {
	store, queue := jobstest.NewMemStore(nil), &jobstest.MemQueue{}
	reg := jobs.NewRegistry()
	over := paddedState{Next: 99, Pad: strings.Repeat("x", driver.MaxCheckpointBytes)}
	var refused, fitted error
	var resumed []int
	jobs.MustRegister(reg, "big", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.NoResult, error) {
		var st paddedState
		if _, err := job.Resume(&st); err != nil {
			return jobs.NoResult{}, err
		}
		resumed = append(resumed, st.Next)
		if len(resumed) > 1 {
			return jobs.NoResult{}, jobs.Continue(over)
		}
		// 40 KiB of JSON is about 54 KiB sealed: under the cap.
		fitted = job.Checkpoint(ctx, paddedState{Next: 1, Pad: strings.Repeat("y", 40<<10)})
		refused = job.Checkpoint(ctx, over)
		return jobs.NoResult{}, jobs.Continue(nil)
	}, nil)
	sealer, _ := jobs.NewAESSealer(make([]byte, 32))
	svc, _ := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: queue, Sealer: sealer})
	w, err := testroles.Worker(jobs.Config{Registry: reg, Store: store, Queue: queue, Sealer: sealer, CancelCheck: -1})
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "o", Kind: "big", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the run, then its continuation
		if resp, _ := w.HandleSQS(context.Background(), sqsEvent(message.Encode(res.Job.ID))); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("failures %v", resp.BatchItemFailures)
		}
	}
	if fitted != nil {
		t.Fatalf("a checkpoint under the cap: %v, want stored", fitted)
	}
	if refused == nil || !strings.Contains(refused.Error(), "checkpoint too large") || strings.Contains(refused.Error(), "xxx") {
		t.Fatalf("an oversized checkpoint: %v, want it refused as too large, without its content", refused)
	}
	if len(resumed) != 2 || resumed[1] != 1 {
		t.Fatalf("runs resumed from %v, want 0 then 1 (the oversized checkpoint was not stored)", resumed)
	}
	got, _ := store.Get(context.Background(), res.Job.ID)
	if got.Status != jobs.StatusFailed || got.ErrorCode != jobs.CodeInternal || len(got.Checkpoint) > driver.MaxCheckpointBytes {
		t.Fatalf("%s %q with a %d-byte checkpoint, want failed internal_error (Continue with an oversized checkpoint), the last one kept",
			got.Status, got.ErrorCode, len(got.Checkpoint))
	}
}

// The worker's own heartbeat path on fake time (testing/synctest): a
// handler of a kind with a 30 s heartbeat lease that calls Job.Heartbeat
// in a loop for five dispatch graces, in one 15-minute invocation, while
// a Sweeper sweeps every minute, is never interrupted (the sweeper looks
// at it and defers it) and ends succeeded on its first attempt. Then a
// run whose worker dies (its handler blocks, its invocation makes no
// call again) is interrupted by the sweeper once its lease has ended: no
// earlier, and no later than the first sweep after it (a lease and a
// sweeper period after its last heartbeat), long before the invocation's
// deadline, the lease a run without heartbeats holds.
func TestWorkerHeartbeatsKeepARunAliveOnFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			grace, lease, sweepEvery = 2 * time.Minute, 30 * time.Second, time.Minute
			invocation               = 15 * time.Minute
		)
		ctx := context.Background()
		store, queue := jobstest.NewMemStore(nil), &jobstest.MemQueue{}
		reg := jobs.NewRegistry()
		dead := make(chan struct{}) // the dying run blocks on it
		var mu sync.Mutex
		lastBeat := map[string]time.Time{}
		// The worker's store: once its instance died, nothing it sends
		// lands (the worker would otherwise keep the lease of a handler
		// that blocks).
		workerStore := &diesStore{MemStore: store}
		jobs.MustRegister(reg, "beat", func(ctx context.Context, job *jobs.Job[struct{ Die bool }]) (jobs.NoResult, error) {
			start := time.Now()
			for time.Since(start) < 5*grace {
				if job.Payload.Die && time.Since(start) >= grace {
					workerStore.dead.Store(true)
					<-dead // the worker died: nothing more from this run
					return jobs.NoResult{}, nil
				}
				time.Sleep(lease / 2)
				if err := job.Heartbeat(ctx); err != nil {
					return jobs.NoResult{}, err
				}
				mu.Lock()
				lastBeat[job.ID] = time.Now()
				mu.Unlock()
			}
			return jobs.NoResult{}, nil
		}, &jobs.KindOpts{Lane: "long", Heartbeat: lease})
		svc, _ := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: queue, DispatchGrace: grace})
		w, err := testroles.Worker(jobs.Config{Registry: reg, Store: workerStore, Queue: queue, Lane: "long", DispatchGrace: grace, CancelCheck: -1})
		if err != nil {
			t.Fatal(err)
		}
		sw, err := testroles.Sweeper(jobs.Config{Store: store, Queue: queue, Registry: reg, DispatchGrace: grace})
		if err != nil {
			t.Fatal(err)
		}
		// The sweeper, every minute; each sweep's report.
		var reps []jobs.SweepReport
		sweepCtx, stopSweeps := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer func() { // also on a failure: the bubble ends with its goroutines
			close(dead)
			stopSweeps()
			wg.Wait()
		}()
		wg.Go(func() {
			tick := time.NewTicker(sweepEvery)
			defer tick.Stop()
			for {
				select {
				case <-sweepCtx.Done():
					return
				case <-tick.C:
				}
				rep, err := sw.Sweep(ctx)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				reps = append(reps, rep)
				mu.Unlock()
			}
		})
		// invoke runs one worker invocation of the job, as the long lane's
		// event source would, in its own goroutine.
		invoke := func(id string) {
			wg.Go(func() {
				ictx, cancel := context.WithTimeout(ctx, invocation)
				defer cancel()
				_, _ = w.HandleSQS(ictx, sqsEvent(message.Encode(id)))
			})
		}
		enqueue := func(payload string) string {
			res, err := svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "beat", Payload: []byte(payload)})
			if err != nil {
				t.Fatal(err)
			}
			return res.Job.ID
		}

		// 1. Heartbeats for five dispatch graces: never interrupted.
		alive := enqueue(`{"Die":false}`)
		start := time.Now()
		invoke(alive)
		for rec, _ := store.Get(ctx, alive); !rec.Status.Final(); rec, _ = store.Get(ctx, alive) {
			if rec.Status != jobs.StatusRunning && rec.Status != jobs.StatusQueued {
				t.Fatalf("the heartbeating run is %s at %v", rec.Status, time.Since(start))
			}
			time.Sleep(time.Second)
		}
		took := time.Since(start)
		rec, _ := store.Get(ctx, alive)
		mu.Lock()
		var deferred, interrupted int
		for _, r := range reps {
			deferred, interrupted = deferred+r.Deferred, interrupted+r.Interrupted
		}
		mu.Unlock()
		if rec.Status != jobs.StatusSucceeded || rec.Attempt != 1 || took < 5*grace || interrupted != 0 {
			t.Fatalf("after %v: %s on attempt %d, %d interrupted by the sweeper; want succeeded on attempt 1 after 5 graces (%v), never interrupted",
				took, rec.Status, rec.Attempt, interrupted, 5*grace)
		}
		if deferred < 5 {
			t.Fatalf("the sweeper deferred the run %d times in %v: it did not judge it by its lease", deferred, took)
		}

		// 2. Its worker dies after a grace of heartbeats.
		dying := enqueue(`{"Die":true}`)
		invoke(dying)
		for rec, _ := store.Get(ctx, dying); !rec.Status.Final(); rec, _ = store.Get(ctx, dying) {
			time.Sleep(time.Second)
		}
		found := time.Now()
		rec, _ = store.Get(ctx, dying)
		mu.Lock()
		last := lastBeat[dying]
		mu.Unlock()
		after := found.Sub(last)
		if rec.Status != jobs.StatusFailed || rec.ErrorCode != jobs.CodeInterrupted {
			t.Fatalf("the dead run: %s %q, want failed interrupted", rec.Status, rec.ErrorCode)
		}
		if bound := lease + sweepEvery + time.Second; after < lease || after > bound {
			t.Fatalf("the dead run was interrupted %v after its last heartbeat, want after its %v lease and by the next sweep (%v); its invocation's deadline was %v",
				after, lease, bound, invocation)
		}
		t.Logf("heartbeating run: %v, deferred %d times; dead run interrupted %v after its last heartbeat", took, deferred, after)
	})
}

// diesStore is a worker's store once its instance died: its heartbeats
// no longer land.
type diesStore struct {
	*jobstest.MemStore
	dead atomic.Bool
}

func (s *diesStore) Heartbeat(ctx context.Context, id, token string, hb driver.Heartbeat) error {
	if s.dead.Load() {
		return errors.New("the worker's instance is gone")
	}
	return s.MemStore.Heartbeat(ctx, id, token, hb)
}

// A heartbeat kind's handler that stops heartbeating for longer than its
// lease (a long step; winding down after a cancel) while its invocation
// lives: the worker keeps the lease, so the sweeper defers the run rather
// than ending it and letting a retry start beside the handler.
func TestWorkerKeepsTheLeaseWhileItsHandlerRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease, sweepEvery, step = 30 * time.Second, time.Minute, 3 * time.Minute
		ctx := context.Background()
		store, queue := jobstest.NewMemStore(nil), &jobstest.MemQueue{}
		reg := jobs.NewRegistry()
		var running, overlaps atomic.Int32
		jobs.MustRegister(reg, "slow", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.NoResult, error) {
			if running.Add(1) > 1 {
				overlaps.Add(1)
			}
			defer running.Add(-1)
			if err := job.Heartbeat(ctx); err != nil {
				return jobs.NoResult{}, err
			}
			time.Sleep(step) // six leases without a heartbeat of its own
			return jobs.NoResult{}, nil
		}, &jobs.KindOpts{Lane: "long", Heartbeat: lease, Retry: jobs.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Second}})
		svc, _ := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: queue})
		w, err := testroles.Worker(jobs.Config{Registry: reg, Store: store, Queue: queue, Lane: "long", CancelCheck: -1})
		if err != nil {
			t.Fatal(err)
		}
		sw, err := testroles.Sweeper(jobs.Config{Store: store, Queue: queue, Registry: reg})
		if err != nil {
			t.Fatal(err)
		}
		res, err := svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "slow", Payload: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		id := res.Job.ID
		var wg sync.WaitGroup
		wg.Go(func() {
			ictx, cancel := context.WithTimeout(ctx, 15*time.Minute)
			defer cancel()
			_, _ = w.HandleSQS(ictx, sqsEvent(message.Encode(id)))
		})
		var interrupted int
		for range 5 {
			time.Sleep(sweepEvery)
			rep, err := sw.Sweep(ctx)
			if err != nil {
				t.Fatal(err)
			}
			interrupted += rep.Interrupted + rep.Retried
			if interrupted > 0 {
				// What a redelivery would do next: run the retry beside the
				// first run's handler.
				wg.Go(func() {
					ictx, cancel := context.WithTimeout(ctx, 15*time.Minute)
					defer cancel()
					_, _ = w.HandleSQS(ictx, sqsEvent(message.Encode(id)))
				})
				break
			}
		}
		wg.Wait()
		rec, _ := store.Get(ctx, id)
		if interrupted != 0 || overlaps.Load() != 0 || rec.Status != jobs.StatusSucceeded || rec.Attempt != 1 {
			t.Fatalf("a handler %v without heartbeats of its own: the sweeper ended its run %d times, %d runs overlapped; the job is %s on attempt %d; want it kept, succeeded on attempt 1",
				step, interrupted, overlaps.Load(), rec.Status, rec.Attempt)
		}
	})
}

// A run whose job another run took over (its lease lapsed and a retry
// claimed it) is ended by the worker's periodic check: its handler's
// context ends, since its work is no longer the job's.
func TestCancelCheckEndsARunThatWasTakenOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store, queue := jobstest.NewMemStore(nil), &jobstest.MemQueue{}
		reg := jobs.NewRegistry()
		ended := make(chan time.Duration, 1)
		jobs.MustRegister(reg, "k", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.NoResult, error) {
			start := time.Now()
			select {
			case <-ctx.Done():
				ended <- time.Since(start)
			case <-time.After(time.Minute):
				ended <- -1
			}
			return jobs.NoResult{}, nil
		}, nil)
		svc, _ := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: queue})
		w, err := testroles.Worker(jobs.Config{Registry: reg, Store: store, Queue: queue, CancelCheck: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		res, err := svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "k", Payload: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		id := res.Job.ID
		var wg sync.WaitGroup
		wg.Go(func() {
			ictx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			defer cancel()
			_, _ = w.HandleSQS(ictx, sqsEvent(message.Encode(id)))
		})
		time.Sleep(2500 * time.Millisecond)
		// Another run takes the job over.
		cur, _ := store.Get(ctx, id)
		now := time.Now()
		if err := store.Requeue(ctx, id, cur.ClaimToken, driver.Requeue{At: now, RunAt: now, SweepAt: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Claim(ctx, id, driver.Claim{Token: "other", At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if d := <-ended; d < 0 || d > 4*time.Second {
			t.Fatalf("the taken-over run's handler ran on for %v; want its context ended at the next check (1 s)", d)
		}
		wg.Wait()
		if rec, _ := store.Get(ctx, id); rec.Status != jobs.StatusRunning || rec.ClaimToken != "other" {
			t.Fatalf("the taken-over run wrote over the new one: %s under %q", rec.Status, rec.ClaimToken)
		}
	})
}
