package localstack

import (
	"fmt"
	"testing"
	"time"
)

// The throughput counts the runs that ended within the window, by the
// records' own timestamps, per minute.
func TestStatsThroughput(t *testing.T) {
	now := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	s := NewStats()
	s.now = func() time.Time { return now }
	line := func(at time.Time, metric string, n int) []byte {
		return fmt.Appendf(nil, `{"_aws":{"Timestamp":%d,"CloudWatchMetrics":[{"Namespace":"x","Dimensions":[["service","kind"]],"Metrics":[{"Name":%q,"Unit":"Count"}]}]},"service":"worker","kind":"k",%q:%d}`,
			at.UnixMilli(), metric, metric, n)
	}
	s.read(line(now.Add(-10*time.Minute), "JobsSucceeded", 7)) // before the window
	s.read(line(now.Add(-4*time.Minute), "JobsSucceeded", 6))
	s.read(line(now.Add(-time.Minute), "JobsFailed", 3))
	s.read(line(now.Add(-time.Minute), "JobsStarted", 50)) // not an end
	s.read(line(now, "JobsCancelled", 1))
	got := s.Snapshot()["k"]
	if got.EndedPerMinute != 2 {
		t.Fatalf("ended per minute %v, want (6+3+1)/5 = 2", got.EndedPerMinute)
	}
	if got.Counts["JobsSucceeded"] != 13 {
		t.Fatalf("totals %v", got.Counts)
	}
	now = now.Add(5 * time.Minute)
	if got := s.Snapshot()["k"]; got.EndedPerMinute != 0.2 {
		t.Fatalf("five minutes later: %v, want 1/5", got.EndedPerMinute)
	}
}
