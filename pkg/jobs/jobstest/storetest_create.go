package jobstest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// createAndGet checks creating and reading a job: a create never overwrites,
// and an expired job is gone.
func (c suite) createAndGet(t *testing.T) {
	ctx := context.Background()

	c.run(t, "CreateGetRoundTrip", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := NewRecord(wire.NewID(), clock.Now())
		rec.Payload = []byte(`{"text":"héllo","n":[1,2,3]}`)
		// What a job's view names: the job it replays, its schedule run by
		// hand, its parent.
		rec.ReplayOf, rec.ManualRunOf, rec.ChildOf = wire.NewID(), "nightly", wire.NewID()
		if err := s.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, s, rec.ID)
		if !reflect.DeepEqual(got, rec) {
			t.Fatalf("Get returned\n%+v\nwant\n%+v", got, rec)
		}
	})

	c.run(t, "CreateExistingIsConflict", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		again := NewRecord(rec.ID, clock.Now())
		again.Payload = []byte(`{"n":2}`)
		err := s.Create(ctx, again)
		wantConflict(t, err, jobs.StatusQueued)
		if got := mustGet(t, s, rec.ID); string(got.Payload) != `{"n":1}` {
			t.Fatalf("second create overwrote the payload: %s", got.Payload)
		}
	})

	c.run(t, "GetManyReadsTheJobsStored", func(t *testing.T, s driver.Store, clock *Clock) {
		many, ok := s.(driver.ManyGetter)
		if !ok {
			t.Skip("the store does not read several jobs at once (driver.ManyGetter)")
		}
		// More than one request's worth (dynamostore: 100 a request).
		var ids []string
		for range 130 {
			ids = append(ids, mustCreate(t, s, clock.Now()).ID)
		}
		gone := mustCreate(t, s, clock.Now())
		_, token := mustClaim(t, s, gone.ID, clock.Now())
		if err := s.Finish(ctx, gone.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, At: clock.Now(), ExpiresAt: clock.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Minute + time.Second)
		got, err := many.GetMany(ctx, append(ids, wire.NewID(), gone.ID))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(ids) {
			t.Fatalf("GetMany answered %d jobs, want the %d stored (not an unknown one, nor an expired one)", len(got), len(ids))
		}
		for _, id := range ids {
			if want := mustGet(t, s, id); !reflect.DeepEqual(got[id], want) {
				t.Fatalf("GetMany's %s is\n%+v\nGet's\n%+v", id, got[id], want)
			}
		}
	})

	c.run(t, "GetUnknownIsNotFound", func(t *testing.T, s driver.Store, clock *Clock) {
		if _, err := s.Get(ctx, wire.NewID()); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	})

	c.run(t, "ExpiredJobIsGoneAndItsIDReusable", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		_, token := mustClaim(t, s, rec.ID, clock.Now())
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, At: clock.Now(), ExpiresAt: clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Hour + time.Second)
		if _, err := s.Get(ctx, rec.ID); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("Get of an expired job: %v, want ErrNotFound", err)
		}
		fresh := NewRecord(rec.ID, clock.Now())
		if err := s.Create(ctx, fresh); err != nil {
			t.Fatalf("Create over an expired job: %v", err)
		}
		if got := mustGet(t, s, rec.ID); got.Status != jobs.StatusQueued || got.Attempt != 0 {
			t.Fatalf("recreated job %+v", got)
		}
	})
}
