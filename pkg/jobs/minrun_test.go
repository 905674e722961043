package jobs_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// A kind whose minimum run time is more than a fresh invocation's handler
// time (the worker's timeout less the reserve) could never be claimed: a
// worker that knows its timeout refuses to be built with it, naming the
// kind. Without a timeout nothing is known, and nothing is refused.
func TestWorkerRefusesAKindLongerThanItsInvocations(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		timeout time.Duration
		refused bool
	}{
		"timeout unknown":                {0, false},
		"timeout too short for the kind": {30 * time.Second, true},
		"handler time just enough":       {33 * time.Second, false}, // 33s less the 3s reserve
		"ample timeout":                  {15 * time.Minute, false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			reg := jobs.NewRegistry()
			jobs.MustRegister(reg, "quick", sleeper, nil)
			jobs.MustRegister(reg, "report", sleeper, &jobs.KindOpts{MinRunTime: 30 * time.Second})
			_, err := testroles.Worker(jobs.Config{Registry: reg, Store: jobstest.NewMemStore(nil), WorkerTimeout: c.timeout})
			switch {
			case c.refused && (err == nil || !strings.Contains(err.Error(), `kind "report"`) || strings.Contains(err.Error(), "quick")):
				t.Fatalf("timeout %v: %v, want kind report refused", c.timeout, err)
			case !c.refused && err != nil:
				t.Fatalf("timeout %v: %v", c.timeout, err)
			}
		})
	}
}

// A kind of another lane, whose minimum run time only that lane's longer
// invocations can give, does not stop this lane's worker from starting:
// each worker checks its own lane's kinds.
func TestWorkerChecksOnlyItsLanesKinds(t *testing.T) {
	t.Parallel()
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "quick", sleeper, nil)
	jobs.MustRegister(reg, "export", sleeper, &jobs.KindOpts{Lane: "long", MinRunTime: 10 * time.Minute})
	if _, err := testroles.Worker(jobs.Config{Registry: reg, Store: jobstest.NewMemStore(nil), WorkerTimeout: 30 * time.Second}); err != nil {
		t.Fatalf("the default lane's worker (30 s) with a long-lane kind of 10 minutes: %v, want it built", err)
	}
	if _, err := testroles.Worker(jobs.Config{Registry: reg, Store: jobstest.NewMemStore(nil), Lane: "long", WorkerTimeout: 15 * time.Minute}); err != nil {
		t.Fatalf("the long lane's worker: %v", err)
	}
	if _, err := testroles.Worker(jobs.Config{Registry: reg, Store: jobstest.NewMemStore(nil), Lane: "long", WorkerTimeout: 5 * time.Minute}); err == nil || !strings.Contains(err.Error(), `kind "export"`) {
		t.Fatalf("the long lane's worker with 5 minutes: %v, want kind export refused", err)
	}
}
