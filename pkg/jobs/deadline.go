package jobs

import (
	"context"
	"fmt"
	"time"
)

// Deadlines is the one place where a worker invocation's time is divided.
// Given the Lambda deadline D:
//
//	handler context ends at      D - Reserve
//	the final write must end by  D - Safety   (its own context, not the handler's)
//	the claim's lease ends at    D
//
// Reserve leaves room for the final write (FinalWrite) and for the response
// to leave the function (Safety). A handler that ignores its context is
// abandoned at D - Reserve, so the worker always answers before D.
type Deadlines struct {
	// Reserve is how long before the Lambda deadline the handler's context
	// ends. Must be at least FinalWrite + Safety.
	Reserve time.Duration
	// FinalWrite bounds the final conditional write (with the SDK's retries).
	FinalWrite time.Duration
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
	Safety:     500 * time.Millisecond,
	NoDeadline: 15 * time.Minute,
}

// Validate checks the deadlines against each other and, when timeout is
// non-zero, against the worker's Lambda timeout.
func (d Deadlines) Validate(timeout time.Duration) error {
	switch {
	case d.FinalWrite <= 0 || d.Safety < 0:
		return fmt.Errorf("jobs: deadlines: final write %v and safety %v must be positive", d.FinalWrite, d.Safety)
	case d.Reserve < d.FinalWrite+d.Safety:
		return fmt.Errorf("jobs: deadlines: reserve %v is less than final write %v + safety %v", d.Reserve, d.FinalWrite, d.Safety)
	case timeout != 0 && timeout <= 2*d.Reserve:
		return fmt.Errorf("jobs: deadlines: worker timeout %v leaves handlers less than half of it after the reserve %v", timeout, d.Reserve)
	}
	return nil
}

// invocation holds the deadlines of one worker invocation.
type invocation struct {
	lambda  time.Time // the Lambda deadline; the lease ends here
	handler time.Time // handler contexts end here
	write   time.Time // final writes must end here
	budget  time.Duration
}

func (d Deadlines) plan(ctx context.Context, now time.Time) invocation {
	dl, ok := ctx.Deadline()
	if !ok {
		dl = now.Add(d.NoDeadline)
	}
	return invocation{
		lambda:  dl,
		handler: dl.Add(-d.Reserve),
		write:   dl.Add(-d.Safety),
		budget:  d.FinalWrite,
	}
}

// finalWriteContext returns the context for a final write: not cancelled
// with ctx (the handler's context may already be done), bounded by the
// final-write budget and by the invocation's write deadline, whichever
// comes first.
func (inv invocation) finalWriteContext(ctx context.Context) (context.Context, context.CancelFunc) {
	end := time.Now().Add(inv.budget)
	if inv.write.Before(end) {
		end = inv.write
	}
	return context.WithDeadline(context.WithoutCancel(ctx), end)
}
