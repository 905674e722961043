package jobs_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// lifecycle is a service and worker on a fake clock, with a queue whose
// messages the test delivers by hand.
type lifecycle struct {
	clock  *jobstest.Clock
	store  *jobstest.MemStore
	queue  *jobstest.MemQueue
	svc    *jobs.Service
	worker *jobs.Worker
	next   int // index of the next undelivered message in queue.Sent()
}

type attemptPayload struct {
	FailTimes int    `json:"fail_times"`
	Code      string `json:"code,omitempty"`
}

func newLifecycle(t *testing.T, policy jobs.RetryPolicy, handler func(context.Context, *jobs.Job[attemptPayload]) (jobs.NoResult, error)) *lifecycle {
	t.Helper()
	l := &lifecycle{clock: jobstest.NewClock(time.Now().Truncate(time.Millisecond)), queue: &jobstest.MemQueue{}}
	l.store = jobstest.NewMemStore(l.clock)
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "flaky", handler, &jobs.KindOpts{Retry: policy, FailureCodes: []string{"rate_limited"}})
	l.svc, _ = testroles.Service(jobs.Config{Registry: reg, Store: l.store, Queue: l.queue, Clock: l.clock})
	var err error
	l.worker, err = testroles.Worker(jobs.Config{Registry: reg, Store: l.store, Queue: l.queue, Clock: l.clock, CancelCheck: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// deliver hands every message sent since the last call to the worker.
func (l *lifecycle) deliver(t *testing.T) {
	t.Helper()
	sent := l.queue.Sent()
	var ev events.SQSEvent
	for ; l.next < len(sent); l.next++ {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: sent[l.next], Body: message.Encode(sent[l.next])})
	}
	if len(ev.Records) == 0 {
		return
	}
	resp, _ := l.worker.HandleSQS(context.Background(), ev)
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", failedIDs(resp))
	}
}

func (l *lifecycle) get(t *testing.T, id string) *driver.Record {
	t.Helper()
	rec, err := l.store.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func failingUntil(runs *atomic.Int32) func(context.Context, *jobs.Job[attemptPayload]) (jobs.NoResult, error) {
	return func(_ context.Context, j *jobs.Job[attemptPayload]) (jobs.NoResult, error) {
		n := runs.Add(1)
		if int(n) <= j.Payload.FailTimes {
			if j.Payload.Code != "" {
				return jobs.NoResult{}, jobs.Retry(jobs.Fail(j.Payload.Code, errors.New("429 from upstream")))
			}
			return jobs.NoResult{}, jobs.Retry(errors.New("connection reset"))
		}
		return jobs.NoResult{}, nil
	}
}

func TestRetryableFailureSucceedsOnAttemptThree(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	l := newLifecycle(t, jobs.RetryPolicy{MaxAttempts: 5, BaseDelay: time.Second, MaxDelay: time.Minute}, failingUntil(&runs))
	rec, _, err := enqueued(l.svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "o", Kind: "flaky", Payload: []byte(`{"fail_times":2}`)}))
	if err != nil {
		t.Fatal(err)
	}
	l.deliver(t) // attempt 1 fails and is requeued with a delayed message
	got := l.get(t, rec.ID)
	if got.Status != jobs.StatusQueued || got.Attempt != 1 || got.LastError != jobs.CodeInternal || !got.RunAt.After(l.clock.Now()) {
		t.Fatalf("after attempt 1: %+v", got)
	}
	if d := l.queue.Delay(rec.ID); d < 500*time.Millisecond || d > time.Second {
		t.Fatalf("retry message delayed %v, want the first backoff (0.5s..1s)", d)
	}
	if v, _ := l.svc.Get(context.Background(), "o", rec.ID); v.RunAt == nil || v.LastError == nil || *v.LastError != jobs.CodeInternal {
		t.Fatalf("view %+v does not show the next run time and the last error", v)
	}
	for range 2 {
		l.clock.Advance(time.Minute)
		l.deliver(t)
	}
	got = l.get(t, rec.ID)
	if got.Status != jobs.StatusSucceeded || got.Attempt != 3 || runs.Load() != 3 {
		t.Fatalf("got %s attempt %d after %d runs, want succeeded on attempt 3", got.Status, got.Attempt, runs.Load())
	}
}

func TestRetriesExhausted(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	l := newLifecycle(t, jobs.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Second}, failingUntil(&runs))
	rec, _, _ := enqueued(l.svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "o", Kind: "flaky", Payload: []byte(`{"fail_times":99,"code":"rate_limited"}`)}))
	for range 5 {
		l.deliver(t)
		l.clock.Advance(time.Hour)
	}
	got := l.get(t, rec.ID)
	if got.Status != jobs.StatusFailed || got.ErrorCode != "rate_limited" || got.Attempt != 3 || runs.Load() != 3 {
		t.Fatalf("got %s %q attempt %d runs %d, want failed rate_limited after 3", got.Status, got.ErrorCode, got.Attempt, runs.Load())
	}
}

// A retry through the API (Service.Resubmit: POST /v1/jobs/{id}/retry)
// restarts the kind's retry policy: a job that spent its 3 attempts and
// failed, retried by its owner, fails again and gets its automatic retries
// again, 3 more attempts (4 to 6; the attempt count goes on), before it
// fails for good (docs/operations/OPERATIONS.md says so).
func TestManualRetryRestartsTheRetryPolicy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var runs atomic.Int32
	l := newLifecycle(t, jobs.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Second}, failingUntil(&runs))
	rec, _, _ := enqueued(l.svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "flaky", Payload: []byte(`{"fail_times":99,"code":"rate_limited"}`)}))
	for range 5 {
		l.deliver(t)
		l.clock.Advance(time.Hour)
	}
	if got := l.get(t, rec.ID); got.Status != jobs.StatusFailed || got.Attempt != 3 {
		t.Fatalf("before the retry: %s after %d attempts, want failed after 3", got.Status, got.Attempt)
	}
	if _, err := l.svc.Resubmit(ctx, "o", rec.ID); err != nil {
		t.Fatal(err)
	}
	l.deliver(t) // attempt 4 fails: retried automatically, as a first attempt would be
	if got := l.get(t, rec.ID); got.Status != jobs.StatusQueued || got.Attempt != 4 || got.LastError != "rate_limited" || !got.RunAt.After(l.clock.Now()) {
		t.Fatalf("after the manual retry's first failure: %s after %d attempts (last error %q, run at %v); want queued for an automatic retry",
			got.Status, got.Attempt, got.LastError, got.RunAt)
	}
	for range 5 {
		l.clock.Advance(time.Hour)
		l.deliver(t)
	}
	if got := l.get(t, rec.ID); got.Status != jobs.StatusFailed || got.ErrorCode != "rate_limited" || got.Attempt != 6 || runs.Load() != 6 {
		t.Fatalf("got %s %q after %d attempts and %d runs, want failed rate_limited after 6", got.Status, got.ErrorCode, got.Attempt, runs.Load())
	}
}

func TestDefaultPolicyKeepsFailuresFinal(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	l := newLifecycle(t, jobs.RetryPolicy{}, failingUntil(&runs))
	rec, _, _ := enqueued(l.svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "o", Kind: "flaky", Payload: []byte(`{"fail_times":1}`)}))
	l.deliver(t)
	if got := l.get(t, rec.ID); got.Status != jobs.StatusFailed || runs.Load() != 1 {
		t.Fatalf("got %s after %d runs", got.Status, runs.Load())
	}
}

func TestDelayedJobRunsOnlyWhenDue(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	l := newLifecycle(t, jobs.RetryPolicy{}, failingUntil(&runs))
	ctx := context.Background()
	rec, _, err := enqueued(l.svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "flaky", Payload: []byte(`{}`), EnqueueOpts: jobs.EnqueueOpts{RunAt: l.clock.Now().Add(10 * time.Minute)}}))
	if err != nil {
		t.Fatal(err)
	}
	if d := l.queue.Delay(rec.ID); d != 10*time.Minute {
		t.Fatalf("message delayed %v, want 10m", d)
	}
	l.deliver(t) // delivered early (as a redelivery could be)
	if got := l.get(t, rec.ID); got.Status != jobs.StatusQueued || runs.Load() != 0 {
		t.Fatalf("ran before its time: %s, %d runs", got.Status, runs.Load())
	}
	l.clock.Advance(10 * time.Minute)
	l.deliver(t)
	if got := l.get(t, rec.ID); got.Status != jobs.StatusSucceeded || runs.Load() != 1 {
		t.Fatalf("at its time: %s, %d runs", got.Status, runs.Load())
	}
	// Days ahead: no message at all; the sweeper sends it when due.
	far, _, _ := enqueued(l.svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "flaky", Payload: []byte(`{}`), EnqueueOpts: jobs.EnqueueOpts{RunAt: l.clock.Now().Add(72 * time.Hour)}}))
	before := len(l.queue.Sent())
	sweeper, _ := testroles.Sweeper(jobs.Config{Registry: jobs.NewRegistry(), Store: l.store, Queue: l.queue, Clock: l.clock})
	if rep, _ := sweeper.Sweep(ctx); rep.Resent != 0 || len(l.queue.Sent()) != before {
		t.Fatalf("a job three days out was sent now: %+v", rep)
	}
	l.clock.Advance(72*time.Hour - 5*time.Minute)
	if rep, _ := sweeper.Sweep(ctx); rep.Resent != 0 {
		t.Fatalf("sent 5 minutes early without being due in the index: %+v", rep)
	}
	l.clock.Advance(5 * time.Minute)
	if rep, _ := sweeper.Sweep(ctx); rep.Resent != 1 {
		t.Fatalf("not sent when due: %+v", rep)
	}
	l.deliver(t)
	if got := l.get(t, far.ID); got.Status != jobs.StatusSucceeded {
		t.Fatalf("far job %s", got.Status)
	}
	if _, _, err := enqueued(l.svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "flaky", Payload: []byte(`{}`), EnqueueOpts: jobs.EnqueueOpts{RunAt: l.clock.Now().Add(400 * 24 * time.Hour)}})); !errors.Is(err, jobs.ErrInvalidRequest) {
		t.Fatalf("400 days ahead: %v", err)
	}
}

func TestCancelQueuedAndFinished(t *testing.T) {
	t.Parallel()
	var runs atomic.Int32
	l := newLifecycle(t, jobs.RetryPolicy{}, failingUntil(&runs))
	ctx := context.Background()
	rec, _, _ := enqueued(l.svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "flaky", Payload: []byte(`{}`)}))
	if _, err := l.svc.Cancel(ctx, "someone-else", rec.ID); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("another owner's cancel: %v", err)
	}
	got, err := l.svc.Cancel(ctx, "o", rec.ID)
	if err != nil || got.Status != jobs.StatusCancelled {
		t.Fatalf("cancel queued: %+v %v", got, err)
	}
	l.deliver(t)
	if runs.Load() != 0 {
		t.Fatal("a cancelled job ran")
	}
	if _, err := l.svc.Cancel(ctx, "o", rec.ID); !errors.Is(err, jobs.ErrAlreadyFinal) {
		t.Fatalf("cancel again: %v", err)
	}
}

// A running job's cancel is noticed while its handler works, whether the
// handler honours its context or not, and nothing but cancelled lands, once
// the handler has returned.
func TestCancelRunning(t *testing.T) {
	t.Parallel()
	for _, honours := range []bool{true, false} {
		release := make(chan struct{})
		started := make(chan string, 1)
		l := newLifecycle(t, jobs.RetryPolicy{}, func(ctx context.Context, j *jobs.Job[attemptPayload]) (jobs.NoResult, error) {
			started <- j.ID
			if honours {
				<-ctx.Done()
				return jobs.NoResult{}, ctx.Err()
			}
			<-release // ignores its context, then claims success
			return jobs.NoResult{}, nil
		})
		ctx := context.Background()
		rec, _, _ := enqueued(l.svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "flaky", Payload: []byte(`{}`)}))
		done := make(chan struct{})
		go func() { l.deliver(t); close(done) }()
		<-started
		got, err := l.svc.Cancel(ctx, "o", rec.ID)
		if err != nil || got.Status != jobs.StatusRunning || !got.CancelRequested {
			t.Fatalf("cancel running: %+v %v", got, err)
		}
		close(release)
		<-done
		if final := l.get(t, rec.ID); final.Status != jobs.StatusCancelled {
			t.Fatalf("honours ctx %v: ended %s, want cancelled", honours, final.Status)
		}
	}
}
