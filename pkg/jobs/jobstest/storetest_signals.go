package jobstest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// signals is the conformance suite's part for signals (driver.Signaller),
// run when the store keeps them.
func (c suite) signals(t *testing.T) {
	ctx := context.Background()
	signaller := func(t *testing.T, s driver.Store) driver.Signaller {
		t.Helper()
		sg, ok := s.(driver.Signaller)
		if !ok {
			t.Skip("the store keeps no signals (driver.Signaller)")
		}
		return sg
	}
	conflict := func(t *testing.T, err error, what string) *driver.Record {
		t.Helper()
		var ce *driver.ConflictError
		if !errors.As(err, &ce) || ce.Current == nil {
			t.Fatalf("%s: %v, want a *ConflictError with the job", what, err)
		}
		return ce.Current
	}

	// A job's step marks are written with its state: by a checkpoint, a
	// park and its final write, each when given; a write without them
	// keeps them.
	c.run(t, "StepMarksAreWrittenWithTheState", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		_, token := mustClaim(t, s, rec.ID, clock.Now())
		now := clock.Now()
		if err := s.Checkpoint(ctx, rec.ID, token, driver.Checkpoint{Data: []byte("sealed:1"), LeaseUntil: now.Add(time.Minute), At: now, Marks: `[{"name":"a"}]`}); err != nil {
			t.Fatal(err)
		}
		if err := s.Heartbeat(ctx, rec.ID, token, driver.Heartbeat{LeaseUntil: now.Add(time.Minute), At: now}); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, rec.ID).StepMarks; got != `[{"name":"a"}]` {
			t.Fatalf("after a checkpoint and a heartbeat: marks %q", got)
		}
		if err := s.Requeue(ctx, rec.ID, token, driver.Requeue{At: now, RunAt: now, WaitingOn: "sleep", Marks: `[{"name":"b"}]`}); err != nil {
			t.Fatal(err)
		}
		claimed, token := mustClaim(t, s, rec.ID, now)
		if claimed.StepMarks != `[{"name":"b"}]` {
			t.Fatalf("after a park: marks %q", claimed.StepMarks)
		}
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, At: now, ExpiresAt: now.Add(time.Hour), Marks: `[{"name":"c"}]`}); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, rec.ID).StepMarks; got != `[{"name":"c"}]` {
			t.Fatalf("after the final write: marks %q", got)
		}
	})

	// A signal is stored on a queued or running job, once per name, up to
	// Max; the claim returns the job's signals; a finished job takes none.
	c.run(t, "SignalsAreKeptOncePerNameUpToMax", func(t *testing.T, s driver.Store, clock *Clock) {
		sg := signaller(t, s)
		rec := mustCreate(t, s, clock.Now())
		if err := sg.Signal(ctx, rec.ID, driver.Signal{Name: "approval", Data: []byte("sealed:a"), At: clock.Now(), Max: 2}); err != nil {
			t.Fatal(err)
		}
		cur := conflict(t, sg.Signal(ctx, rec.ID, driver.Signal{Name: "approval", Data: []byte("sealed:b"), At: clock.Now(), Max: 2}), "the same name again")
		if string(cur.Signals["approval"]) != "sealed:a" {
			t.Fatalf("the duplicate's conflict: signals %q, want the first kept", cur.Signals)
		}
		claimed, token := mustClaim(t, s, rec.ID, clock.Now())
		if string(claimed.Signals["approval"]) != "sealed:a" {
			t.Fatalf("the claim's signals: %q", claimed.Signals)
		}
		if err := sg.Signal(ctx, rec.ID, driver.Signal{Name: "note.1", Data: []byte("sealed:n"), At: clock.Now(), Max: 2}); err != nil {
			t.Fatalf("a signal to a running job: %v", err)
		}
		conflict(t, sg.Signal(ctx, rec.ID, driver.Signal{Name: "third", Data: []byte("sealed:t"), At: clock.Now(), Max: 2}), "a signal past Max")
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, At: clock.Now(), ExpiresAt: clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		got := conflict(t, sg.Signal(ctx, rec.ID, driver.Signal{Name: "late", Data: []byte("sealed:l"), At: clock.Now(), Max: 9}), "a signal to a finished job")
		if got.Status != jobs.StatusSucceeded || len(got.Signals) != 2 || string(got.Signals["note.1"]) != "sealed:n" {
			t.Fatalf("the finished job: %s, signals %q", got.Status, got.Signals)
		}
		if err := sg.Signal(ctx, "00000000-0000-0000-0000-000000000000", driver.Signal{Name: "x", Data: []byte("s"), At: clock.Now(), Max: 2}); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("a signal to no job: %v", err)
		}
	})

	// A child's signal (driver.ChildSignal) does not count towards Max:
	// a job with Max signals of its own still takes one, and one of its
	// own past Max is refused whatever child signals it holds.
	c.run(t, "ChildSignalsAreNotCounted", func(t *testing.T, s driver.Store, clock *Clock) {
		sg := signaller(t, s)
		rec := mustCreate(t, s, clock.Now())
		for _, name := range []string{"approval", driver.ChildSignal("quote-1"), driver.ChildSignal("quote 2#x")} {
			if err := sg.Signal(ctx, rec.ID, driver.Signal{Name: name, Data: []byte{1}, At: clock.Now(), Max: 1}); err != nil {
				t.Fatalf("signal %q with Max 1: %v", name, err)
			}
		}
		conflict(t, sg.Signal(ctx, rec.ID, driver.Signal{Name: "note", Data: []byte("sealed:n"), At: clock.Now(), Max: 1}), "a second signal of its own past Max 1")
		got := mustGet(t, s, rec.ID)
		if len(got.Signals) != 3 || got.Signals[driver.ChildSignal("quote 2#x")] == nil {
			t.Fatalf("signals %q, want the three", got.Signals)
		}
	})

	// A large signal is read wherever the store keeps it: in the job's
	// item, or in one of its own (Record.SignalRefs; the record's entry
	// then empty, not nil) that lasts until Signal.Until and longer by
	// KeepPart; the same signal written again (a lost answer's retry) is
	// no conflict, another of that name is.
	c.run(t, "LargeSignalsAreReadWhereverKept", func(t *testing.T, s driver.Store, clock *Clock) {
		sg := signaller(t, s)
		rec := mustCreate(t, s, clock.Now())
		big := driver.Signal{Name: "approval", Data: bigPayload("s"), At: clock.Now(), Max: 2, Until: clock.Now().Add(30 * 24 * time.Hour)}
		if err := sg.Signal(ctx, rec.ID, big); err != nil {
			t.Fatal(err)
		}
		if err := sg.Signal(ctx, rec.ID, big); err != nil {
			t.Fatalf("the same signal again (a retried write): %v, want nil", err)
		}
		cur := conflict(t, sg.Signal(ctx, rec.ID, driver.Signal{Name: "approval", Data: bigPayload("t"), At: clock.Now(), Max: 2, Until: big.Until}), "another signal of that name")
		if cur.Signals["approval"] == nil {
			t.Fatal("the conflict's job has no signal approval")
		}
		claimed, _ := mustClaim(t, s, rec.ID, clock.Now())
		p := driver.SignalPart("approval")
		data, until, err := s.ReadPart(ctx, claimed, p)
		if err != nil || string(data) != string(big.Data) {
			t.Fatalf("the signal read back: %d bytes, %v; want the %d first stored", len(data), err, len(big.Data))
		}
		if claimed.SignalRefs["approval"] == "" {
			if string(claimed.Signals["approval"]) != string(big.Data) {
				t.Fatalf("a signal kept inline: %d bytes in the record", len(claimed.Signals["approval"]))
			}
			return
		}
		if n := len(claimed.Signals["approval"]); n != 0 || claimed.Signals["approval"] == nil {
			t.Fatalf("a signal kept apart: the record's entry has %d bytes (nil %v), want empty", n, claimed.Signals["approval"] == nil)
		}
		if until.Before(big.Until.Truncate(time.Second)) {
			t.Fatalf("the signal's item lasts until %v, want at least %v", until, big.Until)
		}
		later := big.Until.Add(10 * 24 * time.Hour)
		if err := s.KeepPart(ctx, claimed, p, later); err != nil {
			t.Fatal(err)
		}
		if _, until, err := s.ReadPart(ctx, claimed, p); err != nil || until.Before(later.Truncate(time.Second)) {
			t.Fatalf("after KeepPart: until %v, %v; want %v", until, err, later)
		}
	})

	// A park for a signal the job has is refused (the signal came while
	// the run ran); a park for one it has not lands, and that signal then
	// wakes it: due at RunAt, in the sweep index at SweepAt. A wake of a
	// job that waits for another signal is refused.
	c.run(t, "AParkForASignalAndItsWake", func(t *testing.T, s driver.Store, clock *Clock) {
		sg := signaller(t, s)
		rec := mustCreate(t, s, clock.Now())
		_, token := mustClaim(t, s, rec.ID, clock.Now())
		if err := sg.Signal(ctx, rec.ID, driver.Signal{Name: "early", Data: []byte("sealed:e"), At: clock.Now(), Max: 8}); err != nil {
			t.Fatal(err)
		}
		timeout := clock.Now().Add(48 * time.Hour)
		park := driver.Requeue{At: clock.Now(), RunAt: timeout, SweepAt: timeout.Add(-10 * time.Minute), WaitingOn: driver.WaitSignalOn("early")}
		cur := conflict(t, s.Requeue(ctx, rec.ID, token, park), "a park for a signal the job has")
		if cur.Status != jobs.StatusRunning || cur.ClaimToken != token {
			t.Fatalf("after the refused park: %s, token %q", cur.Status, cur.ClaimToken)
		}
		park.WaitingOn = driver.WaitSignalOn("approval")
		if err := s.Requeue(ctx, rec.ID, token, park); err != nil {
			t.Fatalf("a park for a signal the job has not: %v", err)
		}
		got := mustGet(t, s, rec.ID)
		if got.Status != jobs.StatusQueued || got.WaitingOn != driver.WaitSignalOn("approval") || !got.RunAt.Equal(timeout) || got.Attempt != 0 {
			t.Fatalf("parked: %s on %q run at %v attempt %d", got.Status, got.WaitingOn, got.RunAt, got.Attempt)
		}
		clock.Advance(time.Hour)
		now := clock.Now()
		// A write without a wake, its caller having read the job running,
		// is refused: the caller reads it again and wakes it.
		cur = conflict(t, sg.Signal(ctx, rec.ID, driver.Signal{Name: "approval", Data: []byte("sealed:late"), At: now, Max: 8}), "a signal without a wake to a job that waits for it")
		if cur.Signals["approval"] != nil || !cur.UpdatedAt.Equal(got.UpdatedAt) {
			t.Fatalf("the refused write: signals %q, updated %v (want %v)", cur.Signals, cur.UpdatedAt, got.UpdatedAt)
		}
		wake := driver.Signal{Name: "other", Data: []byte("sealed:o"), At: now, Max: 8, Wake: true, RunAt: now, SweepAt: now.Add(time.Minute)}
		conflict(t, sg.Signal(ctx, rec.ID, wake), "a wake for another signal")
		wake.Name, wake.Data = "approval", []byte("sealed:yes")
		if err := sg.Signal(ctx, rec.ID, wake); err != nil {
			t.Fatal(err)
		}
		got = mustGet(t, s, rec.ID)
		if got.Status != jobs.StatusQueued || !got.RunAt.Equal(now) || !got.SweepAt.Equal(now.Add(time.Minute)) || string(got.Signals["approval"]) != "sealed:yes" ||
			!got.UpdatedAt.Equal(cur.UpdatedAt) {
			t.Fatalf("woken: %s run at %v (want %v) sweep at %v, signals %q, updated %v (want it left alone)", got.Status, got.RunAt, now, got.SweepAt, got.Signals, got.UpdatedAt)
		}
		if ids, err := s.Due(ctx, now.Add(time.Minute), 100); err != nil || !slices.Contains(ids, rec.ID) {
			t.Fatalf("the woken job is not due for a sweep at its sweep time: %v %v", ids, err)
		}
		claimed, _ := mustClaim(t, s, rec.ID, clock.Now())
		if claimed.Attempt != 1 || len(claimed.Signals) != 2 {
			t.Fatalf("the claim after the wake: attempt %d, signals %q", claimed.Attempt, claimed.Signals)
		}
	})
}
