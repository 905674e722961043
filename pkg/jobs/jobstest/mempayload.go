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

// KeepPayloadsApart makes the store keep every payload over n bytes in an
// item of its own, as dynamostore keeps one that would take its job's
// item past a write unit (driver.PayloadStore): reads of the job leave it
// out (Record.PayloadRef), and the item is gone once its TTL
// (Record.PayloadUntil) has passed on the store's clock. 0 keeps every
// payload inline, the default.
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
