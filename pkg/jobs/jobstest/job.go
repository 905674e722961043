package jobstest

import (
	"context"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// NewJob returns a job of payload for calling a handler directly in a unit
// test (ID "test-job", attempt 1). Its Publish appends each partial
// result's public JSON to *published, when published is not nil. (A
// jobs.Job literal works too; its Publish does nothing.)
func NewJob[P any](payload P, published *[]string) *jobs.Job[P] {
	job := &jobs.Job[P]{ID: "test-job", Kind: "test", Owner: "test", Attempt: 1, Payload: payload}
	wire.SetJobPublish(job, func(_ context.Context, partial []byte) error {
		if published != nil {
			*published = append(*published, string(partial))
		}
		return nil
	})
	return job
}
