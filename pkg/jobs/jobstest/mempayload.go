package jobstest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// memPayload is a payload kept apart: its bytes and its TTL.
type memPayload struct {
	data  []byte
	until time.Time
}

// KeepPayloadsApart makes the store keep every payload, checkpoint, final
// result and signal over n bytes in an item of its own, as dynamostore
// keeps those that would take their job's item past a write unit
// (driver.Part): reads of the job leave them out (Record.PayloadRef,
// CheckpointRef, ResultRef, SignalRefs) until ReadPart, and an item is
// gone once its TTL (Record.PayloadUntil, Checkpoint.Until,
// Outcome.ResultUntil, Signal.Until) has passed on the store's clock. 0
// keeps them all inline, the default.
func (m *MemStore) KeepPayloadsApart(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.apartOver = n
}

// KeepObjectsOver makes the store keep payloads and final results over n
// bytes (n above KeepPayloadsApart's) as objects, as dynamostore does with
// an object tier (dynamostore.Config.Objects): kept apart as above, with
// their size in Record.PayloadBytes or ResultBytes, so that readers that
// only show a job do not read them, and a link from PartURL. 0 keeps none
// as objects, the default.
func (m *MemStore) KeepObjectsOver(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objectsOver = n
}

// StageResult writes the object of job id's final result ahead of its
// final write (driver.ResultStager) when the store keeps it as one
// (KeepObjectsOver), as dynamostore does with an object tier; otherwise a
// zero Staged, and the final write stores the result.
func (m *MemStore) StageResult(_ context.Context, id string, result []byte, until time.Time) (driver.Staged, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.objectsOver == 0 || m.apartOver == 0 || len(result) <= m.apartOver || len(result) <= m.objectsOver {
		return driver.Staged{}, nil
	}
	sum := sha256.Sum256(result)
	ref := hex.EncodeToString(sum[:8])
	k := "result#" + id + "#" + ref
	if cur, ok := m.payloads[k]; ok && cur.until.After(until) {
		until = cur.until
	}
	m.payloads[k] = memPayload{data: bytes.Clone(result), until: until}
	return driver.Staged{Ref: ref, Bytes: len(result)}, nil
}

// PartURL links part p of rec when the store keeps it as an object
// (driver.PartLinker): a link no one can fetch, naming the part.
func (m *MemStore) PartURL(_ context.Context, rec *driver.Record, p driver.Part, ttl time.Duration) (string, error) {
	k, _, err := partKey(rec, p)
	if err != nil || k == "" || (p == driver.PartPayload && rec.PayloadBytes == 0) || (p == driver.PartResult && rec.ResultBytes == 0) {
		return "", err
	}
	return fmt.Sprintf("https://objects.invalid/%s?expires=%d", k, int(ttl.Seconds())), nil
}

// DropPayload removes job id's payload item, if it has one, as TTL would:
// for tests of a payload that is missing at a claim.
func (m *MemStore) DropPayload(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.jobs[id]; ok {
		if k, _, _ := partKey(r, driver.PartPayload); k != "" {
			delete(m.payloads, k)
		}
	}
}

// partKey is the key of rec's item of part p among the store's side items
// ("" when rec carries the part itself), and the part as rec holds it.
func partKey(rec *driver.Record, p driver.Part) (string, []byte, error) {
	switch p {
	case driver.PartPayload:
		if rec.PayloadRef == "" {
			return "", rec.Payload, nil
		}
		return "payload#" + rec.ID + "#" + rec.PayloadRef, nil, nil
	case driver.PartCheckpoint:
		if rec.CheckpointRef == "" {
			return "", rec.Checkpoint, nil
		}
		return "checkpoint#" + rec.ID + "#" + rec.CheckpointRef, nil, nil
	case driver.PartResult:
		if rec.ResultRef == "" {
			return "", rec.Result, nil
		}
		return "result#" + rec.ID + "#" + rec.ResultRef, nil, nil
	}
	if name, ok := p.Signal(); ok {
		if rec.SignalRefs[name] == "" {
			return "", rec.Signals[name], nil
		}
		return "signal#" + rec.ID + "#" + rec.SignalRefs[name], nil, nil
	}
	return "", nil, fmt.Errorf("jobstest: no part %q", p)
}

// ReadPart reads part p of rec from its item, or returns it from rec.
func (m *MemStore) ReadPart(_ context.Context, rec *driver.Record, p driver.Part) ([]byte, time.Time, error) {
	k, inline, err := partKey(rec, p)
	if err != nil || k == "" {
		return inline, time.Time{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	item, ok := m.payloads[k]
	if !ok || !m.clock.Now().Before(item.until) {
		return nil, time.Time{}, driver.ErrPartMissing
	}
	return bytes.Clone(item.data), item.until, nil
}

// KeepPart moves the TTL of rec's item of part p to until, if it was
// sooner and the item has not expired.
func (m *MemStore) KeepPart(_ context.Context, rec *driver.Record, p driver.Part, until time.Time) error {
	k, _, err := partKey(rec, p)
	if err != nil || k == "" {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if item, ok := m.payloads[k]; ok && m.clock.Now().Before(item.until) && item.until.Before(until) {
		item.until = until
		m.payloads[k] = item
	}
	return nil
}

// memRef names the item of a part of data's bytes, or is "" for one kept
// inline by a store that keeps parts over apartOver apart.
func memRef(data []byte, apartOver int) string {
	if apartOver == 0 || len(data) <= apartOver {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// setPart stores data as r's part p (r is the record as stored): in the
// record, or, over the store's bound, in an item of its own named by its
// hash, lasting until until (or longer, when an item of that name lasts
// longer already).
func (m *MemStore) setPart(r *driver.Record, p driver.Part, data []byte, until time.Time) {
	ref := memRef(data, m.apartOver)
	inline := bytes.Clone(data)
	if ref != "" {
		inline = nil
	}
	object := 0
	if ref != "" && m.objectsOver > 0 && len(data) > m.objectsOver {
		object = len(data)
	}
	switch p {
	case driver.PartPayload:
		r.Payload, r.PayloadRef, r.PayloadBytes = inline, ref, object
	case driver.PartCheckpoint:
		r.Checkpoint, r.CheckpointRef = inline, ref
	case driver.PartResult:
		r.Result, r.ResultRef, r.ResultBytes = inline, ref, object
	}
	if name, ok := p.Signal(); ok {
		// Kept apart: empty, not nil (a nil signal has not come).
		r.Signals[name] = append([]byte{}, inline...)
		if ref != "" {
			if r.SignalRefs == nil {
				r.SignalRefs = map[string]string{}
			}
			r.SignalRefs[name] = ref
		}
	}
	if ref == "" {
		return
	}
	k, _, _ := partKey(r, p)
	if cur, ok := m.payloads[k]; ok && cur.until.After(until) {
		until = cur.until
	}
	m.payloads[k] = memPayload{data: bytes.Clone(data), until: until}
}

// PartItem returns the TTL of job id's item of part p, and whether the job
// has one that has not expired: for invariants (an item outlasts its job).
func (m *MemStore) PartItem(id string, p driver.Part) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.jobs[id]
	if !ok {
		return time.Time{}, false
	}
	k, _, err := partKey(r, p)
	if err != nil || k == "" {
		return time.Time{}, false
	}
	item, ok := m.payloads[k]
	if !ok || !m.clock.Now().Before(item.until) {
		return time.Time{}, false
	}
	return item.until, true
}
