package jobs_test

import (
	"context"
	"errors"
	"strings"
	"sync"
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

// A wait on a running job answers within one poll (250 ms) of the job's
// end, with the job as it ended, however long the wait could have lasted.
func TestWaitAnswersWithinAPollOfTheJobsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := jobstest.NewMemStore(nil)
		r := newEngineRig(t, mem, mem, jobs.Config{}, nil)
		id := r.enqueue(t, "sleep", `{"for":"3s"}`)
		start := time.Now()
		go r.worker.HandleSQS(ctx, sqsEvent(message.Encode(id)))
		synctest.Wait() // the handler is running
		running, err := r.svc.Get(ctx, "o", id)
		if err != nil || running.Status != jobs.StatusRunning {
			t.Fatalf("get: %+v, %v", running, err)
		}
		v, changed, err := r.svc.Wait(ctx, "o", id, running.Version(), 8*time.Second)
		took := time.Since(start)
		if err != nil || !changed || v.Status != jobs.StatusSucceeded {
			t.Fatalf("wait: %+v, changed %v, %v; want it succeeded", v, changed, err)
		}
		if took < 3*time.Second || took > 3*time.Second+250*time.Millisecond {
			t.Fatalf("answered %v after the start of a 3 s job; want within %v of its end", took, 250*time.Millisecond)
		}
		if v.Version() == running.Version() {
			t.Fatal("the ended job's version is the running job's")
		}
	})
}

// A wait on a job that does not change answers at its end, unchanged; one
// whose version the caller has not seen answers at once.
func TestWaitAnswersAtItsEndOrAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := jobstest.NewMemStore(nil)
		r := newEngineRig(t, mem, mem, jobs.Config{}, nil)
		id := r.enqueue(t, "sleep", `{"for":"1s"}`)
		start := time.Now()
		v, changed, err := r.svc.Wait(ctx, "o", id, "", 2*time.Second)
		if err != nil || changed || v.Status != jobs.StatusQueued || time.Since(start) != 2*time.Second {
			t.Fatalf("wait on a job nobody runs: %+v, changed %v, %v after %v; want it queued, unchanged, at 2 s", v, changed, err, time.Since(start))
		}
		start = time.Now()
		v, changed, err = r.svc.Wait(ctx, "o", id, "an-older-version", 2*time.Second)
		if err != nil || !changed || time.Since(start) != 0 || string(v.Payload) != `{"for":"1s"}` {
			t.Fatalf("wait from another version: %+v, changed %v, %v after %v; want the job at once, with its payload", v, changed, err, time.Since(start))
		}
	})
}

// Bad waits: another owner's job is not found, and a wait outside 1 ms
// to MaxWait is refused, before any read.
func TestWaitRefusesBadRequests(t *testing.T) {
	ctx := context.Background()
	mem := jobstest.NewMemStore(nil)
	r := newEngineRig(t, mem, mem, jobs.Config{}, nil)
	id := r.enqueue(t, "sleep", `{"for":"1s"}`)
	if _, _, err := r.svc.Wait(ctx, "someone-else", id, "", time.Second); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("another owner's wait: %v, want ErrNotFound", err)
	}
	for _, d := range []time.Duration{0, -time.Second, jobs.MaxWait + time.Second} {
		var re *jobs.RequestError
		if _, _, err := r.svc.Wait(ctx, "o", id, "", d); !errors.As(err, &re) || re.Code != "invalid_request" {
			t.Fatalf("wait of %v: %v, want invalid_request", d, err)
		}
	}
}

// An owner's open waits are at most WaitsPerOwner: one more is refused
// (too_many_waits, Retry-After), another owner's are its own, and a
// slot frees when its wait ends, or, for a wait whose function died, when
// its lease ends.
func TestWaitsPerOwnerAreLeased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := jobstest.NewMemStore(nil)
		r := newEngineRig(t, mem, mem, jobs.Config{}, nil)
		svc, err := testroles.Service(jobs.Config{Registry: jobs.NewRegistry(), Store: mem, WaitsPerOwner: 2})
		if err != nil {
			t.Fatal(err)
		}
		ownID := r.enqueue(t, "sleep", `{"for":"1s"}`)
		other, _, err := enqueued(r.svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "p", Kind: "sleep", Payload: []byte(`{"for":"1s"}`)}))
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				if _, _, err := svc.Wait(ctx, "o", ownID, "", 5*time.Second); err != nil {
					t.Errorf("an open wait: %v", err)
				}
			})
		}
		synctest.Wait()
		var re *jobs.RequestError
		if _, _, err := svc.Wait(ctx, "o", ownID, "", time.Second); !errors.As(err, &re) || re.Code != "too_many_waits" || re.RetryAfter() <= 0 {
			t.Fatalf("a third wait: %v, want too_many_waits with a Retry-After", err)
		}
		if _, _, err := svc.Wait(ctx, "p", other.ID, "", time.Second); err != nil {
			t.Fatalf("another owner's wait: %v", err)
		}
		wg.Wait()
		if _, _, err := svc.Wait(ctx, "o", ownID, "", time.Second); err != nil {
			t.Fatalf("a wait after the others ended: %v", err)
		}
		// Two waits whose functions died hold their slots until their
		// leases end.
		key, now := "~waits#"+wire.OwnerKey("o"), time.Now()
		for _, h := range []string{"dead-1", "dead-2"} {
			if st, err := mem.AcquireSlot(ctx, key, driver.SlotClaim{Holder: h, Max: 2, LeaseUntil: now.Add(3 * time.Second), At: now}); err != nil || st != driver.SlotHeld {
				t.Fatalf("a dead wait's slot: %v, %v", st, err)
			}
		}
		if _, _, err := svc.Wait(ctx, "o", ownID, "", time.Second); !errors.As(err, &re) || re.Code != "too_many_waits" {
			t.Fatalf("a wait beside two dead ones: %v, want too_many_waits", err)
		}
		time.Sleep(3 * time.Second)
		if _, _, err := svc.Wait(ctx, "o", ownID, "", time.Second); err != nil {
			t.Fatalf("a wait after the dead ones' leases: %v", err)
		}
	})
}

// A wait on a job whose final result is kept in an item of its own
// answers that result, and the version GET answers for the same job: a
// client waits from GET's ETag and never sees a null result.
func TestWaitReadsAResultKeptApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := jobstest.NewMemStore(nil)
		mem.KeepPayloadsApart(100)
		r := newEngineRig(t, mem, mem, jobs.Config{}, func(reg *jobs.Registry) {
			jobs.MustRegister(reg, "big", func(ctx context.Context, _ *jobs.Job[struct{}]) (jobs.JSON[string], error) {
				time.Sleep(time.Second)
				return jobs.JSON[string]{V: strings.Repeat("r", 1000)}, nil
			}, nil)
		})
		id := r.enqueue(t, "big", `{}`)
		go r.worker.HandleSQS(ctx, sqsEvent(message.Encode(id)))
		synctest.Wait()
		running, err := r.svc.Get(ctx, "o", id)
		if err != nil || running.Status != jobs.StatusRunning {
			t.Fatalf("get: %+v %v", running, err)
		}
		v, changed, err := r.svc.Wait(ctx, "o", id, running.Version(), 5*time.Second)
		if err != nil || !changed || v.Status != jobs.StatusSucceeded || len(v.Result) < 1000 {
			t.Fatalf("wait: %s %v %v, result %d bytes; want it succeeded with its result", v.Status, changed, err, len(v.Result))
		}
		if rec := r.get(t, id); rec.ResultRef == "" {
			t.Fatal("the result is not kept apart: the test tests nothing")
		}
		got, err := r.svc.Get(ctx, "o", id)
		if err != nil || got.Version() != v.Version() {
			t.Fatalf("GET's version %s, the wait's %s (%v)", got.Version(), v.Version(), err)
		}
		// Waiting from that version: nothing changes, no read answers early.
		start := time.Now()
		if _, changed, err := r.svc.Wait(ctx, "o", id, got.Version(), 2*time.Second); err != nil || changed || time.Since(start) != 2*time.Second {
			t.Fatalf("a wait from the ended job's version: changed %v after %v, %v", changed, time.Since(start), err)
		}
	})
}
