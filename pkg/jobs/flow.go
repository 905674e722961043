package jobs

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/errtypes"
	"github.com/lambdajobs/lambdajobs/internal/metricnames"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Flow control. A kind's limits (KindOpts.Concurrency, RateLimit and
// their per-key forms) are enforced when a job is claimed: the worker
// takes a slot of the kind's concurrency (a slot item of the store,
// sharded so a large limit is no hot item: each shard holds at most
// slotsPerShard of the limit and a job's shard is fixed by its id), a slot
// of its key's, and a token of each rate. A job that cannot get one waits:
// its claim's attempt is given back and it goes back to the queue, parked
// (Record.WaitingOn says on what) until a moment later, with a new message,
// so waiting never counts towards the queue's maxReceiveCount and never
// reaches the dead-letter queue, however long it lasts. That is the one
// waiting state, with one wake-up path: a run that frees the slot the
// job queued for (its slot item keeps a bounded list of waiters) takes
// the first waiter off and starts it, on its own goroutine under the same
// slot when it can (see slotChain), else by sending its message; the
// parked job's own delayed message is a backstop when no release comes.
// A run's slots are passed on or released as soon as its handler has
// returned (before the run's final write: the slot bounds running
// handlers); a slot whose worker died frees itself at the run's lease.
// Kinds without limits pay nothing: no read, no write, no request.
// docs/guide/FLOW_CONTROL.md has the design and the costs.

// limits are a kind's flow control, checked.
type limits struct {
	concurrency, perKey int
	rate, ratePerKey    float64 // starts per second
	burst, burstPerKey  float64
	key                 string // "owner", "tenant" or a payload field
	// rateN, ratePerKeyN and period are the rates as registered (KindInfo).
	rateN, ratePerKeyN int
	period             time.Duration
}

func (l limits) any() bool {
	return l.concurrency > 0 || l.perKey > 0 || l.rate > 0 || l.ratePerKey > 0
}

// slotsPerShard bounds the holders of one slot item: a kind's concurrency
// of n is spread over ceil(n/slotsPerShard) items.
const slotsPerShard = 16

func (o *KindOpts) limits() (limits, error) {
	var l limits
	if o.Concurrency < 0 || o.ConcurrencyPerKey < 0 || o.RateLimit < 0 || o.RateLimitPerKey < 0 || o.RatePeriod < 0 {
		return l, errors.New("flow control: limits must not be negative")
	}
	period := o.RatePeriod
	if period == 0 {
		period = time.Second
	}
	l.concurrency, l.perKey = o.Concurrency, o.ConcurrencyPerKey
	l.rate, l.ratePerKey = float64(o.RateLimit)/period.Seconds(), float64(o.RateLimitPerKey)/period.Seconds()
	l.rateN, l.ratePerKeyN, l.period = o.RateLimit, o.RateLimitPerKey, period
	// A burst of one start: the rate holds over any window, not only on
	// average.
	l.burst, l.burstPerKey = 1, 1
	switch key := o.LimitKey; {
	case key == "" && (o.ConcurrencyPerKey > 0 || o.RateLimitPerKey > 0):
		return l, errors.New(`flow control: a per-key limit needs LimitKey ("owner", "tenant" or "payload.<field>")`)
	case key == "", key == "owner", key == "tenant":
		l.key = key
	case strings.HasPrefix(key, "payload.") && len(key) > len("payload."):
		l.key = key
	default:
		return l, fmt.Errorf(`flow control: LimitKey %q: want "owner", "tenant" or "payload.<field>"`, key)
	}
	return l, nil
}

// limitKeyOf is rec's value of the kind's LimitKey, hashed ("" when it has
// none: a payload without the field).
func (k *kindDef) limitKeyOf(rec *driver.Record) string {
	var v string
	switch k.limits.key {
	case "owner":
		v = rec.Owner
	case "tenant":
		// Within the owner's: a tenant named by two owners is two keys.
		v = wire.TenantOf(rec.Owner, rec.Tenant)
	default:
		field := strings.TrimPrefix(k.limits.key, "payload.")
		if slices.Contains(k.secrets, field) {
			return "" // sealed: never a key (refused at registration too)
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(rec.Payload, &obj) != nil {
			return ""
		}
		v = string(obj[field])
	}
	if v == "" {
		return ""
	}
	h := sha256.Sum256([]byte(v))
	return hex.EncodeToString(h[:8])
}

// shardOf is the shard of a limit of n that job id's slot is in.
func shardOf(id string, n int) int {
	return shardOfN(id, (n+slotsPerShard-1)/slotsPerShard)
}

// shardOfN is job id's shard of shards.
func shardOfN(id string, shards int) int {
	h := sha256.Sum256([]byte(id))
	return int(binary.BigEndian.Uint32(h[:4]) % uint32(shards))
}

// shardMax is how many of a limit of n the shard holds.
func shardMax(n, shard int) int {
	shards := (n + slotsPerShard - 1) / slotsPerShard
	m := n / shards
	if shard < n%shards {
		m++
	}
	return m
}

// slotKeys are the slot items a run of the kind's job rec holds: the
// kind's shard, and its key's.
func (k *kindDef) slotKeys(rec *driver.Record) []slotKey {
	var out []slotKey
	if n := k.limits.concurrency; n > 0 {
		s := shardOf(rec.ID, n)
		out = append(out, slotKey{key: fmt.Sprintf("%s#%d", k.name, s), max: shardMax(n, s)})
	}
	if n := k.limits.perKey; n > 0 {
		if kv := k.limitKeyOf(rec); kv != "" {
			s := shardOf(rec.ID, n)
			out = append(out, slotKey{key: fmt.Sprintf("%s#k#%s#%d", k.name, kv, s), max: shardMax(n, s)})
		}
	}
	return out
}

type slotKey struct {
	key string
	max int
}

// What a parked job waits on (Record.WaitingOn, View.WaitingOn).
const (
	waitConcurrency = "concurrency" // a slot of a concurrency limit
	waitRate        = "rate"        // its reserved start under a rate limit
	waitStore       = "store"       // a limit's item could not be read
	waitKind        = "kind"        // its kind is unknown to the worker that got it
	waitKey         = "key"         // its payload's key is not in that worker's ring yet
)

// sealedWithUnknownKey reports whether rec's payload has a sealed field
// whose key sealer does not hold.
func sealedWithUnknownKey(sealer Sealer, rec *driver.Record, k *kindDef) bool {
	_, err := openPayload(sealer, rec.ID, k.secrets, rec.Payload)
	return errors.Is(err, errUnknownKey)
}

// unknownKindGrace is how long after its creation a job whose kind the
// worker that receives it does not register is handed back (waiting_on
// "kind", no attempt spent) rather than failed unknown_kind: a deploy that
// adds a kind reaches its functions one by one, and a job enqueued through
// a new enqueue function may reach an old worker first. A job sealed with
// a key the worker's ring lacks (waiting_on "key") is handed back as long.
const unknownKindGrace = 30 * time.Minute

// unknownKindWait is how long (jittered) a job of an unknown kind waits
// before it is delivered again.
const unknownKindWait = 30 * time.Second

// admission is why a run may not start yet: what it waits on, when it
// may (RunAt: a reserved start; now when any delivery may try again), and
// when its next message comes (a woken waiter's comes sooner).
//
// A run whose handler suspended (Sleep) parks too: ran says its handler
// ran (the job keeps its start), state is the job's state to store with
// the park (nil: the stored one stands).
type admission struct {
	on    string
	runAt time.Time
	delay time.Duration
	ran   bool
	state []byte
	marks string // the run's steps as shown, to store with the park ("": keep)
}

// admit takes what a run of cl.rec needs before its handler starts: a
// reservation of each rate it is under (unless it holds one: it waited on
// the rate and its time has come), then its slots, each held by holder
// (the run's claim token), but the slot its goroutine holds already (c,
// the slot chain it runs under). A reservation due within inlineRateWait
// is waited for here, holding the claim. It returns nil when the run may
// start, else why not (its slots released). A job whose reserved start
// came but whose slot is taken waits on the slot and reserves again
// later: its first reservation is spent, which only lowers the rate.
func (w *Worker) admit(ctx context.Context, inv invocation, k *kindDef, cl claimed) *admission {
	rec, holder, c := cl.rec, cl.token, cl.chain
	if !k.limits.any() {
		return nil
	}
	cctx, cancel := inv.callContext(ctx)
	defer cancel()
	now := w.eng.now()
	// A job that waited on the rate starts on its reservation only when
	// it is on time: delivered late (its workers were busy), its reserved
	// start has passed and later reservations are someone else's, so it
	// reserves again. Starting late on the old one is how reservations
	// that came due together all started at once, over the rate.
	if rec.WaitingOn != waitRate || now.Sub(rec.RunAt) > rateOnTime {
		for try := 1; ; try++ {
			var longest time.Duration
			for _, b := range k.buckets(rec) {
				wait, err := w.eng.store.TakeToken(cctx, b.key, driver.TokenBucket{PerSecond: b.rate, Burst: b.burst, At: now})
				if err != nil {
					w.log.LogAttrs(ctx, slog.LevelWarn, "rate not read; the job waits", slog.String("job_id", rec.ID), slog.String("err_types", errtypes.Of(err)))
					return &admission{on: waitStore, runAt: now, delay: w.eng.jitter(slotWait)}
				}
				longest = max(longest, wait)
			}
			switch {
			case longest == 0:
			case longest <= inlineRateWait && inv.canStart(longest+k.minRun) && sleepCtx(ctx, longest):
			default:
				// The message comes back up to a second early (SQS delays are
				// whole seconds) and waits out the rest (claimFailed), so the
				// start is on time, not bunched at the second.
				return &admission{on: waitRate, runAt: now.Add(longest), delay: longest.Truncate(time.Second)}
			}
			// The reservation holds only if the start follows it at once:
			// an answer that came late (a slow call) leaves it passed, and
			// the next one is someone else's.
			reserved := now.Add(longest)
			now = w.eng.now()
			if now.Sub(reserved) <= rateOnTime {
				break
			}
			if try == 3 {
				return &admission{on: waitStore, runAt: now, delay: w.eng.jitter(slotWait)}
			}
		}
	}
	var held []slotKey
	for _, s := range k.slotKeys(rec) {
		if c != nil && s.key == c.key {
			continue
		}
		state, err := w.eng.store.AcquireSlot(cctx, s.key, driver.SlotClaim{Holder: holder, Waiter: rec.ID, Max: s.max, LeaseUntil: inv.leaseUntil(now), At: now,
			Waiters: waitersFor(s.max), ExpectFull: w.busy.get(s.key)})
		if err == nil && state != driver.SlotHeld {
			w.busy.set(s.key, true)
		}
		if err == nil && state == driver.SlotHeld {
			held = append(held, s)
			continue
		}
		if err != nil {
			// The write may have landed though its answer did not: a
			// release of a slot not held changes nothing.
			held = append(held, s)
		}
		w.release(ctx, inv, holder, held, false)
		switch {
		case err != nil:
			w.log.LogAttrs(ctx, slog.LevelWarn, "slot not taken; the job waits", slog.String("job_id", rec.ID), slog.String("err_types", errtypes.Of(err)))
			return &admission{on: waitStore, runAt: now, delay: w.eng.jitter(slotWait)}
		case state == driver.SlotQueued:
			return &admission{on: waitConcurrency, runAt: now, delay: w.eng.jitter(wakeBackstop)}
		default:
			return &admission{on: waitConcurrency, runAt: now, delay: w.eng.jitter(w.overflowWait(k.name, s.max))}
		}
	}
	return nil
}

// sleepCtx sleeps d, or until ctx ends: whether it slept d.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Waiting on a concurrency slot. A job that finds its slot item full is
// queued among the item's waiters (at most waitersFor of them) and parked
// for wakeBackstop: a run that frees a slot starts the first waiter (run
// by its own worker, or sent its message), so it starts when the slot
// frees; the backstop only covers a wake that was lost (a worker killed
// between taking the waiter off and starting it, or a slot freed by its
// lease). A job that finds the waiters
// full too parks for about half the time they take to drain (see
// overflowWait) and looks again.
const (
	wakeBackstop = 30 * time.Second
	// inlineRateWait is the longest reserved start a worker waits for
	// holding the claim rather than parking the job.
	inlineRateWait = time.Second
)

// overflowWait is how long a job that found kind's slot item of slots
// slots and its waiters full waits before it looks again: half the time
// the waiters take to drain, at this worker's measure of the kind's runs,
// from 1 to 30 seconds. Sooner and the overflow's looks cost more than
// they bring; later and the slots idle once the waiters are through. A
// worker that has no measure yet (a new instance, the first runs of a
// burst) looks again after the floor: guessing a hold of a second made a
// burst's overflow wait up to 12 s for waiters that drained in 3.
func (w *Worker) overflowWait(kind string, slots int) time.Duration {
	var hold time.Duration
	if v, ok := w.holds.Load(kind); ok {
		hold = v.(time.Duration)
	}
	drain := time.Duration(waitersFor(slots)) * hold / time.Duration(slots)
	return min(30*time.Second, max(drain/2, time.Second))
}

// noteHold adds a run of kind that held its slots for d to this worker's
// measure (a moving average).
func (w *Worker) noteHold(kind string, d time.Duration) {
	old, ok := w.holds.Load(kind)
	if ok {
		d = (old.(time.Duration)*7 + d) / 8
	}
	w.holds.Store(kind, d)
}

// busyHints remember, per slot key, whether this worker's last acquire
// of it found every slot held: its next acquire tries queueing first
// (driver.SlotClaim.ExpectFull), and a chain whose slot's list was busy
// pops before it releases. At most maxBusyHints keys (per-key limits may
// have many); past that it forgets them all.
type busyHints struct {
	mu   sync.Mutex
	full map[string]bool
}

const maxBusyHints = 4096

func (b *busyHints) get(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.full[key]
}

func (b *busyHints) set(key string, full bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.full == nil || len(b.full) >= maxBusyHints {
		b.full = map[string]bool{}
	}
	if full {
		b.full[key] = true
	} else {
		delete(b.full, key)
	}
}

// waitersFor bounds the waiters of a slot item of max slots: enough to
// keep it busy for a while, few enough that the item stays small (each
// waiter is a job id of 36 bytes; a join and a pop write it all).
func waitersFor(max int) int { return min(4*max+64, 128) }

type bucket struct {
	key         string
	rate, burst float64
}

// buckets are the token buckets a start of rec reserves from. A rate of
// r starts a second is spread over ceil(r/startsPerBucket) buckets, each
// of its share, and a job's bucket is fixed by its id: one bucket item
// takes at most startsPerBucket writes a second.
func (k *kindDef) buckets(rec *driver.Record) []bucket {
	var out []bucket
	add := func(key string, rate, burst float64) {
		shards := int(math.Ceil(rate / startsPerBucket))
		s := shardOfN(rec.ID, shards)
		out = append(out, bucket{key: fmt.Sprintf("%s#%d", key, s), rate: rate / float64(shards), burst: max(1, burst/float64(shards))})
	}
	if k.limits.rate > 0 {
		add(k.name, k.limits.rate, k.limits.burst)
	}
	if k.limits.ratePerKey > 0 {
		if kv := k.limitKeyOf(rec); kv != "" {
			add(k.name+"#k#"+kv, k.limits.ratePerKey, k.limits.burstPerKey)
		}
	}
	return out
}

// startsPerBucket bounds the starts a second one token bucket item
// reserves (each one write): a tenth of a partition's write budget.
const startsPerBucket = 100

// slotWait is how long a job that found its kind's slots taken waits
// before it tries again (jittered): runs end at any moment, so soon.
const slotWait = time.Second

// farLead is how long before a far wait's end (beyond SQS's delays) the
// sweeper sends its message, delayed by the rest: well inside SQS's 15
// minutes, and more than a sweep's period.
const farLead = 10 * time.Minute

// rateOnTime is how late after its reserved start a job that waited on a
// rate may still start on that reservation: the claim's own latency. A
// rate holds in every window of its period less this.
const rateOnTime = 100 * time.Millisecond

// release frees the slots held by holder (a run's claim token) and wakes
// each slot's first waiter (best effort: a slot not released frees
// itself at the run's lease, and a waiter not woken looks again at its
// backstop). With chain, the first waiter it takes off is not sent its
// message but returned: the caller runs it on its own goroutine
// (runNext), so it starts when the slot frees rather than when its
// message has been received behind the queue's others. Its calls end
// within Call and by the invocation's write deadline (inv.callContext):
// a run's releases come after its handler, and a chain's can follow one
// another, so Call alone could outlast the Lambda deadline.
func (w *Worker) release(ctx context.Context, inv invocation, holder string, held []slotKey, chain bool) (next string) {
	if len(held) == 0 {
		return ""
	}
	rctx, cancel := inv.callContext(context.WithoutCancel(ctx))
	defer cancel()
	for _, s := range held {
		waiter, err := w.eng.store.ReleaseSlot(rctx, s.key, holder)
		switch {
		case err != nil:
			w.log.LogAttrs(ctx, slog.LevelWarn, "slot not released; it frees itself at the run's lease", slog.String("err_types", errtypes.Of(err)))
		case waiter == "":
		case chain && next == "":
			next = waiter
		default:
			w.wake(rctx, waiter)
		}
	}
	return next
}

// wake sends the message of job id, a waiter on a slot just freed.
func (w *Worker) wake(ctx context.Context, id string) {
	rec, err := w.eng.store.Get(ctx, id)
	if err != nil || rec.Status.Final() {
		return
	}
	w.wakeRec(ctx, rec)
}

// wakeRec sends the message of rec, a waiter on a slot just freed, as
// read. A waiter that is still parking (it queued itself, then writes its
// park) is sent its message a second later, by when its park has landed.
func (w *Worker) wakeRec(ctx context.Context, rec *driver.Record) {
	m := messageOf(rec)
	if rec.Status != StatusQueued {
		m.Delay = time.Second
	}
	if err := w.eng.queue.Send(ctx, m); err != nil {
		w.log.LogAttrs(ctx, slog.LevelWarn, "waiter not woken; it looks again at its backstop", slog.String("job_id", rec.ID),
			slog.String("err_types", errtypes.Of(err)))
		return
	}
	count(ctx, rec.Kind, metricnames.JobsWoken)
}

// slotChain is a concurrency slot one goroutine holds across runs, on a
// store whose slots pass from run to run (driver.WaiterPopper): the chain's
// first run took it, holding it by its claim token, and each run that ends
// takes the next waiter off the slot's list and runs it under the same
// slot (one write, PopWaiter) instead of releasing it for the waiter to
// take (a release, a message, a receive, an acquire): the slot passes
// from run to run without a trip through the queue, and no other job
// takes it in between. The goroutine releases it when no waiter is left,
// or when its invocation has too little time left for another run.
type slotChain struct {
	key, holder string
	// pop: the slot's list had waiters when last seen: take the next off
	// first (one write); else release first (one write) and run the
	// waiter the release answers, if any, taking its own slot.
	pop bool
}

// successor is what a goroutine runs after a run: a woken waiter (id)
// and the slot chain it runs under (nil: it takes its own slots), or,
// with no id, the next waiter the chain takes off. settle, when set, is
// the previous run's final write, which runNext starts once it has
// claimed the next job (or found none).
type successor struct {
	id     string
	chain  *slotChain
	settle func()
}

func (s successor) any() bool { return s.id != "" || s.chain != nil }

// chainOf is the slot chain a run of rec (claimed under token) holds its
// first slot in: c when it runs under one, a new one on a store whose
// slots pass from run to run (its holder the run's token), nil on any
// other store or for a kind without concurrency slots.
func (w *Worker) chainOf(k *kindDef, rec *driver.Record, token string, c *slotChain) *slotChain {
	if c != nil || w.popper == nil {
		return c
	}
	keys := k.slotKeys(rec)
	if len(keys) == 0 {
		return nil
	}
	return &slotChain{key: keys[0].key, holder: token, pop: w.busy.get(keys[0].key)}
}

// popAhead takes chain c's next waiter off its slot's list while the
// chain's current run goes on, answering it ("" when none, or the pop
// failed: the run's end then releases the slot, or pops again).
func (w *Worker) popAhead(ctx context.Context, inv invocation, c *slotChain) <-chan string {
	out := make(chan string, 1)
	go func() {
		cctx, cancel := inv.callContext(context.WithoutCancel(ctx))
		defer cancel()
		id, left, err := w.popper.PopWaiter(cctx, c.key, c.holder)
		if err == nil {
			c.pop = left > 0
			w.busy.set(c.key, id != "")
		}
		out <- id
	}()
	return out
}

// afterRun frees the slots of the run cl (its job, claim token and chain,
// from chainOf) whose handler has returned, but its chain's, and says what
// the goroutine runs next: the chain's next waiter, or, on a store whose
// slots do not pass from run to run (no chain), the first waiter the
// release of its slots took off, which takes its own. Waiters of the
// run's other slots are woken by message.
func (w *Worker) afterRun(ctx context.Context, inv invocation, k *kindDef, cl claimed) successor {
	keys, c := k.slotKeys(cl.rec), cl.chain
	if c == nil {
		return successor{id: w.release(ctx, inv, cl.token, keys, true)}
	}
	w.release(ctx, inv, cl.token, slices.DeleteFunc(keys, func(s slotKey) bool { return s.key == c.key }), false)
	return successor{chain: c}
}

// passOn takes the next waiter off chain c's slot, or releases the slot:
// it returns the waiter to run, with c when it runs under the chain's
// slot, or with nil when the slot was released (a waiter the release
// took off takes its own slot); "" when there is none.
func (w *Worker) passOn(ctx context.Context, inv invocation, c *slotChain) (string, *slotChain) {
	if c.pop {
		cctx, cancel := inv.callContext(ctx)
		id, left, err := w.popper.PopWaiter(cctx, c.key, c.holder)
		cancel()
		if err == nil && id != "" {
			c.pop = left > 0
			return id, c
		}
		// None left (or the pop failed): release the slot.
	}
	id := w.release(ctx, inv, c.holder, []slotKey{{key: c.key}}, true)
	w.busy.set(c.key, id != "")
	return id, nil
}

// park sends run r's job back to the queue to wait as a says, its
// claim's attempt given back.
func (e *engine) park(ctx context.Context, r run, a *admission) ending {
	rec := r.rec
	now := e.now()
	runAt := a.runAt.Truncate(time.Millisecond)
	d := e.deliveryAt(now, now.Add(a.delay), rec.Lane)
	// A message sent now is looked at by the sweeper a grace after the
	// run time, as a backstop. A wait beyond SQS's delays has no message:
	// the sweeper sends it farLead before its time, with the rest as the
	// message's delay, so it is delivered on time (a rate waiter delivered
	// late reserves again: it would lose its place).
	switch at := runAt.Add(e.graceOf(rec.Lane)); {
	case d.send && at.After(d.sweepAt):
		d.sweepAt = at
	case !d.send:
		d.sweepAt = runAt.Add(-farLead)
	}
	e.keepPayloadUntil(ctx, rec, now, runAt)
	q := driver.Requeue{At: now, RunAt: runAt, SweepAt: d.sweepAt, WaitingOn: a.on, Unstart: !a.ran && rec.FirstStartedAt.Equal(rec.StartedAt), Marks: a.marks}
	if a.state != nil {
		q.Checkpoint, q.CheckpointUntil = a.state, e.payloadKeep(rec.Kind, now, runAt)
	}
	err := e.store.Requeue(ctx, rec.ID, r.token, q)
	if signalled(err, r.token, a.on) {
		// The signal it waits for came while it ran: due now instead,
		// its wait stored.
		d = e.deliveryAt(now, now, rec.Lane)
		q.RunAt, q.SweepAt, q.WaitingOn = now, d.sweepAt, waitSignal
		err = e.store.Requeue(ctx, rec.ID, r.token, q)
	}
	if ownWrite(err, StatusQueued, now) {
		err = nil
	}
	log := e.log.With(slog.String("job_id", rec.ID), slog.String("kind", rec.Kind))
	switch {
	case errors.Is(err, errCancelRequested):
		return e.finish(ctx, log, r, execution{Status: StatusCancelled, Cause: "cancelled", Marks: a.marks})
	case isConflict(err):
		return ending{res: superseded}
	case err != nil:
		log.LogAttrs(ctx, slog.LevelError, "park write failed; the job stays running until a redelivery or the sweeper settles it",
			slog.String("err_types", errtypes.Of(err)))
		return ending{res: unsettled}
	}
	if err := e.deliver(ctx, rec, d); err != nil {
		log.LogAttrs(ctx, slog.LevelWarn, "parked job not sent; the sweeper will send it", slog.String("err_types", errtypes.Of(err)))
	}
	count(ctx, rec.Kind, metricnames.JobsWaited)
	log.LogAttrs(ctx, slog.LevelDebug, "job waits", slog.String("waiting_on", a.on), slog.Time("run_at", runAt))
	return ending{res: landed, parked: true}
}

// uniqueKeyOf is the store key of owner's unique key for kind.
func uniqueKeyOf(owner, kind, key string) string {
	h := sha256.Sum256([]byte(key))
	return wire.OwnerKey(owner) + "#" + kind + "#" + hex.EncodeToString(h[:16])
}
