package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// stepPayload is the payload of the dependency tests' kind: a name to
// record, whether to fail, and a job to enqueue after itself while it
// runs.
type stepPayload struct {
	Name      string `json:"name"`
	Fail      bool   `json:"fail,omitempty"`
	SpawnNext string `json:"spawn_next,omitempty"`
	Token     string `json:"token,omitempty" jobs:"secret"`
}

// depRig is a service, worker and sweeper on one in-memory store, with a
// queue the test drains by hand: every message sent is delivered once,
// in order, by drain.
type depRig struct {
	clock   *jobstest.Clock
	mem     *jobstest.MemStore
	store   driver.Store
	queue   *jobstest.MemQueue
	svc     *jobs.Service
	worker  *jobs.Worker
	sweeper *jobs.Sweeper

	mu        sync.Mutex
	ran       []string // the names, in the order their handlers ran
	delivered int      // messages of queue delivered so far
	spawned   map[string]string
	tokens    map[string]string
	fixed     map[string]bool // names whose handler no longer fails
}

func newDepRig(t *testing.T, wrap func(*jobstest.MemStore) driver.Store) *depRig {
	t.Helper()
	r := &depRig{clock: jobstest.NewClock(time.Now()), queue: &jobstest.MemQueue{}, spawned: map[string]string{}, tokens: map[string]string{}, fixed: map[string]bool{}}
	r.mem = jobstest.NewMemStore(r.clock)
	r.store = r.mem
	if wrap != nil {
		r.store = wrap(r.mem)
	}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "step", func(ctx context.Context, j *jobs.Job[stepPayload]) (jobs.NoResult, error) {
		r.mu.Lock()
		r.ran = append(r.ran, j.Payload.Name)
		r.tokens[j.Payload.Name] = j.Payload.Token
		fixed := r.fixed[j.Payload.Name]
		r.mu.Unlock()
		if j.Payload.SpawnNext != "" {
			// Enqueued while this job runs: registered on a running parent.
			v := r.enqueue(t, j.Payload.SpawnNext, false, j.ID)
			r.mu.Lock()
			r.spawned[j.Payload.SpawnNext] = v.ID
			r.mu.Unlock()
		}
		if j.Payload.Fail && !fixed {
			return jobs.NoResult{}, jobs.Fail("boom", errors.New("failed on purpose"))
		}
		return jobs.NoResult{}, nil
	}, &jobs.KindOpts{FailureCodes: []string{"boom"}})
	sealer, err := jobs.NewAESSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	c, err := jobs.NewClient(jobs.Config{Registry: reg, Store: r.store, Queue: r.queue, Clock: r.clock, Sealer: sealer, PageTokenKey: make([]byte, 32), CancelCheck: -1})
	if err != nil {
		t.Fatal(err)
	}
	r.svc, r.worker, r.sweeper = c.Service(), c.Worker(), c.Sweeper()
	return r
}

func (r *depRig) enqueueWith(t *testing.T, p stepPayload, after ...string) (*jobs.View, error) {
	t.Helper()
	body, _ := json.Marshal(p)
	res, err := r.svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "alice", Kind: "step", Payload: body, EnqueueOpts: jobs.EnqueueOpts{After: after}})
	if err != nil {
		return nil, err
	}
	return &res.Job, nil
}

func (r *depRig) enqueue(t *testing.T, name string, fail bool, after ...string) *jobs.View {
	t.Helper()
	v, err := r.enqueueWith(t, stepPayload{Name: name, Fail: fail}, after...)
	if err != nil {
		t.Fatalf("enqueue %s: %v", name, err)
	}
	return v
}

// drain delivers every message sent and not yet delivered, a batch at a
// time, until none is left.
func (r *depRig) drain(t *testing.T) {
	t.Helper()
	drainQueue(t, r.queue, r.worker, &r.delivered)
}

// drainQueue delivers to worker every message of queue past the first
// *delivered, ten at a time, until none is left; it counts them in
// *delivered.
func drainQueue(t *testing.T, queue *jobstest.MemQueue, worker *jobs.Worker, delivered *int) {
	t.Helper()
	for range 1000 {
		msgs := queue.Messages()
		if *delivered == len(msgs) {
			return
		}
		var bodies []string
		for _, m := range msgs[*delivered:min(len(msgs), *delivered+10)] {
			bodies = append(bodies, message.Encode(m.JobID))
		}
		*delivered += len(bodies)
		if resp, _ := worker.HandleSQS(context.Background(), sqsEvent(bodies...)); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("batch item failures %v", failedIDs(resp))
		}
	}
	t.Fatal("the queue never drained")
}

func (r *depRig) get(t *testing.T, id string) *driver.Record {
	t.Helper()
	rec, err := r.mem.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func (r *depRig) view(t *testing.T, id string) *jobs.View {
	t.Helper()
	v, err := r.svc.Get(context.Background(), "alice", id)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (r *depRig) ranNames() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ran)
}

// sweepLater runs a sweep once every sweep time has passed.
func (r *depRig) sweepLater(t *testing.T) jobs.SweepReport {
	t.Helper()
	r.clock.Advance(time.Hour)
	rep, err := r.sweeper.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestChainRunsInOrder(t *testing.T) {
	t.Parallel()
	r := newDepRig(t, nil)
	a := r.enqueue(t, "a", false)
	b := r.enqueue(t, "b", false, a.ID)
	c := r.enqueue(t, "c", false, b.ID)
	for _, v := range []*jobs.View{b, c} {
		if v.Status != jobs.StatusQueued || v.WaitingOn != "parents" || v.ParentsLeft != 1 || len(v.After) != 1 {
			t.Fatalf("%s as enqueued: %s waiting on %q, %d parents left of %v; want queued, waiting on its parent", v.ID, v.Status, v.WaitingOn, v.ParentsLeft, v.After)
		}
	}
	// A message of a waiting job (a duplicate, a stale one) starts nothing.
	if resp, _ := r.worker.HandleSQS(context.Background(), sqsEvent(message.Encode(c.ID))); len(resp.BatchItemFailures) != 0 || len(r.ranNames()) != 0 {
		t.Fatalf("a waiting job's message: failures %v, ran %v; want acknowledged, nothing run", failedIDs(resp), r.ranNames())
	}
	r.drain(t)
	if got := r.ranNames(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("ran %v, want a, b, c in order, each once", got)
	}
	for _, id := range []string{a.ID, b.ID, c.ID} {
		if rec := r.get(t, id); rec.Status != jobs.StatusSucceeded || rec.Attempt != 1 || !rec.SweepAt.IsZero() || len(rec.After) != 0 {
			t.Fatalf("%s: %s attempt %d sweep %v steps %v; want succeeded on attempt 1, nothing pending", id, rec.Status, rec.Attempt, rec.SweepAt, rec.After)
		}
	}
	if v := r.view(t, c.ID); v.WaitingOn != "" || v.ParentsLeft != 0 || !slices.Equal(v.After, []string{b.ID}) {
		t.Fatalf("c's view after: waiting %q, %d left, after %v", v.WaitingOn, v.ParentsLeft, v.After)
	}
}

func TestFailedParentCancelsTheChain(t *testing.T) {
	t.Parallel()
	r := newDepRig(t, nil)
	a := r.enqueue(t, "a", true)
	b := r.enqueue(t, "b", false, a.ID)
	c := r.enqueue(t, "c", false, b.ID)
	r.drain(t)
	if got := r.ranNames(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("ran %v, want only a", got)
	}
	for _, tt := range []struct{ id, by string }{{b.ID, a.ID}, {c.ID, b.ID}} {
		rec := r.get(t, tt.id)
		if rec.Status != jobs.StatusCancelled || rec.ErrorCode != jobs.CodeDependencyFailed || rec.CancelledBy != tt.by || rec.Attempt != 0 {
			t.Fatalf("%s: %s code %q by %q attempt %d; want cancelled, dependency_failed, by %s, never run", tt.id, rec.Status, rec.ErrorCode, rec.CancelledBy, rec.Attempt, tt.by)
		}
		if v := r.view(t, tt.id); v.Error == nil || *v.Error != jobs.CodeDependencyFailed {
			t.Fatalf("%s's view has no dependency_failed code: %+v", tt.id, v)
		}
	}
}

// A fan-in of 50 parents that end in any order, each delivered twice:
// the child runs once, after the last.
func TestFanInRunsItsChildOnceAfterTheLastParent(t *testing.T) {
	t.Parallel()
	r := newDepRig(t, nil)
	var parents []string
	for i := range 50 {
		parents = append(parents, r.enqueue(t, fmt.Sprintf("p%d", i), false).ID)
	}
	child := r.enqueue(t, "child", false, parents...)
	if child.ParentsLeft != 50 {
		t.Fatalf("child waits on %d parents, want 50", child.ParentsLeft)
	}
	order := slices.Clone(parents)
	rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for i, id := range order {
		r.delivered = len(r.queue.Messages()) // run the parents one by one, by hand
		if resp, _ := r.worker.HandleSQS(context.Background(), sqsEvent(message.Encode(id), message.Encode(id))); len(resp.BatchItemFailures) != 0 {
			t.Fatal(failedIDs(resp))
		}
		if rec := r.get(t, child.ID); i < 49 && (rec.WaitingOn != "parents" || rec.ParentsLeft() != 49-i) {
			t.Fatalf("after %d parents: child waiting on %q with %d left", i+1, rec.WaitingOn, rec.ParentsLeft())
		}
	}
	// Every message sent since (the child's, once or more) is delivered
	// twice.
	msgs := r.queue.Messages()[r.delivered:]
	var bodies []string
	for _, m := range msgs {
		bodies = append(bodies, message.Encode(m.JobID), message.Encode(m.JobID))
	}
	if len(bodies) == 0 {
		t.Fatal("the child was never sent")
	}
	r.worker.HandleSQS(context.Background(), sqsEvent(bodies...))
	ran := r.ranNames()
	if n := len(ran); n != 51 || ran[50] != "child" {
		t.Fatalf("ran %d handlers, last %q; want 51, the child last and once", n, ran[n-1])
	}
}

func TestAfterAFinishedParent(t *testing.T) {
	t.Parallel()
	r := newDepRig(t, nil)
	ok, bad := r.enqueue(t, "ok", false), r.enqueue(t, "bad", true)
	r.drain(t)
	after := r.enqueue(t, "after_ok", false, ok.ID)
	if after.WaitingOn != "" || after.Status != jobs.StatusQueued {
		t.Fatalf("after a succeeded parent: %s waiting on %q; want queued, released", after.Status, after.WaitingOn)
	}
	r.drain(t)
	if got := r.get(t, after.ID); got.Status != jobs.StatusSucceeded {
		t.Fatalf("after a succeeded parent: %s, want succeeded", got.Status)
	}
	failed := r.enqueue(t, "after_bad", false, ok.ID, bad.ID)
	if failed.Status != jobs.StatusCancelled || failed.Error == nil || *failed.Error != jobs.CodeDependencyFailed {
		t.Fatalf("after a failed parent: %+v; want cancelled, dependency_failed", failed)
	}
	if slices.Contains(r.ranNames(), "after_bad") {
		t.Fatal("a job after a failed parent ran")
	}
}

// A job enqueued after a parent while that parent runs: the parent's final
// write, made with the dependents its claim read, must not miss it.
func TestDependentEnqueuedWhileItsParentRuns(t *testing.T) {
	t.Parallel()
	r := newDepRig(t, nil)
	body, _ := json.Marshal(stepPayload{Name: "parent", SpawnNext: "late"})
	res, err := r.svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "alice", Kind: "step", Payload: body})
	if err != nil {
		t.Fatal(err)
	}
	r.drain(t)
	late := r.spawned["late"]
	if late == "" {
		t.Fatal("the parent did not enqueue its dependent")
	}
	if got := r.get(t, late); got.Status != jobs.StatusSucceeded {
		t.Fatalf("the job enqueued after its running parent: %s waiting on %q; want succeeded", got.Status, got.WaitingOn)
	}
	if p := r.get(t, res.Job.ID); len(p.Dependents) != 1 {
		t.Fatalf("the parent records %d dependents, want 1", len(p.Dependents))
	}
}

// failCount fails CountParents while ctx says the worker is dying: the
// parent's outcome landed, its post-outcome step did not.
type failCount struct{ *jobstest.MemStore }

func (s failCount) CountParents(ctx context.Context, id string, c driver.ParentCount) (*driver.Record, error) {
	if ctx.Value(dieKey{}) != nil {
		return nil, errWorkerDied
	}
	return s.MemStore.CountParents(ctx, id, c)
}

func TestDependentsOfADeadWorkersParentAreReleasedBySweeper(t *testing.T) {
	t.Parallel()
	r := newDepRig(t, func(m *jobstest.MemStore) driver.Store { return failCount{m} })
	a := r.enqueue(t, "a", false)
	b := r.enqueue(t, "b", false, a.ID)
	r.delivered = len(r.queue.Messages())
	if resp, _ := r.worker.HandleSQS(context.WithValue(context.Background(), dieKey{}, true), sqsEvent(message.Encode(a.ID))); len(resp.BatchItemFailures) != 0 {
		t.Fatal(failedIDs(resp))
	}
	if rec := r.get(t, a.ID); rec.Status != jobs.StatusSucceeded || !slices.Contains(rec.After, "dependents") || rec.SweepAt.IsZero() {
		t.Fatalf("a after the death: %s steps %v sweep %v; want succeeded, its dependents step pending in the sweep schedule", rec.Status, rec.After, rec.SweepAt)
	}
	if rec := r.get(t, b.ID); rec.WaitingOn != "parents" || !rec.SweepAt.IsZero() {
		t.Fatalf("b: waiting on %q, sweep %v; want waiting, out of the sweep schedule", rec.WaitingOn, rec.SweepAt)
	}
	if rep := r.sweepLater(t); rep.After != 1 {
		t.Fatalf("sweep %+v, want a's step run", rep)
	}
	r.drain(t)
	r.sweepLater(t)
	r.drain(t)
	if got := r.ranNames(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("ran %v, want a then b, once each", got)
	}
}

// failAdd fails every AddDependent while armed: the enqueue stored the job
// but could not register it.
type failAdd struct {
	*jobstest.MemStore
	armed *bool
}

func (s failAdd) AddDependent(ctx context.Context, parent string, d driver.DependentOf) (*driver.Record, error) {
	if *s.armed {
		return nil, errWorkerDied
	}
	return s.MemStore.AddDependent(ctx, parent, d)
}

func TestSweeperFinishesARegistrationTheEnqueueLeft(t *testing.T) {
	t.Parallel()
	armed := false
	r := newDepRig(t, func(m *jobstest.MemStore) driver.Store { return failAdd{m, &armed} })
	a := r.enqueue(t, "a", false)
	armed = true
	b := r.enqueue(t, "b", false, a.ID) // accepted: stored, waiting, in the sweep schedule
	armed = false
	if rec := r.get(t, b.ID); rec.WaitingOn != "parents" || rec.SweepAt.IsZero() || len(r.get(t, a.ID).Dependents) != 0 {
		t.Fatalf("b: waiting on %q sweep %v; want stored waiting, in the sweep schedule, unregistered", rec.WaitingOn, rec.SweepAt)
	}
	r.sweepLater(t)
	if len(r.get(t, a.ID).Dependents) != 1 || !r.get(t, b.ID).SweepAt.IsZero() {
		t.Fatal("the sweep did not finish b's registration")
	}
	r.drain(t)
	if got := r.ranNames(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("ran %v, want a then b", got)
	}
}

// Retrying a failed parent brings back the dependents its failure
// cancelled, once it succeeds; a dependent retried by hand first is
// refused while its parent is failed.
func TestRetriedParentBringsBackItsDependents(t *testing.T) {
	t.Parallel()
	r := newDepRig(t, nil)
	a := r.enqueue(t, "a", true)
	b := r.enqueue(t, "b", false, a.ID)
	c := r.enqueue(t, "c", false, b.ID)
	r.drain(t)
	_, err := r.svc.Resubmit(context.Background(), "alice", b.ID)
	var re *jobs.RequestError
	if !errors.As(err, &re) || re.Code != jobs.CodeDependencyFailed {
		t.Fatalf("retry of b while a is failed: %v; want dependency_failed", err)
	}
	if rec := r.get(t, b.ID); rec.Status != jobs.StatusCancelled {
		t.Fatalf("b after the refused retry: %s", rec.Status)
	}
	r.mu.Lock()
	r.fixed["a"] = true // what the retry is for
	r.mu.Unlock()
	if _, err := r.svc.Resubmit(context.Background(), "alice", a.ID); err != nil {
		t.Fatal(err)
	}
	r.drain(t)
	if got := r.ranNames(); !slices.Equal(got, []string{"a", "a", "b", "c"}) {
		t.Fatalf("ran %v, want a, a again, then b and c", got)
	}
	for _, id := range []string{b.ID, c.ID} {
		if got := r.get(t, id); got.Status != jobs.StatusSucceeded || got.CancelledBy != "" {
			t.Fatalf("%s: %s (cancelled by %q); want succeeded", id, got.Status, got.CancelledBy)
		}
	}
}

// A dependent its owner cancelled stays cancelled when its parent
// succeeds later; its own dependents are cancelled with it.
func TestCancelledDependentStaysCancelled(t *testing.T) {
	t.Parallel()
	r := newDepRig(t, nil)
	a := r.enqueue(t, "a", false)
	b := r.enqueue(t, "b", false, a.ID)
	c := r.enqueue(t, "c", false, b.ID)
	if _, err := r.svc.Cancel(context.Background(), "alice", b.ID); err != nil {
		t.Fatal(err)
	}
	if rec := r.get(t, c.ID); rec.Status != jobs.StatusCancelled || rec.ErrorCode != jobs.CodeDependencyFailed {
		t.Fatalf("c after b's cancel: %s %q; want cancelled, dependency_failed", rec.Status, rec.ErrorCode)
	}
	r.drain(t)
	r.sweepLater(t)
	if got := r.ranNames(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("ran %v, want only a", got)
	}
	if rec := r.get(t, b.ID); rec.Status != jobs.StatusCancelled || rec.ErrorCode != "" {
		t.Fatalf("b: %s %q; want cancelled by its owner", rec.Status, rec.ErrorCode)
	}
}

func TestAfterIsValidatedAndChangesNothing(t *testing.T) {
	t.Parallel()
	r := newDepRig(t, nil)
	a := r.enqueue(t, "a", false)
	body, _ := json.Marshal(stepPayload{Name: "x"})
	bob, err := r.svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "bob", Kind: "step", Payload: body})
	if err != nil {
		t.Fatal(err)
	}
	many := make([]string, 101)
	for i := range many {
		many[i] = a.ID
	}
	for _, tt := range []struct {
		name  string
		after []string
		opts  jobs.EnqueueOpts
		code  string
	}{
		{"unknown", []string{"0190b8a2-7b8e-7c4e-9d2f-3a1b2c3d4e5f"}, jobs.EnqueueOpts{}, "unknown_parent"},
		{"another owner's", []string{bob.Job.ID}, jobs.EnqueueOpts{}, "unknown_parent"},
		{"malformed", []string{"not-an-id"}, jobs.EnqueueOpts{}, "invalid_request"},
		{"twice", []string{a.ID, a.ID}, jobs.EnqueueOpts{}, "invalid_request"},
		{"too many", many, jobs.EnqueueOpts{}, "invalid_request"},
		{"with a unique key", []string{a.ID}, jobs.EnqueueOpts{UniqueKey: "k"}, "invalid_request"},
	} {
		before := r.mem.Len()
		opts := tt.opts
		opts.After = tt.after
		_, err := r.svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "alice", Kind: "step", Payload: body, EnqueueOpts: opts})
		var re *jobs.RequestError
		if !errors.As(err, &re) || re.Code != tt.code {
			t.Errorf("%s: %v, want %s", tt.name, err, tt.code)
		}
		if r.mem.Len() != before || len(r.get(t, a.ID).Dependents) != 0 {
			t.Errorf("%s: stored something", tt.name)
		}
	}
	if _, err := r.svc.Prepare(jobs.EnqueueRequest{Owner: "alice", Kind: "step", Payload: body, EnqueueOpts: jobs.EnqueueOpts{After: []string{a.ID}}}); !errors.Is(err, jobs.ErrInvalidRequest) {
		t.Errorf("Prepare with After: %v, want refused", err)
	}
	// A parent with the most dependents takes no more.
	for i := range 100 {
		r.enqueue(t, fmt.Sprintf("d%d", i), false, a.ID)
	}
	_, err = r.enqueueWith(t, stepPayload{Name: "one too many"}, a.ID)
	var re *jobs.RequestError
	if !errors.As(err, &re) || re.Code != "too_many_dependents" {
		t.Fatalf("the 101st dependent: %v, want too_many_dependents", err)
	}
}

// The same idempotency key with other parents is another request.
func TestAfterIsPartOfTheIdempotentRequest(t *testing.T) {
	t.Parallel()
	r := newDepRig(t, nil)
	a, b := r.enqueue(t, "a", false), r.enqueue(t, "b", false)
	body, _ := json.Marshal(stepPayload{Name: "c"})
	req := func(after ...string) error {
		_, err := r.svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "alice", Kind: "step", Payload: body,
			EnqueueOpts: jobs.EnqueueOpts{IdempotencyKey: "k", After: after}})
		return err
	}
	if err := req(a.ID); err != nil {
		t.Fatal(err)
	}
	if err := req(a.ID); err != nil {
		t.Fatalf("the same request again: %v", err)
	}
	if err := req(b.ID); !errors.Is(err, jobs.ErrIdempotencyConflict) {
		t.Fatalf("the same key after another parent: %v, want an idempotency conflict", err)
	}
}

func TestReplayMakesANewJobFromAnOldOne(t *testing.T) {
	t.Parallel()
	r := newDepRig(t, nil)
	v, err := r.enqueueWith(t, stepPayload{Name: "orig", Token: "s3cr3t"})
	if err != nil {
		t.Fatal(err)
	}
	r.drain(t)
	ctx := context.Background()
	same, err := r.svc.Replay(ctx, jobs.ReplayRequest{Owner: "alice", ID: v.ID})
	if err != nil {
		t.Fatal(err)
	}
	edited, err := r.svc.Replay(ctx, jobs.ReplayRequest{Owner: "alice", ID: v.ID, Payload: json.RawMessage(`{"name":"edited","token":"[secret]"}`)})
	if err != nil {
		t.Fatal(err)
	}
	r.drain(t)
	for _, res := range []*jobs.EnqueueResult{same, edited} {
		if res.Job.ID == v.ID || res.Job.ReplayOf != v.ID || res.Replayed {
			t.Fatalf("replay: %+v; want a new job replaying %s", res.Job, v.ID)
		}
		if got := r.get(t, res.Job.ID); got.Status != jobs.StatusSucceeded {
			t.Fatalf("replayed job %s", got.Status)
		}
	}
	if got := r.ranNames(); len(got) != 3 || !slices.Contains(got[1:], "orig") || !slices.Contains(got[1:], "edited") {
		t.Fatalf("ran %v, want orig, then orig and edited once each", got)
	}
	if r.tokens["edited"] != "s3cr3t" {
		t.Fatalf("the edited replay's secret is %q: a \"[secret]\" field must keep the old value", r.tokens["edited"])
	}
	if orig := r.get(t, v.ID); orig.Status != jobs.StatusSucceeded || orig.Attempt != 1 {
		t.Fatalf("the old job changed: %s attempt %d", orig.Status, orig.Attempt)
	}
	before := r.mem.Len()
	if _, err := r.svc.Replay(ctx, jobs.ReplayRequest{Owner: "bob", ID: v.ID}); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("another owner's replay: %v, want not found", err)
	}
	if _, err := r.svc.Replay(ctx, jobs.ReplayRequest{Owner: "alice", ID: v.ID, Payload: json.RawMessage(`{"name":1}`)}); !errors.Is(err, jobs.ErrInvalidPayload) {
		t.Fatalf("a replay with a bad payload: %v, want invalid payload", err)
	}
	if r.mem.Len() != before {
		t.Fatal("a refused replay stored a job")
	}
}

// failRelease fails every ReleaseParents: a dependent whose enqueue
// counts its last parent must still be released (the count and the
// release are one write), never left out of the sweep schedule waiting.
type failRelease struct{ *jobstest.MemStore }

func (s failRelease) ReleaseParents(context.Context, string, driver.ReleaseParents) error {
	return errWorkerDied
}

func TestAJobAfterSucceededParentsIsReleasedByItsEnqueue(t *testing.T) {
	t.Parallel()
	r := newDepRig(t, func(m *jobstest.MemStore) driver.Store { return failRelease{m} })
	a, b := r.enqueue(t, "a", false), r.enqueue(t, "b", false)
	r.drain(t)
	c := r.enqueue(t, "c", false, a.ID, b.ID)
	rec := r.get(t, c.ID)
	if rec.WaitingOn != "" || rec.SweepAt.IsZero() || rec.Status != jobs.StatusQueued {
		t.Fatalf("c after two succeeded parents: %s waiting on %q, sweep %v; want released, in the sweep schedule", rec.Status, rec.WaitingOn, rec.SweepAt)
	}
	r.drain(t)
	if got := r.get(t, c.ID); got.Status != jobs.StatusSucceeded {
		t.Fatalf("c: %s, want succeeded", got.Status)
	}
}

// A job enqueued after a parent that had failed already is created
// cancelled, and comes back when that parent is retried and succeeds.
func TestAJobAfterAFailedParentComesBackWithItsRetry(t *testing.T) {
	t.Parallel()
	r := newDepRig(t, nil)
	a := r.enqueue(t, "a", true)
	r.drain(t)
	c := r.enqueue(t, "c", false, a.ID)
	if c.Status != jobs.StatusCancelled || c.Error == nil || *c.Error != jobs.CodeDependencyFailed {
		t.Fatalf("c after a failed parent: %+v, want cancelled, dependency_failed", c)
	}
	r.mu.Lock()
	r.fixed["a"] = true
	r.mu.Unlock()
	if _, err := r.svc.Resubmit(context.Background(), "alice", a.ID); err != nil {
		t.Fatal(err)
	}
	r.drain(t)
	if got := r.get(t, c.ID); got.Status != jobs.StatusSucceeded {
		t.Fatalf("c after its parent's retry succeeded: %s, want succeeded", got.Status)
	}
}

// A bulk retry over jobs a failed parent cancelled goes on past them:
// each is matched and left as it is, and the parent is retried.
func TestBulkRetryGoesOnPastJobsWaitingForAParentsRetry(t *testing.T) {
	t.Parallel()
	r := newDepRig(t, nil)
	a := r.enqueue(t, "a", true)
	r.enqueue(t, "b", false, a.ID)
	r.drain(t)
	res, err := r.svc.Bulk(context.Background(), "alice", jobs.BulkRequest{Action: jobs.BulkResubmit, Kind: "step"})
	if err != nil {
		t.Fatalf("bulk retry: %v", err)
	}
	if res.Matched != 2 || res.Changed != 1 {
		t.Fatalf("bulk retry: matched %d changed %d, want 2 and 1 (the parent)", res.Matched, res.Changed)
	}
}

// A retry of a keyed enqueue answers with its job, though its parent has
// taken its most dependents since.
func TestAKeyedRetryAfterAFullParentAnswersItsJob(t *testing.T) {
	t.Parallel()
	r := newDepRig(t, nil)
	a := r.enqueue(t, "a", false)
	body, _ := json.Marshal(stepPayload{Name: "keyed"})
	req := jobs.EnqueueRequest{Owner: "alice", Kind: "step", Payload: body, EnqueueOpts: jobs.EnqueueOpts{IdempotencyKey: "k", After: []string{a.ID}}}
	first, err := r.svc.Enqueue(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 99 {
		r.enqueue(t, fmt.Sprintf("d%d", i), false, a.ID)
	}
	again, err := r.svc.Enqueue(context.Background(), req)
	if err != nil || again.Job.ID != first.Job.ID || !again.Replayed {
		t.Fatalf("the retry: %+v %v, want the first job, replayed", again, err)
	}
}

// A failure that cancels a wide, deep tree does the first 100 cancels'
// own steps at once and leaves the rest to the sweeper, which finishes.
func TestACascadeBeyondItsBudgetFinishesInTheSweeper(t *testing.T) {
	t.Parallel()
	r := newDepRig(t, nil)
	a := r.enqueue(t, "a", true)
	var leaves []string
	for i := range 100 {
		child := r.enqueue(t, fmt.Sprintf("c%d", i), false, a.ID)
		grand := r.enqueue(t, fmt.Sprintf("g%d", i), false, child.ID)
		leaves = append(leaves, r.enqueue(t, fmt.Sprintf("l%d", i), false, grand.ID).ID)
	}
	r.drain(t)
	waiting := 0
	for _, id := range leaves {
		if r.get(t, id).Status == jobs.StatusQueued {
			waiting++
		}
	}
	if waiting == 0 {
		t.Fatal("every leaf was cancelled inline: the cascade had no budget")
	}
	for range 3 {
		r.sweepLater(t)
	}
	for _, id := range leaves {
		if got := r.get(t, id); got.Status != jobs.StatusCancelled || got.ErrorCode != jobs.CodeDependencyFailed {
			t.Fatalf("leaf %s after the sweeps: %s %q, want cancelled, dependency_failed", id, got.Status, got.ErrorCode)
		}
	}
	if len(r.ranNames()) != 1 {
		t.Fatalf("ran %v, want only a", r.ranNames())
	}
}
