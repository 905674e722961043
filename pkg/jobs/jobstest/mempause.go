package jobstest

import (
	"context"
	"sort"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

var _ driver.PauseStore = (*MemStore)(nil)

// Pauses returns the pause set, by ID.
func (m *MemStore) Pauses(context.Context) ([]driver.Pause, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]driver.Pause, 0, len(m.pauses))
	for _, p := range m.pauses {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out, nil
}

// SetPause writes p unless the set holds max pauses of other IDs.
func (m *MemStore) SetPause(_ context.Context, p driver.Pause, max int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, there := m.pauses[p.ID()]; !there && len(m.pauses) >= max {
		return &driver.ConflictError{}
	}
	if m.pauses == nil {
		m.pauses = map[string]driver.Pause{}
	}
	m.pauses[p.ID()] = p
	return nil
}

// RemovePause removes the pause named id.
func (m *MemStore) RemovePause(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, there := m.pauses[id]; !there {
		return driver.ErrNotFound
	}
	delete(m.pauses, id)
	return nil
}
