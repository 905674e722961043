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
