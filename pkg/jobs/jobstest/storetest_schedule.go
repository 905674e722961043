package jobstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// schedules checks the schedules' state: an owner's runtime schedules, and
// the last fire of an overlap-skipping schedule.
func (c suite) schedules(t *testing.T) {
	ctx := context.Background()

	c.run(t, "OwnerSchedulesAreOwnedNamedAndLimited", func(t *testing.T, s driver.Store, clock *Clock) {
		a := jobs.Schedule{Name: "a", Expression: "rate(1 hour)", TimeZone: "UTC", Kind: "k", Payload: []byte(`{"x":1}`), Overlap: jobs.OverlapAllow, Owner: "alice"}
		b := a
		b.Name = "b.with.dots"
		if list, err := s.OwnerSchedules(ctx, "alicekey"); err != nil || len(list) != 0 {
			t.Fatalf("an owner without schedules: %v %v", list, err)
		}
		for _, sc := range []jobs.Schedule{a, b} {
			if err := s.AddOwnerSchedule(ctx, "alicekey", sc, 2); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.AddOwnerSchedule(ctx, "alicekey", a, 2); err != nil {
			t.Fatalf("the same schedule again (a lost answer): %v", err)
		}
		changed := a
		changed.Expression = "rate(2 hours)"
		if err := s.AddOwnerSchedule(ctx, "alicekey", changed, 5); !errors.Is(err, driver.ErrExists) {
			t.Fatalf("another schedule of the same name: %v, want ErrExists", err)
		}
		c := a
		c.Name = "c"
		if err := s.AddOwnerSchedule(ctx, "alicekey", c, 2); !isConflict(err) {
			t.Fatalf("a third schedule with a limit of 2: %v, want a *driver.ConflictError", err)
		}
		list, err := s.OwnerSchedules(ctx, "alicekey")
		if err != nil || len(list) != 2 || list[0].Name != "a" || list[1].Name != "b.with.dots" || string(list[0].Payload) != `{"x":1}` || list[1].Owner != "alice" {
			t.Fatalf("alice's schedules: %+v %v", list, err)
		}
		if other, _ := s.OwnerSchedules(ctx, "bobkey"); len(other) != 0 {
			t.Fatalf("another owner sees %+v", other)
		}
		if err := s.RemoveOwnerSchedule(ctx, "bobkey", "a"); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("another owner removed alice's schedule: %v", err)
		}
		if err := s.RemoveOwnerSchedule(ctx, "alicekey", "a"); err != nil {
			t.Fatal(err)
		}
		if err := s.RemoveOwnerSchedule(ctx, "alicekey", "a"); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("removing twice: %v", err)
		}
		if err := s.AddOwnerSchedule(ctx, "alicekey", c, 2); err != nil {
			t.Fatalf("a removed schedule frees its place: %v", err)
		}
		if due, err := s.Due(ctx, clock.Now().Add(24*time.Hour), 100); err != nil || len(due) != 0 {
			t.Fatalf("schedules due: %v %v", due, err)
		}
	})

	c.run(t, "LastFireMovesOnlyFromWhatWasRead", func(t *testing.T, s driver.Store, clock *Clock) {
		if last, err := s.LastFire(ctx, "nightly"); err != nil || last != "" {
			t.Fatalf("a schedule never fired: %q %v", last, err)
		}
		if err := s.SetLastFire(ctx, "nightly", "", "a"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetLastFire(ctx, "nightly", "", "b"); !isConflict(err) {
			t.Fatalf("a second first fire: %v, want a *driver.ConflictError", err)
		}
		if err := s.SetLastFire(ctx, "nightly", "", "a"); err != nil {
			t.Fatalf("the same write again (a lost answer): %v", err)
		}
		if err := s.SetLastFire(ctx, "nightly", "a", "b"); err != nil {
			t.Fatal(err)
		}
		if err := s.SetLastFire(ctx, "nightly", "a", "c"); !isConflict(err) {
			t.Fatalf("moving from a stale read: %v, want a *driver.ConflictError", err)
		}
		if last, _ := s.LastFire(ctx, "nightly"); last != "b" {
			t.Fatalf("last fire %q, want b", last)
		}
		if last, _ := s.LastFire(ctx, "other"); last != "" {
			t.Fatalf("schedules share state: %q", last)
		}
		// The state is not a job and never due.
		if _, err := s.Get(ctx, "schedule#nightly"); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("schedule state read as a job: %v", err)
		}
		if due, err := s.Due(ctx, clock.Now().Add(24*time.Hour), 100); err != nil || len(due) != 0 {
			t.Fatalf("schedule state due: %v %v", due, err)
		}
	})
}
