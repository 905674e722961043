package examplekinds

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Flaky shows retries: it fails its first fail_times attempts with a
// retryable error, then succeeds. Its policy allows 4 attempts, one second
// apart and doubling.
const Flaky = "example.flaky"

// FlakyPayload is example.flaky's payload.
type FlakyPayload struct {
	FailTimes int `json:"fail_times"`
}

// FlakyPolicy is example.flaky's retry policy.
var FlakyPolicy = jobs.RetryPolicy{MaxAttempts: 4, BaseDelay: time.Second, MaxDelay: 10 * time.Second}

// CodeStillFailing is what example.flaky fails with once out of attempts.
const CodeStillFailing = "still_failing"

// FlakyRun runs example.flaky.
func FlakyRun(_ context.Context, job *jobs.Job[FlakyPayload]) (jobs.JSON[map[string]int], error) {
	if job.Attempt <= job.Payload.FailTimes {
		return jobs.JSON[map[string]int]{}, jobs.Retry(jobs.Fail(CodeStillFailing, errors.New(fmt.Sprint("attempt ", job.Attempt, " failed"))))
	}
	return jobs.JSON[map[string]int]{V: map[string]int{"succeeded_on_attempt": job.Attempt}}, nil
}
