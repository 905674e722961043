package integration_test

import "github.com/lambdajobs/lambdajobs/pkg/jobs"

// enqueued unpacks Service.Enqueue's result for tests that want the job
// and whether it was created now.
func enqueued(res *jobs.EnqueueResult, err error) (*jobs.View, bool, error) {
	if err != nil {
		return nil, false, err
	}
	return &res.Job, !res.Replayed, nil
}

// enqueuedBatch unpacks Service.EnqueueBatch's result likewise.
func enqueuedBatch(res *jobs.BatchResult, err error) (*jobs.Batch, bool, error) {
	if err != nil {
		return nil, false, err
	}
	return &res.Batch, !res.Replayed, nil
}
