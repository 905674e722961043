package simulation

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// TestFirePauseInvariantCountsWhenTheJobIsMade: a fire received while its
// schedule's pause held, whose job is made after the pause ended (by itself,
// or resumed) as the worker reached it later in its batch, is no violation;
// one made while the pause still holds is (seed 5496: the pause ended 4.5 s
// before the job was made, 3.5 s after the receive).
func TestFirePauseInvariantCountsWhenTheJobIsMade(t *testing.T) {
	const id = "fire-job"
	for _, c := range []struct {
		name   string
		resume bool          // resumed 1 s after the receive
		made   time.Duration // after the receive
		want   bool          // a violation
	}{
		{"made while the pause holds", false, 2 * time.Second, true},
		{"made after the pause ended by itself", false, 8 * time.Second, false},
		{"made after the pause was resumed", true, 2 * time.Second, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := &world{sched: &sched{start: time.Now()}, coverage: map[string]int{}}
				now := time.Now()
				w.pauses.set(driver.Pause{Schedule: fireSchedule, Since: now, Until: now.Add(80 * time.Second), By: "operator"})
				w.pauses.fire(id)
				time.Sleep(76500 * time.Millisecond)
				w.pauses.received(id, time.Now())
				if c.resume {
					time.Sleep(time.Second)
					w.pauses.remove("schedule:" + fireSchedule)
					time.Sleep(c.made - time.Second)
				} else {
					time.Sleep(c.made)
				}
				w.checkFirePaused(id)
				if got := len(w.violations) > 0; got != c.want {
					t.Fatalf("violation %v, want %v: %v", got, c.want, w.violations)
				}
			})
		})
	}
}
