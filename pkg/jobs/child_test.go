package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

type fanPayload struct {
	N      int    `json:"n"`
	Fail   bool   `json:"fail,omitempty"`   // fail the first run, declared
	Change bool   `json:"change,omitempty"` // reuse a name with another payload
	Bad    string `json:"bad,omitempty"`    // a misuse to try: "name", "key", "capped"
}

type leafPayload struct {
	I int `json:"i"`
}

// childRig runs a "fan" kind whose handler starts N "leaf" children by
// name, on one in-memory store, its queue drained by hand.
type childRig struct {
	clock     *jobstest.Clock
	mem       *jobstest.MemStore
	queue     *jobstest.MemQueue
	svc       *jobs.Service
	worker    *jobs.Worker
	leaf      jobs.Kind[leafPayload]
	delivered int

	mu    sync.Mutex
	runs  map[string]int     // fan job -> runs
	errs  map[string][]error // fan job -> what EnqueueChild answered, in its last run
	fresh map[string]int     // fan job -> children its runs created (not replayed)
}

func newChildRig(t *testing.T) *childRig {
	t.Helper()
	r := &childRig{clock: jobstest.NewClock(time.Now()), queue: &jobstest.MemQueue{}, runs: map[string]int{}, errs: map[string][]error{}, fresh: map[string]int{}}
	r.mem = jobstest.NewMemStore(r.clock)
	reg := jobs.NewRegistry()
	leaf := jobs.MustRegister(reg, "leaf", func(context.Context, *jobs.Job[leafPayload]) (jobs.NoResult, error) {
		return jobs.NoResult{}, nil
	}, &jobs.KindOpts{Internal: true})
	capped := jobs.MustRegister(reg, "capped", func(context.Context, *jobs.Job[leafPayload]) (jobs.NoResult, error) {
		return jobs.NoResult{}, nil
	}, &jobs.KindOpts{MaxQueued: 1})
	jobs.MustRegister(reg, "fan", func(ctx context.Context, j *jobs.Job[fanPayload]) (jobs.NoResult, error) {
		r.mu.Lock()
		r.runs[j.ID]++
		first := r.runs[j.ID] == 1
		r.mu.Unlock()
		var errs []error
		for i := range j.Payload.N {
			p := leafPayload{I: i}
			if j.Payload.Change && !first {
				p.I += 100
			}
			var opts *jobs.EnqueueOpts
			name := fmt.Sprintf("leaf-%d", i)
			k := leaf
			switch j.Payload.Bad {
			case "name":
				name = "a name\nwith a newline"
			case "key":
				opts = &jobs.EnqueueOpts{IdempotencyKey: "k"}
			case "capped":
				k, opts = capped, &jobs.EnqueueOpts{Delay: time.Hour} // stays queued
			}
			res, err := k.EnqueueChild(ctx, j, name, p, opts)
			errs = append(errs, err)
			if err == nil && !res.Replayed {
				r.mu.Lock()
				r.fresh[j.ID]++
				r.mu.Unlock()
			}
		}
		r.mu.Lock()
		r.errs[j.ID] = errs
		r.mu.Unlock()
		if j.Payload.Fail && first {
			return jobs.NoResult{}, jobs.Fail("boom", errors.New("first run fails"))
		}
		return jobs.NoResult{}, nil
	}, &jobs.KindOpts{FailureCodes: []string{"boom"}})
	c, err := jobs.NewClient(jobs.Config{Registry: reg, Store: r.mem, Queue: r.queue, Clock: r.clock, PageTokenKey: make([]byte, 32), CancelCheck: -1})
	if err != nil {
		t.Fatal(err)
	}
	r.svc, r.worker, r.leaf = c.Service(), c.Worker(), leaf
	return r
}

func (r *childRig) fan(t *testing.T, p fanPayload, opts jobs.EnqueueOpts) jobs.View {
	t.Helper()
	body, _ := json.Marshal(p)
	res, err := r.svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "alice", Kind: "fan", Payload: body, EnqueueOpts: opts})
	if err != nil {
		t.Fatal(err)
	}
	return res.Job
}

// drain delivers every message not yet delivered until none is left.
func (r *childRig) drain(t *testing.T) {
	t.Helper()
	drainQueue(t, r.queue, r.worker, &r.delivered)
}

// children returns the parent's children, by their payload's i.
func (r *childRig) children(t *testing.T, parent string) map[int]jobs.View {
	t.Helper()
	out := map[int]jobs.View{}
	for _, rec := range r.mem.All() {
		if rec.ChildOf != parent {
			continue
		}
		v, err := r.svc.Get(context.Background(), rec.Owner, rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		var p leafPayload
		if err := json.Unmarshal(v.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if _, dup := out[p.I]; dup {
			t.Errorf("two children of %s with i=%d", parent, p.I)
		}
		out[p.I] = *v
	}
	return out
}

// A handler starts its children once per name: a second run (a manual
// retry of the failed parent) finds them and starts none. Each child is
// the parent's owner's, names its parent, takes the parent's tags and
// tenant, runs, and may be of an internal kind.
func TestAHandlerStartsChildrenOncePerName(t *testing.T) {
	r := newChildRig(t)
	parent := r.fan(t, fanPayload{N: 5, Fail: true}, jobs.EnqueueOpts{Tags: map[string]string{"import": "42"}, Tenant: "acme"})
	r.drain(t)
	if v, _ := r.svc.Get(context.Background(), "alice", parent.ID); v.Status != jobs.StatusFailed {
		t.Fatalf("the parent's first run: %s", v.Status)
	}
	if _, err := r.svc.Resubmit(context.Background(), "alice", parent.ID); err != nil {
		t.Fatal(err)
	}
	r.drain(t)
	if v, _ := r.svc.Get(context.Background(), "alice", parent.ID); v.Status != jobs.StatusSucceeded || r.runs[parent.ID] != 2 {
		t.Fatalf("the parent after its retry: %s, %d runs", v.Status, r.runs[parent.ID])
	}
	if r.fresh[parent.ID] != 5 {
		t.Errorf("the parent's two runs created %d children, want 5 (the second run's five calls replayed)", r.fresh[parent.ID])
	}
	kids := r.children(t, parent.ID)
	if len(kids) != 5 {
		t.Fatalf("%d children, want 5", len(kids))
	}
	for i, v := range kids {
		if v.Kind != "leaf" || v.Status != jobs.StatusSucceeded || v.ChildOf != parent.ID || !reflect.DeepEqual(v.Tags, map[string]string{"import": "42"}) {
			t.Errorf("child %d: %+v", i, v)
		}
		rec, _ := r.mem.Get(context.Background(), v.ID)
		if rec.Owner != "alice" || rec.Tenant != "acme" {
			t.Errorf("child %d is %s's for %q, want alice's for acme", i, rec.Owner, rec.Tenant)
		}
	}
	// Another caller cannot see them, as with any job.
	if _, err := r.svc.Get(context.Background(), "bob", kids[0].ID); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("bob reads alice's child: %v", err)
	}
}

// A name reused with another payload is an idempotency conflict, and
// starts nothing; misuses are refused with a clear error and store nothing.
func TestEnqueueChildRefusesMisuse(t *testing.T) {
	r := newChildRig(t)
	changed := r.fan(t, fanPayload{N: 2, Fail: true, Change: true}, jobs.EnqueueOpts{})
	r.drain(t)
	if _, err := r.svc.Resubmit(context.Background(), "alice", changed.ID); err != nil {
		t.Fatal(err)
	}
	r.drain(t)
	for i, err := range r.errs[changed.ID] {
		if !errors.Is(err, jobs.ErrIdempotencyConflict) {
			t.Errorf("name leaf-%d reused with another payload: %v, want ErrIdempotencyConflict", i, err)
		}
	}
	if n := len(r.children(t, changed.ID)); n != 2 {
		t.Errorf("%d children after the conflicting run, want the first run's 2", n)
	}
	for _, bad := range []string{"name", "key"} {
		v := r.fan(t, fanPayload{N: 1, Bad: bad}, jobs.EnqueueOpts{})
		r.drain(t)
		var re *jobs.RequestError
		if err := r.errs[v.ID][0]; !errors.As(err, &re) || re.Code != "invalid_request" {
			t.Errorf("a child with a bad %s: %v, want invalid_request", bad, err)
		}
		if n := len(r.children(t, v.ID)); n != 0 {
			t.Errorf("a child with a bad %s stored %d jobs", bad, n)
		}
	}
	// A capped kind's cap applies to children: the second of two waits.
	v := r.fan(t, fanPayload{N: 2, Bad: "capped"}, jobs.EnqueueOpts{})
	r.drain(t)
	if errs := r.errs[v.ID]; len(errs) != 2 || errs[0] != nil || !errors.Is(errs[1], jobs.ErrQueueFull) {
		t.Errorf("two children of a kind capped at one queued job: %v", errs)
	}
	// A rerun finds its child even when the child's kind is at its cap.
	r = newChildRig(t)
	v = r.fan(t, fanPayload{N: 1, Bad: "capped", Fail: true}, jobs.EnqueueOpts{})
	r.drain(t)
	if _, err := r.svc.Resubmit(context.Background(), "alice", v.ID); err != nil {
		t.Fatal(err)
	}
	r.drain(t)
	if errs := r.errs[v.ID]; len(errs) != 1 || errs[0] != nil || r.fresh[v.ID] != 1 || r.runs[v.ID] != 2 {
		t.Errorf("a rerun of a parent whose child's kind is at its cap: %v (%d created, %d runs)", errs, r.fresh[v.ID], r.runs[v.ID])
	}
	// A Job built by hand (a handler's unit test) starts nothing.
	if _, err := r.leaf.EnqueueChild(context.Background(), &jobs.Job[fanPayload]{ID: "x"}, "n", leafPayload{}, nil); err == nil || !strings.Contains(err.Error(), "the job a worker passed") {
		t.Errorf("a hand-built job: %v, want an error that says so", err)
	}
}
