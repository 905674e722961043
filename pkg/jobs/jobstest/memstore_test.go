package jobstest_test

import (
	"testing"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

func TestMemStoreConformance(t *testing.T) {
	jobstest.RunStoreTests(t, func(t *testing.T, clock jobs.Clock) driver.Store {
		return jobstest.NewMemStore(clock)
	})
}

// The suite again with every payload over 64 bytes kept apart, as
// dynamostore keeps those that would take a job's item past a write unit.
func TestMemStoreConformancePayloadsApart(t *testing.T) {
	jobstest.RunStoreTests(t, func(t *testing.T, clock jobs.Clock) driver.Store {
		m := jobstest.NewMemStore(clock)
		m.KeepPayloadsApart(64)
		return m
	})
}
