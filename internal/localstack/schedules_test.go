package localstack

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// The local scheduler fires each schedule at its times, with the scheduled
// time in the message, as Scheduler's target input would carry it.
func TestSchedulerFiresAtTheScheduledTimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var mu sync.Mutex
		var fires []jobs.Fire
		s := &Scheduler{
			Schedules: []jobs.Schedule{
				{Name: "tick", Expression: "rate(1 minute)", TimeZone: "UTC"},
				{Name: "quarter", Expression: "cron(*/15 * * * ? *)", TimeZone: "UTC"},
			},
			Start: start,
			Send: func(_ context.Context, body string) error {
				var f jobs.Fire
				if err := json.Unmarshal([]byte(body), &f); err != nil {
					t.Errorf("fire %q: %v", body, err)
				}
				mu.Lock()
				fires = append(fires, f)
				mu.Unlock()
				return nil
			},
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		time.Sleep(150 * time.Second)
		synctest.Wait()
		mu.Lock()
		ticks := 0
		for _, f := range fires {
			at, err := time.Parse(time.RFC3339, f.ScheduledTime)
			if err != nil {
				t.Fatalf("scheduled time %q", f.ScheduledTime)
			}
			if f.Schedule == "tick" {
				ticks++
				if want := start.Add(time.Duration(ticks) * time.Minute).UTC().Truncate(time.Second); !at.Equal(want) {
					t.Errorf("tick %d at %v, want %v", ticks, at, want)
				}
			}
		}
		mu.Unlock()
		if ticks != 2 {
			t.Fatalf("%d ticks in 2.5 minutes, want 2: %+v", ticks, fires)
		}
		l := s.List()
		if len(l) != 2 || l[0].Name != "tick" || !l[0].NextFire.Equal(start.Add(3*time.Minute).UTC()) {
			t.Fatalf("list %+v", l)
		}
		if last := start.Add(2 * time.Minute).UTC(); l[0].LastFire == nil || !l[0].LastFire.Equal(last) || l[0].LastJobID != jobs.FireJobID("tick", last) {
			t.Fatalf("last fire %v %q", l[0].LastFire, l[0].LastJobID)
		}
		cancel()
		<-done
	})
}
