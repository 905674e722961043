package jobs_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// Unique jobs and debounce (docs/guide/FLOW_CONTROL.md), one test per mode, through the
// Runner: the real Service, Worker and Sweeper over memory.

type syncPayload struct {
	Account string `json:"account"`
	N       int    `json:"n"`
}

// uniqueRig is a Runner with the kind "sync", whose runs it records;
// during is called inside each run.
type uniqueRig struct {
	r    *jobstest.Runner
	kind jobs.Kind[syncPayload]
	mu   sync.Mutex
	runs []syncPayload
}

func newUniqueRig(t *testing.T, during func(ctx context.Context, u *uniqueRig, p syncPayload)) *uniqueRig {
	t.Helper()
	u := &uniqueRig{}
	reg := jobs.NewRegistry()
	u.kind = jobs.MustRegister(reg, "sync", func(ctx context.Context, j *jobs.Job[syncPayload]) (jobs.NoResult, error) {
		u.mu.Lock()
		u.runs = append(u.runs, j.Payload)
		u.mu.Unlock()
		if during != nil {
			during(ctx, u, j.Payload)
		}
		return jobs.NoResult{}, nil
	}, nil)
	var err error
	if u.r, err = jobstest.NewRunner(reg); err != nil {
		t.Fatal(err)
	}
	return u
}

func (u *uniqueRig) enqueue(t *testing.T, p syncPayload, opts jobs.EnqueueOpts) *jobs.EnqueueResult {
	t.Helper()
	res, err := u.kind.Enqueue(context.Background(), u.r.Service, "team", p, &opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func (u *uniqueRig) work(t *testing.T) {
	t.Helper()
	if _, err := u.r.Work(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func wantNew(t *testing.T, res *jobs.EnqueueResult, not ...string) {
	t.Helper()
	if res.Replayed || res.Duplicate != "" {
		t.Fatalf("enqueue answered a duplicate (%q) of %s, want a new job", res.Duplicate, res.Job.ID)
	}
	for _, id := range not {
		if res.Job.ID == id {
			t.Fatalf("new job has the id %s of an earlier one", id)
		}
	}
}

func wantDuplicate(t *testing.T, res *jobs.EnqueueResult, of, why string) {
	t.Helper()
	if !res.Replayed || res.Duplicate != why || res.Job.ID != of {
		t.Fatalf("enqueue: job %s replayed %v duplicate %q, want a %q duplicate of %s", res.Job.ID, res.Replayed, res.Duplicate, why, of)
	}
}

// Until finished (the default): a second enqueue while the first is
// queued, or running, answers with it; once it finished, a new job.
func TestUniqueUntilFinished(t *testing.T) {
	u := newUniqueRig(t, func(ctx context.Context, u *uniqueRig, p syncPayload) {
		if p.N == 0 { // while it runs
			res, err := u.kind.Enqueue(ctx, u.r.Service, "team", syncPayload{N: 2}, &jobs.EnqueueOpts{UniqueKey: "acct-1"})
			if err != nil || res.Duplicate != "unique" {
				t.Errorf("enqueue while the holder runs: %+v %v, want a duplicate", res, err)
			}
		}
	})
	key := jobs.EnqueueOpts{UniqueKey: "acct-1"}
	first := u.enqueue(t, syncPayload{N: 0}, key)
	wantNew(t, first)
	wantDuplicate(t, u.enqueue(t, syncPayload{N: 1}, key), first.Job.ID, "unique")
	// Another owner's key, and another key, are their own.
	other, err := u.kind.Enqueue(context.Background(), u.r.Service, "other-team", syncPayload{N: 5}, &key)
	if err != nil {
		t.Fatal(err)
	}
	wantNew(t, other, first.Job.ID)
	wantNew(t, u.enqueue(t, syncPayload{N: 5}, jobs.EnqueueOpts{UniqueKey: "acct-2"}), first.Job.ID)
	u.work(t)
	wantNew(t, u.enqueue(t, syncPayload{N: 3}, key), first.Job.ID)
	if len(u.runs) != 3 {
		t.Fatalf("%d runs, want 3 (the holder, the other owner's, the other key's)", len(u.runs))
	}
}

// Until started: once the holder starts, one more may wait while it
// runs, and no third.
func TestUniqueUntilStarted(t *testing.T) {
	var waiting []*jobs.EnqueueResult
	u := newUniqueRig(t, func(ctx context.Context, u *uniqueRig, p syncPayload) {
		if p.N != 0 {
			return
		}
		for n := 1; n <= 2; n++ {
			res, err := u.kind.Enqueue(ctx, u.r.Service, "team", syncPayload{N: n}, &jobs.EnqueueOpts{UniqueKey: "k", Unique: jobs.UniqueUntilStarted})
			if err != nil {
				t.Error(err)
				return
			}
			waiting = append(waiting, res)
		}
	})
	opts := jobs.EnqueueOpts{UniqueKey: "k", Unique: jobs.UniqueUntilStarted}
	first := u.enqueue(t, syncPayload{N: 0}, opts)
	wantDuplicate(t, u.enqueue(t, syncPayload{N: 9}, opts), first.Job.ID, "unique")
	u.work(t)
	if len(waiting) != 2 {
		t.Fatal("the holder's run did not enqueue")
	}
	wantNew(t, waiting[0], first.Job.ID)
	wantDuplicate(t, waiting[1], waiting[0].Job.ID, "unique")
	if len(u.runs) != 2 || u.runs[1].N != 1 {
		t.Fatalf("runs %+v, want the holder and the one that waited", u.runs)
	}
}

// For a period: duplicates until the period ends, whatever the job did.
func TestUniqueForPeriod(t *testing.T) {
	u := newUniqueRig(t, nil)
	opts := jobs.EnqueueOpts{UniqueKey: "daily", Unique: jobs.UniqueForPeriod, UniqueFor: time.Hour}
	first := u.enqueue(t, syncPayload{}, opts)
	u.work(t)
	u.r.Clock.Advance(59 * time.Minute)
	dup := u.enqueue(t, syncPayload{}, opts)
	wantDuplicate(t, dup, first.Job.ID, "unique")
	if dup.Job.Status != jobs.StatusSucceeded {
		t.Fatalf("the duplicate's job is %s, want the finished holder", dup.Job.Status)
	}
	u.r.Clock.Advance(time.Minute)
	wantNew(t, u.enqueue(t, syncPayload{}, opts), first.Job.ID)
}

// Debounce: ten enqueues a second apart with a window of 5 s make one
// job, which runs once, 5 s after the last, with the last payload.
func TestDebounceRunsOnceWithTheLastPayload(t *testing.T) {
	u := newUniqueRig(t, nil)
	opts := jobs.EnqueueOpts{UniqueKey: "reindex", Unique: jobs.UniqueDebounce, UniqueFor: 5 * time.Second}
	first := u.enqueue(t, syncPayload{N: 0}, opts)
	wantNew(t, first)
	for n := 1; n < 10; n++ {
		u.r.Clock.Advance(time.Second)
		u.work(t)
		res := u.enqueue(t, syncPayload{N: n}, opts)
		wantDuplicate(t, res, first.Job.ID, "debounced")
		if want := u.r.Clock.Now().Add(5 * time.Second); res.Job.RunAt == nil || !res.Job.RunAt.Equal(want) {
			t.Fatalf("debounced job runs at %v, want %v", res.Job.RunAt, want)
		}
	}
	u.r.Clock.Advance(4 * time.Second)
	u.work(t)
	if len(u.runs) != 0 {
		t.Fatalf("ran %d times within the window", len(u.runs))
	}
	u.r.Clock.Advance(time.Second)
	u.work(t)
	if len(u.runs) != 1 || u.runs[0].N != 9 {
		t.Fatalf("runs %+v, want one, with the last payload (n 9)", u.runs)
	}
	// Once it ran, the key is free: the next enqueue makes a new job.
	wantNew(t, u.enqueue(t, syncPayload{N: 10}, opts), first.Job.ID)
}

// 100 concurrent enqueues with one key make exactly one job.
func TestConcurrentUniqueEnqueuesMakeOneJob(t *testing.T) {
	u := newUniqueRig(t, nil)
	var wg sync.WaitGroup
	results := make([]*jobs.EnqueueResult, 100)
	for i := range results {
		wg.Go(func() {
			res, err := u.kind.Enqueue(context.Background(), u.r.Service, "team", syncPayload{N: i}, &jobs.EnqueueOpts{UniqueKey: "one"})
			if err != nil {
				t.Error(err)
				return
			}
			results[i] = res
		})
	}
	wg.Wait()
	made := 0
	for _, res := range results {
		if res == nil {
			t.FailNow()
		}
		if res.Duplicate == "" {
			made++
		}
		if res.Job.ID != results[0].Job.ID {
			t.Fatalf("answers name jobs %s and %s", results[0].Job.ID, res.Job.ID)
		}
	}
	if made != 1 {
		t.Fatalf("%d enqueues made a job, want 1", made)
	}
}

// Bad uniqueness options are refused, and change nothing.
func TestUniqueOptionsAreChecked(t *testing.T) {
	u := newUniqueRig(t, nil)
	for _, opts := range []jobs.EnqueueOpts{
		{Unique: jobs.UniqueUntilFinished},             // no key
		{UniqueKey: "k", Unique: "forever"},            // no such mode
		{UniqueKey: "k", Unique: jobs.UniqueForPeriod}, // no period
		{UniqueKey: "k", Unique: jobs.UniqueDebounce},  // no window
		{UniqueKey: "k", IdempotencyKey: "i"},          // both
		{UniqueKey: "k\x00"},                           // not printable
		{UniqueKey: "k", Unique: jobs.UniqueDebounce, UniqueFor: -time.Second},
	} {
		_, err := u.kind.Enqueue(context.Background(), u.r.Service, "team", syncPayload{}, &opts)
		if !errors.Is(err, jobs.ErrInvalidRequest) {
			t.Fatalf("%+v: %v, want ErrInvalidRequest", opts, err)
		}
	}
	// The key is still free.
	wantNew(t, u.enqueue(t, syncPayload{}, jobs.EnqueueOpts{UniqueKey: "k"}))
}

// A job not started by its StartBy ends cancelled, code expired, and its
// handler never runs.
func TestStartByExpiresAJobThatDidNotStart(t *testing.T) {
	u := newUniqueRig(t, nil)
	now := u.r.Clock.Now()
	late := u.enqueue(t, syncPayload{N: 1}, jobs.EnqueueOpts{Delay: 2 * time.Minute, StartBy: now.Add(time.Minute)})
	onTime := u.enqueue(t, syncPayload{N: 2}, jobs.EnqueueOpts{Delay: 30 * time.Second, StartBy: now.Add(time.Minute)})
	u.r.Clock.Advance(30 * time.Second)
	u.work(t)
	u.r.Clock.Advance(90 * time.Second)
	u.work(t)
	v, err := u.r.Service.Get(context.Background(), "team", late.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != jobs.StatusCancelled || v.Error == nil || *v.Error != jobs.CodeExpired {
		t.Fatalf("late job %s (%v), want cancelled, expired", v.Status, v.Error)
	}
	if got, _ := u.r.Service.Get(context.Background(), "team", onTime.Job.ID); got.Status != jobs.StatusSucceeded {
		t.Fatalf("on-time job %s, want succeeded", got.Status)
	}
	if len(u.runs) != 1 || u.runs[0].N != 2 {
		t.Fatalf("runs %+v, want only the on-time job", u.runs)
	}
}

// StartBy bounds a job's first start only: a job that started in time and
// is retried after its StartBy runs its retry.
func TestStartByDoesNotExpireARetry(t *testing.T) {
	reg := jobs.NewRegistry()
	runs := 0
	kind := jobs.MustRegister(reg, "flaky", func(ctx context.Context, j *jobs.Job[syncPayload]) (jobs.NoResult, error) {
		runs++
		if runs == 1 {
			return jobs.NoResult{}, jobs.RetryAfter(2*time.Minute, errors.New("later"))
		}
		return jobs.NoResult{}, nil
	}, &jobs.KindOpts{Retry: jobs.RetryPolicy{MaxAttempts: 3}})
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := kind.Enqueue(ctx, r.Service, "team", syncPayload{}, &jobs.EnqueueOpts{StartBy: r.Clock.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	r.Clock.Advance(3 * time.Minute)
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	v, err := r.Service.Get(ctx, "team", res.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != jobs.StatusSucceeded || v.Attempt != 2 || runs != 2 {
		t.Fatalf("%s on attempt %d after %d runs, want succeeded on attempt 2: a retry after start_by was expired", v.Status, v.Attempt, runs)
	}
}

// A manual retry of a failed job unique until it finished takes its key
// again: refused (409 unique_key_held) while another job of the owner holds
// it, and once it runs again, holding it against new enqueues.
func TestRetryOfAUniqueJobTakesItsKeyAgain(t *testing.T) {
	ctx := context.Background()
	reg := jobs.NewRegistry()
	fail := true
	kind := jobs.MustRegister(reg, "sync", func(ctx context.Context, j *jobs.Job[syncPayload]) (jobs.NoResult, error) {
		if fail && j.Payload.N == 1 {
			return jobs.NoResult{}, jobs.Fail("broken", errors.New("scripted"))
		}
		return jobs.NoResult{}, nil
	}, &jobs.KindOpts{FailureCodes: []string{"broken"}})
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	opts := &jobs.EnqueueOpts{UniqueKey: "acct-1", Unique: jobs.UniqueUntilFinished}
	first, err := kind.Enqueue(ctx, r.Service, "team", syncPayload{N: 1}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	// It failed and freed its key: another job takes it, and waits.
	r.Clock.Advance(time.Minute)
	second, err := kind.Enqueue(ctx, r.Service, "team", syncPayload{N: 2}, &jobs.EnqueueOpts{UniqueKey: "acct-1", Unique: jobs.UniqueUntilFinished, Delay: time.Hour})
	if err != nil || second.Duplicate != "" {
		t.Fatalf("a new job with the freed key: %v, duplicate %q", err, second.Duplicate)
	}
	var re *jobs.RequestError
	if _, err := r.Service.Resubmit(ctx, "team", first.Job.ID); !errors.As(err, &re) || re.Code != "unique_key_held" {
		t.Fatalf("retry while another job holds the key: %v, want unique_key_held", err)
	}
	if _, err := r.Service.Cancel(ctx, "team", second.Job.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Work(ctx); err != nil { // the cancel's steps free the key
		t.Fatal(err)
	}
	fail = false
	if _, err := r.Service.Resubmit(ctx, "team", first.Job.ID); err != nil {
		t.Fatalf("retry once the key is free: %v", err)
	}
	third, err := kind.Enqueue(ctx, r.Service, "team", syncPayload{N: 3}, opts)
	if err != nil || third.Duplicate != "unique" || third.Job.ID != first.Job.ID {
		t.Fatalf("an enqueue with the key while the retry is queued: %v, duplicate %q of %s; want the retried job", err, third.Duplicate, third.Job.ID)
	}
}
