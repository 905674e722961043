package jobstest

import (
	"context"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// AcquireSlot takes a slot of key for c.Holder if fewer than c.Max live
// holders hold one.
func (m *MemStore) AcquireSlot(_ context.Context, key string, c driver.SlotClaim) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	holders := m.slots[key]
	if holders == nil {
		holders = map[string]time.Time{}
		m.slots[key] = holders
	}
	live := 0
	for h, lease := range holders {
		switch {
		case !lease.After(c.At):
			delete(holders, h)
		case h != c.Holder:
			live++
		}
	}
	if live >= c.Max {
		return false, nil
	}
	holders[c.Holder] = c.LeaseUntil
	return true, nil
}

// ReleaseSlot frees holder's slot of key.
func (m *MemStore) ReleaseSlot(_ context.Context, key, holder string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.slots[key], holder)
	return nil
}

// TakeToken reserves the bucket key's next token: how long until it is
// due.
func (m *MemStore) TakeToken(_ context.Context, key string, b driver.TokenBucket) (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	interval := time.Duration(float64(time.Second) / b.PerSecond)
	tolerance := time.Duration((b.Burst - 1) * float64(interval))
	tat := m.tokens[key]
	if tat.Before(b.At) {
		tat = b.At
	}
	m.tokens[key] = tat.Add(interval)
	return max(0, tat.Add(-tolerance).Sub(b.At)), nil
}

// ClaimUnique takes the unique key for u.JobID unless a live holder has it.
func (m *MemStore) ClaimUnique(_ context.Context, key string, u driver.UniqueClaim) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h, ok := m.unique[key]; ok && h.job != u.JobID && (h.until.IsZero() || h.until.After(u.At)) {
		return h.job, nil
	}
	m.unique[key] = uniqueHold{job: u.JobID, until: u.Until}
	return u.JobID, nil
}

// ReleaseUnique frees the unique key if jobID holds it.
func (m *MemStore) ReleaseUnique(_ context.Context, key, jobID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.unique[key].job == jobID {
		delete(m.unique, key)
	}
	return nil
}

// Debounce replaces a queued job's payload, request hash and run time.
func (m *MemStore) Debounce(_ context.Context, id string, d driver.Debounce) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.live(id)
	if !ok {
		return driver.ErrNotFound
	}
	if r.Status != driver.StatusQueued {
		return &driver.ConflictError{Err: driver.ErrNotQueued, Current: clone(r)}
	}
	r.Payload, r.RequestHash, r.RunAt, r.SweepAt, r.UpdatedAt = append([]byte(nil), d.Payload...), d.RequestHash, d.RunAt, d.SweepAt, d.At
	return nil
}
