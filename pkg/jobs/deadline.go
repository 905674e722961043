package jobs

import (
	"context"
	"fmt"
	"time"
)

// Deadlines is the one place where a worker invocation's time is divided.
// Given the Lambda deadline D:
//
//	a record is claimed only if    D - Reserve - now >= the kind's minimum run time
//	the handler context ends at    D - Reserve
//	the final write must end by    D - Safety   (its own context, not the handler's)
//	every other call must end by   D - Safety, and within Call of its start
//	the claim's lease ends at      D
//
// Reserve leaves room for the final write (FinalWrite) and for the response
// to leave the function (Safety). A handler that ignores its context is
// abandoned at D - Reserve, and no call can outlive D - Safety, so the worker
// always answers before D whatever DynamoDB or SQS do.
//
// Contexts and the Lambda deadline run on the real clock, so this file is
// the one place in the package that reads it (time.Now); every time written
// to the store comes from the injected Clock.
type Deadlines struct {
	// Reserve is how long before the Lambda deadline the handler's context
	// ends. Must be at least FinalWrite + Safety.
	Reserve time.Duration
	// FinalWrite bounds the final conditional write (with the SDK's retries,
	// whose waits lambdafn keeps short enough to fit, and the store's
	// retries of transaction conflicts).
	FinalWrite time.Duration
	// Call bounds each other AWS call on the worker's path: the claim, the
	// create of a job from a foreign message, a re-send, a cancel check, a
	// batch's settlement (default 2s).
	Call time.Duration
	// MinRun is the handler time a record needs for its claim: with less
	// left before D - Reserve it goes back to the queue unclaimed, no
	// attempt spent. A kind can ask for more with KindOpts.MinRunTime
	// (default 2s; never more than half of a fresh invocation's handler
	// time, so a short timeout still runs its first records).
	MinRun time.Duration
	// Safety is kept free at the very end for the function to return.
	Safety time.Duration
	// NoDeadline is the budget assumed when the context has no deadline
	// (outside Lambda, as in tests).
	NoDeadline time.Duration
}

// DefaultDeadlines fit a worker Lambda timeout of 15 seconds or more.
var DefaultDeadlines = Deadlines{
	Reserve:    3 * time.Second,
	FinalWrite: 2 * time.Second,
	Call:       2 * time.Second,
	MinRun:     2 * time.Second,
	Safety:     500 * time.Millisecond,
	NoDeadline: 15 * time.Minute,
}

// ForTimeout returns d as a worker whose Lambda timeout is timeout should
// use it. What the reserve holds takes no longer at the end of a long run
// (one conditional write, a small answer), but a final write given up
// costs more: the job stays running until its lease ends, is interrupted
// and retried, and the work since its last checkpoint is done again (for
// a kind without checkpoints, the whole run: up to 90 minutes on Lambda
// Managed Instances). The store retries a throttled or conflicting final
// write until its budget ends, so a long run's budget is longer:
// FinalWrite becomes timeout/180 when that is more (5 s for 15 minutes,
// 30 s for 90; 100 ms steps), and Reserve grows by as much, keeping its
// margin over FinalWrite. The handler gives up at most about 0.6% of its
// time for it. Safety, the moment the answer needs to leave, does not
// grow. A timeout up to 180 FinalWrites (6 minutes for the default 2 s)
// leaves d as it is. The CDK construct applies it to every lane's worker
// (JOBS_HANDLER_RESERVE, JOBS_FINAL_WRITE_TIMEOUT).
func (d Deadlines) ForTimeout(timeout time.Duration) Deadlines {
	d = d.withDefaults()
	if w := (timeout / finalWriteShare).Truncate(100 * time.Millisecond); w > d.FinalWrite {
		d.Reserve += w - d.FinalWrite
		d.FinalWrite = w
	}
	return d
}

// finalWriteShare: a long run's final write may take up to this share
// (1/finalWriteShare) of its worker's timeout (Deadlines.ForTimeout).
const finalWriteShare = 180

// withDefaults fills the zero fields added after the first release, so a
// Deadlines written before them keeps working.
func (d Deadlines) withDefaults() Deadlines {
	if d == (Deadlines{}) {
		return DefaultDeadlines
	}
	if d.Call <= 0 {
		d.Call = DefaultDeadlines.Call
	}
	if d.MinRun <= 0 {
		d.MinRun = DefaultDeadlines.MinRun
	}
	if d.NoDeadline <= 0 {
		d.NoDeadline = DefaultDeadlines.NoDeadline
	}
	return d
}

// Validate checks the deadlines against each other and, when timeout is
// non-zero, against the worker's Lambda timeout.
func (d Deadlines) Validate(timeout time.Duration) error {
	d = d.withDefaults()
	switch {
	case d.FinalWrite <= 0 || d.Safety < 0:
		return fmt.Errorf("jobs: deadlines: final write %v and safety %v must be positive", d.FinalWrite, d.Safety)
	case d.Reserve < d.FinalWrite+d.Safety:
		// (The moments a handler gets to return after its context ends come
		// out of the final write's budget, which ends by D - Safety anyway.)
		return fmt.Errorf("jobs: deadlines: reserve %v is less than final write %v + safety %v", d.Reserve, d.FinalWrite, d.Safety)
	case timeout != 0 && timeout <= 2*d.Reserve:
		return fmt.Errorf("jobs: deadlines: worker timeout %v leaves handlers less than half of it after the reserve %v", timeout, d.Reserve)
	case timeout != 0 && timeout-d.Reserve < d.MinRun:
		return fmt.Errorf("jobs: deadlines: worker timeout %v minus reserve %v is less than the minimum run time %v", timeout, d.Reserve, d.MinRun)
	}
	return nil
}

// checkKinds refuses, when the worker's timeout is known, a kind whose
// minimum run time is more than the handler time of a fresh invocation
// (timeout - Reserve): no invocation could claim its jobs.
func (d Deadlines) checkKinds(reg *Registry, lane string, timeout time.Duration) error {
	if timeout <= 0 {
		return nil
	}
	d = d.withDefaults()
	handler := timeout - d.Reserve
	for _, name := range reg.Kinds() {
		// Only the lane's own kinds: another lane's worker (with a timeout
		// of its own) runs the others.
		if k, _ := reg.lookup(name); k.lane == lane && k.minRun > handler {
			return fmt.Errorf("jobs: kind %q: its minimum run time %v (KindOpts.MinRunTime) is more than the handler time of a fresh invocation, %v "+
				"(worker timeout %v less reserve %v): its jobs would never start; raise the timeout or lower the minimum", name, k.minRun, handler, timeout, d.Reserve)
		}
	}
	return nil
}

// invocation holds the deadlines of one worker invocation, on the real
// clock.
type invocation struct {
	lambda  time.Time // the Lambda deadline; the lease ends here
	handler time.Time // handler contexts end here
	write   time.Time // final writes and every other call must end here
	budget  time.Duration
	call    time.Duration
	minRun  time.Duration
}

func (d Deadlines) plan(ctx context.Context) invocation {
	d = d.withDefaults()
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(d.NoDeadline)
	}
	inv := invocation{
		lambda:  dl,
		handler: dl.Add(-d.Reserve),
		write:   dl.Add(-d.Safety),
		budget:  d.FinalWrite,
		call:    d.Call,
		// The default minimum never exceeds half of a fresh invocation's
		// handler time, so a short timeout still runs its first records
		// (a kind's own KindOpts.MinRunTime is not clamped).
		minRun: min(d.MinRun, time.Until(dl.Add(-d.Reserve))/2),
	}
	return inv
}

// leaseUntil is the lease of a claim made now: the Lambda deadline, on the
// store's clock.
func (inv invocation) leaseUntil(now time.Time) time.Time {
	return now.Add(time.Until(inv.lambda)).Truncate(time.Millisecond)
}

// handlerTimeLeft is what is left of the handlers' time.
func (inv invocation) handlerTimeLeft() time.Duration { return time.Until(inv.handler) }

// canStart reports whether a run that needs at least need (0: the default
// minimum, at most half of the invocation's handler time) can still start.
func (inv invocation) canStart(need time.Duration) bool {
	return inv.handlerTimeLeft() >= max(need, inv.minRun)
}

// finalWriteContext returns the context for a final write: not cancelled
// with ctx (the handler's context may already be done), bounded by the
// final-write budget and by the invocation's write deadline, whichever
// comes first.
func (inv invocation) finalWriteContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return inv.bounded(context.WithoutCancel(ctx), inv.budget)
}

// partContext returns the context for reading a claimed job's payload and
// writing its result when they may be objects of tens of MB: the run's
// time pays for them, up to the latest moment that leaves the final write
// its budget (the handler's own deadline comes sooner).
func (inv invocation) partContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithDeadline(context.WithoutCancel(ctx), inv.write.Add(-inv.budget))
}

// callContext returns the context for one AWS call other than the final
// write: within Call of now, and ending by the invocation's write deadline.
func (inv invocation) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return inv.bounded(ctx, inv.call)
}

func (inv invocation) bounded(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	end := time.Now().Add(d)
	if inv.write.Before(end) {
		end = inv.write
	}
	return context.WithDeadline(ctx, end)
}

// sweepPlan bounds a sweep: it starts no work after stop, and no call of it
// outlives the Lambda deadline less the reserve.
//
//	a sweep starts no page after   D - Reserve
//	no call of it outlives         D - Reserve/2
type sweepPlan struct{ stop, end time.Time }

func planSweep(ctx context.Context, reserve time.Duration) sweepPlan {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(15 * time.Minute)
	}
	return sweepPlan{stop: dl.Add(-reserve), end: dl.Add(-reserve / 2)}
}

func (p sweepPlan) over() bool { return !time.Now().Before(p.stop) }

// context bounds the calls of the sweep.
func (p sweepPlan) context(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, p.end)
}
