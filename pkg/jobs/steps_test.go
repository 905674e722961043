package jobs_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

type stepsPayload struct {
	// Script, per run (by the count of runs so far): "retry" asks for a
	// retry after the second step, "fail" fails with a declared code,
	// "continue" continues after the first step, "swap" asks for the
	// steps in another order, "" runs all three.
	Script []string `json:"script"`
}

type stepsResult struct {
	Sum int `json:"sum"`
}

// stepsRig runs one "steps" kind in a jobstest.Runner and counts how
// often each step's function ran and the keys it was given.
type stepsRig struct {
	r     *jobstest.Runner
	mu    sync.Mutex
	runs  int
	calls map[string]int
	keys  map[string][]string
	err   error // the first error a Step answered
}

func newStepsRig(t *testing.T) *stepsRig {
	t.Helper()
	s := &stepsRig{calls: map[string]int{}, keys: map[string][]string{}}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "steps", func(ctx context.Context, job *jobs.Job[stepsPayload]) (jobs.JSON[stepsResult], error) {
		s.mu.Lock()
		run := s.runs
		s.runs++
		s.mu.Unlock()
		script := ""
		if run < len(job.Payload.Script) {
			script = job.Payload.Script[run]
		}
		step := func(name string, v int) (int, error) {
			return jobs.Step(ctx, job, name, func(ctx context.Context) (int, error) {
				s.mu.Lock()
				s.calls[name]++
				s.keys[name] = append(s.keys[name], jobs.StepKey(ctx))
				s.mu.Unlock()
				return v, nil
			})
		}
		names := []string{"charge", "ship", "email"}
		if script == "swap" {
			names[0], names[1] = names[1], names[0]
		}
		sum := 0
		for i, name := range names {
			v, err := step(name, 1<<i)
			if err != nil {
				s.mu.Lock()
				if s.err == nil {
					s.err = err
				}
				s.mu.Unlock()
				if script == "swap" {
					continue // a handler that ignores it still fails the job
				}
				return jobs.JSON[stepsResult]{}, err
			}
			sum += v
			switch {
			case i == 0 && script == "continue":
				return jobs.JSON[stepsResult]{}, jobs.Continue(map[string]int{"after": 1})
			case i == 1 && script == "retry":
				return jobs.JSON[stepsResult]{}, jobs.Retry(errors.New("a transient failure"))
			case i == 1 && script == "fail":
				return jobs.JSON[stepsResult]{}, jobs.Fail("declined", errors.New("declined"))
			}
		}
		return jobs.JSON[stepsResult]{V: stepsResult{Sum: sum}}, nil
	}, &jobs.KindOpts{FailureCodes: []string{"declined"}, Retry: jobs.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Second}})
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	s.r = r
	return s
}

// run enqueues a job with script and works until it ends, retries
// included; it returns the job as its owner reads it.
func (s *stepsRig) run(t *testing.T, script ...string) jobs.View {
	t.Helper()
	ctx := context.Background()
	res, err := s.r.Service.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "steps", Payload: []byte(`{"script":["` + strings.Join(script, `","`) + `"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := s.r.Work(ctx); err != nil {
			t.Fatal(err)
		}
		v, err := s.r.Service.Get(ctx, "o", res.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if v.Status.Final() {
			return *v
		}
		s.r.Clock.Advance(time.Minute) // a retry's backoff
	}
	t.Fatal("the job never ended")
	return jobs.View{}
}

// A step's function runs once however often the handler runs: a retry
// after the second step gets the first two from the job's state and runs
// the third; each step's key is the same in every run.
func TestStepsRunOnceAcrossRetries(t *testing.T) {
	s := newStepsRig(t)
	v := s.run(t, "retry")
	if v.Status != jobs.StatusSucceeded || string(v.Result) != `{"sum":7}` || v.Attempt != 2 {
		t.Fatalf("the job: %s attempt %d result %s", v.Status, v.Attempt, v.Result)
	}
	for name, want := range map[string]int{"charge": 1, "ship": 1, "email": 1} {
		if s.calls[name] != want {
			t.Errorf("step %s ran %d times over two runs, want %d", name, s.calls[name], want)
		}
	}
	if s.keys["charge"][0] == "" || s.keys["charge"][0] == s.keys["ship"][0] {
		t.Errorf("step keys %v: want one per step", s.keys)
	}
}

// The steps survive a continuation, beside the handler's own checkpoint,
// and a manual retry of a failed job: neither runs a completed step again;
// a replay, a new job, runs every step.
func TestStepsSurviveContinuationsAndManualRetries(t *testing.T) {
	s := newStepsRig(t)
	if v := s.run(t, "continue"); v.Status != jobs.StatusSucceeded || s.calls["charge"] != 1 || s.calls["email"] != 1 || s.runs != 2 {
		t.Fatalf("after a continuation: %s, %d runs, calls %v", v.Status, s.runs, s.calls)
	}

	s = newStepsRig(t)
	v := s.run(t, "fail")
	if v.Status != jobs.StatusFailed {
		t.Fatalf("the first run: %s", v.Status)
	}
	ctx := context.Background()
	if _, err := s.r.Service.Resubmit(ctx, "o", v.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := s.r.Service.Get(ctx, "o", v.ID)
	if got.Status != jobs.StatusSucceeded || s.calls["charge"] != 1 || s.calls["ship"] != 1 || s.calls["email"] != 1 {
		t.Fatalf("after the manual retry: %s, calls %v", got.Status, s.calls)
	}
	// A replay is a new job: it starts with no steps, and runs each.
	re, err := s.r.Service.Replay(ctx, jobs.ReplayRequest{Owner: "o", ID: v.ID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ = s.r.Service.Get(ctx, "o", re.Job.ID)
	if got.Status != jobs.StatusSucceeded || s.calls["charge"] != 2 || s.calls["ship"] != 2 || s.calls["email"] != 2 {
		t.Fatalf("after a replay: %s, calls %v; want each step run once more", got.Status, s.calls)
	}
}

// A run that asks for its steps in another order than an earlier run
// stored them ends the job failed, nondeterministic, even when the
// handler ignores the error and returns a result.
func TestStepsOutOfOrderFailTheJob(t *testing.T) {
	s := newStepsRig(t)
	v := s.run(t, "retry", "swap")
	if v.Status != jobs.StatusFailed || v.Error == nil || *v.Error != jobs.CodeNondeterministic {
		t.Fatalf("the job: %s %v", v.Status, v.Error)
	}
	if s.err == nil || !strings.Contains(s.err.Error(), `step "ship" was stored after "charge", which this run has not asked for`) {
		t.Errorf("Step answered %v", s.err)
	}
	if s.calls["email"] != 0 {
		t.Errorf("a step after the mismatch ran %d times", s.calls["email"])
	}
	if _, err := jobs.Register(jobs.NewRegistry(), "k", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil },
		&jobs.KindOpts{FailureCodes: []string{jobs.CodeNondeterministic}}); err == nil {
		t.Error("a kind declared the reserved code nondeterministic")
	}
}

// On a Job built by hand, steps run and are kept in memory: a handler's
// unit test calls it twice with the same Job and sees the second run
// reuse the first's results.
func TestStepsOnAJobBuiltByHand(t *testing.T) {
	job := jobstest.NewJob(stepsPayload{}, nil)
	calls := 0
	f := func(ctx context.Context) (string, error) {
		calls++
		if jobs.StepKey(ctx) == "" {
			t.Error("no step key inside a step")
		}
		return "done", nil
	}
	for range 2 {
		if v, err := jobs.Step(context.Background(), job, "a", f); err != nil || v != "done" {
			t.Fatalf("Step: %q %v", v, err)
		}
	}
	if calls != 2 {
		// Two calls in one run are two steps, each run.
		t.Fatalf("two steps ran %d times", calls)
	}
	if jobs.StepKey(context.Background()) != "" {
		t.Error("a step key outside a step")
	}
}

// A handler may go on without a step that failed: a later run that asks
// for it runs it then, between the steps stored around it, and reads the
// others back; the job is not nondeterministic.
func TestAStepLeftOutRunsInALaterRun(t *testing.T) {
	runs, calls := 0, map[string]int{}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "optional", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.NoResult, error) {
		runs++
		first := runs == 1
		step := func(name string, fail bool) {
			_, _ = jobs.Step(ctx, job, name, func(context.Context) (int, error) {
				calls[name]++
				if fail {
					return 0, errors.New("not now")
				}
				return 1, nil
			})
		}
		step("a", false)
		step("optional", first) // fails in the first run; the handler goes on
		step("b", false)
		if first {
			return jobs.NoResult{}, jobs.Retry(errors.New("again"))
		}
		return jobs.NoResult{}, nil
	}, &jobs.KindOpts{Retry: jobs.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Second}})
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := r.Service.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "optional", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := r.Work(ctx); err != nil {
			t.Fatal(err)
		}
		r.Clock.Advance(time.Minute)
	}
	v, _ := r.Service.Get(ctx, "o", res.Job.ID)
	if v.Status != jobs.StatusSucceeded || calls["a"] != 1 || calls["b"] != 1 || calls["optional"] != 2 {
		t.Fatalf("the job %s %v after %d runs, calls %v", v.Status, v.Error, runs, calls)
	}
}

// Steps asked for at once, from goroutines, fail the job: their stored
// order would not say which result is whose.
func TestStepsAtOnceFailTheJob(t *testing.T) {
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "parallel", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.NoResult, error) {
		started, release := make(chan struct{}), make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = jobs.Step(ctx, job, "first", func(context.Context) (int, error) {
				close(started)
				<-release
				return 1, nil
			})
		}()
		<-started
		_, err := jobs.Step(ctx, job, "second", func(context.Context) (int, error) { return 2, nil })
		close(release)
		<-done
		if err == nil {
			t.Error("a step asked for while another ran was run")
		}
		return jobs.NoResult{}, nil // ignoring it does not help
	}, nil)
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := r.Service.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "parallel", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	if v, _ := r.Service.Get(ctx, "o", res.Job.ID); v.Status != jobs.StatusFailed || v.Error == nil || *v.Error != jobs.CodeNondeterministic {
		t.Fatalf("the job: %s %v", v.Status, v.Error)
	}
}
