package jobs

import (
	"log/slog"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wallclock"
)

// Clock tells the time. Tests inject a fake (see jobstest.Clock); production
// code uses the wall clock.
type Clock interface {
	Now() time.Time
}

func orClock(c Clock) Clock {
	if c == nil {
		return wallclock.Clock{}
	}
	return c
}

func orLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
