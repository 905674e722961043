package simulation

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// Options change what a seed's world holds.
type Options struct {
	// PlantEvery, when set, plants a defect: one in PlantEvery final
	// writes that find their job running under another claim (drawn by
	// the seed) drops its token condition and lands.
	PlantEvery int
	// PlantClaimEvery, when set, plants a defect: one in PlantClaimEvery
	// claims that find their job running takes it over anyway, as a claim
	// that dropped its status condition would.
	PlantClaimEvery int
	// Jobs is about how many client operations the world makes (default 24).
	Jobs int
	// PlantDropEvery, when set, plants a defect: the event source deletes
	// one in PlantDropEvery messages its invocation listed as failures
	// (a message that must come back is lost), which the nets must catch.
	PlantDropEvery int
	// PlantHideFor, when set, plants a defect: a hidden duplicate stays
	// hidden this long, whatever the worker asked, which the dead-worker
	// bound must catch.
	PlantHideFor time.Duration
	// StrictNets fails a seed in which a job is stranded: its only net a
	// dead letter that no sweep settles (see checkNets).
	StrictNets bool
	// MessageFirst and SweeperOff, when set, override the seed's draws:
	// Config.MessageFirst on every Client, and no sweeper at all (only
	// with message first).
	MessageFirst, SweeperOff bool
}

// world is one seed's system: the store, the queues, the bus, the
// function instances, the clients, and what the invariants watch.
type world struct {
	seed  uint64
	opts  Options
	setup *rand.Rand // draws the knobs, before anything runs
	inner *rand.Rand // draws inside calls (in the scheduler's turns)
	sched *sched
	net   *actor

	mem *jobstest.MemStore
	sqs *sqs
	bus *bus
	// reg has every kind; regOld lacks kindAdded, the kind the deploy at
	// deployAt adds (rolled out to every worker by deployAt+rollout).
	reg, regOld *jobs.Registry
	deployAt    time.Time
	rollout     time.Duration
	retry       jobs.RetryPolicy
	sealer      jobs.Sealer
	lim         limitsOf

	// apartOver: payloads over this many bytes are kept in items of
	// their own (MemStore.KeepPayloadsApart; 0 none), and lateEvery: one
	// in lateEvery reads of one finds it not there yet (a replica behind;
	// 0 never).
	apartOver, lateEvery int
	// objectsOver: payloads and results over this many bytes are kept as
	// objects (MemStore.KeepObjectsOver: the S3 tier; 0 none).
	objectsOver int
	// viewer reads jobs as GET does, on the store without faults, for
	// the invariants.
	viewer *jobs.Service

	// The knobs this seed drew.
	timeout, bulkTimeout, grace time.Duration
	pageSize, pollers           int
	faults                      map[string]float64
	// messageFirst is Config.MessageFirst on every Client of the seed;
	// sweeperOff runs no sweeper (message-first seeds only): jobs end
	// through redelivery alone. dupKill: a message delivered again during
	// its job's run kills the run's instance, one time in two. throttled
	// is the chance that the event source's invocation of a batch is
	// throttled (the batch comes back after its visibility timeout, its
	// receives counted).
	messageFirst, sweeperOff, dupKill bool
	throttled                         float64
	logger                            *slog.Logger

	track       *tracker
	followUps   tally[string]
	completions tally[jobs.BatchCounts]

	// stragglers are the goroutines that outlive their caller: abandoned
	// invocations, requests held in the network.
	stragglers sync.WaitGroup

	mu         sync.Mutex
	violations []string
	coverage   map[string]int
	accepted   map[string]string // job id -> how it was made
	pauses     pauseLog          // the pauses written and resumed
	batches    map[string]int    // batch id -> its jobs
	grants     []grant           // the burst owner's accepted requests
	tags       tagRun            // what the tags owner did
	waits      []waitRun         // what the waits owner's waits did
	uploads    []*uploadRun      // what the uploads owner's uploads did
	kids       kids              // what the parents' runs were told
	invoked    invoked           // what the parents' Invokes answered
	mapped     mapped            // what the parents' Maps answered
	stepLog    stepLog           // what the durable steps did
	waitJobs   []string          // the client's jobs that wait for a signal (w.mu)
	plain      jobs.Kind[payload]
	reported   map[string]bool
	plant      int
	// lost: the jobs reported without a net; foreignDead, deadUnclaimed:
	// the foreign messages, and the jobs never claimed, whose messages
	// were dead-lettered.
	lost, stranded map[string]bool
	// dirty: the jobs whose nets the next stepCheck checks; steps counts
	// the checks.
	dirty                      map[string]bool
	steps                      int
	foreignDead, deadUnclaimed []string
}

func newWorld(seed uint64, opts Options) *world {
	if opts.Jobs <= 0 {
		opts.Jobs = 24
	}
	w := &world{seed: seed, opts: opts, plant: opts.PlantEvery,
		setup: rand.New(rand.NewPCG(seed, 1)), inner: rand.New(rand.NewPCG(seed, 2)),
		coverage: map[string]int{}, kids: kids{want: map[string]int{}, got: map[string]map[string]string{}}, invoked: invoked{answers: map[string]string{}}, mapped: mapped{answers: map[string]string{}, calls: map[string][3]int{}, aborted: map[string]int{}}, stepLog: stepLog{stored: map[string]bool{}, slept: map[string]time.Time{}, waited: map[string]time.Time{}, signalled: map[string]sentSignal{}, maybe: map[string][]int{}, tokens: map[string][]madeToken{}}, accepted: map[string]string{}, batches: map[string]int{}, reported: map[string]bool{}, lost: map[string]bool{},
		stranded: map[string]bool{}, dirty: map[string]bool{}}
	w.sched = newSched(w, seed)
	w.net = &actor{w: w, name: "network"}
	w.track = newTracker(w)
	s := w.setup
	w.timeout = time.Duration(10+s.IntN(21)) * time.Second
	w.bulkTimeout = w.timeout * 2
	w.grace = w.bulkTimeout + time.Duration(5+s.IntN(120))*time.Second
	w.pageSize = 1 + s.IntN(5)
	w.pollers = 1 + s.IntN(3)
	w.lim = limitsOf{conc: 1 + s.IntN(3), concPerKey: 1, rate: 1 + s.IntN(3), ratePeriod: time.Duration(1+s.IntN(5)) * time.Second,
		// The odd nanoseconds keep the worker's lease ticks (a quarter
		// heartbeat apart) off the whole-millisecond instants its other
		// timers fire at: two timers at one instant wake in no set order.
		heartbeat: time.Duration(2+s.IntN(6))*time.Second + 4*1009*time.Nanosecond}
	w.faults = map[string]float64{
		faultThrottle: s.Float64() * 0.05,
		faultConflict: s.Float64() * 0.02,
		faultLost:     s.Float64() * 0.03,
		faultSlow:     s.Float64() * 0.04,
		faultStall:    s.Float64() * 0.02,
		faultKill:     s.Float64() * 0.01,
	}
	w.mem = jobstest.NewMemStore(nil) // the bubble's clock
	// The knobs message first brought, from a stream of their own so the
	// draws above keep their values.
	k := rand.New(rand.NewPCG(seed, 3))
	w.messageFirst = opts.MessageFirst || k.IntN(10) < 8
	w.sweeperOff = opts.SweeperOff || (w.messageFirst && k.IntN(10) == 0)
	w.dupKill = k.IntN(2) == 0
	if k.IntN(3) == 0 {
		w.throttled = k.Float64() * 0.2
	}
	// Payload items, from a stream of their own.
	p := rand.New(rand.NewPCG(seed, 4))
	if p.IntN(3) > 0 {
		w.apartOver = []int{8, 40, 120}[p.IntN(3)]
		w.lateEvery = []int{0, 3, 10}[p.IntN(3)]
		w.mem.KeepPayloadsApart(w.apartOver)
		// The object tier, drawn after the rest of this stream.
		if p.IntN(2) == 0 {
			w.objectsOver = w.apartOver + []int{0, 40}[p.IntN(2)]
			w.mem.KeepObjectsOver(w.objectsOver)
		}
	}
	// Each lane's visibility timeout follows the rule the construct
	// deploys: twice the lane's worker timeout plus the event source's
	// batch window (drawn: 0 to 20 s).
	window := time.Duration(k.IntN(21)) * time.Second
	visibility := map[string]time.Duration{"": 2*w.timeout + window, laneBulk: 2*w.bulkTimeout + window}
	w.sqs = newSQS(w, []string{"", laneBulk}, visibility, 3+s.IntN(8))
	if w.sweeperOff {
		// Nobody drains the dead-letter queues: the construct's
		// maxReceiveCount with message first.
		w.sqs.maxReceive = 10
	}
	w.logger = slog.New(pathLog{w: w})
	start := time.Now()
	down := time.Duration(s.IntN(600)) * time.Second
	w.bus = &bus{w: w, accepted: map[string]int{}, statusOf: map[string]string{}, downFrom: start.Add(down), downUntil: start.Add(down + time.Duration(s.IntN(900))*time.Second),
		partialEvery: []int{0, 7, 13}[s.IntN(3)]}
	if w.sweeperOff {
		// Events left pending are the sweeper's: a seed without one has
		// no outage, so that its jobs end rather than wait for it.
		w.bus.downUntil, w.bus.partialEvery = w.bus.downFrom, 0
	}
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(s.IntN(256))
	}
	sealer, err := jobs.NewAESSealer(key)
	if err != nil {
		panic(err)
	}
	w.sealer = sealer
	w.retry = jobs.RetryPolicy{MaxAttempts: 1 + s.IntN(3), BaseDelay: time.Duration(1+s.IntN(20)) * time.Second, MaxDelay: 20 * time.Minute}
	// A deploy that adds a kind: the enqueue functions have it from
	// deployAt, the workers as each is replaced, all by deployAt+rollout.
	w.deployAt = start.Add(time.Duration(60+s.IntN(540)) * time.Second)
	w.rollout = time.Duration(s.IntN(300)) * time.Second
	w.regOld, w.reg = jobs.NewRegistry(), jobs.NewRegistry()
	w.register(w.regOld, false)
	w.register(w.reg, true)
	return w
}

// decide draws the fault of call c (in the scheduler's goroutine).
func (w *world) decide(rng *rand.Rand, c *call) verdict {
	if strings.HasPrefix(c.label, "late ") {
		return verdict{}
	}
	x := rng.Float64()
	for _, f := range []string{faultThrottle, faultConflict, faultLost, faultSlow, faultStall, faultKill} {
		p := w.faults[f]
		if x >= p {
			x -= p
			continue
		}
		switch f {
		case faultKill:
			if !c.actor.worker {
				return verdict{}
			}
			if rng.IntN(2) == 0 {
				return verdict{fault: faultKillDone}
			}
		case faultSlow:
			return verdict{fault: f, delay: time.Duration(1+rng.IntN(3000))*time.Millisecond + 5*time.Microsecond}
		case faultStall:
			// A request applied after its caller gave up (up to a minute
			// later: an SDK call without a timeout, a frozen instance).
			return verdict{fault: f, delay: time.Duration(1+rng.IntN(60000)) * time.Millisecond}
		}
		return verdict{fault: f}
	}
	return verdict{}
}

// draw returns a number in [0, n) inside a call's turn.
func (w *world) draw(n int) int { return w.inner.IntN(n) }

func (w *world) cover(group, name string) {
	w.mu.Lock()
	w.coverage[group+": "+name]++
	w.mu.Unlock()
}

func (w *world) violate(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	w.mu.Lock()
	w.violations = append(w.violations, msg)
	w.mu.Unlock()
	w.sched.tracef("VIOLATION %s", msg)
}

// landed checks a final write (or retry) of job that landed under the
// caller's claim token: no run under another claim may still be going,
// since an outcome lands only from the run that holds the claim. (A run
// under the same claim may: its handler ignored its context and was
// abandoned, and its lease keeps the next run away.)
func (w *world) landed(op, job, token string) {
	if r := w.track.activeRun(job); r != nil && r.token != token {
		w.violate("%s of job %s landed under claim %s while its run under claim %s is still going", op, job, short(token), short(r.token))
	}
}

func short(token string) string {
	if len(token) > 8 {
		return token[len(token)-8:]
	}
	return token
}

// simRand is a seeded jobs.Rand: UUIDv7 ids on the bubble's clock.
type simRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newSimRand(seed uint64, name string) *simRand {
	h := uint64(14695981039346656037)
	for _, c := range []byte(name) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return &simRand{r: rand.New(rand.NewPCG(seed, h))}
}

func (s *simRand) NewID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var u uuid.UUID
	binary.BigEndian.PutUint64(u[8:], s.r.Uint64())
	binary.BigEndian.PutUint64(u[0:8], uint64(time.Now().UnixMilli())<<16|uint64(s.r.IntN(1<<16)))
	u[6] = (u[6] & 0x0f) | 0x70
	u[8] = (u[8] & 0x3f) | 0x80
	return u.String()
}

func (s *simRand) Int64N(n int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r.Int64N(n)
}

// newActor returns an actor with its store, queue and bus.
func (w *world) newActor(name string, worker bool) (*actor, *gatedStore, gatedQueue, gatedBus) {
	a := &actor{w: w, name: name, worker: worker}
	return a, &gatedStore{a: a, st: w.mem}, gatedQueue{a: a, q: w.sqs}, gatedBus{a: a, b: w.bus}
}

// timeoutOf is the worker timeout of lane's functions.
func (w *world) timeoutOf(lane string) time.Duration {
	if lane == laneBulk {
		return w.bulkTimeout
	}
	return w.timeout
}

func (w *world) laneGraces() map[string]time.Duration {
	return map[string]time.Duration{laneBulk: w.grace}
}

// instance is a worker function's execution environment.
type instance struct {
	a      *actor
	worker *jobs.Worker
	dead   chan struct{}
	old    bool // started before the deploy reached it: without kindAdded
}

func (w *world) coldStart(name, lane string, gen int) *instance {
	a, st, q, b := w.newActor(name, true)
	timeout := w.timeout
	if lane == laneBulk {
		timeout = w.bulkTimeout
	}
	// Before the deploy every instance is old; during its rollout every
	// other one; after it, none.
	reg := w.reg
	if now := time.Now(); now.Before(w.deployAt) || (now.Before(w.deployAt.Add(w.rollout)) && gen%2 == 1) {
		reg = w.regOld
	}
	wk, err := testroles.Worker(jobs.Config{Registry: reg, Store: st, Queue: q, Bus: b, Sealer: w.sealer, Lane: lane,
		Concurrency: 1, WorkerTimeout: timeout, DispatchGrace: w.grace, LaneDispatchGrace: w.laneGraces(), Rand: newSimRand(w.seed, name),
		MessageFirst: w.messageFirst, Routes: simRoutes(), Logger: w.logger})
	if err != nil {
		panic(err)
	}
	inst := &instance{a: a, worker: wk, dead: make(chan struct{}), old: reg == w.regOld}
	a.onKill = func() {
		w.track.killed(a)
		close(inst.dead)
	}
	w.cover("mechanism", "cold start")
	return inst
}

// poller is one concurrent poller of a lane's event source mapping: it
// receives a batch and invokes its function instance with it, deletes
// what succeeded, and cold-starts a new instance after a kill.
func (w *world) poller(ctx context.Context, lane string, n int) {
	esm, _, _, _ := w.newActor(fmt.Sprintf("esm%s/%d", lane, n), false)
	timeout := w.timeout
	if lane == laneBulk {
		timeout = w.bulkTimeout
	}
	var inst *instance
	gen := 0
	for ctx.Err() == nil {
		var batch []events.SQSMessage
		throttled := false
		err := esm.do(ctx, "Receive", "lane"+lane, func() error {
			d := 0
			if x := w.draw(100); x < 3 {
				d = 1 + x%2
			}
			batch = w.sqs.receive(lane, 1+w.draw(10), d)
			throttled = len(batch) > 0 && w.throttled > 0 && float64(w.draw(1000)) < w.throttled*1000
			return nil
		})
		if throttled {
			// Lambda throttled the invocation: the batch comes back after
			// its visibility timeout, its receives counted.
			w.cover("fault", "invocation throttled")
			w.sched.tracef("%-14s invocation throttled (%d messages)", esm.name, len(batch))
			continue
		}
		if err != nil {
			if !sleep(ctx, time.Second) {
				return
			}
			continue
		}
		if len(batch) == 0 {
			if !w.sqs.longPoll(ctx, lane) {
				return
			}
			continue
		}
		if inst != nil && inst.old && !time.Now().Before(w.deployAt.Add(w.rollout)) {
			inst = nil // the deploy replaced it
			w.cover("mechanism", "deploy replaced an instance")
		}
		if inst == nil || inst.a.killed() {
			gen++
			inst = w.coldStart(fmt.Sprintf("worker%s/%d.%d", lane, n, gen), lane, gen)
		}
		resp, ok := w.invoke(ctx, inst, batch, timeout)
		if !ok {
			continue // the instance died: the batch comes back after its visibility timeout
		}
		back := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			back[f.ItemIdentifier] = true
		}
		var handles, failed []string
		for _, m := range batch {
			if !back[m.MessageId] {
				handles = append(handles, m.ReceiptHandle)
			} else if w.opts.PlantDropEvery > 0 {
				failed = append(failed, m.ReceiptHandle)
			}
		}
		if len(handles)+len(failed) > 0 {
			_ = esm.do(ctx, "DeleteBatch", append(handles, failed...)[0], func() error {
				for _, h := range handles {
					w.sqs.remove(lane, h)
				}
				for _, h := range failed {
					if w.draw(w.opts.PlantDropEvery) == 0 {
						w.cover("planted", "a failed message deleted")
						w.sqs.remove(lane, h)
					}
				}
				return nil
			})
		}
	}
}

// invoke runs one invocation under the Lambda deadline; false when the
// instance died or missed its deadline (the runtime kills it).
func (w *world) invoke(ctx context.Context, inst *instance, batch []events.SQSMessage, timeout time.Duration) (events.SQSEventResponse, bool) {
	// The deadline is off the whole milliseconds the worker's own timers
	// (its cancel checks) tick at, so no two fire at one instant.
	ictx, cancel := context.WithTimeout(context.WithValue(context.WithoutCancel(ctx), instanceKey{}, inst.a), timeout+17*time.Microsecond)
	defer cancel()
	done := make(chan events.SQSEventResponse, 1)
	w.stragglers.Add(1)
	go func() {
		defer w.stragglers.Done()
		resp, _ := inst.worker.HandleSQS(ictx, events.SQSEvent{Records: batch})
		done <- resp
	}()
	w.cover("mechanism", "invocation")
	// Once the invocation answers, Lambda freezes the environment: a
	// handler the worker abandoned runs no more within this invocation.
	defer w.track.killed(inst.a)
	select {
	case resp := <-done:
		return resp, !inst.a.killed()
	case <-inst.dead:
		return events.SQSEventResponse{}, false
	case <-ictx.Done():
		// The deadline passed before the worker answered.
		select {
		case resp := <-done:
			return resp, !inst.a.killed()
		default:
		}
		w.violate("%s missed its Lambda deadline", inst.a.name)
		inst.a.kill()
		return events.SQSEventResponse{}, false
	}
}

// sweeps runs the sweeper every minute, as its EventBridge schedule does.
func (w *world) sweeps(ctx context.Context) {
	if w.sweeperOff {
		w.cover("mechanism", "sweeper off")
		return
	}
	for n := 1; sleep(ctx, time.Minute+11*time.Microsecond); n++ {
		a, st, q, b := w.newActor(fmt.Sprintf("sweeper/%d", n), true)
		sw, err := testroles.Sweeper(jobs.Config{Store: st, Queue: q, Bus: b, Registry: w.reg, DispatchGrace: w.grace, LaneDispatchGrace: w.laneGraces(),
			SweepPageSize: w.pageSize, Rand: newSimRand(w.seed, a.name), DeadLetters: gatedDeadLetters{a: a, q: w.sqs},
			MessageFirst: w.messageFirst, Logger: w.logger})
		if err != nil {
			panic(err)
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		rep, _ := sw.Sweep(sctx)
		cancel()
		w.cover("mechanism", "sweep")
		w.checkDeadRuns()
		if rep.Interrupted+rep.Retried > 0 {
			w.cover("mechanism", "sweep interrupt")
		}
		if rep.Resent > 0 {
			w.cover("mechanism", "sweep re-send")
		}
		if rep.After > 0 {
			w.cover("mechanism", "sweep post-outcome steps")
		}
		if rep.DeadLettersSettled > 0 {
			w.cover("mechanism", "sweep settles a dead letter")
		}
	}
}

// deadRunBound is how long after its lease ended a running job may stay
// running: the sweeper looks every minute, so ten sweeps, however many of
// the calls fail by chance.
const deadRunBound = 10 * time.Minute

// checkDeadRuns checks, after each sweep, that no job whose run's lease
// ended and whose sweep time came more than deadRunBound ago is still
// running: a dead worker's job is interrupted (or retried) whatever else
// is due.
func (w *world) checkDeadRuns() {
	now := time.Now()
	for _, r := range w.mem.All() {
		if r.Status != jobs.StatusRunning || r.LeaseUntil.IsZero() || r.SweepAt.IsZero() || w.reported[r.ID] {
			continue
		}
		// Due to the sweeper since its lease ended and its sweep time came
		// (a re-sent job keeps its re-send's backoff when it is claimed).
		if due := later(r.LeaseUntil, r.SweepAt); now.Sub(due) > deadRunBound {
			w.reported[r.ID] = true
			w.violate("job %s is still running %v after its lease ended and its sweep time came: the sweeper never interrupted it", r.ID, now.Sub(due).Round(time.Second))
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// sleep sleeps d unless ctx ends first; false when it did.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// apiTimeout bounds each client request, as API Gateway's integration
// timeout and the enqueue function's do.
const apiTimeout = 29 * time.Second

// client makes ops client operations at seeded times within span.
func (w *world) client(ctx context.Context, n, ops int, span time.Duration) {
	a, st, q, b := w.newActor(fmt.Sprintf("client%d", n), false)
	ids := newSimRand(w.seed, a.name)
	service := func(reg *jobs.Registry) *jobs.Service {
		svc, err := testroles.Service(jobs.Config{Registry: reg, Store: st, Queue: q, Bus: b, Sealer: w.sealer, DispatchGrace: w.grace,
			LaneDispatchGrace: w.laneGraces(), Rand: ids, MessageFirst: w.messageFirst, Logger: w.logger})
		if err != nil {
			panic(err)
		}
		return svc
	}
	// The enqueue function before the deploy, and after (it has the new
	// kind from deployAt).
	before, after := service(w.regOld), service(w.reg)
	rng := rand.New(rand.NewPCG(w.seed, uint64(100+n)))
	var mine []string
	at := time.Duration(0)
	for i := range ops {
		at += time.Duration(rng.Int64N(int64(span) / int64(ops) * 2))
		if !sleep(ctx, at-time.Duration(0)) {
			return
		}
		at = 0
		// Each operation is one API request: API Gateway gives up on it
		// after 29 s, the enqueue function's timeout.
		svc := before
		if !time.Now().Before(w.deployAt) {
			svc = after
		}
		octx, cancel := context.WithTimeout(ctx, apiTimeout)
		id := w.operate(octx, svc, rng, n*1000+i, mine)
		cancel()
		if id != "" {
			mine = append(mine, id)
		}
	}
}

// script draws a handler script.
func script(rng *rand.Rand, n int) payload {
	p := payload{N: n, Ms: rng.IntN(8000)}
	switch x := rng.IntN(20); {
	case x < 2:
		p.Fail = "declared"
	case x < 4:
		p.Fail = "retry"
	case x < 5:
		p.Fail = "error"
	}
	if rng.IntN(4) == 0 {
		p.Publish = 1 + rng.IntN(3)
	}
	return p
}

// operate makes one client operation and returns the id of a job it
// made ("" for none).
func (w *world) operate(ctx context.Context, svc *jobs.Service, rng *rand.Rand, n int, mine []string) string {
	p := script(rng, n)
	req := jobs.EnqueueRequest{Owner: simOwner, Kind: kindPlain}
	op := "enqueue plain"
	switch x := rng.IntN(100); {
	case x < 5:
		op, p.Children = "enqueue parent", 1+rng.IntN(3)
	case x < 9:
		op, p.Steps = "enqueue steps", 1+rng.IntN(3)
		switch rng.IntN(3) {
		case 0:
			// A sleep after the first step: within the queue's delay
			// (a message's delay) or beyond it (the sweeper's).
			p.SleepS = 1 + rng.IntN(1800)
		case 1:
			// A wait for a signal after it, with its timeout, and a
			// callback token for it that may expire before or after.
			p.SignalS = 1 + rng.IntN(1800)
			p.TokenS = 1 + rng.IntN(2*p.SignalS)
		case 2:
			// A child it waits for, which runs for a while and may fail.
			p.InvokeS = 1 + rng.IntN(600)
			if rng.IntN(3) == 0 {
				p.InvokeFail = "declared"
			}
			if rng.IntN(2) == 0 {
				// Or many, a window at a time, one of which may fail.
				p.MapN, p.MapWindow = 2+rng.IntN(9), rng.IntN(4)
				if rng.IntN(3) == 0 {
					p.MapFail = 1 + rng.IntN(p.MapN)
				}
			}
		}
	case x < 14 && len(mine) > 0:
		// A signal to one of the client's jobs that wait for one (again:
		// a duplicate), or now and then to any (most wait for none).
		w.mu.Lock()
		waiting := w.waitJobs
		w.mu.Unlock()
		id := mine[len(mine)-1-rng.IntN(min(len(mine), 4))]
		if len(waiting) > 0 && rng.IntN(4) > 0 {
			id = waiting[len(waiting)-1-rng.IntN(min(len(waiting), 3))]
		}
		if rng.IntN(3) > 0 && w.callback(ctx, svc, id, n) {
			return ""
		}
		w.signal(ctx, svc, id, n)
		return ""
	case x < 14:
	case x < 20 && !time.Now().Before(w.deployAt):
		op, req.Kind = "enqueue added kind", kindAdded
	case x < 20:
	case x < 28:
		op, req.Kind = "enqueue delayed", kindPlain
		req.Delay = time.Duration(rng.IntN(1500)) * time.Second
	case x < 38:
		op, req.Kind = "enqueue limited", kindLimited
		p.Key = fmt.Sprint("k", rng.IntN(2))
	case x < 46:
		op, req.Kind = "enqueue rated", kindRated
	case x < 53:
		op, req.Kind = "enqueue unique", kindUnique
		req.UniqueKey = fmt.Sprint("u", rng.IntN(3))
		req.Unique = []jobs.Unique{jobs.UniqueUntilFinished, jobs.UniqueUntilStarted, jobs.UniqueForPeriod, jobs.UniqueDebounce}[rng.IntN(4)]
		if req.Unique == jobs.UniqueForPeriod || req.Unique == jobs.UniqueDebounce {
			req.UniqueFor = time.Duration(1+rng.IntN(60)) * time.Second
		}
	case x < 60:
		op, req.Kind = "enqueue bulk lane", kindBulk
	case x < 68:
		op, req.Kind = "enqueue long", kindLong
		p.StepMs = int(w.lim.heartbeat.Milliseconds()) / (2 + rng.IntN(3))
		p.Ms = p.StepMs * (1 + rng.IntN(20))
		p.Cont = rng.IntN(3)
		p.WindDownMs = rng.IntN(90_000)
		if p.Fail == "error" {
			p.Fail = ""
		}
	case x < 74 && len(mine) > 0:
		op = "enqueue dependent"
		for range 1 + rng.IntN(2) {
			req.After = append(req.After, mine[rng.IntN(len(mine))])
		}
	case x < 80:
		return w.batch(ctx, svc, rng, n)
	case x < 88 && len(mine) > 0:
		id := mine[rng.IntN(len(mine))]
		_, err := svc.Cancel(ctx, simOwner, id)
		w.cover("client", "cancel"+outcome(err))
		return ""
	case x < 90 && len(mine) > 0:
		// A caller who cancels, then changes its mind and retries.
		id := mine[rng.IntN(len(mine))]
		_, err := svc.Cancel(ctx, simOwner, id)
		w.cover("client", "cancel then retry"+outcome(err))
		for range 3 {
			if !sleep(ctx, time.Duration(rng.IntN(20_000))*time.Millisecond) {
				break
			}
			if _, err := svc.Resubmit(ctx, simOwner, id); err == nil {
				w.cover("client", "retry after cancel")
				break
			}
		}
		return ""
	case x < 94 && len(mine) > 0:
		id := mine[rng.IntN(len(mine))]
		_, err := svc.Resubmit(ctx, simOwner, id)
		w.cover("client", "retry"+outcome(err))
		return ""
	case len(mine) > 0:
		id := mine[rng.IntN(len(mine))]
		res, err := svc.Replay(ctx, jobs.ReplayRequest{Owner: simOwner, ID: id})
		w.cover("client", "replay"+outcome(err))
		if err == nil {
			w.accept(res.Job.ID, "replay")
			return res.Job.ID
		}
		return ""
	}
	raw, _ := json.Marshal(p)
	req.Payload = raw
	if rng.IntN(6) == 0 {
		req.IdempotencyKey = fmt.Sprint("idem", rng.IntN(4))
	}
	res, err := svc.Enqueue(ctx, req)
	w.cover("client", op+outcome(err))
	if err != nil {
		return ""
	}
	w.accept(res.Job.ID, op)
	if p.SignalS > 0 {
		w.mu.Lock()
		w.waitJobs = append(w.waitJobs, res.Job.ID)
		w.mu.Unlock()
	}
	return res.Job.ID
}

func outcome(err error) string {
	if err != nil {
		return " (refused)"
	}
	return ""
}

func (w *world) accept(id, how string) {
	w.mu.Lock()
	if _, ok := w.accepted[id]; !ok {
		w.accepted[id] = how
	}
	w.mu.Unlock()
}

func (w *world) batch(ctx context.Context, svc *jobs.Service, rng *rand.Rand, n int) string {
	req := jobs.BatchRequest{Owner: simOwner}
	size := 1 + rng.IntN(5)
	for i := range size {
		raw, _ := json.Marshal(script(rng, n*10+i))
		req.Jobs = append(req.Jobs, jobs.JobSpec{Kind: kindPlain, Payload: raw})
	}
	raw, _ := json.Marshal(payload{N: n})
	req.Completion = &jobs.JobSpec{Kind: kindComplete, Payload: raw}
	res, err := svc.EnqueueBatch(ctx, req)
	w.cover("client", "batch"+outcome(err))
	if err != nil {
		return ""
	}
	w.mu.Lock()
	w.batches[res.Batch.ID] = size
	w.mu.Unlock()
	for _, id := range res.Batch.JobIDs {
		w.accept(id, "batch")
	}
	return ""
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
