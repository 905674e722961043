package jobs_test

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

type napPayload struct {
	// For is how long the handler sleeps between its two steps; Until,
	// when set, is SleepUntil's time instead. Script, per run: "step"
	// asks for the sleep as a step, "goexit" calls runtime.Goexit itself.
	For    string    `json:"for"`
	Until  time.Time `json:"until,omitzero"`
	Script []string  `json:"script,omitempty"`
}

// napRig runs one "nap" kind (a step, a sleep, a step) in a
// jobstest.Runner, counting its runs and what each part of it did.
type napRig struct {
	r   *jobstest.Runner
	mu  sync.Mutex
	n   struct{ runs, before, after, deferred, recovered int }
	err error // what Sleep answered, when it returned an error
}

func newNapRig(t *testing.T) *napRig {
	t.Helper()
	s := &napRig{}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "nap", func(ctx context.Context, job *jobs.Job[napPayload]) (jobs.JSON[stepsResult], error) {
		s.mu.Lock()
		run := s.n.runs
		s.n.runs++
		s.mu.Unlock()
		script := ""
		if run < len(job.Payload.Script) {
			script = job.Payload.Script[run]
		}
		// A handler that recovers panics, and counts its deferred calls.
		defer func() {
			r := recover()
			s.mu.Lock()
			s.n.deferred++
			if r != nil {
				s.n.recovered++
			}
			s.mu.Unlock()
		}()
		if _, err := jobs.Step(ctx, job, "before", func(context.Context) (int, error) {
			s.mu.Lock()
			s.n.before++
			s.mu.Unlock()
			return 1, nil
		}); err != nil {
			return jobs.JSON[stepsResult]{}, err
		}
		var err error
		switch d, _ := time.ParseDuration(job.Payload.For); {
		case script == "goexit":
			runtime.Goexit()
		case script == "step":
			_, err = jobs.Step(ctx, job, "nap", func(context.Context) (int, error) { return 0, nil })
		case !job.Payload.Until.IsZero():
			err = job.SleepUntil(ctx, "nap", job.Payload.Until)
		default:
			err = job.Sleep(ctx, "nap", d)
		}
		if err != nil {
			s.mu.Lock()
			s.err = err
			s.mu.Unlock()
			return jobs.JSON[stepsResult]{}, jobs.Fail("bad_sleep", err)
		}
		s.mu.Lock()
		s.n.after++
		s.mu.Unlock()
		return jobs.JSON[stepsResult]{V: stepsResult{Sum: 2}}, nil
	}, &jobs.KindOpts{FailureCodes: []string{"bad_sleep"}})
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	s.r = r
	return s
}

func (s *napRig) enqueue(t *testing.T, p string) string {
	t.Helper()
	res, err := s.r.Service.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "o", Kind: "nap", Payload: []byte(p)})
	if err != nil {
		t.Fatal(err)
	}
	return res.Job.ID
}

// work runs what is due and answers how many deliveries it made.
func (s *napRig) work(t *testing.T) int {
	t.Helper()
	n, err := s.r.Work(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (s *napRig) get(t *testing.T, id string) *jobs.View {
	t.Helper()
	v, err := s.r.Service.Get(context.Background(), "o", id)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A job that sleeps 2 days waits queued, on "sleep", until the sleep's
// end: no attempt spent, no worker held, no message delivered before its
// time; it resumes at its time (the sweep that finds it due sends it), its
// first step read back, and the code after Sleep runs once, in the run
// after the sleep.
func TestSleepHoldsNothingAndResumesAtItsTime(t *testing.T) {
	s := newNapRig(t)
	start := s.r.Clock.Now()
	id := s.enqueue(t, `{"for":"48h"}`)
	s.work(t)
	v := s.get(t, id)
	end := start.Add(48 * time.Hour)
	if v.Status != jobs.StatusQueued || v.WaitingOn != "sleep" || v.RunAt == nil || !v.RunAt.Equal(end) || v.Attempt != 0 {
		t.Fatalf("after the run that sleeps: %s waiting on %q, run at %v, attempt %d; want queued on sleep until %v, attempt 0",
			v.Status, v.WaitingOn, v.RunAt, v.Attempt, end)
	}
	if s.n.runs != 1 || s.n.before != 1 || s.n.after != 0 || s.n.deferred != 1 || s.n.recovered != 0 {
		t.Fatalf("the first run: %+v; want the step once, the code after Sleep never, the deferred call once", s.n)
	}
	if got, want := marks(v.Steps), "before step done "+start.Format(time.RFC3339)+"; nap sleep waiting "+start.Format(time.RFC3339)+" until "+end.Format(time.RFC3339); got != want {
		t.Fatalf("the sleeping job's steps: %s, want %s", got, want)
	}
	s.r.Clock.Set(end.Add(-time.Minute))
	if n := s.work(t); n != 0 {
		t.Fatalf("%d deliveries a minute before the sleep's end, want none", n)
	}
	s.r.Clock.Set(end)
	if n := s.work(t); n != 1 {
		t.Fatalf("%d deliveries at the sleep's end, want 1", n)
	}
	v = s.get(t, id)
	if v.Status != jobs.StatusSucceeded || v.Attempt != 1 || s.n.runs != 2 || s.n.before != 1 || s.n.after != 1 {
		t.Fatalf("after the sleep: %s attempt %d, counts %+v; want succeeded on attempt 1, two runs, each step once", v.Status, v.Attempt, s.n)
	}
	if got := marks(v.Steps); !strings.Contains(got, "; nap sleep done ") {
		t.Fatalf("the steps after the sleep: %s", got)
	}
}

// A sleep short enough for the queue's delay is its message's delay; one
// whose end has passed (SleepUntil) returns at once and stores nothing.
func TestShortSleepsAndPastEnds(t *testing.T) {
	s := newNapRig(t)
	id := s.enqueue(t, `{"for":"90s"}`)
	s.work(t)
	if v := s.get(t, id); v.WaitingOn != "sleep" {
		t.Fatalf("a 90 s sleep: %s on %q", v.Status, v.WaitingOn)
	}
	s.r.Clock.Advance(89 * time.Second)
	if n := s.work(t); n != 0 {
		t.Fatalf("%d deliveries before the sleep's end", n)
	}
	s.r.Clock.Advance(time.Second)
	s.work(t)
	if v := s.get(t, id); v.Status != jobs.StatusSucceeded {
		t.Fatalf("after a 90 s sleep: %s", v.Status)
	}

	s = newNapRig(t)
	past := s.r.Clock.Now().Add(-time.Hour).Format(time.RFC3339)
	id = s.enqueue(t, `{"until":"`+past+`"}`)
	s.work(t)
	if v := s.get(t, id); v.Status != jobs.StatusSucceeded || s.n.runs != 1 {
		t.Fatalf("SleepUntil a past time: %s after %d runs, want succeeded in one", v.Status, s.n.runs)
	}
}

// Sleep refuses an end past MaxDelay and stores nothing; a stored sleep
// asked for as a step, and a handler that ends its goroutine itself, fail
// the job with the reserved codes.
func TestSleepMisuse(t *testing.T) {
	s := newNapRig(t)
	id := s.enqueue(t, `{"for":"8785h"}`) // 366 days
	s.work(t)
	if v := s.get(t, id); v.Status != jobs.StatusFailed || *v.Error != "bad_sleep" || s.err == nil || !strings.Contains(s.err.Error(), "more than MaxDelay") {
		t.Fatalf("a sleep of 366 days: %s %v (%v)", v.Status, v.Error, s.err)
	}

	s = newNapRig(t)
	id = s.enqueue(t, `{"for":"1h","script":["","step"]}`)
	s.work(t)
	s.r.Clock.Advance(time.Hour)
	s.work(t)
	if v := s.get(t, id); v.Status != jobs.StatusFailed || *v.Error != jobs.CodeNondeterministic || s.n.after != 0 {
		t.Fatalf("a sleep asked for as a step in the next run: %s %v, counts %+v", v.Status, v.Error, s.n)
	}

	s = newNapRig(t)
	id = s.enqueue(t, `{"for":"1h","script":["goexit"]}`)
	s.work(t)
	if v := s.get(t, id); v.Status != jobs.StatusFailed || *v.Error != jobs.CodeInternal || s.n.deferred != 1 {
		t.Fatalf("a handler that called runtime.Goexit: %s %v, counts %+v", v.Status, v.Error, s.n)
	}
}

// A sleeping job is queued: its owner cancels it, and it never runs again.
func TestASleepingJobCancels(t *testing.T) {
	s := newNapRig(t)
	id := s.enqueue(t, `{"for":"1h"}`)
	s.work(t)
	if _, err := s.r.Service.Cancel(context.Background(), "o", id); err != nil {
		t.Fatal(err)
	}
	s.r.Clock.Advance(2 * time.Hour)
	s.work(t)
	if v := s.get(t, id); v.Status != jobs.StatusCancelled || s.n.runs != 1 {
		t.Fatalf("a sleeping job cancelled: %s after %d runs", v.Status, s.n.runs)
	}
}

// A sleep past the kind's MaxRunTime is refused when asked for, not
// ended timed_out when the job wakes; one within it sleeps.
func TestASleepPastMaxRunTimeIsRefused(t *testing.T) {
	var sleepErr error
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "nap", func(ctx context.Context, job *jobs.Job[napPayload]) (jobs.NoResult, error) {
		d, _ := time.ParseDuration(job.Payload.For)
		if sleepErr = job.Sleep(ctx, "nap", d); sleepErr != nil {
			return jobs.NoResult{}, jobs.Fail("bad_sleep", sleepErr)
		}
		return jobs.NoResult{}, nil
	}, &jobs.KindOpts{MaxRunTime: 2 * time.Hour, FailureCodes: []string{"bad_sleep"}})
	r := newRunner(t, reg)
	ctx := context.Background()
	v, _ := r.Service.Get(ctx, "o", runOnce(t, r, `{"for":"3h"}`))
	if v.Status != jobs.StatusFailed || *v.Error != "bad_sleep" || sleepErr == nil || !strings.Contains(sleepErr.Error(), "MaxRunTime") {
		t.Fatalf("a 3 h sleep of a kind whose runs last 2 h: %s %v (Sleep said %v); want refused", v.Status, v.Error, sleepErr)
	}
	short := runOnce(t, r, `{"for":"1h"}`)
	r.Clock.Advance(time.Hour)
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	if v, _ := r.Service.Get(ctx, "o", short); v.Status != jobs.StatusSucceeded {
		t.Fatalf("a 1 h sleep within MaxRunTime: %s %v", v.Status, v.Error)
	}
}

// A pause of its kind does not hide a sleep: the job shows its sleep
// (and the sleep's end) while it sleeps, the pause once it would run.
func TestASleepingJobShowsItsSleepUnderAPause(t *testing.T) {
	s := newNapRig(t)
	id := s.enqueue(t, `{"for":"1h"}`)
	s.work(t)
	ctx := context.Background()
	if _, err := s.r.Service.Pause(ctx, "", jobs.PauseRequest{Kind: "nap"}); err != nil {
		t.Fatal(err)
	}
	if v := s.get(t, id); v.WaitingOn != "sleep" {
		t.Fatalf("a sleeping job under a pause of its kind shows %q, want sleep", v.WaitingOn)
	}
	s.r.Clock.Advance(time.Hour)
	s.work(t)
	if v := s.get(t, id); v.Status != jobs.StatusQueued || v.WaitingOn != "paused" || s.n.runs != 1 {
		t.Fatalf("woken under a pause: %s on %q after %d runs, want queued on paused, not run", v.Status, v.WaitingOn, s.n.runs)
	}
}

// On a Job built by hand (a handler's unit test), a sleep passes at once.
func TestSleepOnAJobBuiltByHand(t *testing.T) {
	job := &jobs.Job[napPayload]{ID: "j"}
	if err := job.Sleep(context.Background(), "nap", 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := job.SleepUntil(context.Background(), "later", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
}

func newRunner(t *testing.T, reg *jobs.Registry) *jobstest.Runner {
	t.Helper()
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// runOnce enqueues a "nap" job with payload p on r, runs what is due, and
// returns the job's id.
func runOnce(t *testing.T, r *jobstest.Runner, p string) string {
	t.Helper()
	ctx := context.Background()
	res, err := r.Service.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "nap", Payload: []byte(p)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	return res.Job.ID
}

// A handler's deferred calls after a Sleep that suspended store nothing:
// a deferred Step or Checkpoint returns an error (the park's state, taken
// when the run suspended, stands), and the next run passes the sleep with
// its first step read back.
func TestDeferredCallsAfterASleepStoreNothing(t *testing.T) {
	var mu sync.Mutex
	var deferredErrs []error
	runs, tidied := 0, 0
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "nap", func(ctx context.Context, job *jobs.Job[napPayload]) (jobs.NoResult, error) {
		mu.Lock()
		runs++
		mu.Unlock()
		defer func() {
			_, serr := jobs.Step(ctx, job, "tidy", func(context.Context) (int, error) {
				mu.Lock()
				tidied++
				mu.Unlock()
				return 1, nil
			})
			cerr := job.Checkpoint(ctx, map[string]int{"n": 1})
			mu.Lock()
			deferredErrs = append(deferredErrs, serr, cerr)
			mu.Unlock()
		}()
		if err := job.Sleep(ctx, "nap", time.Hour); err != nil {
			return jobs.NoResult{}, err
		}
		return jobs.NoResult{}, nil
	}, nil)
	r := newRunner(t, reg)
	ctx := context.Background()
	id := runOnce(t, r, `{}`)
	if len(deferredErrs) != 2 || deferredErrs[0] == nil || deferredErrs[1] == nil || tidied != 0 {
		t.Fatalf("the deferred Step and Checkpoint after a suspending Sleep: %v, the step's function ran %d times; want two errors, no run", deferredErrs, tidied)
	}
	if v, _ := r.Service.Get(ctx, "o", id); v.WaitingOn != "sleep" {
		t.Fatalf("after the run that slept: %s on %q", v.Status, v.WaitingOn)
	}
	r.Clock.Advance(time.Hour)
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	v, _ := r.Service.Get(ctx, "o", id)
	if v.Status != jobs.StatusSucceeded || runs != 2 || tidied != 1 || deferredErrs[2] != nil || deferredErrs[3] != nil {
		t.Fatalf("after the sleep: %s after %d runs, tidied %d times, deferred errors %v; want succeeded in two runs, the deferred calls landing once",
			v.Status, runs, tidied, deferredErrs)
	}
}

// A Sleep on a goroutine other than the handler's cannot end the handler:
// a handler that returns after one fails with CodeInternal instead of
// parking with a state that is not its own.
func TestASleepOffTheHandlersGoroutineFails(t *testing.T) {
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "nap", func(ctx context.Context, job *jobs.Job[napPayload]) (jobs.NoResult, error) {
		var wg sync.WaitGroup
		wg.Go(func() { _ = job.Sleep(ctx, "nap", time.Hour) })
		wg.Wait()
		return jobs.NoResult{}, nil
	}, nil)
	r := newRunner(t, reg)
	ctx := context.Background()
	id := runOnce(t, r, `{}`)
	if v, _ := r.Service.Get(ctx, "o", id); v.Status != jobs.StatusFailed || *v.Error != jobs.CodeInternal {
		t.Fatalf("a handler that slept on another goroutine and returned: %s %v, want failed %s", v.Status, v.Error, jobs.CodeInternal)
	}
}

// A sleep whose state no longer fits a checkpoint is refused while the
// handler can still act on it: Sleep returns the error, nothing is stored.
func TestASleepTooLargeToStoreIsRefused(t *testing.T) {
	var sleepErr error
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "nap", func(ctx context.Context, job *jobs.Job[napPayload]) (jobs.NoResult, error) {
		// A checkpoint that fits (about 64,100 bytes sealed), and a sleep
		// whose long name takes the state past 64 KiB sealed.
		if err := job.Checkpoint(ctx, strings.Repeat("x", 48000)); err != nil {
			return jobs.NoResult{}, err
		}
		sleepErr = job.Sleep(ctx, strings.Repeat("n", 2000), time.Hour)
		return jobs.NoResult{}, jobs.Fail("too_big", nil)
	}, &jobs.KindOpts{FailureCodes: []string{"too_big"}})
	r := newRunner(t, reg)
	ctx := context.Background()
	id := runOnce(t, r, `{}`)
	v, _ := r.Service.Get(ctx, "o", id)
	if sleepErr == nil || !strings.Contains(sleepErr.Error(), "too large") || v.Status != jobs.StatusFailed || *v.Error != "too_big" {
		t.Fatalf("a sleep past the checkpoint limit: Sleep said %v, the job %s %v; want an error and the handler's own failure", sleepErr, v.Status, v.Error)
	}
}
