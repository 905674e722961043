package jobs_test

import (
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// A long run's final write gets a longer budget, 1/180 of the worker's
// timeout, and its reserve grows by as much; a timeout of a few minutes
// keeps the configured deadlines, and Safety never grows.
func TestDeadlinesForALongTimeout(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		timeout             time.Duration
		reserve, finalWrite time.Duration
	}{
		{60 * time.Second, 3 * time.Second, 2 * time.Second},
		{6 * time.Minute, 3 * time.Second, 2 * time.Second},
		{10 * time.Minute, 4300 * time.Millisecond, 3300 * time.Millisecond},
		{15 * time.Minute, 6 * time.Second, 5 * time.Second},
		{90 * time.Minute, 31 * time.Second, 30 * time.Second},
	} {
		d := jobs.DefaultDeadlines.ForTimeout(c.timeout)
		if d.Reserve != c.reserve || d.FinalWrite != c.finalWrite || d.Safety != jobs.DefaultDeadlines.Safety || d.Call != jobs.DefaultDeadlines.Call {
			t.Errorf("timeout %v: reserve %v final write %v safety %v call %v, want %v %v %v %v", c.timeout, d.Reserve, d.FinalWrite, d.Safety, d.Call,
				c.reserve, c.finalWrite, jobs.DefaultDeadlines.Safety, jobs.DefaultDeadlines.Call)
		}
		if err := d.Validate(c.timeout); err != nil {
			t.Errorf("timeout %v: %v", c.timeout, err)
		}
	}
}
