package jobs

import (
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// anyQueue is a queue that is there; the rule only asks whether it is.
type anyQueue struct{ driver.Queue }

// The delivery rule, in one table: the queue delivers what is due within
// its longest delay, the sweeper the rest, and the sweeper looks at what
// the queue delivers one grace after it is due.
func TestDeliveryRule(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const grace = 3 * time.Minute
	const longGrace = 20 * time.Minute
	withQueue := &engine{queue: anyQueue{}, grace: grace, laneGrace: map[string]time.Duration{"long": longGrace}}
	noQueue := &engine{grace: grace}
	for _, c := range []struct {
		name  string
		eng   *engine
		runAt time.Time
		want  delivery
		lane  string
	}{
		{"due now: sent at once", withQueue, time.Time{}, delivery{send: true, sweepAt: now.Add(grace)}, ""},
		{"due in the past: sent at once", withQueue, now.Add(-time.Hour), delivery{send: true, sweepAt: now.Add(grace)}, ""},
		{"due within 15 minutes: sent delayed", withQueue, now.Add(10 * time.Minute), delivery{send: true, delay: 10 * time.Minute, sweepAt: now.Add(10*time.Minute + grace)}, ""},
		{"due in exactly 15 minutes: sent delayed", withQueue, now.Add(driver.MaxQueueDelay), delivery{send: true, delay: driver.MaxQueueDelay, sweepAt: now.Add(driver.MaxQueueDelay + grace)}, ""},
		{"due later: the sweeper sends it then", withQueue, now.Add(time.Hour), delivery{sweepAt: now.Add(time.Hour)}, ""},
		{"no queue, due now: the sweeper looks after the grace", noQueue, time.Time{}, delivery{sweepAt: now.Add(grace)}, ""},
		{"no queue, due soon: the sweeper sends it then", noQueue, now.Add(time.Minute), delivery{sweepAt: now.Add(time.Minute)}, ""},
		// A lane whose worker runs longer has its own grace, so a message
		// in a long run's batch is not re-sent while it waits its turn.
		{"long lane, due now: its own grace", withQueue, time.Time{}, delivery{send: true, sweepAt: now.Add(longGrace)}, "long"},
		{"long lane, delayed: its own grace after", withQueue, now.Add(time.Minute), delivery{send: true, delay: time.Minute, sweepAt: now.Add(time.Minute + longGrace)}, "long"},
		{"another lane: the grace", withQueue, time.Time{}, delivery{send: true, sweepAt: now.Add(grace)}, "urgent"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.eng.deliveryAt(now, c.runAt, c.lane); got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// Every job is built by one builder: queued, created and updated at once,
// its run time at the store's precision (none when it is not ahead), its
// sweep time the delivery rule's.
func TestNewJobRecord(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e := &engine{queue: anyQueue{}, grace: time.Minute}
	b := &driver.Batch{ID: "b", Total: 40, Shards: 2}
	for _, c := range []struct {
		name                 string
		j                    newJob
		wantRunAt, wantSweep time.Time
	}{
		{"due now", newJob{id: "a", at: now}, time.Time{}, now.Add(time.Minute)},
		{"run_at in the past", newJob{id: "a", at: now, runAt: now.Add(-time.Second)}, time.Time{}, now.Add(time.Minute)},
		{"delayed", newJob{id: "a", at: now, runAt: now.Add(time.Second + 1500*time.Microsecond)}, now.Add(1001 * time.Millisecond), now.Add(1001*time.Millisecond + time.Minute)},
		{"far ahead", newJob{id: "a", at: now, runAt: now.Add(24 * time.Hour)}, now.Add(24 * time.Hour), now.Add(24 * time.Hour)},
		{"in a batch", newJob{id: "a", at: now, batch: b, index: 7}, time.Time{}, now.Add(time.Minute)},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := e.record(c.j)
			if rec.Status != StatusQueued || !rec.CreatedAt.Equal(now) || !rec.UpdatedAt.Equal(now) {
				t.Errorf("status %s created %v updated %v, want queued at %v", rec.Status, rec.CreatedAt, rec.UpdatedAt, now)
			}
			if !rec.RunAt.Equal(c.wantRunAt) || !rec.SweepAt.Equal(c.wantSweep) {
				t.Errorf("run at %v, sweep at %v; want %v, %v", rec.RunAt, rec.SweepAt, c.wantRunAt, c.wantSweep)
			}
			if c.j.batch != nil && (rec.BatchID != "b" || rec.BatchIndex != 7 || rec.BatchSize != 40 || rec.BatchShards != 2) {
				t.Errorf("batch place %q %d/%d in %d shards, want b 7/40 in 2", rec.BatchID, rec.BatchIndex, rec.BatchSize, rec.BatchShards)
			}
		})
	}
}
