package jobstest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

var _ driver.PayloadStore = (*MemStore)(nil)

// memPayload is a payload kept apart: its bytes and its TTL.
type memPayload struct {
	data  []byte
	until time.Time
}

// KeepPayloadsApart makes the store keep every payload, and every
// checkpoint, over n bytes in an item of its own, as dynamostore keeps
// those that would take their job's item past a write unit
// (driver.PayloadStore, driver.CheckpointStore): reads of the job leave
// them out (Record.PayloadRef, Record.CheckpointRef), and an item is gone
// once its TTL (Record.PayloadUntil, Checkpoint.Until) has passed on the
// store's clock. 0 keeps them all inline, the default.
func (m *MemStore) KeepPayloadsApart(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.apartOver = n
}

// DropPayload removes job id's payload item, if it has one, as TTL would:
// for tests of a payload that is missing at a claim.
func (m *MemStore) DropPayload(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.jobs[id]; ok && r.PayloadRef != "" {
		delete(m.payloads, id+"#"+r.PayloadRef)
	}
}

// PayloadItem returns job id's payload item's TTL, and whether the job
// has one that has not expired: for invariants (every live job's payload
// outlasts it).
func (m *MemStore) PayloadItem(id string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.jobs[id]
	if !ok || r.PayloadRef == "" {
		return time.Time{}, false
	}
	p, ok := m.payloads[id+"#"+r.PayloadRef]
	if !ok || !m.clock.Now().Before(p.until) {
		return time.Time{}, false
	}
	return p.until, true
}

// setPayload stores payload for stored (the job's record as stored): in
// the record, or apart when over the store's bound.
func (m *MemStore) setPayload(stored *driver.Record, payload []byte, until time.Time) {
	stored.Payload, stored.PayloadRef = bytes.Clone(payload), ""
	if m.apartOver <= 0 || len(payload) <= m.apartOver {
		return
	}
	sum := sha256.Sum256(payload)
	ref := hex.EncodeToString(sum[:8])
	k := stored.ID + "#" + ref
	if cur, ok := m.payloads[k]; ok && cur.until.After(until) {
		until = cur.until
	}
	m.payloads[k] = memPayload{data: bytes.Clone(payload), until: until}
	stored.Payload, stored.PayloadRef = nil, ref
}

// Payload reads rec's payload item.
func (m *MemStore) Payload(_ context.Context, rec *driver.Record) (json.RawMessage, time.Time, error) {
	if rec.PayloadRef == "" {
		return rec.Payload, time.Time{}, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.payloads[rec.ID+"#"+rec.PayloadRef]
	if !ok || !m.clock.Now().Before(p.until) {
		return nil, time.Time{}, driver.ErrPayloadMissing
	}
	return bytes.Clone(p.data), p.until, nil
}

// KeepPayload moves rec's payload item's TTL to until, if it was sooner.
func (m *MemStore) KeepPayload(_ context.Context, rec *driver.Record, until time.Time) error {
	if rec.PayloadRef == "" {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := rec.ID + "#" + rec.PayloadRef
	if p, ok := m.payloads[k]; ok && m.clock.Now().Before(p.until) && p.until.Before(until) {
		p.until = until
		m.payloads[k] = p
	}
	return nil
}

var _ driver.CheckpointStore = (*MemStore)(nil)

// checkpointKey is the key of job id's checkpoint item ref among the
// store's side items.
func checkpointKey(id, ref string) string { return "checkpoint#" + id + "#" + ref }

// setCheckpoint stores data as r's checkpoint: in the record, or apart
// when over the store's bound.
func (m *MemStore) setCheckpoint(r *driver.Record, data []byte, until time.Time) {
	r.Checkpoint, r.CheckpointRef = bytes.Clone(data), ""
	if m.apartOver <= 0 || len(data) <= m.apartOver {
		return
	}
	sum := sha256.Sum256(data)
	ref := hex.EncodeToString(sum[:8])
	k := checkpointKey(r.ID, ref)
	if cur, ok := m.payloads[k]; ok && cur.until.After(until) {
		until = cur.until
	}
	m.payloads[k] = memPayload{data: bytes.Clone(data), until: until}
	r.Checkpoint, r.CheckpointRef = nil, ref
}

// ReadCheckpoint reads rec's checkpoint item.
func (m *MemStore) ReadCheckpoint(_ context.Context, rec *driver.Record) ([]byte, time.Time, error) {
	if rec.CheckpointRef == "" {
		return rec.Checkpoint, time.Time{}, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.payloads[checkpointKey(rec.ID, rec.CheckpointRef)]
	if !ok || !m.clock.Now().Before(p.until) {
		return nil, time.Time{}, driver.ErrCheckpointMissing
	}
	return bytes.Clone(p.data), p.until, nil
}

// KeepCheckpoint moves rec's checkpoint item's TTL to until, if it was
// sooner.
func (m *MemStore) KeepCheckpoint(_ context.Context, rec *driver.Record, until time.Time) error {
	if rec.CheckpointRef == "" {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := checkpointKey(rec.ID, rec.CheckpointRef)
	if p, ok := m.payloads[k]; ok && m.clock.Now().Before(p.until) && p.until.Before(until) {
		p.until = until
		m.payloads[k] = p
	}
	return nil
}

// CheckpointItem returns job id's checkpoint item's TTL, and whether the
// job has one that has not expired: for invariants.
func (m *MemStore) CheckpointItem(id string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.jobs[id]
	if !ok || r.CheckpointRef == "" {
		return time.Time{}, false
	}
	p, ok := m.payloads[checkpointKey(id, r.CheckpointRef)]
	if !ok || !m.clock.Now().Before(p.until) {
		return time.Time{}, false
	}
	return p.until, true
}
