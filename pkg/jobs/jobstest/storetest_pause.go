package jobstest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// pauses checks the pause set (driver.PauseStore): written one pause at a
// time, replaced by ID, bounded, removed, read whole.
func (c suite) pauses(t *testing.T) {
	ctx := context.Background()
	c.run(t, "PausesAreSetReplacedBoundedAndRemoved", func(t *testing.T, s driver.Store, clock *Clock) {
		ps, ok := s.(driver.PauseStore)
		if !ok {
			t.Skip("the store does not keep pauses (driver.PauseStore)")
		}
		if list, err := ps.Pauses(ctx); err != nil || len(list) != 0 {
			t.Fatalf("no pauses yet: %v %v", list, err)
		}
		now := clock.Now()
		kind := driver.Pause{Kind: "k.a", Since: now, Until: now.Add(time.Hour), By: "operator"}
		lane := driver.Pause{Lane: "bulk", Since: now, Until: now.Add(time.Hour), By: "operator"}
		mine := driver.Pause{Kind: "k.a", OwnerKey: "0123456789abcdef0123456789abcdef", Since: now, Until: now.Add(time.Hour), By: "owner"}
		for _, p := range []driver.Pause{kind, lane} {
			if err := ps.SetPause(ctx, p, 2); err != nil {
				t.Fatalf("set %s: %v", p.ID(), err)
			}
		}
		var ce *driver.ConflictError
		if err := ps.SetPause(ctx, mine, 2); !errors.As(err, &ce) {
			t.Fatalf("a third pause over a bound of 2: %v, want a conflict", err)
		}
		longer := kind
		longer.Until = now.Add(2 * time.Hour)
		if err := ps.SetPause(ctx, longer, 2); err != nil {
			t.Fatalf("a pause replaced at the bound: %v", err)
		}
		list, err := ps.Pauses(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids := []string{}
		for _, p := range list {
			ids = append(ids, p.ID())
		}
		if !slices.Equal(ids, []string{"kind:k.a", "lane:bulk"}) || !list[0].Until.Equal(longer.Until) || list[0].By != "operator" {
			t.Fatalf("the set: %+v", list)
		}
		if err := ps.RemovePause(ctx, lane.ID()); err != nil {
			t.Fatal(err)
		}
		if err := ps.RemovePause(ctx, lane.ID()); !errors.Is(err, driver.ErrNotFound) {
			t.Fatalf("a pause removed twice: %v, want ErrNotFound", err)
		}
		if err := ps.SetPause(ctx, mine, 2); err != nil {
			t.Fatalf("a pause where one was removed: %v", err)
		}
		if list, err := ps.Pauses(ctx); err != nil || len(list) != 2 || list[1].OwnerKey != mine.OwnerKey {
			t.Fatalf("after the remove and the owner's pause: %+v %v", list, err)
		}
	})
}
