package lambdafn

import (
	"context"
	"log/slog"
	"time"
)

// The set-up breakdown: how long each step of a function's start took, for
// the cold-start measurements in docs/evidence/BENCHMARKS.md and for an operator
// who wants to know where an init went. Serve logs it once per process, at
// DEBUG, as the line "function set up":
//
//	main_ms      from this package's initialisation to Serve: the main
//	             package's own work, such as building the registry
//	config_ms    reading the configuration from the environment
//	aws_ms       the AWS configuration (region, credentials, endpoints)
//	clients_ms   the AWS clients every invocation uses
//	tracing_ms   the tracer provider (JOBS_TRACING=on only)
//	metrics_ms   the ColdStart metric (JOBS_METRICS_NAMESPACE only)
//	handler_ms   the function's handler: its services, the registry
//	             checks, a key read from Secrets Manager
//	secrets_ms   of which the reads from Secrets Manager
//	setup_ms     the whole of Build
//	cpu_ms       the process's CPU time (user and system) so far,
//	             Go runtime and package initialisation included
//
// The Go runtime's and the packages' own initialisation, before any of
// this, is what GODEBUG=inittrace=1 prints.

// processStart is when this package was initialised: after the packages it
// imports, before the main package's main.
var processStart = time.Now()

// setupClock times Build's steps.
type setupClock struct {
	began, last time.Time
	attrs       []slog.Attr
	secrets     time.Duration
}

func newSetupClock() *setupClock {
	now := time.Now()
	return &setupClock{began: now, last: now}
}

// step ends the step called name.
func (c *setupClock) step(name string) {
	if c == nil {
		return
	}
	now := time.Now()
	c.attrs = append(c.attrs, msAttr(name, now.Sub(c.last)))
	c.last = now
}

// secretsRead adds the time of one read from Secrets Manager.
func (c *setupClock) secretsRead(d time.Duration) {
	if c != nil {
		c.secrets += d
	}
}

// log writes the breakdown at DEBUG.
func (c *setupClock) log(ctx context.Context, logger *slog.Logger, mainTook time.Duration) {
	if c == nil || logger == nil || !logger.Enabled(ctx, slog.LevelDebug) {
		return
	}
	attrs := append([]slog.Attr{msAttr("main", mainTook)}, c.attrs...)
	attrs = append(attrs, msAttr("secrets", c.secrets), msAttr("setup", c.last.Sub(c.began)))
	if cpu, ok := cpuTime(); ok {
		attrs = append(attrs, msAttr("cpu", cpu))
	}
	logger.LogAttrs(ctx, slog.LevelDebug, "function set up", attrs...)
}

func msAttr(name string, d time.Duration) slog.Attr {
	return slog.Float64(name+"_ms", float64(d.Microseconds())/1000)
}
