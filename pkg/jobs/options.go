package jobs

import (
	"log/slog"
	"time"
)

// Clock tells the time. Tests inject a fake (see jobstest.Clock); production
// code uses the wall clock.
type Clock interface {
	Now() time.Time
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// WallClock is the real clock.
var WallClock Clock = wallClock{}

func orClock(c Clock) Clock {
	if c == nil {
		return WallClock
	}
	return c
}

func orLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
