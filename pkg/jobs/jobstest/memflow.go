package jobstest

import (
	"context"
	"slices"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// slotItem is a slot item: its holders' leases and its waiters, in
// order.
type slotItem struct {
	holders map[string]time.Time
	waiters []string
}

// AcquireSlot takes a slot of key for c.Holder if fewer than c.Max live
// holders hold one, else queues its waiter.
func (m *MemStore) AcquireSlot(_ context.Context, key string, c driver.SlotClaim) (driver.SlotState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	item := m.slots[key]
	if item == nil {
		item = &slotItem{holders: map[string]time.Time{}}
		m.slots[key] = item
	}
	live := 0
	for h, lease := range item.holders {
		switch {
		case !lease.After(c.At):
			delete(item.holders, h)
		case h != c.Holder:
			live++
		}
	}
	waiter := c.WaiterOf()
	if live < c.Max {
		item.holders[c.Holder] = c.LeaseUntil
		item.waiters = slices.DeleteFunc(item.waiters, func(w string) bool { return w == waiter })
		return driver.SlotHeld, nil
	}
	if slices.Contains(item.waiters, waiter) {
		return driver.SlotQueued, nil
	}
	if len(item.waiters) < c.Waiters {
		item.waiters = append(item.waiters, waiter)
		return driver.SlotQueued, nil
	}
	return driver.SlotFull, nil
}

// ReleaseSlot frees holder's slot of key and takes its first waiter off.
func (m *MemStore) ReleaseSlot(_ context.Context, key, holder string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	item := m.slots[key]
	if item == nil {
		return "", nil
	}
	if _, held := item.holders[holder]; !held {
		return "", nil
	}
	delete(item.holders, holder)
	if len(item.waiters) == 0 {
		return "", nil
	}
	next := item.waiters[0]
	item.waiters = item.waiters[1:]
	return next, nil
}

var _ driver.WaiterPopper = (*MemStore)(nil)

// PopWaiter takes key's first waiter off if holder holds a slot.
func (m *MemStore) PopWaiter(_ context.Context, key, holder string) (string, int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	item := m.slots[key]
	if item == nil {
		return "", 0, nil
	}
	if _, held := item.holders[holder]; !held || len(item.waiters) == 0 {
		return "", 0, nil
	}
	next := item.waiters[0]
	item.waiters = item.waiters[1:]
	return next, len(item.waiters), nil
}

// TakeToken reserves the bucket key's next token: how long until it is
// due (with b.IfDue, only one due now).
func (m *MemStore) TakeToken(_ context.Context, key string, b driver.TokenBucket) (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	interval := time.Duration(float64(time.Second) / b.PerSecond)
	tolerance := time.Duration((b.Burst - 1) * float64(interval))
	tat := m.tokens[key]
	if tat.Before(b.At) {
		tat = b.At
	}
	wait := max(0, tat.Add(-tolerance).Sub(b.At))
	if b.IfDue && wait > 0 {
		return wait, nil
	}
	m.tokens[key] = tat.Add(interval)
	return wait, nil
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
		return &driver.ConflictError{Current: clone(r)}
	}
	m.setPart(r, driver.PartPayload, d.Payload, d.PayloadUntil)
	r.RequestHash, r.RunAt, r.SweepAt, r.UpdatedAt = d.RequestHash, d.RunAt, d.SweepAt, d.At
	return nil
}
