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
// (driver.PayloadStore): reads of the job leave the payload out and name
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
		ps, ok := s.(driver.PayloadStore)
		if !ok {
			t.Fatalf("job %s names a payload item (%q) but the store is no driver.PayloadStore", rec.ID, rec.PayloadRef)
		}
		p, until, err := ps.Payload(ctx, rec)
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
		ps := s.(driver.PayloadStore)
		later := clock.Now().Add(3 * time.Hour)
		if err := ps.KeepPayload(ctx, rec, later); err != nil {
			t.Fatal(err)
		}
		if err := ps.KeepPayload(ctx, rec, clock.Now().Add(2*time.Hour)); err != nil {
			t.Fatal(err) // sooner: it stays as it is
		}
		clock.Advance(2*time.Hour + time.Minute)
		if _, kept, err := ps.Payload(ctx, rec); err != nil || kept.Before(later.Truncate(time.Second)) {
			t.Fatalf("after KeepPayload: expires %v, %v; want %v", kept, err, later)
		}
		clock.Advance(time.Hour)
		if _, _, err := ps.Payload(ctx, rec); !errors.Is(err, driver.ErrPayloadMissing) {
			t.Fatalf("a payload item past its TTL: %v, want ErrPayloadMissing", err)
		}
		if err := ps.KeepPayload(ctx, rec, clock.Now().Add(time.Hour)); err != nil {
			t.Fatalf("KeepPayload of a missing item: %v", err)
		}
		if _, _, err := ps.Payload(ctx, rec); !errors.Is(err, driver.ErrPayloadMissing) {
			t.Fatalf("KeepPayload brought back an expired payload item: %v", err)
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
		if p, _, err := payloadOf(t, s, mustGet(t, s, rec.ID)); err != nil || p != string(big) {
			t.Fatalf("after a debounce to %d bytes: %d, %v", len(big), len(p), err)
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
// (driver.CheckpointStore), through Checkpoint and Requeue: a read of
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
		cs, ok := s.(driver.CheckpointStore)
		if !ok {
			t.Fatalf("job %s names a checkpoint item but the store is no driver.CheckpointStore", rec.ID)
		}
		cp, _, err := cs.ReadCheckpoint(ctx, rec)
		if err != nil {
			t.Fatalf("ReadCheckpoint: %v", err)
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
		cs := s.(driver.CheckpointStore)
		if err := cs.KeepCheckpoint(ctx, got, clock.Now().Add(2*time.Hour)); err != nil {
			t.Fatal(err)
		}
		clock.Advance(90 * time.Minute)
		if _, _, err := cs.ReadCheckpoint(ctx, got); err != nil {
			t.Fatalf("a kept checkpoint item before its TTL: %v", err)
		}
		clock.Advance(time.Hour)
		if _, _, err := cs.ReadCheckpoint(ctx, got); !errors.Is(err, driver.ErrCheckpointMissing) {
			t.Fatalf("a checkpoint item past its TTL: %v, want ErrCheckpointMissing", err)
		}
	})
}
