package jobs

import (
	"context"
	"io"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/emf"
	"github.com/lambdajobs/lambdajobs/internal/metricnames"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Metrics turns on metrics in CloudWatch Embedded Metric Format: JSON lines
// written with the logs, which CloudWatch Logs turns into metrics, so no
// AWS request is added to any job's path. A Worker writes the metrics of
// one invocation at its end (a few lines per SQS batch); a Service one line
// per enqueue; a Sweeper one line per sweep.
//
// Every record carries the "service" dimension but JobsEnqueued's (by
// "kind" and in all: one record per enqueue, so its bytes count); job
// metrics also "kind", and failures "code" (a declared or reserved code:
// bounded). Never a job id or an owner.
//
//	JobsEnqueued       Count         jobs accepted (not idempotent replays)
//	JobsStarted        Count         claims
//	QueueLatency       Milliseconds  from created (or run_at) to started
//	JobsSucceeded      Count
//	JobsFailed         Count         with the "code" dimension
//	JobsTimedOut       Count         failed or retried as timed_out
//	JobsInterrupted    Count         failed or retried as interrupted
//	JobsRetried        Count         sent back for another attempt
//	JobsContinued      Count         runs that ended in a continuation (Continue; no attempt spent)
//	JobsWaited         Count         claims that parked their job to wait on a limit (no attempt spent)
//	JobsWoken          Count         waiters a freed slot started (run by the worker that freed it, or sent their message)
//	JobsRefused        Count         jobs an enqueue refused at a cap on queued jobs (ErrQueueFull, 429)
//	JobsCancelled      Count         runs that ended cancelled, and queued jobs cancelled through the API
//	JobsResubmitted    Count         failed or cancelled jobs queued again through the API
//	JobsHandedBack     Count         jobs sent again unclaimed: too little of the invocation was left to start them
//	RunDuration        Milliseconds  from claim to final write
//	Attempts           Count         attempts of a job that ended
//	HandlersAbandoned  Count         handlers that ignored their deadline
//	FiresEnqueued      Count         schedule fire deliveries handed to their job (a redelivered fire counts again)
//	FiresSkipped       Count         schedule fires skipped (OverlapSkip: the previous run was unfinished)
//	SweepResent, SweepInterrupted, SweepRetried, SweepBatches, SweepAfter, SweepErrors  Count
//	SweepDuration      Milliseconds
//	SweepComplete      Count         1 when a sweep finished before its deadline
//	DeadLettersSettled Count         dead letters a sweep settled, by "kind" ("(none)" when no such job) and "lane" ("default" for "")
//
// lambdafn adds ColdStart (Count, once per process). The names are
// constants in internal/metricnames, which the construct's alarms and
// dashboard, the local stack and the CLI read too.
type Metrics struct {
	// Namespace of the metrics, e.g. "lambdajobs/prod".
	Namespace string
	// Service is the "service" dimension: which function writes them.
	Service string
	// Writer receives the records, one JSON object per line (os.Stdout in
	// Lambda, where CloudWatch Logs reads them).
	Writer io.Writer
}

func (m *Metrics) batch() *emf.Batch {
	if m == nil || m.Writer == nil {
		return nil
	}
	return emf.New(m.Namespace, map[string]string{metricnames.Service: m.Service})
}

// bare is batch without the service dimension.
func (m *Metrics) bare() *emf.Batch {
	if m == nil || m.Writer == nil {
		return nil
	}
	return emf.New(m.Namespace, nil)
}

func (m *Metrics) flush(b *emf.Batch, now time.Time) {
	if m != nil {
		_ = b.Flush(m.Writer, now)
	}
}

type metricsKey struct{}

func withMetrics(ctx context.Context, b *emf.Batch) context.Context {
	if b == nil {
		return ctx
	}
	return context.WithValue(ctx, metricsKey{}, b)
}

func metricsOf(ctx context.Context) *emf.Batch {
	b, _ := ctx.Value(metricsKey{}).(*emf.Batch)
	return b
}

// count adds 1 to name for kind.
func count(ctx context.Context, kind, name string) {
	metricsOf(ctx).Add(map[string]string{metricnames.Kind: kind}, name, emf.Count, 1)
}

// measure records a duration of kind.
func measure(ctx context.Context, kind, name string, d time.Duration) {
	metricsOf(ctx).Add(map[string]string{metricnames.Kind: kind}, name, emf.Milliseconds, float64(d.Milliseconds()))
}

// recordEnding counts how a run ended.
func recordEnding(ctx context.Context, rec *driver.Record, end ending, started, at time.Time) {
	if end.res != landed {
		return
	}
	traceEnding(ctx, end)
	k := rec.Kind
	switch {
	case end.continued:
		count(ctx, k, metricnames.JobsContinued)
	case end.retried:
		count(ctx, k, metricnames.JobsRetried)
	case end.ex.Status == StatusSucceeded:
		count(ctx, k, metricnames.JobsSucceeded)
	case end.ex.Status == StatusCancelled:
		count(ctx, k, metricnames.JobsCancelled)
	case end.ex.Status == StatusFailed:
		metricsOf(ctx).Add(map[string]string{metricnames.Kind: k, metricnames.Code: end.ex.Code}, metricnames.JobsFailed, emf.Count, 1)
	}
	switch end.ex.Code {
	case CodeTimedOut:
		count(ctx, k, metricnames.JobsTimedOut)
	case CodeInterrupted:
		count(ctx, k, metricnames.JobsInterrupted)
	}
	if !end.retried && !end.continued && !end.parked {
		metricsOf(ctx).Add(map[string]string{metricnames.Kind: k}, metricnames.Attempts, emf.Count, float64(rec.Attempt))
	}
	if !started.IsZero() && at.After(started) && end.ex.Code != CodeInterrupted {
		measure(ctx, k, metricnames.RunDuration, at.Sub(started))
	}
}
