package jobstest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// bigPayload is a payload that takes any job's item past one write unit.
func bigPayload(fill string) []byte {
	return []byte(`{"text":"` + strings.Repeat(fill, 3000) + `"}`)
}

// payloads checks a store that keeps large payloads apart
// (driver.PartPayload): reads of the job leave the payload out and name
// its item, which holds it until its TTL; a small payload stays inline. A
// store that keeps every payload inline passes by returning them in the
// record.
func (c suite) payloads(t *testing.T) {
	ctx := context.Background()
	// payloadOf reads rec's payload wherever the store keeps it, and when
	// its item expires (zero: inline).
	payloadOf := func(t *testing.T, s driver.Store, rec *driver.Record) (string, time.Time, error) {
		t.Helper()
		if rec.PayloadRef == "" {
			return string(rec.Payload), time.Time{}, nil
		}
		if len(rec.Payload) != 0 {
			t.Fatalf("job %s names its payload item and carries %d bytes of payload too", rec.ID, len(rec.Payload))
		}
		p, until, err := s.ReadPart(ctx, rec, driver.PartPayload)
		return string(p), until, err
	}
	create := func(t *testing.T, s driver.Store, now time.Time, payload []byte, until time.Time) *driver.Record {
		t.Helper()
		rec := NewRecord(wire.NewID(), now)
		rec.Payload, rec.PayloadUntil = payload, until
		if err := s.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		return rec
	}

	c.run(t, "PayloadReadWhereverKept", func(t *testing.T, s driver.Store, clock *Clock) {
		until := clock.Now().Add(30 * 24 * time.Hour)
		big := bigPayload("p")
		rec := create(t, s, clock.Now(), big, until)
		got := mustGet(t, s, rec.ID)
		p, kept, err := payloadOf(t, s, got)
		if err != nil || p != string(big) {
			t.Fatalf("payload read back: %d bytes, %v; want the %d stored", len(p), err, len(big))
		}
		if got.PayloadRef != "" && kept.Before(until.Truncate(time.Second)) {
			t.Fatalf("payload item expires %v, want at least %v", kept, until)
		}
		claimed, _ := mustClaim(t, s, rec.ID, clock.Now())
		if claimed.PayloadRef != got.PayloadRef {
			t.Fatalf("the claim names payload item %q, Get %q", claimed.PayloadRef, got.PayloadRef)
		}
		if p, _, err := payloadOf(t, s, claimed); err != nil || p != string(big) {
			t.Fatalf("payload of the claimed job: %d bytes, %v", len(p), err)
		}
		small := create(t, s, clock.Now(), []byte(`{"n":1}`), until)
		if got := mustGet(t, s, small.ID); got.PayloadRef != "" || string(got.Payload) != `{"n":1}` {
			t.Fatalf("a small payload was not kept inline: %q %s", got.PayloadRef, got.Payload)
		}
	})

	c.run(t, "PayloadOfALosingCreateLeavesTheWinners", func(t *testing.T, s driver.Store, clock *Clock) {
		until := clock.Now().Add(30 * 24 * time.Hour)
		rec := create(t, s, clock.Now(), bigPayload("a"), until)
		again := NewRecord(rec.ID, clock.Now())
		again.Payload, again.PayloadUntil = bigPayload("b"), until
		wantConflict(t, s.Create(ctx, again), jobs.StatusQueued)
		if p, _, err := payloadOf(t, s, mustGet(t, s, rec.ID)); err != nil || p != string(bigPayload("a")) {
			t.Fatalf("after a second create with another payload, the job's reads %.20q..., %v", p, err)
		}
	})

	c.run(t, "PayloadItemLastsUntilItsTTLAndKeepExtendsIt", func(t *testing.T, s driver.Store, clock *Clock) {
		until := clock.Now().Add(time.Hour)
		rec := mustGet(t, s, create(t, s, clock.Now(), bigPayload("k"), until).ID)
		if rec.PayloadRef == "" {
			return // inline: it lasts as long as its job
		}
		later := clock.Now().Add(3 * time.Hour)
		if err := s.KeepPart(ctx, rec, driver.PartPayload, later); err != nil {
			t.Fatal(err)
		}
		if err := s.KeepPart(ctx, rec, driver.PartPayload, clock.Now().Add(2*time.Hour)); err != nil {
			t.Fatal(err) // sooner: it stays as it is
		}
		clock.Advance(2*time.Hour + time.Minute)
		if _, kept, err := s.ReadPart(ctx, rec, driver.PartPayload); err != nil || kept.Before(later.Truncate(time.Second)) {
			t.Fatalf("after KeepPart: expires %v, %v; want %v", kept, err, later)
		}
		clock.Advance(time.Hour)
		if _, _, err := s.ReadPart(ctx, rec, driver.PartPayload); !errors.Is(err, driver.ErrPartMissing) {
			t.Fatalf("a payload item past its TTL: %v, want ErrPartMissing", err)
		}
		if err := s.KeepPart(ctx, rec, driver.PartPayload, clock.Now().Add(time.Hour)); err != nil {
			t.Fatalf("KeepPart of a missing item: %v", err)
		}
		if _, _, err := s.ReadPart(ctx, rec, driver.PartPayload); !errors.Is(err, driver.ErrPartMissing) {
			t.Fatalf("KeepPart brought back an expired payload item: %v", err)
		}
	})

	c.run(t, "DebounceKeepsALargePayloadApart", func(t *testing.T, s driver.Store, clock *Clock) {
		until := clock.Now().Add(30 * 24 * time.Hour)
		rec := create(t, s, clock.Now(), []byte(`{"n":1}`), until)
		big := bigPayload("d")
		if err := s.Debounce(ctx, rec.ID, driver.Debounce{Payload: big, PayloadUntil: until, RequestHash: "h2",
			RunAt: clock.Now().Add(time.Minute), SweepAt: clock.Now().Add(3 * time.Minute), At: clock.Now()}); err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, s, rec.ID)
		if p, _, err := payloadOf(t, s, got); err != nil || p != string(big) {
			t.Fatalf("after a debounce to %d bytes: %d, %v", len(big), len(p), err)
		}
		// A store that keeps such a payload apart at creation does at a
		// debounce too.
		if probe := mustGet(t, s, create(t, s, clock.Now(), big, until).ID); probe.PayloadRef != "" && got.PayloadRef == "" {
			t.Fatalf("a debounce kept a %d-byte payload in the job's item, which a create keeps apart", len(big))
		}
		if err := s.Debounce(ctx, rec.ID, driver.Debounce{Payload: []byte(`{"n":3}`), PayloadUntil: until, RequestHash: "h3",
			RunAt: clock.Now().Add(time.Minute), SweepAt: clock.Now().Add(3 * time.Minute), At: clock.Now()}); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, rec.ID); got.PayloadRef != "" || string(got.Payload) != `{"n":3}` {
			t.Fatalf("after a debounce back to a small payload: %q %s", got.PayloadRef, got.Payload)
		}
	})
}

// checkpoints checks a store that keeps large checkpoints apart
// (driver.PartCheckpoint), through Checkpoint and Requeue: a read of
// the job names the item, which holds the checkpoint; a small one stays
// in the job's item. A store that keeps every checkpoint inline passes by
// returning them in the record.
func (c suite) checkpoints(t *testing.T) {
	ctx := context.Background()
	checkpointOf := func(t *testing.T, s driver.Store, rec *driver.Record) []byte {
		t.Helper()
		if rec.CheckpointRef == "" {
			return rec.Checkpoint
		}
		if len(rec.Checkpoint) != 0 {
			t.Fatalf("job %s names its checkpoint item and carries %d bytes of checkpoint too", rec.ID, len(rec.Checkpoint))
		}
		cp, _, err := s.ReadPart(ctx, rec, driver.PartCheckpoint)
		if err != nil {
			t.Fatalf("ReadPart: %v", err)
		}
		return cp
	}
	c.run(t, "CheckpointReadWhereverKept", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		_, token := mustClaim(t, s, rec.ID, clock.Now())
		until := clock.Now().Add(30 * 24 * time.Hour)
		big := bigPayload("c")
		if err := s.Checkpoint(ctx, rec.ID, token, driver.Checkpoint{Data: big, LeaseUntil: clock.Now().Add(time.Minute), At: clock.Now(), Until: until}); err != nil {
			t.Fatal(err)
		}
		if got := checkpointOf(t, s, mustGet(t, s, rec.ID)); string(got) != string(big) {
			t.Fatalf("checkpoint read back: %d bytes, want %d", len(got), len(big))
		}
		// A continuation with a new large checkpoint, then its claim.
		bigger := bigPayload("C")
		if err := s.Requeue(ctx, rec.ID, token, driver.Requeue{At: clock.Now(), RunAt: clock.Now(), Continue: true, Checkpoint: bigger, CheckpointUntil: until}); err != nil {
			t.Fatal(err)
		}
		claimed, token := mustClaim(t, s, rec.ID, clock.Now())
		if got := checkpointOf(t, s, claimed); string(got) != string(bigger) {
			t.Fatalf("the claim's checkpoint: %d bytes of %q..., want the continuation's", len(got), got[:min(12, len(got))])
		}
		small := []byte("sealed:small")
		if err := s.Checkpoint(ctx, rec.ID, token, driver.Checkpoint{Data: small, LeaseUntil: clock.Now().Add(time.Minute), At: clock.Now(), Until: until}); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, rec.ID); got.CheckpointRef != "" || string(got.Checkpoint) != string(small) {
			t.Fatalf("a small checkpoint after a large one: ref %q, %q", got.CheckpointRef, got.Checkpoint)
		}
	})

	// A run whose handler suspends (Job.Sleep) parks with its state in
	// the same write: the job waits on "sleep" until its end, the attempt
	// given back and its start kept; the claim at the end reads the state.
	c.run(t, "ASuspendedRunParksWithItsState", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		_, token := mustClaim(t, s, rec.ID, clock.Now())
		started := clock.Now()
		clock.Advance(time.Second)
		end := clock.Now().Add(48 * time.Hour)
		state := bigPayload("s")
		if err := s.Requeue(ctx, rec.ID, token, driver.Requeue{At: clock.Now(), RunAt: end, SweepAt: end.Add(-10 * time.Minute), WaitingOn: "sleep",
			Checkpoint: state, CheckpointUntil: end.Add(30 * 24 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, s, rec.ID)
		if got.Status != jobs.StatusQueued || got.WaitingOn != "sleep" || got.Attempt != 0 || !got.RunAt.Equal(end) || !got.FirstStartedAt.Equal(started) {
			t.Fatalf("suspended: %s on %q attempt %d run at %v first start %v; want queued on sleep, attempt 0, run at %v, its start kept",
				got.Status, got.WaitingOn, got.Attempt, got.RunAt, got.FirstStartedAt, end)
		}
		clock.Set(end)
		claimed, _ := mustClaim(t, s, rec.ID, clock.Now())
		if cp := checkpointOf(t, s, claimed); string(cp) != string(state) || claimed.Attempt != 1 || claimed.WaitingOn != "sleep" {
			t.Fatalf("the claim at the sleep's end: %d bytes of state, attempt %d, waiting on %q; want the park's state, attempt 1, sleep",
				len(cp), claimed.Attempt, claimed.WaitingOn)
		}
	})

	c.run(t, "CheckpointItemLastsUntilItsTTL", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		_, token := mustClaim(t, s, rec.ID, clock.Now())
		if err := s.Checkpoint(ctx, rec.ID, token, driver.Checkpoint{Data: bigPayload("t"), LeaseUntil: clock.Now().Add(time.Minute), At: clock.Now(), Until: clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, s, rec.ID)
		if got.CheckpointRef == "" {
			return // inline: it lasts as long as its job
		}
		if err := s.KeepPart(ctx, got, driver.PartCheckpoint, clock.Now().Add(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		clock.Advance(90 * time.Minute)
		if _, _, err := s.ReadPart(ctx, got, driver.PartCheckpoint); err != nil {
			t.Fatalf("a kept checkpoint item before its TTL: %v", err)
		}
		clock.Advance(time.Hour)
		if _, _, err := s.ReadPart(ctx, got, driver.PartCheckpoint); !errors.Is(err, driver.ErrPartMissing) {
			t.Fatalf("a checkpoint item past its TTL: %v, want ErrPartMissing", err)
		}
	})
}

// results checks a store that keeps large final results apart
// (driver.PartResult): a read of the finished job names the item, which
// holds the result until the job's own TTL; a small one stays in the
// job's item; a retry from the API clears either.
func (c suite) results(t *testing.T) {
	ctx := context.Background()
	resultOf := func(t *testing.T, s driver.Store, rec *driver.Record) string {
		t.Helper()
		if rec.ResultRef == "" {
			return string(rec.Result)
		}
		if len(rec.Result) != 0 {
			t.Fatalf("job %s names its result item and carries %d bytes of result too", rec.ID, len(rec.Result))
		}
		r, _, err := s.ReadPart(ctx, rec, driver.PartResult)
		if err != nil {
			t.Fatalf("ReadPart: %v", err)
		}
		return string(r)
	}
	c.run(t, "ResultReadWhereverKeptAndClearedByARetry", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		_, token := mustClaim(t, s, rec.ID, clock.Now())
		big := bigPayload("r")
		expires := clock.Now().Add(time.Hour)
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusSucceeded, Result: big, ResultUntil: expires, At: clock.Now(), ExpiresAt: expires}); err != nil {
			t.Fatal(err)
		}
		got := mustGet(t, s, rec.ID)
		if r := resultOf(t, s, got); r != string(big) {
			t.Fatalf("result read back: %d bytes, want %d", len(r), len(big))
		}
		clock.Advance(59 * time.Minute)
		if r := resultOf(t, s, got); r != string(big) {
			t.Fatalf("result read back before the job's TTL: %d bytes", len(r))
		}
		if err := s.Resubmit(ctx, rec.ID, driver.Resubmit{At: clock.Now(), SweepAt: clock.Now().Add(time.Minute)}); err == nil {
			t.Fatal("a succeeded job was resubmitted")
		}
		small := mustCreate(t, s, clock.Now())
		_, token = mustClaim(t, s, small.ID, clock.Now())
		if err := s.Finish(ctx, small.ID, token, driver.Outcome{Status: jobs.StatusFailed, Code: "x", Result: []byte(`{"n":1}`), At: clock.Now(), ExpiresAt: clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, small.ID); got.ResultRef != "" || string(got.Result) != `{"n":1}` {
			t.Fatalf("a small result: ref %q, %s", got.ResultRef, got.Result)
		}
	})

	c.run(t, "ARetryFromTheAPIClearsAResultItem", func(t *testing.T, s driver.Store, clock *Clock) {
		rec := mustCreate(t, s, clock.Now())
		_, token := mustClaim(t, s, rec.ID, clock.Now())
		if err := s.Finish(ctx, rec.ID, token, driver.Outcome{Status: jobs.StatusFailed, Code: "x", Result: bigPayload("f"),
			ResultUntil: clock.Now().Add(time.Hour), At: clock.Now(), ExpiresAt: clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Resubmit(ctx, rec.ID, driver.Resubmit{At: clock.Now(), SweepAt: clock.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, s, rec.ID); got.ResultRef != "" || got.Result != nil {
			t.Fatalf("after a retry from the API: result ref %q, %d bytes", got.ResultRef, len(got.Result))
		}
	})
}
