package simulation

import (
	"context"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
)

// wakeWatch is a job a signal woke (Service.Signal or Service.Callback
// answered that it did, at at): a claim of it must land within the wake
// bound. The wake's write makes the job due and its message is sent at
// once; a send that failed leaves its sweep entry, due a dispatch grace
// later, which the next sweep sends (a sweep whose read failed leaves it
// to the one after). The allowances are the dead-run watch's: every
// receive of the job's message that brought no claim (its calls faulted)
// costs one more visibility timeout, every sweep's receive of its dead
// letter that did not end it deadVisibility, and a poller of the lane may
// be busy for a worker timeout before it receives the message.
type wakeWatch struct {
	job, lane string
	at        time.Time
	// claims is how many claims of the job had landed at the wake.
	claims                 int
	receipts, deadReceipts int
	done                   bool
}

func (k *wakeWatch) bound(w *world) time.Time {
	allowance := w.grace + 2*sweepInterval + time.Duration(1+k.receipts)*w.sqs.visibility[k.lane] + w.timeoutOf(k.lane) +
		time.Duration(k.deadReceipts)*deadVisibility
	return k.from(w, allowance).Add(allowance)
}

// from is when the bound starts: the wake, or the end of a pause that
// held the job while it waited for its claim (its own end, or a resume
// that landed): a sweep that finds the job held looks again then, and
// sends nothing meanwhile. A pause that landed after the bound had passed
// excuses nothing.
func (k *wakeWatch) from(w *world, allowance time.Duration) time.Time {
	r, err := w.mem.Get(context.Background(), k.job)
	if err != nil {
		return k.at
	}
	from := k.at
	l := &w.pauses
	l.mu.Lock()
	defer l.mu.Unlock()
	for moved := true; moved; {
		moved = false
		for _, s := range l.log {
			end := s.p.Until
			if !s.removed.IsZero() && s.removed.Before(end) {
				end = s.removed
			}
			at := s.landed
			if at.Before(k.at) {
				at = k.at
			}
			if end.After(from) && at.Before(from.Add(allowance)) && s.p.Covers(r.Kind, r.Lane, wire.OwnerKey(r.Owner), at) {
				from, moved = end, true
			}
		}
	}
	return from
}

// woke notes that a signal sent at at woke job: its next claim is watched.
// Seeds without a sweeper watch none (a wake whose send failed waits in
// the sweep index for good, as an enqueue's does).
func (w *world) woke(job string, at time.Time) {
	if w.sweeperOff {
		return
	}
	r, err := w.mem.Get(context.Background(), job)
	if err != nil {
		return
	}
	t := w.track
	t.mu.Lock()
	defer t.mu.Unlock()
	t.wakes = append(t.wakes, &wakeWatch{job: job, lane: r.Lane, at: at, claims: t.claimedN[job]})
}

// checkWakes checks each watched wake: claimed since, or still within its
// bound (final: at quiescence, every one must have been).
func (w *world) checkWakes(final bool) {
	t := w.track
	t.mu.Lock()
	wakes := append([]*wakeWatch(nil), t.wakes...)
	t.mu.Unlock()
	now := time.Now()
	for _, k := range wakes {
		if k.done {
			continue
		}
		r, err := w.mem.Get(context.Background(), k.job)
		switch {
		case w.track.claimedCount(k.job) > k.claims:
			w.cover("mechanism", "a woken job was claimed within the wake bound")
		case err != nil || r.Status.Final() || w.isStranded(k.job):
			// Gone, ended some other way (a cancel), or its only net a
			// dead letter no sweep settles (counted where it was found).
		case now.After(k.bound(w)) || final:
			w.violate("job %s, woken by its signal %v ago, has not been claimed since (bound %v: %d deliveries, %d dead-letter receives since; %s, waiting on %q, run at %v, sweep at %v)",
				k.job, now.Sub(k.at).Round(time.Second), k.bound(w).Sub(k.at).Round(time.Second), k.receipts, k.deadReceipts,
				r.Status, r.WaitingOn, r.RunAt.Sub(w.sched.start), r.SweepAt.Sub(w.sched.start))
		default:
			continue
		}
		t.mu.Lock()
		k.done = true
		t.mu.Unlock()
	}
}
