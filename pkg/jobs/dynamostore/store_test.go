package dynamostore_test

import (
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestStoreConformance(t *testing.T) {
	client := testenv.DynamoDB(t)
	jobstest.RunStoreTests(t, func(t *testing.T, clock jobs.Clock) driver.Store {
		return dynamostore.New(client, testenv.NewTable(t, client), dynamostore.Config{Clock: clock})
	})
}
