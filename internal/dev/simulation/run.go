package simulation

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/storekey"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// Result is what one seed's run found.
type Result struct {
	Seed       uint64
	Violations []string
	// Trace is every scheduled call, one line each, with its simulated
	// time and the fault injected into it.
	Trace []string
	// Coverage counts each fault, call and mechanism that fired.
	Coverage map[string]int
	Steps    int
	Jobs     int
	// Elapsed is the simulated time until the world was quiet.
	Elapsed time.Duration
}

// settleWithin bounds how long a world may take to settle after its last
// client operation (in simulated time): longer is a stuck job.
const settleWithin = 6 * time.Hour

// Run runs seed's world in a synctest bubble and checks the invariants.
func Run(t *testing.T, seed uint64, opts Options) *Result {
	t.Helper()
	var res *Result
	synctest.Test(t, func(t *testing.T) {
		res = run(seed, opts)
	})
	return res
}

func run(seed uint64, opts Options) *Result {
	w := newWorld(seed, opts)
	w.sched.tracef("knobs: message first %v, sweeper off %v, visibility %v / bulk %v, maxReceiveCount %d, worker timeout %v / bulk %v, invocations throttled %.3f, duplicate then kill %v",
		w.messageFirst, w.sweeperOff, w.sqs.visibility[""], w.sqs.visibility[laneBulk], w.sqs.maxReceive, w.timeout, w.bulkTimeout, w.throttled, w.dupKill)
	began := time.Now()
	ctx, stop := context.WithCancel(context.Background())
	schedDone := make(chan struct{})
	schedExit := make(chan struct{})
	go func() {
		w.sched.loop(schedDone)
		close(schedExit)
	}()

	var bg sync.WaitGroup
	for _, lane := range []string{"", laneBulk} {
		for i := range w.pollers {
			bg.Go(func() { w.poller(ctx, lane, i) })
		}
	}
	bg.Go(func() { w.sweeps(ctx) })

	var clients sync.WaitGroup
	nClients := 1 + w.setup.IntN(3)
	for i := range nClients {
		clients.Go(func() { w.client(ctx, i, max(1, w.opts.Jobs/nClients), 10*time.Minute) })
	}
	clients.Go(func() { w.burster(ctx, 10*time.Minute) })
	clients.Go(func() { w.foreigner(ctx, 10*time.Minute) })
	clients.Go(func() { w.pauser(ctx, 10*time.Minute) })
	clients.Go(func() { w.tagger(ctx, 10*time.Minute) })
	clients.Go(func() { w.waiter(ctx, 10*time.Minute) })
	clients.Go(func() { w.uploader(ctx, 10*time.Minute) })
	clients.Wait()
	w.cover("mechanism", "clients done")

	deadline := time.Now().Add(settleWithin)
	quiet := false
	for time.Now().Before(deadline) {
		// Off the whole seconds a long poll waits (20 s), which may start
		// at the instant the clients ended: two timers at one instant
		// wake in no set order, and the world's end would not replay.
		if !sleep(ctx, time.Minute+13*time.Microsecond) {
			break
		}
		// Settled at two looks a minute apart: a look races the calls
		// of that instant (a sweep creating a batch's completion job as
		// the world looks), so one quiet look is not an end.
		if w.settled() {
			if quiet {
				break
			}
			quiet = true
		} else {
			quiet = false
		}
	}
	elapsed := time.Since(began)
	stop()
	bg.Wait()
	// Abandoned invocations and requests held in the network end by their
	// own deadlines; the scheduler serves them until then.
	w.stragglers.Wait()
	close(schedDone)
	<-schedExit
	w.stepCheck()
	w.checkWatches(true)
	w.checkWakes(true)
	w.check()
	w.checkDeadLetters()
	msgs, dead := w.sqs.depth()
	w.sched.tracef("end: %d jobs, %d messages left, %d dead letters", w.mem.Len(), msgs, dead)
	return &Result{Seed: seed, Violations: w.violations, Trace: w.sched.trace, Coverage: w.coverage, Steps: w.sched.steps, Jobs: w.mem.Len(), Elapsed: elapsed}
}

// settled reports whether every job of the world is final with its
// post-outcome steps done, and every batch ended.
func (w *world) settled() bool {
	all := w.mem.All()
	if w.sweeperOff || len(w.strandedJobs()) > 0 {
		// Without a sweeper, the jobs that wait in the sweep index never
		// end, nor do stranded ones: the world is quiet once every other
		// job has ended and no message is left to bring anything to a
		// worker.
		if msgs, _ := w.sqs.depth(); msgs > 0 {
			return false
		}
		excused := w.excused(all)
		for _, r := range all {
			if excused[r.ID] == "" && (!r.Status.Final() || len(r.After) > 0) {
				return false
			}
		}
		return true
	}
	for _, r := range all {
		if !r.Status.Final() || len(r.After) > 0 {
			return false
		}
	}
	for id := range w.batches {
		if b, err := w.mem.GetBatch(context.Background(), id); err != nil || b.Status == jobs.StatusRunning {
			return false
		}
	}
	// A batch no client was told of (its enqueue failed after creating
	// it) is in the sweep index until the sweeper ends it, and its
	// completion job with it.
	due, err := w.mem.Due(context.Background(), time.Now().Add(100*365*24*time.Hour), 10000)
	if err != nil {
		return false
	}
	for _, id := range due {
		if storekey.IsBatch(id) {
			return false
		}
	}
	return true
}

// check runs the invariants at quiescence.
func (w *world) check() {
	ctx := context.Background()
	w.checkRate()
	all := map[string]*driver.Record{}
	for _, r := range w.mem.All() {
		all[r.ID] = r
	}
	// Nothing lost: every accepted job is stored.
	for _, id := range sortedKeys(w.accepted) {
		if _, ok := all[id]; !ok {
			if _, err := w.mem.Get(ctx, id); err != nil {
				w.violate("job %s (%s) was accepted and is lost", id, w.accepted[id])
			}
		}
	}
	w.checkTags(all)
	w.checkWaits()
	w.checkUploads(ctx)
	w.checkChildren(all)
	w.checkCascades(all)
	w.checkMaps(all)
	// Every job ends, or waits for a reason that still holds.
	excused := w.excused(w.mem.All())
	for _, id := range sortedKeys(all) {
		r := all[id]
		// The kind a deploy added never fails for it: it waits for a
		// worker that has it.
		if r.Kind == kindAdded && r.ErrorCode == jobs.CodeUnknownKind {
			w.violate("job %s of the kind the deploy added failed unknown_kind", id)
		}
		if why := excused[id]; why != "" {
			w.cover("excused", why)
			continue
		}
		switch {
		case !r.Status.Final():
			queued, dead := w.sqs.holds(id)
			w.violate("job %s (%s) is still %s after %v (waiting on %q, run at %v, sweep at %v, message queued %v, dead-lettered %v)",
				id, r.Kind, r.Status, settleWithin, r.WaitingOn, r.RunAt.Sub(w.sched.start), r.SweepAt.Sub(w.sched.start), queued, dead)
		case len(r.After) > 0:
			w.violate("job %s is %s with its post-outcome steps %v still pending (sweep at %v)", id, r.Status, r.After, r.SweepAt.Sub(w.sched.start))
		}
		if r.WaitingOn == driver.WaitParents && !r.Status.Final() {
			for _, p := range r.Parents {
				if pr, ok := all[p]; ok && pr.Status.Final() {
					w.violate("job %s waits on its parent %s, which is %s", id, p, pr.Status)
				}
			}
		}
		w.checkPayload(r)
		// One event per outcome.
		if r.Events && r.Status.Final() {
			for seq := 1; seq <= r.Outcomes; seq++ {
				eid := fmt.Sprintf("%s/%d", id, seq)
				if w.bus.accepted[eid] == 0 {
					w.violate("outcome %s of job %s was never announced", eid, r.Status)
				}
			}
			if n := w.bus.accepted[fmt.Sprintf("%s/%d", id, r.Outcomes+1)]; n > 0 {
				w.violate("job %s: an event for outcome %d, which it never had", id, r.Outcomes+1)
			}
			if st := w.bus.statusOf[fmt.Sprintf("%s/%d", id, r.Outcomes)]; st != "" && st != string(r.Status) {
				w.violate("job %s: its last event says %s, the job is %s", id, st, r.Status)
			}
		}
		// A failed job of a kind with a follow-up had it run.
		if r.OnFailure != "" && r.Status == jobs.StatusFailed {
			if _, ok := all[wire.DerivedID("on-failure", id, strconv.Itoa(r.Outcomes))]; !ok {
				w.violate("job %s failed and its on-failure job was never made", id)
			}
		}
	}
	// A batch settles once, with exact counts.
	for _, id := range sortedKeys(w.batches) {
		b, err := w.mem.GetBatch(ctx, id)
		if err != nil {
			w.violate("batch %s is lost", id)
			continue
		}
		if b.Status == jobs.StatusRunning && w.sweeperOff && w.batchWaits(b, excused) {
			w.cover("sweeper off", "a batch waits for the sweeper")
			continue
		}
		if b.Status == jobs.StatusRunning {
			w.violate("batch %s never ended", id)
			continue
		}
		var want jobs.BatchCounts
		for i := range w.batches[id] {
			r := all[wire.BatchJobID(id, i)]
			if r == nil {
				continue
			}
			switch r.Status {
			case jobs.StatusSucceeded:
				want.Succeeded++
			case jobs.StatusFailed:
				want.Failed++
			case jobs.StatusCancelled:
				want.Cancelled++
			}
		}
		if excused[wire.CompletionJobID(id)] != "" {
			continue
		}
		seen := w.completions.get(wire.CompletionJobID(id))
		if _, ok := all[wire.CompletionJobID(id)]; !ok && !b.Creating {
			w.violate("batch %s ended %s and its completion job was never made", id, b.Status)
		}
		for _, got := range seen {
			if got.Succeeded != want.Succeeded || got.Failed != want.Failed || got.Cancelled != want.Cancelled {
				w.violate("batch %s's completion saw %+v, its jobs ended %+v", id, got, want)
			}
		}
	}
}

// excused returns the jobs that may stay unfinished: stranded in a
// dead-letter queue that no sweep settles (see checkNets); in a seed
// without a sweeper, those that wait for it by design (queued with a
// sweep entry: an enqueue whose send failed, a delay beyond SQS's, a park;
// final with post-outcome steps pending); and the dependents of either. A
// running job is never one unless stranded: its message's redelivery
// must end it.
func (w *world) excused(all []*driver.Record) map[string]string {
	out := map[string]string{}
	stranded := w.strandedJobs()
	for _, r := range all {
		switch {
		case stranded[r.ID] && !r.Status.Final():
			out[r.ID] = "stranded in a dead-letter queue no sweep settles"
		case w.sweeperOff && r.Status == jobs.StatusQueued && !r.SweepAt.IsZero():
			out[r.ID] = "sweeper off: queued in the sweep index"
		case w.sweeperOff && r.Status.Final() && len(r.After) > 0:
			out[r.ID] = "sweeper off: post-outcome steps pending"
		}
	}
	for changed := len(out) > 0; changed; {
		changed = false
		for _, r := range all {
			if out[r.ID] != "" || r.Status != jobs.StatusQueued || r.WaitingOn != driver.WaitParents {
				continue
			}
			for _, p := range r.Parents {
				if out[p] != "" {
					out[r.ID], changed = "waits on a parent that is excused", true
					break
				}
			}
		}
	}
	return out
}

// batchWaits reports whether a batch that has not ended waits for the
// sweeper (seeds without one): its own sweep entry, or a job of it that
// waits.
func (w *world) batchWaits(b *driver.Batch, excused map[string]string) bool {
	if !b.SweepAt.IsZero() {
		return true
	}
	for i := range w.batches[b.ID] {
		if excused[wire.BatchJobID(b.ID, i)] != "" {
			return true
		}
	}
	return false
}

// checkObjects: a part kept as an object (the S3 tier) says its size
// truly, is read whole by ReadPart, and is shown by size, never read, by
// the job's view: GET links a succeeded job's result instead.
func (w *world) checkObjects(r *driver.Record) {
	w.cover("mechanism", "part as an object")
	ctx := context.Background()
	for _, o := range []struct {
		part driver.Part
		size int
	}{{driver.PartPayload, r.PayloadBytes}, {driver.PartResult, r.ResultBytes}} {
		if o.size == 0 {
			continue
		}
		if data, _, err := w.mem.ReadPart(ctx, r, o.part); err == nil && len(data) != o.size {
			w.violate("job %s: its %s object holds %d bytes, the job says %d", r.ID, o.part, len(data), o.size)
		}
	}
	if w.viewer == nil {
		svc, err := testroles.Service(jobs.Config{Registry: w.reg, Store: w.mem, Queue: &jobstest.MemQueue{}, Sealer: w.sealer})
		if err != nil {
			panic(err)
		}
		w.viewer = svc
	}
	v, err := w.viewer.GetAny(ctx, r.ID)
	if err != nil {
		w.violate("job %s: GET: %v", r.ID, err)
		return
	}
	if r.PayloadBytes > 0 && (v.PayloadBytes != r.PayloadBytes || string(v.Payload) != "null") {
		w.violate("job %s: its view shows %d payload bytes and %q, want the object's size alone", r.ID, v.PayloadBytes, v.Payload)
	}
	if r.ResultBytes > 0 && (v.ResultBytes != r.ResultBytes || string(v.Result) != "null" || (r.Status == jobs.StatusSucceeded) != (v.ResultURL != "")) {
		w.violate("job %s (%s): its view shows %d result bytes, %q and link %q, want the object's size and a link once succeeded", r.ID, r.Status, v.ResultBytes, v.Result, v.ResultURL)
	}
}

// checkPayload: a payload kept apart lasts as long as its job (no TTL
// reaps the payload of a live job, nor of a final one that can still be
// read), a checkpoint or a signal kept apart as long as its job runs on, and no job
// failed for either (the world never loses one: a late read waits and
// tries again).
func (w *world) checkPayload(r *driver.Record) {
	if r.ErrorCode == jobs.CodePayloadUnreadable {
		w.violate("job %s failed %s", r.ID, r.ErrorCode)
	}
	if r.CheckpointRef != "" {
		w.cover("mechanism", "checkpoint apart")
		if _, ok := w.mem.PartItem(r.ID, driver.PartCheckpoint); !ok && !r.Status.Final() {
			w.violate("job %s (%s) has lost its checkpoint item", r.ID, r.Status)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.SignalRefs)) {
		w.cover("mechanism", "signal apart")
		if _, ok := w.mem.PartItem(r.ID, driver.SignalPart(name)); !ok && !r.Status.Final() {
			w.violate("job %s (%s) has lost its signal %q's item", r.ID, r.Status, name)
		}
	}
	if r.PayloadBytes > 0 || r.ResultBytes > 0 {
		w.checkObjects(r)
	}
	if r.ResultRef != "" {
		w.cover("mechanism", "result apart")
		if until, ok := w.mem.PartItem(r.ID, driver.PartResult); !ok || until.Before(r.ExpiresAt) {
			w.violate("job %s (%s): its result item is gone or expires before it (%v, %v)", r.ID, r.Status, until, r.ExpiresAt)
		}
	}
	if r.PayloadRef == "" {
		return
	}
	w.cover("mechanism", "payload apart")
	until, ok := w.mem.PartItem(r.ID, driver.PartPayload)
	switch {
	case !ok:
		w.violate("job %s (%s) has lost its payload item", r.ID, r.Status)
	case !r.ExpiresAt.IsZero() && until.Before(r.ExpiresAt):
		w.violate("job %s's payload item expires at %v, before the job (%v)", r.ID, until, r.ExpiresAt)
	case r.ExpiresAt.IsZero() && until.Before(r.RunAt):
		w.violate("job %s's payload item expires at %v, before the job's run time (%v)", r.ID, until, r.RunAt)
	}
}
