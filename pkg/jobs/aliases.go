package jobs

import "github.com/lambdajobs/lambdajobs/pkg/jobs/driver"

// Status is where a job is in its life: queued -> running (a claim), then
// succeeded, failed or cancelled (the final write), or back to queued for a
// retry; a queued job can also be cancelled. docs/reference/STATE_MACHINE.md draws
// the transitions.
type Status = driver.Status

// The statuses a job can have.
const (
	StatusQueued    = driver.StatusQueued
	StatusRunning   = driver.StatusRunning
	StatusSucceeded = driver.StatusSucceeded
	StatusFailed    = driver.StatusFailed
	StatusCancelled = driver.StatusCancelled
)

// Schedule is a periodic job (see driver.Schedule for its fields): declare
// one with Kind.Every, or create one at run time with ScheduleService.
type Schedule = driver.Schedule

// Overlap is a schedule's policy for a fire that comes while the previous
// fire's job is unfinished.
type Overlap = driver.Overlap

// The overlap policies.
const (
	// OverlapAllow enqueues every fire (the default).
	OverlapAllow = driver.OverlapAllow
	// OverlapSkip skips a fire while the job of the schedule's last
	// enqueued fire is queued or running.
	OverlapSkip = driver.OverlapSkip
)

// BatchCounts is how a batch's jobs ended; a completion job receives them
// (Job.Batch).
type BatchCounts = driver.BatchCounts

// UnfinishedCounts are an owner's queued and running jobs, by kind.
type UnfinishedCounts = driver.UnfinishedCounts

// KindCounts are one kind's unfinished jobs.
type KindCounts = driver.KindCounts
