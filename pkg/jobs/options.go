package jobs

import (
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wallclock"
	"github.com/lambdajobs/lambdajobs/internal/wire"
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

// Rand is where a runtime draws what must differ from run to run: new job
// and batch ids, claim tokens, and the jitter of retries and waits. The
// default draws UUIDv7 ids from crypto/rand and jitter from math/rand/v2; a
// deterministic simulation injects a seeded one, so that a seed replays
// the same ids, tokens and waits.
type Rand interface {
	// NewID returns a fresh id in canonical lower-case UUID form, sortable
	// by its creation time (a UUIDv7).
	NewID() string
	// Int64N returns a number in [0, n); n > 0.
	Int64N(n int64) int64
}

// systemRand is the default Rand.
type systemRand struct{}

func (systemRand) NewID() string        { return wire.NewID() }
func (systemRand) Int64N(n int64) int64 { return rand.Int64N(n) }

func orRand(r Rand) Rand {
	if r == nil {
		return systemRand{}
	}
	return r
}
