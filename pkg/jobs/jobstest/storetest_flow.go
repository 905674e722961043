package jobstest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// flowControl is the conformance suite's part for flow control: slots,
// token buckets, unique keys and debouncing.
func (c suite) flowControl(t *testing.T) {
	ctx := context.Background()
	c.run(t, "SlotsHoldAtMostMaxAndFreeAtTheirLease", func(t *testing.T, s driver.Store, clock *Clock) {
		now := clock.Now()
		claim := func(holder string, lease time.Duration) bool {
			t.Helper()
			ok, err := s.AcquireSlot(ctx, "k", driver.SlotClaim{Holder: holder, Max: 2, LeaseUntil: now.Add(lease), At: now})
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if !claim("a", time.Minute) || !claim("b", time.Second) || claim("c", time.Minute) {
			t.Fatal("want a and b to hold the two slots, c refused")
		}
		if !claim("a", time.Minute) {
			t.Fatal("a holder renewing its own slot was refused")
		}
		if err := s.ReleaseSlot(ctx, "k", "a"); err != nil {
			t.Fatal(err)
		}
		if !claim("c", time.Minute) || claim("d", time.Minute) {
			t.Fatal("after a's release: want c in, d refused")
		}
		now = now.Add(2 * time.Second) // b's lease ended: its slot frees itself
		if !claim("d", time.Minute) || claim("e", time.Minute) {
			t.Fatal("after b's lease: want d in, e refused")
		}
		if err := s.ReleaseSlot(ctx, "never-held", "x"); err != nil {
			t.Fatalf("releasing a slot of an unknown item: %v", err)
		}
	})
	c.run(t, "ConcurrentAcquiresTakeAtMostMax", func(t *testing.T, s driver.Store, clock *Clock) {
		var got atomic.Int32
		var wg sync.WaitGroup
		for range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 3 { // a store may answer "busy" under contention: a caller tries again later
					ok, err := s.AcquireSlot(ctx, "race", driver.SlotClaim{Holder: wire.NewID(), Max: 5, LeaseUntil: clock.Now().Add(time.Minute), At: clock.Now()})
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						got.Add(1)
						return
					}
				}
			}()
		}
		wg.Wait()
		if got.Load() > 5 {
			t.Fatalf("%d holders for 5 slots", got.Load())
		}
	})
	c.run(t, "TokenBucketGivesItsRate", func(t *testing.T, s driver.Store, clock *Clock) {
		b := driver.TokenBucket{PerSecond: 10, Burst: 2, At: clock.Now()}
		for i := range 2 {
			if wait, err := s.TakeToken(ctx, "r", b); err != nil || wait != 0 {
				t.Fatalf("token %d of the burst: wait %v %v", i, wait, err)
			}
		}
		wait, err := s.TakeToken(ctx, "r", b)
		if err != nil || wait <= 0 || wait > 100*time.Millisecond {
			t.Fatalf("an empty bucket: wait %v %v, want up to one token's time (100ms)", wait, err)
		}
		clock.Advance(100 * time.Millisecond)
		b.At = clock.Now()
		if wait, err := s.TakeToken(ctx, "r", b); err != nil || wait != 0 {
			t.Fatalf("after one token's time: wait %v %v", wait, err)
		}
	})
	c.run(t, "UniqueKeysHaveOneHolder", func(t *testing.T, s driver.Store, clock *Clock) {
		now := clock.Now()
		if h, err := s.ClaimUnique(ctx, "u", driver.UniqueClaim{JobID: "j1", At: now}); err != nil || h != "j1" {
			t.Fatalf("first claim: %q %v", h, err)
		}
		if h, _ := s.ClaimUnique(ctx, "u", driver.UniqueClaim{JobID: "j2", At: now}); h != "j1" {
			t.Fatalf("second claim answered %q, want the holder j1", h)
		}
		if h, _ := s.ClaimUnique(ctx, "u", driver.UniqueClaim{JobID: "j1", At: now}); h != "j1" {
			t.Fatalf("the holder claiming again: %q", h)
		}
		if err := s.ReleaseUnique(ctx, "u", "j2"); err != nil { // not the holder: nothing
			t.Fatal(err)
		}
		if h, _ := s.ClaimUnique(ctx, "u", driver.UniqueClaim{JobID: "j2", At: now}); h != "j1" {
			t.Fatalf("a release by another job freed the key for %q", h)
		}
		if err := s.ReleaseUnique(ctx, "u", "j1"); err != nil {
			t.Fatal(err)
		}
		if h, _ := s.ClaimUnique(ctx, "u", driver.UniqueClaim{JobID: "j2", Until: now.Add(time.Minute), At: now}); h != "j2" {
			t.Fatalf("after the holder's release: %q", h)
		}
		if h, _ := s.ClaimUnique(ctx, "u", driver.UniqueClaim{JobID: "j3", At: now.Add(30 * time.Second)}); h != "j2" {
			t.Fatalf("within j2's period: %q", h)
		}
		if h, _ := s.ClaimUnique(ctx, "u", driver.UniqueClaim{JobID: "j3", At: now.Add(time.Minute)}); h != "j3" {
			t.Fatalf("after j2's period: %q", h)
		}
	})
	c.run(t, "DebounceRewritesAQueuedJobOnly", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		later := clock.Now().Add(time.Minute)
		if err := s.Debounce(ctx, rec.ID, driver.Debounce{Payload: []byte(`{"n":2}`), RequestHash: "h2", RunAt: later, SweepAt: later, At: clock.Now()}); err != nil {
			t.Fatal(err)
		}
		got, _ := s.Get(ctx, rec.ID)
		if string(got.Payload) != `{"n":2}` || got.RequestHash != "h2" || !got.RunAt.Equal(later) {
			t.Fatalf("after debounce: %s %s %v", got.Payload, got.RequestHash, got.RunAt)
		}
		if _, err := s.Claim(ctx, rec.ID, driver.Claim{Token: "t", At: later, LeaseUntil: later.Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		err := s.Debounce(ctx, rec.ID, driver.Debounce{Payload: []byte(`{"n":3}`), RunAt: later, SweepAt: later, At: later})
		if !errors.Is(err, driver.ErrNotQueued) {
			t.Fatalf("debouncing a running job: %v, want ErrNotQueued", err)
		}
	})
}
