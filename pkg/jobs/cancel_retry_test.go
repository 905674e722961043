package jobs_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// A running job whose handler ignores its context is
// cancelled, and its owner retries it at once and again every half second.
// Every retry is refused (ErrNotResubmittable: 409 not_retryable over
// HTTP) while the job runs and, once recorded cancelled, while the
// abandoned run's lease lasts (its handler may still be going); the first
// accepted retry comes after the lease, and its run never overlaps the
// first: the handler never runs twice at once.
func TestCancelThenRetryNeverRunsTheHandlerTwiceAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		mem := jobstest.NewMemStore(nil)
		var running, most, runs atomic.Int32
		r := newEngineRig(t, mem, mem, jobs.Config{CancelCheck: time.Second}, func(reg *jobs.Registry) {
			jobs.MustRegister(reg, "stubborn", func(context.Context, *jobs.Job[sleepPayload]) (jobs.NoResult, error) {
				n := running.Add(1)
				defer running.Add(-1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				if runs.Add(1) == 1 {
					// The first run ignores its context (the cancel, then its
					// deadline at 12 s) and returns at 14 s, before its lease
					// (15 s) ends.
					time.Sleep(14 * time.Second)
				}
				return jobs.NoResult{}, nil
			}, nil)
		})
		id := r.enqueue(t, "stubborn", `{}`)
		start := time.Now()
		deliver := func() {
			wctx, cancel := context.WithTimeout(ctx, 15*time.Second) // lease: 15 s
			defer cancel()
			if resp, _ := r.worker.HandleSQS(wctx, sqsEvent(message.Encode(id))); len(resp.BatchItemFailures) != 0 {
				t.Errorf("failures %v", failedIDs(resp))
			}
		}
		first := make(chan struct{})
		go func() { defer close(first); deliver() }()
		synctest.Wait() // the handler is running
		if v, err := r.svc.Cancel(ctx, "o", id); err != nil || v.Status != jobs.StatusRunning || !v.CancelRequested {
			t.Fatalf("cancel of the running job: %+v, %v; want its cancel requested", v, err)
		}
		leaseEnd := r.get(t, id).LeaseUntil
		var accepted time.Duration
		for accepted == 0 {
			_, err := r.svc.Resubmit(ctx, "o", id)
			switch {
			case err == nil:
				accepted = time.Since(start)
			case !errors.Is(err, jobs.ErrNotResubmittable):
				t.Fatalf("retry at %v: %v, want ErrNotResubmittable or success", time.Since(start), err)
			case time.Since(start) > time.Minute:
				t.Fatal("the retry was never accepted")
			default:
				time.Sleep(500 * time.Millisecond)
			}
		}
		if at := start.Add(accepted); at.Before(leaseEnd) {
			t.Errorf("the retry was accepted at %v, before the abandoned run's lease ended (%v)", accepted, leaseEnd.Sub(start))
		}
		second := make(chan struct{})
		go func() { defer close(second); deliver() }() // the retry's run, at once
		<-first
		<-second
		if got := r.get(t, id); got.Status != jobs.StatusSucceeded || runs.Load() != 2 {
			t.Fatalf("after the retry: %s, %d runs; want succeeded after 2", got.Status, runs.Load())
		}
		if n := most.Load(); n != 1 {
			t.Fatalf("the handler ran %d times at once", n)
		}
	})
}
