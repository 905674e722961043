package simulation

import (
	"context"
	"log/slog"
	"maps"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// A job's net (message first): a job that is queued or running either has
// a message on a queue that names it (visible, delayed or in flight; a
// reference, or the foreign message or fire it was made from), or a sweep
// entry (a non-zero SweepAt), except a job waiting on its parents, which
// its parents send. With the sweeper running, a job reference in a
// dead-letter queue is a net too: each sweep drains the dead-letter queues
// and settles the jobs they name (a foreign dead letter stays for the
// operators, so it is none). A job without a net is lost: nothing will
// ever bring it to a worker. checkNets runs after every scheduled call,
// when every goroutine of the bubble is blocked, and at quiescence.

// stepCheck runs the invariants that hold between any two scheduled
// calls (in the scheduler's goroutine, every other one blocked).
func (w *world) stepCheck() {
	w.mu.Lock()
	dirty := sortedKeys(w.dirty)
	clear(w.dirty)
	w.steps++
	full := w.steps%fullCheckEvery == 0
	w.mu.Unlock()
	if full {
		w.checkNets()
	} else if len(dirty) > 0 {
		var recs []*driver.Record
		for _, id := range dirty {
			if r, err := w.mem.Get(context.Background(), id); err == nil {
				recs = append(recs, r)
			}
		}
		w.checkNetsOf(recs, w.sqs.netsOf(dirty))
	}
	w.checkWatches(false)
	w.checkWakes(false)
}

// fullCheckEvery is how often (in scheduled calls) stepCheck checks every
// job's net rather than those of the jobs the calls since touched.
const fullCheckEvery = 64

// touched notes that a call changed what names job id (its record, or a
// message of it left a queue): the next stepCheck checks its net.
func (w *world) touched(id string) {
	if id == "" {
		return
	}
	w.mu.Lock()
	w.dirty[id] = true
	w.mu.Unlock()
}

// checkNets reports each queued or running job without a net, once. A
// job whose only net is a dead letter no sweep settles (a foreign message
// or fire, which the drain leaves for the operators; any, with the sweeper
// off) is stranded: it waits in the dead-letter queue, where the alarm
// fires, for an operator's redrive (docs/evidence/SIMULATION.md says why that is
// counted, not failed, unless Options.StrictNets).
func (w *world) checkNets() {
	w.checkNetsOf(w.mem.All(), w.sqs.nets())
}

// checkNetsOf checks the nets of recs (nets: what the queues hold of
// them).
func (w *world) checkNetsOf(recs []*driver.Record, nets map[string]net) {
	for _, r := range recs {
		if r.Status.Final() || !r.SweepAt.IsZero() || r.WaitingOn == driver.WaitParents {
			continue
		}
		n := nets[r.ID]
		switch {
		case n.queued:
			continue
		case n.deadRef && !w.sweeperOff:
			w.cover("invariant", "a dead letter the drain settles is a job's only net")
			continue
		}
		// Under w.mu: the world's end reads them from its own goroutine
		// (settled), which may wake at the instant a call ends.
		w.mu.Lock()
		seen := w.lost[r.ID]
		w.lost[r.ID] = true
		w.mu.Unlock()
		if seen {
			continue
		}
		if (n.deadRef || n.deadForeign) && !w.opts.StrictNets {
			what := "a foreign dead letter is a job's only net (stranded until an operator redrives it)"
			if w.sweeperOff {
				what = "sweeper off: a dead letter is a job's only net (stranded until an operator redrives it)"
			}
			w.cover("invariant", what)
			w.mu.Lock()
			w.stranded[r.ID] = true
			w.mu.Unlock()
			w.sched.tracef("STRANDED job %s (%s) is %s: its only net is a dead letter no sweep settles", r.ID, r.Kind, r.Status)
			continue
		}
		w.violate("job %s (%s) is %s with no message on a queue and no sweep entry: nothing will bring it to a worker (dead letter %v, foreign dead letter %v, sweeper off %v)",
			r.ID, r.Kind, r.Status, n.deadRef, n.deadForeign, w.sweeperOff)
	}
}

// deadRunWatch is a run of a job whose message was delivered again while
// the run went on (a duplicate), after which the simulation killed the
// run's instance. A job outside the sweep index (message first) must
// leave that run (retried or failed interrupted, by the redelivered
// message or a dead letter's drain) within the dead-worker bound (one in
// the index is the sweeper's, checked by checkDeadRuns): the visibility timeout after the duplicate's receipt,
// plus the sweep interval. Two allowances: every later receive of the
// job's message that did not end the run (its calls faulted, or it moved
// the message to the DLQ, whose drain runs at the next sweep) costs one
// more visibility timeout, every receive of its dead letter by a sweep
// that did not end the run (the answer lost, or the sweep killed before it
// deleted or released the letter) hides the letter for deadVisibility, and
// a poller of the lane may be busy for up to one worker timeout before it
// receives the message.
type deadRunWatch struct {
	job, token, lane string
	dupAt            time.Time
	receipts         int // deliveries of the job's messages after the kill
	deadReceipts     int // sweeps' receives of the job's dead letter since
	done             bool
}

// bound is when the job must have left the dead run.
func (d *deadRunWatch) bound(w *world) time.Time {
	// While the run is watched, no receive since the kill has ended it;
	// a sweep whose read of the job failed (a fault) leaves it to the
	// next one; a dead letter a sweep received and neither deleted nor
	// released is hidden from the next ones for deadVisibility.
	return d.dupAt.Add(time.Duration(1+d.receipts)*w.sqs.visibility[d.lane] + w.timeoutOf(d.lane) + 2*sweepInterval +
		time.Duration(d.deadReceipts)*deadVisibility)
}

// sweepInterval is how often the sweeper runs (its schedule's rate).
const sweepInterval = time.Minute

// delivered notes a delivery of a message naming job in lane (in a
// Receive's turn): it counts towards the watches of the job's dead runs;
// during a run of the job it is a duplicate, after which, in seeds that
// draw it, the run's instance is killed (then watched).
func (t *tracker) delivered(job, lane string, now time.Time) {
	t.received(job)
	t.mu.Lock()
	r := t.active[job]
	t.mu.Unlock()
	if r == nil || r.inst == nil || r.inst.killed() {
		return
	}
	w := t.w
	w.cover("fault", "delivered again during its run")
	if !w.dupKill || w.draw(2) != 0 {
		return
	}
	t.mu.Lock()
	t.watches = append(t.watches, &deadRunWatch{job: job, token: r.token, lane: lane, dupAt: now})
	t.mu.Unlock()
	w.cover("fault", "delivered again during its run, then its worker killed")
	w.sched.tracef("%-14s killed: %s's message was delivered again during its run", instName(r.inst), job)
	r.inst.kill()
}

// received counts a receive of a message naming job (a delivery, or the
// receive that moved it to its dead-letter queue) towards the watches of
// the job's dead runs.
func (t *tracker) received(job string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range t.watches {
		if d.job == job && !d.done {
			d.receipts++
		}
	}
	for _, k := range t.wakes {
		if k.job == job && !k.done {
			k.receipts++
		}
	}
}

// deadReceived counts a sweep's receive of a dead letter naming job
// towards the watches of the job's dead runs: if that sweep does not end
// the run, the letter stays hidden for deadVisibility.
func (t *tracker) deadReceived(job string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, d := range t.watches {
		if d.job == job && !d.done {
			d.deadReceipts++
		}
	}
	for _, k := range t.wakes {
		if k.job == job && !k.done {
			k.deadReceipts++
		}
	}
}

// checkWatches checks each watched dead run: ended, or still within its
// bound (final: at quiescence, every one must have ended).
func (w *world) checkWatches(final bool) {
	w.track.mu.Lock()
	watches := append([]*deadRunWatch(nil), w.track.watches...)
	w.track.mu.Unlock()
	now := time.Now()
	for _, d := range watches {
		if d.done {
			continue
		}
		r, err := w.mem.Get(context.Background(), d.job)
		if err != nil || r.Status != driver.StatusRunning || r.ClaimToken != d.token {
			w.track.mu.Lock()
			d.done = true
			w.track.mu.Unlock()
			w.cover("mechanism", "a killed run's job left it within the dead-worker bound")
			continue
		}
		if w.isStranded(d.job) {
			// Its only net is a dead letter no sweep settles (counted
			// where it was found): no bound holds.
			w.track.mu.Lock()
			d.done = true
			w.track.mu.Unlock()
			continue
		}
		if !r.SweepAt.IsZero() && !final {
			// In the sweep index (message first off, a heartbeat's lease,
			// a park): the worker hides its duplicate for long and the
			// sweeper ends the run, within checkDeadRuns' bound.
			continue
		}
		if bound := d.bound(w); now.After(bound) || final {
			w.track.mu.Lock()
			d.done = true
			w.track.mu.Unlock()
			w.violate("job %s is still running under its dead run %v after its message's duplicate receipt (bound %v: %d deliveries, %d dead-letter receives since)",
				d.job, now.Sub(d.dupAt).Round(time.Second), bound.Sub(d.dupAt).Round(time.Second), d.receipts, d.deadReceipts)
		}
	}
}

// deadLettered notes a message moved to its dead-letter queue (in a
// Receive's turn): a reference to a job never claimed must be re-sent by
// the sweeper's drain and run; a foreign message must stay.
func (w *world) deadLettered(m *sqsMessage) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case m.foreign:
		w.foreignDead = append(w.foreignDead, m.id)
	case m.jobID != "" && w.track.claimedCount(m.jobID) == 0:
		w.deadUnclaimed = append(w.deadUnclaimed, m.jobID)
	}
}

// checkDeadLetters runs at quiescence: each foreign dead letter is still
// in its dead-letter queue; each job whose reference was dead-lettered
// before any claim of it was claimed since (it ran), or cancelled.
func (w *world) checkDeadLetters() {
	if w.sweeperOff {
		return // nobody drains them
	}
	for _, id := range w.foreignDead {
		if !w.sqs.inDLQ(id) {
			w.violate("the foreign dead letter %s left its dead-letter queue", id)
			continue
		}
		w.cover("dlq", "a foreign dead letter stayed")
	}
	for _, id := range w.deadUnclaimed {
		r, err := w.mem.Get(context.Background(), id)
		switch {
		case err != nil:
			// Never stored (an enqueue whose put failed): dropped.
		case w.track.claimedCount(id) > 0:
			w.cover("dlq", "a never-claimed job's dead letter was re-sent and it ran")
		case r.Status == jobs.StatusCancelled:
		default:
			w.violate("job %s's dead letter was never re-sent to run: it is %s and never ran", id, r.Status)
		}
	}
}

// pathLog counts, from the product's own log lines, each path on which a
// send failed, so that the coverage table shows every path of the
// invariant met a failed send (and the nets checked after each step show
// each left its job reachable). A line renamed in the product makes its
// coverage entry fail to fire, loudly.
type pathLog struct{ w *world }

// sendFailures maps a log line to the path it reports a failed send of.
var sendFailures = map[string]string{
	"jobs not sent before their put; stored for the sweeper to send after the grace": "enqueue or batch (stored with sweep entries)",
	"retry not sent; the message that brought it comes back":                         "retry (the held message comes back)",
	"continuation not sent; the message that brought it comes back":                  "continuation (the held message comes back)",
	"retry not sent; the sweeper will send it":                                       "retry (its sweep entry)",
	"continuation not sent; the sweeper will send it":                                "continuation (its sweep entry)",
	"too little time left to start this job; the message will come back unclaimed":   "hand-back (the message comes back)",
	"early delivery not re-sent; the message will come back":                         "early delivery (the message comes back)",
	"job made from a message not sent to its lane; the message will come back":       "job made from a foreign message or a fire (the message comes back)",
}

func (h pathLog) Enabled(context.Context, slog.Level) bool { return true }

func (h pathLog) Handle(_ context.Context, r slog.Record) error {
	path, ok := sendFailures[r.Message]
	if !ok {
		return nil
	}
	failed := false
	r.Attrs(func(a slog.Attr) bool {
		failed = a.Key == "err_types"
		return !failed
	})
	if failed {
		h.w.cover("send failed", path)
	}
	return nil
}

func (h pathLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h pathLog) WithGroup(string) slog.Handler      { return h }

// isStranded reports whether job id's only net is a dead letter no sweep
// settles (checkNetsOf found it so).
func (w *world) isStranded(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stranded[id]
}

// strandedJobs is a copy of the stranded jobs.
func (w *world) strandedJobs() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.stranded)
}
