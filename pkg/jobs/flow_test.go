package jobs_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// Flow control (docs/guide/FLOW_CONTROL.md) under testing/synctest: a model of SQS's
// receive counts and dead-letter queue, workers polling it at once, and
// handlers that count how many of them run.

// sqsSim is what these tests need of SQS: a received message is deleted
// when its record succeeded, or, given back, received again after the
// visibility timeout with its receive count up, and moved to the
// dead-letter queue at its maxReceive-th receive; a send is a new message.
type sqsSim struct {
	visibility time.Duration
	maxReceive int
	timeout    time.Duration // each invocation's, the Lambda timeout

	mu       sync.Mutex
	seq      int
	msgs     []*simMsg
	dlq      []string
	receives map[string]int // job id -> the most receives of one of its messages
	// now counts the messages sent without a delay: enqueues and wakes.
	now int
}

type simMsg struct {
	id, jobID string
	visible   time.Time
	receives  int
}

func newSQSSim() *sqsSim {
	return &sqsSim{visibility: 30 * time.Second, maxReceive: 5, timeout: time.Minute, receives: map[string]int{}}
}

func (q *sqsSim) Send(_ context.Context, msgs ...driver.Message) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range msgs {
		q.seq++
		q.msgs = append(q.msgs, &simMsg{id: fmt.Sprint("m", q.seq), jobID: m.JobID, visible: time.Now().Add(m.Delay)})
		if m.Delay == 0 {
			q.now++
		}
	}
	return nil
}

// receive takes up to n visible messages, hiding each for the
// visibility timeout.
func (q *sqsSim) receive(n int) []*simMsg {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []*simMsg
	now := time.Now()
	for _, m := range q.msgs {
		if len(out) == n {
			break
		}
		if !m.visible.After(now) {
			m.visible = now.Add(q.visibility)
			m.receives++
			q.receives[m.jobID] = max(q.receives[m.jobID], m.receives)
			out = append(out, m)
		}
	}
	return out
}

// settle deletes the batch's messages that succeeded; one given back
// stays hidden until its visibility timeout, or goes to the DLQ.
func (q *sqsSim) settle(batch []*simMsg, resp events.SQSEventResponse) {
	q.mu.Lock()
	defer q.mu.Unlock()
	back := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		back[f.ItemIdentifier] = true
	}
	q.msgs = slices.DeleteFunc(q.msgs, func(m *simMsg) bool {
		if !slices.Contains(batch, m) {
			return false
		}
		if back[m.id] && m.receives >= q.maxReceive {
			q.dlq = append(q.dlq, m.jobID)
			return true
		}
		return !back[m.id]
	})
}

// poll runs w over the queue until ctx ends: batches of ten, each one
// invocation of a Lambda with q.timeout.
func (q *sqsSim) poll(ctx context.Context, w *jobs.Worker) {
	for ctx.Err() == nil {
		batch := q.receive(10)
		if len(batch) == 0 {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		var ev events.SQSEvent
		for _, m := range batch {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: m.id, Body: message.Encode(m.jobID)})
		}
		ictx, cancel := context.WithTimeout(ctx, q.timeout)
		resp, _ := w.HandleSQS(ictx, ev)
		cancel()
		q.settle(batch, resp)
	}
}

// gauge counts the handlers running at once, overall and per key.
type gauge struct {
	mu            sync.Mutex
	now, peak     int
	byKey, keyMax map[string]int
	starts        []time.Time
}

func (g *gauge) hold(key string, d time.Duration) {
	g.mu.Lock()
	if g.byKey == nil {
		g.byKey, g.keyMax = map[string]int{}, map[string]int{}
	}
	g.now++
	g.peak = max(g.peak, g.now)
	g.byKey[key]++
	g.keyMax[key] = max(g.keyMax[key], g.byKey[key])
	g.starts = append(g.starts, time.Now())
	g.mu.Unlock()
	time.Sleep(d)
	g.mu.Lock()
	g.now--
	g.byKey[key]--
	g.mu.Unlock()
}

type heldPayload struct {
	Account string `json:"account"`
	N       int    `json:"n"`
}

// flowRig is a service, workers polling an sqsSim, and kinds whose
// handlers hold for hold, counted by g.
type flowRig struct {
	mem   *jobstest.MemStore
	store driver.Store
	q     *sqsSim
	svc   *jobs.Service
	reg   *jobs.Registry
	g     gauge
}

func newFlowRig(t *testing.T, store driver.Store, mem *jobstest.MemStore, register func(r *flowRig)) *flowRig {
	t.Helper()
	r := &flowRig{mem: mem, store: store, q: newSQSSim(), reg: jobs.NewRegistry()}
	register(r)
	var err error
	if r.svc, err = testroles.Service(jobs.Config{Registry: r.reg, Store: store, Queue: r.q}); err != nil {
		t.Fatal(err)
	}
	return r
}

// holding registers kind, whose runs hold for d, counted per account.
func (r *flowRig) holding(kind string, d time.Duration, opts *jobs.KindOpts) {
	jobs.MustRegister(r.reg, kind, func(ctx context.Context, j *jobs.Job[heldPayload]) (jobs.NoResult, error) {
		r.g.hold(j.Payload.Account, d)
		return jobs.NoResult{}, nil
	}, opts)
}

// start runs pollers, each a Worker running up to 10 records at once,
// until the function it returns stops them.
func (r *flowRig) start(t *testing.T, pollers int) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range pollers {
		w, err := testroles.Worker(jobs.Config{Registry: r.reg, Store: r.store, Queue: r.q, Concurrency: 10, CancelCheck: -1})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { r.q.poll(ctx, w) })
	}
	return func() { cancel(); wg.Wait() }
}

func (r *flowRig) enqueue(t *testing.T, kind string, p heldPayload) string {
	t.Helper()
	raw := fmt.Sprintf(`{"account":%q,"n":%d}`, p.Account, p.N)
	res, err := r.svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "o", Kind: kind, Payload: []byte(raw)})
	if err != nil {
		t.Fatal(err)
	}
	return res.Job.ID
}

// waitFinal waits (in bubble time) until every job in ids is final, and
// fails the test after limit.
func (r *flowRig) waitFinal(t *testing.T, ids []string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		done := 0
		for _, id := range ids {
			if rec, err := r.store.Get(context.Background(), id); err == nil && rec.Status.Final() {
				done++
			}
		}
		if done == len(ids) {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("%d of %d jobs final after %v", done, len(ids), limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// assertRanOnce checks each job succeeded on its first attempt, and
// that no message of it was received twice or dead-lettered: waiting
// spent nothing.
func (r *flowRig) assertRanOnce(t *testing.T, ids []string) {
	t.Helper()
	for _, id := range ids {
		rec, err := r.store.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Status != jobs.StatusSucceeded || rec.Attempt != 1 {
			t.Fatalf("job %s: %s after %d attempts, want succeeded on attempt 1", id, rec.Status, rec.Attempt)
		}
	}
	r.q.mu.Lock()
	defer r.q.mu.Unlock()
	if len(r.q.dlq) != 0 {
		t.Fatalf("dead-lettered: %v", r.q.dlq)
	}
	for id, n := range r.q.receives {
		if n > 1 {
			t.Fatalf("a message of job %s was received %d times: waiting counts towards maxReceiveCount", id, n)
		}
	}
}

// A kind limited to 5 runs 5 at once across two workers of 10 handler
// slots each, never 6; the same jobs without the limit run wider. Every
// job succeeds on its first attempt, and no message is received twice.
// A woken waiter is run by the worker whose run freed the slot, with no
// message (only the enqueues are sent at once), on a store whose slots
// pass from run to run (driver.WaiterPopper) and on one whose released
// slot the waiter takes again. Both take about the 4 s of work.
func TestConcurrencyLimitHoldsAcrossWorkers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int
		store func(*jobstest.MemStore) driver.Store
	}{
		{"unlimited", 0, func(m *jobstest.MemStore) driver.Store { return m }},
		{"limit 5, slots passed on", 5, func(m *jobstest.MemStore) driver.Store { return m }},
		{"limit 5, slots released", 5, func(m *jobstest.MemStore) driver.Store { return struct{ driver.Store }{m} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := jobstest.NewMemStore(nil)
				store := tc.store(mem)
				_, passes := store.(driver.WaiterPopper)
				r := newFlowRig(t, store, mem, func(r *flowRig) {
					r.holding("held", 200*time.Millisecond, &jobs.KindOpts{Concurrency: tc.limit})
				})
				var ids []string
				for i := range 100 {
					ids = append(ids, r.enqueue(t, "held", heldPayload{Account: "a", N: i}))
				}
				defer r.start(t, 2)()
				took := r.waitFinal(t, ids, 5*time.Minute)
				r.assertRanOnce(t, ids)
				// 100 runs of 200 ms at 5 at once: 4 s of work. Each release
				// wakes a waiter at once; were waiters left to their backstop
				// (30 s), it would take minutes of the bubble's time.
				if tc.limit > 0 && took > 6*time.Second {
					t.Fatalf("took %v of the bubble's time, want about 4 s: releases wake no waiter?", took)
				}
				switch {
				case tc.limit == 0 && r.g.peak <= 5:
					t.Fatalf("unlimited peak %d: the rig cannot show a limit of 5", r.g.peak)
				case tc.limit > 0 && r.g.peak != tc.limit:
					t.Fatalf("peak %d with a limit of %d", r.g.peak, tc.limit)
				}
				r.q.mu.Lock()
				sent := r.q.now
				r.q.mu.Unlock()
				if tc.limit > 0 && sent != len(ids) {
					t.Fatalf("%d messages sent at once for %d jobs (slots passed on: %v): a woken waiter was sent a message instead of run by the worker that freed its slot", sent, len(ids), passes)
				}
			})
		})
	}
}

// A goroutine that runs the waiters its runs woke gives its invocation
// back after a while (chainFor, 10 s): a backlog of a limited kind whose
// chains hold every worker's invocation does not keep another kind's
// message from being received for longer. Two pollers, two slots of 3 s
// runs and 18 waiters: the chains alone would hold both invocations for
// 27 s.
func TestChainsGiveTheirInvocationsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := jobstest.NewMemStore(nil)
		var quickAt atomic.Value
		r := newFlowRig(t, mem, mem, func(r *flowRig) {
			r.holding("slow", 3*time.Second, &jobs.KindOpts{Concurrency: 2})
			jobs.MustRegister(r.reg, "quick", func(ctx context.Context, j *jobs.Job[heldPayload]) (jobs.NoResult, error) {
				quickAt.Store(time.Now())
				return jobs.NoResult{}, nil
			}, nil)
		})
		var ids []string
		for i := range 20 {
			ids = append(ids, r.enqueue(t, "slow", heldPayload{N: i}))
		}
		t0 := time.Now()
		defer r.start(t, 2)()
		time.Sleep(time.Second)
		quick := r.enqueue(t, "quick", heldPayload{})
		r.waitFinal(t, append(ids, quick), 5*time.Minute)
		r.assertRanOnce(t, append(ids, quick))
		if r.g.peak != 2 {
			t.Fatalf("peak %d with a limit of 2", r.g.peak)
		}
		if got := quickAt.Load().(time.Time).Sub(t0); got > 15*time.Second {
			t.Fatalf("the other kind's job started %v in, want within about 10 s: the chains kept both invocations", got)
		}
	})
}

// A per-key limit of 1 over 10 accounts runs each account alone and the
// 10 at once.
func TestPerKeyLimitRunsEachKeyAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := jobstest.NewMemStore(nil)
		r := newFlowRig(t, mem, mem, func(r *flowRig) {
			r.holding("sync", 200*time.Millisecond, &jobs.KindOpts{ConcurrencyPerKey: 1, LimitKey: "payload.account"})
		})
		var ids []string
		for i := range 50 {
			ids = append(ids, r.enqueue(t, "sync", heldPayload{Account: fmt.Sprint("acct-", i%10), N: i}))
		}
		defer r.start(t, 2)()
		r.waitFinal(t, ids, 5*time.Minute)
		r.assertRanOnce(t, ids)
		for key, n := range r.g.keyMax {
			if n != 1 {
				t.Fatalf("account %s ran %d at once, want 1", key, n)
			}
		}
		if r.g.peak != 10 {
			t.Fatalf("peak %d over 10 accounts, want 10", r.g.peak)
		}
	})
}

// A job that waits for a slot for more than 10 visibility timeouts (the
// slot held by another worker's run meanwhile) is never dead-lettered,
// none of its messages received twice, says what it waits on, and runs
// when the slot frees, on its first attempt.
func TestWaitingForASlotNeverDeadLetters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := jobstest.NewMemStore(nil)
		r := newFlowRig(t, mem, mem, func(r *flowRig) {
			r.holding("one", 0, &jobs.KindOpts{Concurrency: 1})
		})
		id := r.enqueue(t, "one", heldPayload{})
		rec, _ := mem.Get(context.Background(), id)
		wait := 10*r.q.visibility + 5*time.Second
		for _, key := range jobs.SlotKeys(r.reg, rec) {
			if st, err := mem.AcquireSlot(context.Background(), key, driver.SlotClaim{Holder: "elsewhere", Max: 1, LeaseUntil: time.Now().Add(wait), At: time.Now()}); st != driver.SlotHeld || err != nil {
				t.Fatalf("holding the slot: %v %v", st, err)
			}
		}
		defer r.start(t, 1)()
		time.Sleep(wait - time.Second)
		if rec, _ := mem.Get(context.Background(), id); rec.Status != jobs.StatusQueued || rec.WaitingOn != "concurrency" || rec.Attempt != 0 {
			t.Fatalf("after %v the job is %s (waiting on %q) after %d attempts, want queued, waiting on concurrency, no attempt", wait, rec.Status, rec.WaitingOn, rec.Attempt)
		}
		r.waitFinal(t, []string{id}, time.Minute)
		r.assertRanOnce(t, []string{id})
	})
}

// releaseLost drops the releases of one job's slots: its worker died
// after its handler, before it could free them or pass them on.
type releaseLost struct {
	*jobstest.MemStore
	dead    atomic.Value // job id
	holders sync.Map     // the dead job's runs' holders (claim tokens)
}

func (s *releaseLost) AcquireSlot(ctx context.Context, key string, c driver.SlotClaim) (driver.SlotState, error) {
	if c.Waiter == s.dead.Load() {
		s.holders.Store(c.Holder, true)
	}
	return s.MemStore.AcquireSlot(ctx, key, c)
}

func (s *releaseLost) ReleaseSlot(ctx context.Context, key, holder string) (string, error) {
	if _, dead := s.holders.Load(holder); dead {
		return "", nil
	}
	return s.MemStore.ReleaseSlot(ctx, key, holder)
}

func (s *releaseLost) PopWaiter(ctx context.Context, key, holder string) (string, int, error) {
	if _, dead := s.holders.Load(holder); dead {
		return "", 0, nil
	}
	return s.MemStore.PopWaiter(ctx, key, holder)
}

// A slot whose worker died frees itself at the run's lease (the
// invocation's end): the next job waits that long, then runs at its next
// look (no release woke it).
func TestKilledWorkersSlotFreesAtItsLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := jobstest.NewMemStore(nil)
		store := &releaseLost{MemStore: mem}
		started := map[int]time.Time{}
		var mu sync.Mutex
		r := newFlowRig(t, store, mem, func(r *flowRig) {
			jobs.MustRegister(r.reg, "one", func(ctx context.Context, j *jobs.Job[heldPayload]) (jobs.NoResult, error) {
				mu.Lock()
				started[j.Payload.N] = time.Now()
				mu.Unlock()
				return jobs.NoResult{}, nil
			}, &jobs.KindOpts{Concurrency: 1})
		})
		first := r.enqueue(t, "one", heldPayload{N: 0})
		store.dead.Store(first)
		t0 := time.Now()
		defer r.start(t, 1)()
		time.Sleep(time.Second)
		second := r.enqueue(t, "one", heldPayload{N: 1})
		r.waitFinal(t, []string{first, second}, 5*time.Minute)
		r.assertRanOnce(t, []string{first, second})
		mu.Lock()
		defer mu.Unlock()
		// The first run's lease is its invocation's end, a minute after t0;
		// no release woke the waiter, so its backstop (30 s, jittered by
		// half) brings it back after that.
		if got := started[1].Sub(t0); got < time.Minute || got > time.Minute+45*time.Second+time.Second {
			t.Fatalf("the second job started %v after the first, want after the dead run's lease (1m), within a backstop", got)
		}
	})
}

// A rate of 20 a second holds over 30 s of a backlog of 601 (docs/guide/FLOW_CONTROL.md:
// observed starts within 10% of the limit): starts in any sliding second
// at most 20 (a burst of one), in each of the 30 seconds from the first
// start 18 to 20, the whole 30 s within 10%, each job waiting once, on
// its reserved start.
func TestRateLimitKeepsItsRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := jobstest.NewMemStore(nil)
		r := newFlowRig(t, mem, mem, func(r *flowRig) {
			r.holding("call", 10*time.Millisecond, &jobs.KindOpts{RateLimit: 20})
		})
		const n = 601 // 600 intervals of 50 ms: 30 s
		var ids []string
		for i := range n {
			ids = append(ids, r.enqueue(t, "call", heldPayload{N: i}))
		}
		defer r.start(t, 2)()
		took := r.waitFinal(t, ids, 5*time.Minute)
		r.assertRanOnce(t, ids)
		starts := slices.Clone(r.g.starts)
		slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
		for i := range starts {
			j := i
			for j < len(starts) && starts[j].Sub(starts[i]) < time.Second {
				j++
			}
			if j-i > 20 {
				t.Fatalf("%d starts within a second from %v, want at most 20", j-i, starts[i])
			}
		}
		perSecond := make([]int, 30)
		for _, at := range starts {
			if s := int(at.Sub(starts[0]) / time.Second); s < len(perSecond) {
				perSecond[s]++
			}
		}
		for s, got := range perSecond {
			if got < 18 || got > 20 {
				t.Fatalf("%d starts in second %d (all: %v), want 20 within 10%%", got, s, perSecond)
			}
		}
		span := starts[len(starts)-1].Sub(starts[0])
		if rate := float64(n-1) / span.Seconds(); rate < 18 || rate > 22 {
			t.Fatalf("%d starts at 20 a second spanned %v (%.2f a second; all final after %v), want 20 within 10%%", n, span, rate, took)
		}
		t.Logf("%d starts over %v of the bubble's time; per second: %v", n, span, perSecond)
	})
}

// noFlowStore fails a test on any flow control call: a kind with no limit
// and no unique key must pay nothing for the feature (docs/guide/FLOW_CONTROL.md,
// "Costs per job").
type noFlowStore struct {
	driver.Store
	calls atomic.Int32
}

func (s *noFlowStore) AcquireSlot(ctx context.Context, key string, c driver.SlotClaim) (driver.SlotState, error) {
	s.calls.Add(1)
	return s.Store.AcquireSlot(ctx, key, c)
}

func (s *noFlowStore) ReleaseSlot(ctx context.Context, key, holder string) (string, error) {
	s.calls.Add(1)
	return s.Store.ReleaseSlot(ctx, key, holder)
}

func (s *noFlowStore) TakeToken(ctx context.Context, key string, b driver.TokenBucket) (time.Duration, error) {
	s.calls.Add(1)
	return s.Store.TakeToken(ctx, key, b)
}

func (s *noFlowStore) ClaimUnique(ctx context.Context, key string, u driver.UniqueClaim) (string, error) {
	s.calls.Add(1)
	return s.Store.ClaimUnique(ctx, key, u)
}

func (s *noFlowStore) ReleaseUnique(ctx context.Context, key, jobID string) error {
	s.calls.Add(1)
	return s.Store.ReleaseUnique(ctx, key, jobID)
}

func (s *noFlowStore) Debounce(ctx context.Context, id string, d driver.Debounce) error {
	s.calls.Add(1)
	return s.Store.Debounce(ctx, id, d)
}

// A kind with no limit and no unique key makes no flow control call from
// enqueue to outcome, so its requests and write units per job are what
// they were before flow control (docs/evidence/BENCHMARKS.md's figures); a limited
// kind beside it does make them (else this test could not fail).
func TestUnlimitedKindsMakeNoFlowCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := jobstest.NewMemStore(nil)
		store := &noFlowStore{Store: mem}
		r := newFlowRig(t, store, mem, func(r *flowRig) {
			r.holding("plain", 10*time.Millisecond, nil)
			r.holding("limited", 10*time.Millisecond, &jobs.KindOpts{Concurrency: 2})
		})
		var ids []string
		for i := range 20 {
			ids = append(ids, r.enqueue(t, "plain", heldPayload{Account: "a", N: i}))
		}
		defer r.start(t, 2)()
		r.waitFinal(t, ids, time.Minute)
		if n := store.calls.Load(); n != 0 {
			t.Fatalf("20 jobs of a kind without limits made %d flow control calls, want 0", n)
		}
		limited := r.enqueue(t, "limited", heldPayload{Account: "a"})
		r.waitFinal(t, []string{limited}, time.Minute)
		if store.calls.Load() == 0 {
			t.Fatal("a limited kind made no flow control call: the wrapper sees nothing")
		}
	})
}

// rateRig is a Service and a Worker over one store, on one clock, with
// the kind "rated" (at most one start per period; each run calls ran with
// its payload's n), and what its tests do with them.
type rateRig struct {
	t   *testing.T
	svc *jobs.Service
	w   *jobs.Worker
	q   *jobstest.MemQueue
	reg *jobs.Registry
}

func newRateRig(t *testing.T, store driver.Store, clock *jobstest.Clock, ran func(n int), period time.Duration) *rateRig {
	t.Helper()
	r := &rateRig{t: t, q: &jobstest.MemQueue{}, reg: jobs.NewRegistry()}
	jobs.MustRegister(r.reg, "rated", func(ctx context.Context, j *jobs.Job[heldPayload]) (jobs.NoResult, error) {
		ran(j.Payload.N)
		return jobs.NoResult{}, nil
	}, &jobs.KindOpts{RateLimit: 1, RatePeriod: period})
	var err error
	if r.svc, err = testroles.Service(jobs.Config{Registry: r.reg, Store: store, Queue: r.q, Clock: clock}); err != nil {
		t.Fatal(err)
	}
	if r.w, err = testroles.Worker(jobs.Config{Registry: r.reg, Store: store, Queue: r.q, Clock: clock, CancelCheck: -1}); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rateRig) enqueue(n int) string {
	r.t.Helper()
	res, err := r.svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "o", Kind: "rated", Payload: []byte(fmt.Sprintf(`{"n":%d}`, n))})
	if err != nil {
		r.t.Fatal(err)
	}
	return res.Job.ID
}

func (r *rateRig) deliver(id string) {
	r.t.Helper()
	if _, err := r.w.HandleSQS(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: id, Body: message.Encode(id)}}}); err != nil {
		r.t.Fatal(err)
	}
}

// A job parked on a rate limit and delivered after its reserved start (its
// workers were busy) reserves again instead of starting on the stale
// reservation: the later reservations are someone else's, and starting on
// the old one is how parked jobs that came due together all started at
// once, over the rate.
func TestLateRateWaiterReservesAgain(t *testing.T) {
	t.Parallel()
	clock := jobstest.NewClock(time.Now().Truncate(time.Second))
	store := jobstest.NewMemStore(clock)
	var (
		mu     sync.Mutex
		starts = map[int]time.Time{}
	)
	r := newRateRig(t, store, clock, func(n int) {
		mu.Lock()
		starts[n] = clock.Now()
		mu.Unlock()
	}, 10*time.Second)
	ctx := context.Background()
	a, b := r.enqueue(1), r.enqueue(2)
	r.deliver(a) // starts at t0
	r.deliver(b) // reserves t0+10s and parks
	if rec, _ := store.Get(ctx, b); rec.WaitingOn != "rate" {
		t.Fatalf("the second job waits on %q, want rate", rec.WaitingOn)
	}
	clock.Advance(20 * time.Second)
	r.deliver(r.enqueue(3)) // its reservation is now: t0+20s
	clock.Advance(5 * time.Second)
	r.deliver(b) // 15 s after its reserved start, 5 s after the third started
	mu.Lock()
	defer mu.Unlock()
	if at, ok := starts[2]; ok {
		t.Fatalf("the late job started %v after the third, on its stale reservation: two starts within the 10 s period of a limit of 1", at.Sub(starts[3]))
	}
	if rec, _ := store.Get(ctx, b); rec.WaitingOn != "rate" || rec.RunAt.Sub(starts[3]) < 10*time.Second {
		t.Fatalf("the late job waits on %q until %v after the third's start, want a fresh reservation 10 s after it", rec.WaitingOn, rec.RunAt.Sub(starts[3]))
	}
}

// slowTokens answers its first TakeToken late: the reservation it made
// has passed by the time the worker hears of it.
type slowTokens struct {
	*jobstest.MemStore
	clock *jobstest.Clock
	calls atomic.Int32
}

func (s *slowTokens) TakeToken(ctx context.Context, key string, b driver.TokenBucket) (time.Duration, error) {
	wait, err := s.MemStore.TakeToken(ctx, key, b)
	if s.calls.Add(1) == 1 {
		s.clock.Advance(500 * time.Millisecond)
	}
	return wait, err
}

// A reservation whose answer came late is not started on: the start would
// follow it by the call's delay, closer to the next reservation than the
// rate allows. The worker reserves again.
func TestLateReservationAnswerReservesAgain(t *testing.T) {
	t.Parallel()
	clock := jobstest.NewClock(time.Now().Truncate(time.Second))
	store := &slowTokens{MemStore: jobstest.NewMemStore(clock), clock: clock}
	var started []time.Time
	r := newRateRig(t, store, clock, func(int) { started = append(started, clock.Now()) }, 10*time.Second)
	ctx := context.Background()
	id := r.enqueue(0)
	r.deliver(id)
	rec, _ := store.Get(ctx, id)
	if calls := store.calls.Load(); calls != 2 || len(started) != 0 || rec.WaitingOn != "rate" {
		t.Fatalf("%d reservations, %d starts (at %v), waiting on %q: want a second reservation and the job parked on it, not a start 500 ms after its reserved time",
			calls, len(started), started, rec.WaitingOn)
	}
}

// A rate reservation beyond SQS's 15-minute delays waits in the sweep
// index until its time, and the sweeper sends it then: not a dispatch
// grace later.
func TestFarRateReservationStartsOnTime(t *testing.T) {
	t.Parallel()
	clock := jobstest.NewClock(time.Now().Truncate(time.Second))
	store := jobstest.NewMemStore(clock)
	r := newRateRig(t, store, clock, func(int) {}, time.Hour)
	ctx, q, reg := context.Background(), r.q, r.reg
	var ids []string
	for n := range 2 {
		ids = append(ids, r.enqueue(n))
		r.deliver(ids[n])
	}
	rec, _ := store.Get(ctx, ids[1])
	if rec.WaitingOn != "rate" || rec.RunAt.Sub(clock.Now()) < 59*time.Minute {
		t.Fatalf("the second job waits on %q until %v from now, want its reservation an hour out", rec.WaitingOn, rec.RunAt.Sub(clock.Now()))
	}
	if late := rec.SweepAt.Sub(rec.RunAt); late > 0 {
		t.Fatalf("the sweeper looks at the job %v after its reserved start: it would start that late", late)
	}
	// The sweeper sends it ahead of its time, delayed to arrive then.
	sw, err := testroles.Sweeper(jobs.Config{Store: store, Queue: q, Clock: clock, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	clock.Set(rec.SweepAt)
	if _, err := sw.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	sent := q.Messages()
	last := sent[len(sent)-1]
	if last.JobID != ids[1] || !clock.Now().Add(last.Delay).Add(time.Second).After(rec.RunAt) || clock.Now().Add(last.Delay).After(rec.RunAt) {
		t.Fatalf("the sweeper sent %+v at %v; want the job, delayed to arrive at its reserved start %v (at most a second early)", last, clock.Now(), rec.RunAt)
	}
}

// A slot chain runs only its own lane's waiters: a waiter enqueued into
// another lane goes back to its lane, to run under that lane's deadline,
// and the slot goes with it.
func TestSlotChainSendsAnotherLanesWaiterToItsLane(t *testing.T) {
	t.Parallel()
	store := jobstest.NewMemStore(nil)
	release := make(chan struct{})
	var mu sync.Mutex
	ranIn := map[int]string{}
	limited := func(lane string) func(context.Context, *jobs.Job[heldPayload]) (jobs.NoResult, error) {
		return func(ctx context.Context, j *jobs.Job[heldPayload]) (jobs.NoResult, error) {
			mu.Lock()
			ranIn[j.Payload.N] = lane
			mu.Unlock()
			if j.Payload.N == 0 {
				<-release
			}
			return jobs.NoResult{}, nil
		}
	}
	// One registry per worker, the same kinds: only the handler's lane
	// label differs.
	newReg := func(lane string) *jobs.Registry {
		r := jobs.NewRegistry()
		jobs.MustRegister(r, "limited", limited(lane), &jobs.KindOpts{Concurrency: 1})
		jobs.MustRegister(r, "bulky", sleeper, &jobs.KindOpts{Lane: "bulk"})
		return r
	}
	reg := newReg("")
	q := &jobstest.MemQueue{}
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	def, err := testroles.Worker(jobs.Config{Registry: reg, Store: store, Queue: q, CancelCheck: -1})
	if err != nil {
		t.Fatal(err)
	}
	bulk, err := testroles.Worker(jobs.Config{Registry: newReg("bulk"), Store: store, Queue: q, Lane: "bulk", CancelCheck: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	enqueue := func(n int, lane string) string {
		res, err := svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "limited", Payload: []byte(fmt.Sprintf(`{"n":%d}`, n)), EnqueueOpts: jobs.EnqueueOpts{Lane: lane}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Job.ID
	}
	deliver := func(w *jobs.Worker, id string) {
		if _, err := w.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: id, Body: message.Encode(id)}}}); err != nil {
			t.Error(err)
		}
	}
	a, b := enqueue(0, ""), enqueue(1, "bulk")
	done := make(chan struct{})
	go func() { defer close(done); deliver(def, a) }()
	for { // a holds the slot
		if rec, _ := store.Get(ctx, a); rec.Status == jobs.StatusRunning {
			break
		}
		time.Sleep(time.Millisecond)
	}
	deliver(bulk, b) // the slot is taken: b waits on it
	if rec, _ := store.Get(ctx, b); rec.WaitingOn != "concurrency" {
		t.Fatalf("the bulk-lane job waits on %q, want concurrency", rec.WaitingOn)
	}
	close(release)
	<-done
	mu.Lock()
	lane, ran := ranIn[1]
	mu.Unlock()
	if ran {
		t.Fatalf("the bulk-lane job ran on the %q lane's worker, under its deadline", lane)
	}
	msgs := q.Messages()
	if last := msgs[len(msgs)-1]; last.JobID != b || last.Lane != "bulk" {
		t.Fatalf("last message %+v, want the bulk-lane job sent to its lane", last)
	}
	deliver(bulk, b)
	mu.Lock()
	defer mu.Unlock()
	if lane := ranIn[1]; lane != "bulk" {
		t.Fatalf("the bulk-lane job ran on %q, want bulk", lane)
	}
}
