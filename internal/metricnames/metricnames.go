// Package metricnames names the metrics the functions write in Embedded
// Metric Format, once, for everyone who writes or reads them: pkg/jobs and
// lambdafn write them; the construct's alarms and dashboard
// (infra/jobsinfra), the local stack's stats, `ljob stats` and the
// dashboard read them. A name misspelt on either side is a compile error
// rather than an alarm that never fires.
//
// pkg/jobs's Metrics documents what each one counts and its unit.
package metricnames

import "slices"

// The dimensions of the records: every record carries Service (which
// function wrote it); job metrics also Kind, and JobsFailed Code;
// DeadLettersSettled Kind and Lane.
const (
	Service = "service"
	Kind    = "kind"
	Code    = "code"
	Lane    = "lane"
)

// Job metrics, per kind.
const (
	JobsEnqueued      = "JobsEnqueued"      // Count: jobs accepted (not idempotent replays)
	JobsStarted       = "JobsStarted"       // Count: claims
	QueueLatency      = "QueueLatency"      // Milliseconds: from created (or run_at) to started
	JobsSucceeded     = "JobsSucceeded"     // Count
	JobsFailed        = "JobsFailed"        // Count, with the Code dimension
	JobsTimedOut      = "JobsTimedOut"      // Count: failed or retried as timed_out
	JobsInterrupted   = "JobsInterrupted"   // Count: failed or retried as interrupted
	JobsRetried       = "JobsRetried"       // Count: sent back for another attempt
	JobsContinued     = "JobsContinued"     // Count: runs that ended in a continuation (no attempt spent)
	JobsWaited        = "JobsWaited"        // Count: claims that parked their job to wait for a slot or a rate (no attempt spent)
	JobsWoken         = "JobsWoken"         // Count: waiters a freed slot started (run by its worker, or sent their message)
	JobsRefused       = "JobsRefused"       // Count: jobs an enqueue refused at a cap on queued jobs (429)
	JobsCancelled     = "JobsCancelled"     // Count: runs that ended cancelled, queued jobs cancelled
	JobsResubmitted   = "JobsResubmitted"   // Count: failed or cancelled jobs queued again
	JobsHandedBack    = "JobsHandedBack"    // Count: jobs sent again unclaimed for want of time
	JobsPauseHeld     = "JobsPauseHeld"     // Count: deliveries a pause held back (sent again later, or parked)
	RunDuration       = "RunDuration"       // Milliseconds: from claim to final write
	Attempts          = "Attempts"          // Count: attempts of a job that ended
	HandlersAbandoned = "HandlersAbandoned" // Count: handlers that ignored their deadline
	FiresEnqueued     = "FiresEnqueued"     // Count: schedule fires handed to their job
	FiresSkipped      = "FiresSkipped"      // Count: schedule fires skipped (OverlapSkip)
	FiresPaused       = "FiresPaused"       // Count: fires of a paused schedule, acknowledged without a job
)

// Sweeper metrics, one record per sweep.
const (
	SweepResent      = "SweepResent"      // Count
	SweepInterrupted = "SweepInterrupted" // Count
	SweepRetried     = "SweepRetried"     // Count
	SweepBatches     = "SweepBatches"     // Count
	SweepAfter       = "SweepAfter"       // Count
	SweepErrors      = "SweepErrors"      // Count
	SweepDuration    = "SweepDuration"    // Milliseconds
	SweepComplete    = "SweepComplete"    // Count: 1 when a sweep finished before its deadline
	// DeadLettersSettled counts, by kind and lane, the dead letters a
	// sweep settled (their job's own decision made, the message deleted).
	DeadLettersSettled = "DeadLettersSettled" // Count
)

// ColdStart counts a function's process starts (lambdafn, once per
// process).
const ColdStart = "ColdStart"

// All lists every metric name above.
var All = []string{
	JobsEnqueued, JobsStarted, QueueLatency, JobsSucceeded, JobsFailed, JobsTimedOut, JobsInterrupted, JobsRetried, JobsContinued, JobsWaited, JobsWoken,
	JobsRefused, JobsCancelled, JobsResubmitted, JobsHandedBack, JobsPauseHeld, RunDuration, Attempts, HandlersAbandoned, FiresEnqueued, FiresSkipped, FiresPaused,
	SweepResent, SweepInterrupted, SweepRetried, SweepBatches, SweepAfter, SweepErrors, SweepDuration, SweepComplete,
	DeadLettersSettled, ColdStart,
}

// Known reports whether name is one of the metric names above.
func Known(name string) bool { return slices.Contains(All, name) }
