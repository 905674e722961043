package jobstest

import (
	"context"
	"slices"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// AddDependent records a dependent of a parent that has not succeeded.
func (m *MemStore) AddDependent(_ context.Context, parentID string, d driver.DependentOf) (*driver.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.live(parentID)
	if !ok || p.Owner != d.Owner {
		return nil, jobs.ErrNotFound
	}
	switch {
	case p.Status == jobs.StatusSucceeded:
		return nil, &driver.ConflictError{Current: clone(p)}
	case slices.Contains(p.Dependents, d.Dependent):
	case len(p.Dependents) >= d.Max:
		return nil, &driver.ConflictError{Current: clone(p)}
	default:
		p.Dependents = append(p.Dependents, d.Dependent)
	}
	return clone(p), nil
}

// waiting returns the job id while it waits on its parents.
func (m *MemStore) waiting(id string) (*driver.Record, error) {
	r, ok := m.live(id)
	if !ok {
		return nil, jobs.ErrNotFound
	}
	if r.Status != jobs.StatusQueued || r.WaitingOn != driver.WaitParents {
		return nil, &driver.ConflictError{Current: clone(r)}
	}
	return r, nil
}

// CountParents adds counted parents to a waiting job.
func (m *MemStore) CountParents(_ context.Context, id string, c driver.ParentCount) (*driver.Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.waiting(id)
	if err != nil {
		return nil, err
	}
	if c.Await && len(r.ParentsDone) != c.Known {
		return nil, &driver.ConflictError{Current: clone(r)}
	}
	for _, n := range c.Done {
		if !slices.Contains(r.ParentsDone, n) {
			r.ParentsDone = append(r.ParentsDone, n)
		}
	}
	slices.Sort(r.ParentsDone)
	switch {
	case c.Await && c.Release != nil:
		r.WaitingOn, r.SweepAt, r.UpdatedAt = "", c.Release.SweepAt, c.Release.At
	case c.Await:
		r.SweepAt = time.Time{}
	}
	return clone(r), nil
}

// ReleaseParents ends a waiting job's wait.
func (m *MemStore) ReleaseParents(_ context.Context, id string, rp driver.ReleaseParents) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.waiting(id)
	if err != nil {
		return err
	}
	r.WaitingOn, r.SweepAt, r.UpdatedAt = "", rp.SweepAt, rp.At
	return nil
}
