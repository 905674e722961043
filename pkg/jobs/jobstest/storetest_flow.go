package jobstest

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
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
			st, err := s.AcquireSlot(ctx, "k", driver.SlotClaim{Holder: holder, Max: 2, LeaseUntil: now.Add(lease), At: now})
			if err != nil {
				t.Fatal(err)
			}
			return st == driver.SlotHeld
		}
		release := func(holder string) {
			t.Helper()
			if next, err := s.ReleaseSlot(ctx, "k", holder); err != nil || next != "" {
				t.Fatalf("release by %s: %q %v, want no waiter", holder, next, err)
			}
		}
		if !claim("a", time.Minute) || !claim("b", time.Second) || claim("c", time.Minute) {
			t.Fatal("want a and b to hold the two slots, c refused")
		}
		if !claim("a", time.Minute) {
			t.Fatal("a holder renewing its own slot was refused")
		}
		release("a")
		if !claim("c", time.Minute) || claim("d", time.Minute) {
			t.Fatal("after a's release: want c in, d refused")
		}
		now = now.Add(2 * time.Second) // b's lease ended: its slot frees itself
		if !claim("d", time.Minute) || claim("e", time.Minute) {
			t.Fatal("after b's lease: want d in, e refused")
		}
		release("x") // holds nothing: nothing happens
		if next, err := s.ReleaseSlot(ctx, "never-held", "x"); err != nil || next != "" {
			t.Fatalf("releasing a slot of an unknown item: %q %v", next, err)
		}
	})
	c.run(t, "ReleasesWakeTheWaitersInOrder", func(t *testing.T, s driver.Store, clock *Clock) {
		now := clock.Now()
		acquire := func(holder string) driver.SlotState {
			t.Helper()
			st, err := s.AcquireSlot(ctx, "w", driver.SlotClaim{Holder: holder, Max: 1, LeaseUntil: now.Add(time.Minute), At: now, Waiters: 2})
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		release := func(holder string) string {
			t.Helper()
			next, err := s.ReleaseSlot(ctx, "w", holder)
			if err != nil {
				t.Fatal(err)
			}
			return next
		}
		if acquire("a") != driver.SlotHeld {
			t.Fatal("a: want the slot")
		}
		if acquire("b") != driver.SlotQueued || acquire("c") != driver.SlotQueued || acquire("b") != driver.SlotQueued {
			t.Fatal("b and c: want them queued, b once")
		}
		if acquire("d") != driver.SlotFull {
			t.Fatal("d: want full, the waiters being at their bound")
		}
		if next := release("a"); next != "b" {
			t.Fatalf("a's release woke %q, want b, the first waiter", next)
		}
		if acquire("b") != driver.SlotHeld {
			t.Fatal("b, woken: want the slot")
		}
		if next := release("b"); next != "c" {
			t.Fatalf("b's release woke %q, want c (b left the waiters when it took the slot)", next)
		}
		// c, woken, finds the slot taken by d meanwhile: it waits again.
		if acquire("d") != driver.SlotHeld || acquire("c") != driver.SlotQueued {
			t.Fatal("want d in and c queued again")
		}
		if next := release("d"); next != "c" {
			t.Fatalf("d's release woke %q, want c", next)
		}
		if next := release("d"); next != "" {
			t.Fatalf("a second release woke %q", next)
		}
	})
	// The worker holds a slot by its run's claim token and queues the job:
	// a release answers the job, and the job that takes a slot by another
	// run's token leaves the waiters.
	c.run(t, "HoldersAreRunsWaitersAreJobs", func(t *testing.T, s driver.Store, clock *Clock) {
		now := clock.Now()
		acquire := func(run, job string) driver.SlotState {
			t.Helper()
			st, err := s.AcquireSlot(ctx, "rw", driver.SlotClaim{Holder: run, Waiter: job, Max: 1, LeaseUntil: now.Add(time.Minute), At: now, Waiters: 4})
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		if acquire("run-a1", "a") != driver.SlotHeld || acquire("run-b1", "b") != driver.SlotQueued || acquire("run-c1", "c") != driver.SlotQueued {
			t.Fatal("want a's run to hold the slot, b and c queued")
		}
		if acquire("run-a2", "a") != driver.SlotQueued {
			t.Fatal("another run of job a took the slot a's first run holds: a run holds it, not its job")
		}
		if next, err := s.ReleaseSlot(ctx, "rw", "a"); err != nil || next != "" {
			t.Fatalf("a release by the job's id, not its run's: %q %v, want nothing", next, err)
		}
		if next, err := s.ReleaseSlot(ctx, "rw", "run-a1"); err != nil || next != "b" {
			t.Fatalf("the run's release woke %q %v, want job b", next, err)
		}
		// c's message came before its wake: it takes the slot by its run
		// and leaves the waiters, so the next release wakes a, not c.
		if acquire("run-c2", "c") != driver.SlotHeld {
			t.Fatal("c: want the freed slot")
		}
		if next, err := s.ReleaseSlot(ctx, "rw", "run-c2"); err != nil || next != "a" {
			t.Fatalf("c's release woke %q %v, want a (c left the waiters when it took the slot)", next, err)
		}
	})
	// ExpectFull only changes which write a store tries first: a free slot
	// is still taken, a full item still queues, a missing item is made.
	c.run(t, "ExpectFullTakesAFreeSlotAndQueuesOnAFullOne", func(t *testing.T, s driver.Store, clock *Clock) {
		now := clock.Now()
		acquire := func(holder string) driver.SlotState {
			t.Helper()
			st, err := s.AcquireSlot(ctx, "ef", driver.SlotClaim{Holder: holder, Max: 2, LeaseUntil: now.Add(time.Minute), At: now, Waiters: 1, ExpectFull: true})
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		if acquire("a") != driver.SlotHeld || acquire("b") != driver.SlotHeld {
			t.Fatal("want a and b to take the two free slots")
		}
		first, again := acquire("c"), acquire("c")
		if first != driver.SlotQueued || again != driver.SlotQueued || acquire("d") != driver.SlotFull {
			t.Fatal("want c queued, once, and d refused (one waiter at most)")
		}
		now = now.Add(2 * time.Minute) // every lease ended
		if acquire("d") != driver.SlotHeld {
			t.Fatal("after the leases ended: want d in")
		}
	})
	c.run(t, "PopWaiterPassesTheSlot", func(t *testing.T, s driver.Store, clock *Clock) {
		p, ok := s.(driver.WaiterPopper)
		if !ok {
			t.Skip("the store does not pass slots (driver.WaiterPopper)")
		}
		now := clock.Now()
		acquire := func(holder string) driver.SlotState {
			t.Helper()
			st, err := s.AcquireSlot(ctx, "pop", driver.SlotClaim{Holder: holder, Max: 1, LeaseUntil: now.Add(time.Minute), At: now, Waiters: 4})
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		pop := func(holder string) (string, int) {
			t.Helper()
			w, left, err := p.PopWaiter(ctx, "pop", holder)
			if err != nil {
				t.Fatal(err)
			}
			return w, left
		}
		if w, _ := pop("nobody"); w != "" {
			t.Fatalf("a pop of an unknown item answered %q", w)
		}
		if acquire("a") != driver.SlotHeld || acquire("b") != driver.SlotQueued || acquire("c") != driver.SlotQueued {
			t.Fatal("want a in, b and c queued")
		}
		if w, left := pop("x"); w != "" || left != 0 {
			t.Fatalf("a pop by a holder of nothing: %q %d, want nothing", w, left)
		}
		if w, left := pop("a"); w != "b" || left != 1 {
			t.Fatalf("a's pop: %q with %d left, want b with 1", w, left)
		}
		// a still holds the slot: b runs under it; nobody else gets in.
		if acquire("d") != driver.SlotQueued {
			t.Fatal("d took the slot a passes on")
		}
		if w, left := pop("a"); w != "c" || left != 1 {
			t.Fatalf("a's second pop: %q with %d left, want c with 1 (d)", w, left)
		}
		if w, left := pop("a"); w != "d" || left != 0 {
			t.Fatalf("a's third pop: %q with %d left, want d with none", w, left)
		}
		if w, _ := pop("a"); w != "" {
			t.Fatalf("a pop of an empty list answered %q", w)
		}
		if next, err := s.ReleaseSlot(ctx, "pop", "a"); err != nil || next != "" {
			t.Fatalf("the release: %q %v, want no waiter", next, err)
		}
		if acquire("e") != driver.SlotHeld {
			t.Fatal("after the release: want e in")
		}
	})
	c.run(t, "ConcurrentAcquiresTakeAtMostMax", func(t *testing.T, s driver.Store, clock *Clock) {
		var got atomic.Int32
		var wg sync.WaitGroup
		for range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 3 { // a store may answer busy (an error) under contention: a caller tries again later
					st, err := s.AcquireSlot(ctx, "race", driver.SlotClaim{Holder: wire.NewID(), Max: 5, LeaseUntil: clock.Now().Add(time.Minute), At: clock.Now()})
					if err != nil {
						continue // busy: the item kept changing
					}
					if st == driver.SlotHeld {
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
	// A release lands however busy the item is: a slot not freed would
	// idle until its run's lease ended (on DynamoDB, 30 writers at one
	// item made read-modify-writes give up before the fallback).
	c.run(t, "ReleasesLandUnderContention", func(t *testing.T, s driver.Store, clock *Clock) {
		const n = 16
		claim := func(holder string) driver.SlotClaim {
			return driver.SlotClaim{Holder: holder, Max: n, LeaseUntil: clock.Now().Add(time.Hour), At: clock.Now(), Waiters: 64}
		}
		var holders []string
		for range n {
			h := wire.NewID()
			if st, err := s.AcquireSlot(ctx, "busy", claim(h)); err != nil || st != driver.SlotHeld {
				t.Fatalf("filling the slots: %v %v", st, err)
			}
			holders = append(holders, h)
		}
		var wg sync.WaitGroup
		var raced atomic.Int32 // racing acquires that got a slot
		errs := make(chan error, n)
		for _, h := range holders {
			wg.Go(func() {
				if _, err := s.ReleaseSlot(ctx, "busy", h); err != nil {
					errs <- err
				}
			})
			wg.Go(func() { // waiters queueing meanwhile, or taking a freed slot
				if st, err := s.AcquireSlot(ctx, "busy", claim(wire.NewID())); err == nil && st == driver.SlotHeld {
					raced.Add(1)
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("a release under contention: %v", err)
		}
		// Every released slot is free: the rest of the n go to new holders.
		free := 0
		for range n {
			st, err := s.AcquireSlot(ctx, "busy", driver.SlotClaim{Holder: wire.NewID(), Max: n, LeaseUntil: clock.Now().Add(time.Hour), At: clock.Now()})
			if err != nil {
				t.Fatal(err)
			}
			if st == driver.SlotHeld {
				free++
			}
		}
		if want := n - int(raced.Load()); free != want {
			t.Fatalf("%d slots free after %d releases and %d racing acquires that got one, want %d: a release did not land", free, n, raced.Load(), want)
		}
	})
	c.run(t, "TokenBucketReservesStartsAtItsRate", func(t *testing.T, s driver.Store, clock *Clock) {
		take := func(b driver.TokenBucket) time.Duration {
			t.Helper()
			wait, err := s.TakeToken(ctx, "r", b)
			if err != nil {
				t.Fatal(err)
			}
			return wait
		}
		// 10 a second with a burst of 2: two starts now, then one each
		// 100ms, reserved in turn however many ask at once.
		b := driver.TokenBucket{PerSecond: 10, Burst: 2, At: clock.Now()}
		var got []time.Duration
		for range 5 {
			got = append(got, take(b))
		}
		want := []time.Duration{0, 0, 100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond}
		if !slices.Equal(got, want) {
			t.Fatalf("reservations %v, want %v", got, want)
		}
		// Halfway to the last reservation, the next is after it.
		clock.Advance(150 * time.Millisecond)
		b.At = clock.Now()
		if w := take(b); w != 250*time.Millisecond {
			t.Fatalf("a take 150ms later waits %v, want 250ms (after the reservations made)", w)
		}
		// Idle for long: the burst is back, no more.
		clock.Advance(time.Hour)
		b.At = clock.Now()
		if w1, w2, w3 := take(b), take(b), take(b); w1 != 0 || w2 != 0 || w3 != 100*time.Millisecond {
			t.Fatalf("after an idle hour: %v %v %v, want 0 0 100ms", w1, w2, w3)
		}
	})
	c.run(t, "TokenBucketIfDueRefusesWithoutReserving", func(t *testing.T, s driver.Store, clock *Clock) {
		take := func(b driver.TokenBucket) time.Duration {
			t.Helper()
			wait, err := s.TakeToken(ctx, "due", b)
			if err != nil {
				t.Fatal(err)
			}
			return wait
		}
		// 10 a second with a burst of 2: two takes now; the third is
		// refused (it would wait 100ms), however often it is asked, and
		// reserves nothing: 100ms later one is due, and only one.
		b := driver.TokenBucket{PerSecond: 10, Burst: 2, At: clock.Now(), IfDue: true}
		if w1, w2 := take(b), take(b); w1 != 0 || w2 != 0 {
			t.Fatalf("the burst: %v %v, want 0 0", w1, w2)
		}
		for range 5 {
			if w := take(b); w != 100*time.Millisecond {
				t.Fatalf("over the burst: %v, want a refusal of 100ms", w)
			}
		}
		clock.Advance(100 * time.Millisecond)
		b.At = clock.Now()
		if w1, w2 := take(b), take(b); w1 != 0 || w2 != 100*time.Millisecond {
			t.Fatalf("100ms later: %v %v, want 0 then a refusal of 100ms (the refusals reserved nothing)", w1, w2)
		}
		// A reservation (IfDue unset) still queues behind.
		b.IfDue = false
		if w := take(b); w != 100*time.Millisecond {
			t.Fatalf("a reservation after: %v, want 100ms", w)
		}
		// Idle: due at once, with IfDue as without.
		clock.Advance(time.Hour)
		b.At, b.IfDue = clock.Now(), true
		if w := take(b); w != 0 {
			t.Fatalf("after an idle hour: %v, want 0", w)
		}
	})
	c.run(t, "ConcurrentTakesReserveDistinctStarts", func(t *testing.T, s driver.Store, clock *Clock) {
		b := driver.TokenBucket{PerSecond: 20, Burst: 1, At: clock.Now()}
		var mu sync.Mutex
		seen := map[time.Duration]bool{}
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				wait, err := s.TakeToken(ctx, "c", b)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seen[wait] = true
				mu.Unlock()
			})
		}
		wg.Wait()
		for i := range 20 {
			if w := time.Duration(i) * 50 * time.Millisecond; !seen[w] {
				t.Fatalf("20 concurrent takes at 20 a second reserved %v, want each 50ms step from 0 to 950ms once", seen)
			}
		}
	})
	c.run(t, "ParkingGivesBackTheAttemptAndKeepsWhatItWaitsOn", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		_, token := mustClaim(t, s, rec.ID, clock.Now())
		next := clock.Now().Add(time.Second)
		if err := s.Requeue(ctx, rec.ID, token, driver.Requeue{At: clock.Now(), RunAt: next, SweepAt: next.Add(time.Minute), WaitingOn: "rate", Unstart: true}); err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, s, rec.ID)
		if got.Status != jobs.StatusQueued || got.Attempt != 0 || got.WaitingOn != "rate" || !got.FirstStartedAt.IsZero() || !got.StartedAt.IsZero() {
			t.Fatalf("parked %+v, want queued, attempt 0, waiting on rate, never started", got)
		}
		clock.Advance(time.Second)
		again, token := mustClaim(t, s, rec.ID, clock.Now())
		if again.Attempt != 1 || again.WaitingOn != "rate" {
			t.Fatalf("claimed after parking: attempt %d, waiting on %q; want 1 and the claim to still say rate", again.Attempt, again.WaitingOn)
		}
		if got := mustGet(t, s, rec.ID); got.WaitingOn != "" || got.Status != jobs.StatusRunning || got.Attempt != 1 || got.ClaimToken != token ||
			!got.StartedAt.Equal(again.StartedAt) || !got.FirstStartedAt.Equal(again.FirstStartedAt) || !got.LeaseUntil.Equal(again.LeaseUntil) {
			t.Fatalf("stored after the claim %+v, claimed %+v: want the claim's record but no longer waiting", got, again)
		}
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, At: clock.Now()}); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, rec.ID); got.WaitingOn != "" {
			t.Fatalf("finished job still waiting on %q", got.WaitingOn)
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
		if !isConflict(err) {
			t.Fatalf("debouncing a running job: %v, want a *driver.ConflictError", err)
		}
	})
	c.run(t, "DebouncePutsAJobSentFirstInTheSweepIndex", func(t *testing.T, s driver.Store, clock *Clock) {
		// Its message may come before its new run time, beyond what SQS
		// can delay: the sweeper must find it then.
		rec := NewRecord(wire.NewID(), clock.Now())
		rec.SweepAt = time.Time{}
		if err := s.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		later := clock.Now().Add(time.Hour)
		if err := s.Debounce(ctx, rec.ID, driver.Debounce{Payload: []byte(`{"n":2}`), RequestHash: "h2", RunAt: later, SweepAt: later, At: clock.Now()}); err != nil {
			t.Fatal(err)
		}
		if ids, err := s.Due(ctx, later, 10); err != nil || len(ids) != 1 || ids[0] != rec.ID {
			t.Fatalf("Due at its new run time = %v %v, want the debounced job", ids, err)
		}
	})
}
