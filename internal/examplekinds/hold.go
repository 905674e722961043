package examplekinds

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// The flow control examples: kinds with one handler, which holds for ms
// milliseconds, and different limits, so a test (or a user with make
// run) sees each limit at work.
const (
	// Hold has no limit: it runs as wide as the workers.
	Hold = "example.hold"
	// HoldLimited runs at most 5 at once.
	HoldLimited = "example.hold_limited"
	// HoldPerAccount runs at most 1 at once per account.
	HoldPerAccount = "example.hold_per_account"
	// HoldRate starts at most 20 a second.
	HoldRate = "example.hold_rate"
	// HoldCapped has at most 10 jobs queued (429 beyond).
	HoldCapped = "example.hold_capped"
	// HoldBulk and HoldUrgent run in the bulk and urgent lanes (their own
	// queues and workers): a backlog of the first never delays the second.
	HoldBulk   = "example.hold_bulk"
	HoldUrgent = "example.hold_urgent"
)

// CodeInvalidHold: ms out of range.
const CodeInvalidHold = "invalid_hold"

// SpansDirEnv names a directory where the hold kinds write one file per
// run, <job id>, holding the run's start and end (Unix nanoseconds), so a
// test can count how many ran at once. Unset: nothing is written.
var SpansDirEnv = deploy.EnvExampleSpansDir.Name

// HoldPayload asks for a hold of ms milliseconds for account.
type HoldPayload struct {
	MS      int    `json:"ms"`
	Account string `json:"account,omitempty"`
}

// HoldOpts are the limits of each hold kind.
var HoldOpts = map[string]jobs.KindOpts{
	Hold:           {},
	HoldLimited:    {Concurrency: 5},
	HoldPerAccount: {ConcurrencyPerKey: 1, LimitKey: "payload.account"},
	HoldRate:       {RateLimit: 20},
	HoldCapped:     {MaxQueued: 10},
	HoldBulk:       {Lane: "bulk"},
	HoldUrgent:     {Lane: "urgent"},
}

// HoldFor runs a hold kind: it waits ms (or until its context ends) and
// writes its span.
func HoldFor(ctx context.Context, job *jobs.Job[HoldPayload]) (jobs.NoResult, error) {
	if job.Payload.MS < 0 || job.Payload.MS > 60_000 {
		return jobs.NoResult{}, jobs.Fail(CodeInvalidHold, nil)
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return jobs.NoResult{}, ctx.Err()
	case <-time.After(time.Duration(job.Payload.MS) * time.Millisecond):
	}
	dir := os.Getenv(SpansDirEnv)
	if dir == "" {
		return jobs.NoResult{}, nil
	}
	span := fmt.Sprintf("%d %d\n", start.UnixNano(), time.Now().UnixNano())
	if err := os.WriteFile(filepath.Join(dir, job.ID), []byte(span), 0o644); err != nil {
		return jobs.NoResult{}, fmt.Errorf("hold span: %w", err)
	}
	return jobs.NoResult{}, nil
}

func registerHolds(reg *jobs.Registry) error {
	for _, kind := range []string{Hold, HoldLimited, HoldPerAccount, HoldRate, HoldCapped, HoldBulk, HoldUrgent} {
		opts := HoldOpts[kind]
		opts.FailureCodes = []string{CodeInvalidHold}
		if _, err := jobs.Register(reg, kind, HoldFor, &opts); err != nil {
			return err
		}
	}
	return nil
}
