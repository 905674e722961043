package dynamostore_test

import "github.com/lambdajobs/lambdajobs/pkg/jobs"

// enqueuedBatch unpacks Service.EnqueueBatch's result for tests that want
// the batch and whether it was created now.
func enqueuedBatch(res *jobs.BatchResult, err error) (*jobs.Batch, bool, error) {
	if err != nil {
		return nil, false, err
	}
	return &res.Batch, !res.Replayed, nil
}
