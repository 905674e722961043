package simulation

import (
	"sync"
	"time"
)

// tracker watches the handlers: which runs are active, and the starts of
// each limited kind. It checks, as each run starts, that no two runs of a
// job overlap and that no concurrency limit is exceeded, and that no rate
// limit is exceeded in any window of its period (starts, not
// reservations).
type tracker struct {
	w      *world
	mu     sync.Mutex
	active map[string]*runRec // job id -> its active run
	byKind map[string]int
	byKey  map[string]int
	starts []time.Time // of the rated kind
	runs   map[string]int
	// claims: the claim token each instance's latest claim of a job took;
	// claimedN: how many claims of each job landed.
	claims   map[claimOf]string
	claimedN map[string]int
	// claimAt: when each instance's claim of a job landed.
	claimAt map[claimOf]time.Time
	// watches are the dead runs whose job must end within the dead-worker
	// bound (see deadRunWatch).
	watches []*deadRunWatch
	// wakes are the jobs signals woke, whose next claim must land within
	// the wake bound (see wakeWatch).
	wakes []*wakeWatch
}

type claimOf struct {
	inst *actor
	job  string
}

type runRec struct {
	t     *tracker
	token string
	job   string
	kind  string
	key   string
	inst  *actor
	ended bool
}

func newTracker(w *world) *tracker {
	return &tracker{w: w, active: map[string]*runRec{}, byKind: map[string]int{}, byKey: map[string]int{}, runs: map[string]int{}, claims: map[claimOf]string{},
		claimedN: map[string]int{}, claimAt: map[claimOf]time.Time{}}
}

func (t *tracker) begin(job, kind, key string, inst *actor) *runRec {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := &runRec{t: t, job: job, kind: kind, key: key, inst: inst, token: t.claims[claimOf{inst, job}]}
	if inst != nil && inst.killed() {
		// Its instance died before the handler started: a dead Lambda runs
		// nothing, though the simulation's goroutine goes on.
		r.ended = true
		return r
	}
	t.runs[job]++
	t.w.cover("mechanism", "run "+kind)
	t.w.sched.tracef("%-14s run %s %s", instName(inst), job, kind)
	if prev := t.active[job]; prev != nil {
		t.w.violate("two runs of job %s overlap (runs on %s and %s)", job, instName(prev.inst), instName(inst))
	}
	t.active[job] = r
	if at, ok := t.claimAt[claimOf{inst, job}]; ok {
		t.w.checkPaused(job, kind, at)
	}
	t.byKind[kind]++
	if kind == kindLimited {
		t.byKey[key]++
		if l := t.w.lim.conc; l > 0 && t.byKind[kind] > l {
			t.w.violate("%d runs of %s at once, over its concurrency limit %d", t.byKind[kind], kind, l)
		}
		if l := t.w.lim.concPerKey; l > 0 && t.byKey[key] > l {
			t.w.violate("%d runs of %s key %q at once, over its limit %d per key", t.byKey[key], kind, key, l)
		}
	}
	if kind == kindRated {
		now := time.Now()
		t.starts = append(t.starts, now)
		n := 0
		for _, s := range t.starts {
			// A start may be up to rateOnTime late on its reservation
			// (jobs.flow.go): the rate holds in every window of its
			// period less that.
			if now.Sub(s) < t.w.lim.ratePeriod-100*time.Millisecond {
				n++
			}
		}
		if n > t.w.lim.rate {
			t.w.violate("%d starts of %s within %v, over its rate limit %d", n, kind, t.w.lim.ratePeriod, t.w.lim.rate)
		}
	}
	return r
}

// end ends r (once: a killed instance's runs end at the kill).
func (t *tracker) end(r *runRec) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.endLocked(r)
}

func (t *tracker) endLocked(r *runRec) {
	if r.ended {
		return
	}
	r.ended = true
	if t.active[r.job] == r {
		delete(t.active, r.job)
	}
	t.byKind[r.kind]--
	if r.kind == kindLimited {
		t.byKey[r.key]--
	}
}

// killed ends every run of inst: its function instance is gone, or its
// invocation answered and its environment is frozen.
func (t *tracker) killed(inst *actor) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.active {
		if r.inst == inst {
			t.endLocked(r)
		}
	}
}

func (r *runRec) over() bool {
	r.t.mu.Lock()
	defer r.t.mu.Unlock()
	return r.ended
}

// activeRun returns job's active run, or nil.
func (t *tracker) activeRun(job string) *runRec {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.active[job]
}

// claimed records the claim token inst's claim of job took.
func (t *tracker) claimed(inst *actor, job, token string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.claims[claimOf{inst, job}] = token
	t.claimAt[claimOf{inst, job}] = time.Now()
	t.claimedN[job]++
}

// claimedCount returns how many claims of job landed.
func (t *tracker) claimedCount(job string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.claimedN[job]
}

func instName(a *actor) string {
	if a == nil {
		return "?"
	}
	return a.name
}

// tally is a concurrent map of what the follow-up and completion kinds saw.
type tally[V any] struct {
	mu sync.Mutex
	m  map[string][]V
}

func (t *tally[V]) add(k string, v V) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string][]V{}
	}
	t.m[k] = append(t.m[k], v)
}

func (t *tally[V]) get(k string) []V {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[k]
}
