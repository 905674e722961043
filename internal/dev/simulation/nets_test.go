package simulation

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// TestDeadRunBoundAllowsEachDeadLetterReceive: a killed run's job, outside
// the sweep index, whose message moved to the dead-letter queue, waits for
// a sweep's drain; each sweep's receive of that dead letter whose answer
// was lost (or whose sweep was killed after it) hides it for
// deadVisibility, which the bound allows. Seed 3272 (of 10,000): two such
// receives in a row, the run ended 5m24s after the duplicate's receipt
// (bound 4m43s without them); without them, the same wait is a violation.
func TestDeadRunBoundAllowsEachDeadLetterReceive(t *testing.T) {
	for _, c := range []struct {
		name     string
		receives int  // faulted receives of the dead letter
		want     bool // a violation
	}{
		{"no dead-letter receive", 0, true},
		{"two dead-letter receives whose answers were lost", 2, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const job = "dead-run-job"
				w := &world{sched: &sched{start: time.Now()}, coverage: map[string]int{}, dirty: map[string]bool{}}
				w.mem = jobstest.NewMemStore(nil)
				w.track = newTracker(w)
				w.timeout = 29 * time.Second
				w.sqs = newSQS(w, []string{""}, map[string]time.Duration{"": 67 * time.Second}, 3)
				if err := w.mem.Create(context.Background(), &driver.Record{ID: job, Kind: "sim.plain", Status: driver.StatusRunning, ClaimToken: "t1"}); err != nil {
					t.Fatal(err)
				}
				// The duplicate's receipt kills the run; its message moves
				// to the dead-letter queue at the lease's end.
				w.track.watches = append(w.track.watches, &deadRunWatch{job: job, token: "t1", lane: "", dupAt: time.Now()})
				time.Sleep(26 * time.Second)
				w.sqs.queues[""].dlq = append(w.sqs.queues[""].dlq, &sqsMessage{id: "m1", jobID: job, body: `{"job_id":"` + job + `"}`})
				w.track.received(job)
				// Each faulted receive hides the letter for deadVisibility;
				// the next sweep that finds it visible is 2 s after.
				time.Sleep(55 * time.Second)
				for range c.receives {
					if got := w.sqs.receiveDead("", 10); len(got) != 1 {
						t.Fatalf("received %d dead letters, want 1", len(got))
					}
					time.Sleep(deadVisibility + 2*time.Second)
					w.checkWatches(false)
				}
				// The run ends 5m25s after the duplicate's receipt.
				time.Sleep(325*time.Second - time.Since(w.sched.start))
				w.checkWatches(false)
				if got := len(w.violations) > 0; got != c.want {
					t.Fatalf("violation %v, want %v: %v", got, c.want, w.violations)
				}
			})
		})
	}
}
