package simulation

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var (
	seedFlag       = flag.Uint64("seed", 0, "replay this one seed, printing its trace")
	seedsFlag      = flag.Int("seeds", 2000, "how many seeds TestSimulation runs")
	firstFlag      = flag.Uint64("first", 1, "the first seed TestSimulation runs")
	plantFlag      = flag.Int("plant", 0, "plant a defect: every Nth final write drops its claim-token condition")
	reportFlag     = flag.String("report", "", "write the run's figures (markdown) to this file")
	strictNetsFlag = flag.Bool("strict-nets", false, "fail a job stranded in a dead-letter queue that no sweep drains")
)

// TestSimulation runs many seeds of the whole system with faults at every
// call and checks every invariant. A violation fails the test with its
// trace's tail and the command that replays it.
func TestSimulation(t *testing.T) {
	seeds := make([]uint64, 0, *seedsFlag)
	if *seedFlag != 0 {
		seeds = append(seeds, *seedFlag)
	} else {
		for i := range *seedsFlag {
			seeds = append(seeds, *firstFlag+uint64(i))
		}
	}
	var (
		mu       sync.Mutex
		coverage = map[string]int{}
		steps    int
		jobs     int
		failed   []uint64
	)
	began := time.Now()
	// The group returns once every parallel seed has ended.
	t.Run("seeds", func(t *testing.T) {
		for _, seed := range seeds {
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				res := Run(t, seed, Options{PlantEvery: *plantFlag, StrictNets: *strictNetsFlag})
				mu.Lock()
				for k, v := range res.Coverage {
					coverage[k] += v
				}
				steps += res.Steps
				jobs += res.Jobs
				if len(res.Violations) > 0 {
					failed = append(failed, seed)
				}
				mu.Unlock()
				if *seedFlag != 0 {
					t.Log("trace:\n" + strings.Join(res.Trace, "\n"))
					t.Logf("violations: %q", res.Violations)
				}
				if len(res.Violations) > 0 {
					tail := res.Trace[max(0, len(res.Trace)-40):]
					t.Errorf("seed %d: %d violations:\n  %s\ntrace tail:\n%s\nreplay: go test ./internal/dev/simulation -run 'TestSimulation$' -seed %d -v",
						seed, len(res.Violations), strings.Join(res.Violations, "\n  "), strings.Join(tail, "\n"), seed)
				}
			})
		}
	})
	took := time.Since(began)
	t.Logf("%d seeds, %d jobs, %d scheduled calls in %v", len(seeds), jobs, steps, took.Round(time.Millisecond))
	t.Log("coverage:\n" + coverageTable(coverage))
	slices.Sort(failed)
	t.Logf("failing seeds: %v", failed)
	if *seedFlag != 0 || *firstFlag != 1 || len(seeds) < 2000 {
		return // a replay or a partial run: the coverage below needs the full set
	}
	for _, want := range coverageWanted {
		if coverage[want] == 0 {
			t.Errorf("coverage: %q never fired in %d seeds", want, len(seeds))
		}
	}
	if *reportFlag != "" {
		report := fmt.Sprintf("# Simulator figures\n\nWritten by `make simulate SEEDS=%d`: %d seeds, %d jobs, %d scheduled calls in %v (`go test -race`, 2 cores); failing seeds: %v.\n\nWhat fired, summed over the seeds:\n\n```\n%s```\n",
			len(seeds), len(seeds), jobs, steps, took.Round(time.Second), failed, coverageTable(coverage))
		if err := os.WriteFile(*reportFlag, []byte(report), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// coverageWanted is every fault and mechanism that must fire in the
// default seeds.
var coverageWanted = []string{
	"fault: " + faultThrottle, "fault: " + faultConflict, "fault: " + faultLost, "fault: " + faultSlow, "fault: " + faultStall,
	"fault: kill", "fault: " + faultKillDone, "fault: duplicate delivery", "fault: duplicate in one batch",
	"fault: EventBridge outage", "fault: PutEvents entry refused",
	"sqs: dead-lettered", "sqs: stale receipt handle",
	"mechanism: cold start", "mechanism: sweep interrupt", "mechanism: sweep re-send", "mechanism: sweep post-outcome steps",
	"mechanism: sweep settles a dead letter",
	"mechanism: run " + kindPlain, "mechanism: run " + kindLimited, "mechanism: run " + kindRated, "mechanism: run " + kindUnique,
	"mechanism: run " + kindBulk, "mechanism: run " + kindLong, "mechanism: run " + kindFollowUp, "mechanism: run " + kindComplete,
	"mechanism: run " + kindAdded, "mechanism: deploy replaced an instance", "mechanism: waits on kind",
	"mechanism: waits on rate", "mechanism: waits on concurrency",
	"client: enqueue within a rate", "client: enqueue over a rate (refused)",
	"call: Heartbeat", "call: Checkpoint", "call: Requeue", "call: AcquireSlot", "call: PopWaiter", "call: TakeToken", "call: ClaimUnique",
	"call: Debounce", "call: AddDependent", "call: CountParents", "call: CountInBatch", "call: EndBatch", "call: RequestCancel",
	"call: CancelQueued", "call: Resubmit", "call: PutEvents",
	// Message first: a failed send on each path leaves its job a net
	// (checked after every call), a hidden duplicate, a duplicate and then
	// a killed run within the dead-worker bound, the dead-letter drain,
	// foreign messages and fires, a seed without a sweeper.
	"sqs: sent before its job was stored", "sqs: hidden until the run's lease ends", "sqs: stale receipt handle (hide)",
	"send failed: enqueue or batch (stored with sweep entries)", "send failed: retry (the held message comes back)",
	"send failed: continuation (the held message comes back)", "send failed: hand-back (the message comes back)",
	"send failed: early delivery (the message comes back)",
	"send failed: job made from a foreign message or a fire (the message comes back)",
	"fault: delivered again during its run, then its worker killed", "mechanism: a killed run's job left it within the dead-worker bound",
	"fault: invocation throttled", "invariant: a dead letter the drain settles is a job's only net",
	"dlq: a foreign dead letter stayed", "dlq: a never-claimed job's dead letter was re-sent and it ran",
	"foreign: envelope " + kindPlain, "foreign: envelope " + kindBulk, "foreign: fire", "foreign: unroutable",
	"mechanism: sweeper off",
	"client: enqueue delayed", "client: enqueue dependent", "client: batch", "client: cancel", "client: retry", "client: replay",
	"client: cancel then retry", "client: retry after cancel",
	// Payloads in items of their own: read at the claim, late at times.
	"mechanism: payload apart", "call: ReadPart payload", "fault: payload late", "mechanism: waits on store",
	"mechanism: checkpoint apart", "mechanism: signal apart", "mechanism: child invoked: succeeded", "mechanism: child invoked: failed", "invariant: a cancelled parent's child was cancelled",
	"mechanism: map answered: all succeeded", "mechanism: map answered: a child failed", "mechanism: map: a wave half made by a run that died, finished by the next", "invariant: a cancelled parent's mapped child was cancelled", "mechanism: a woken job was claimed within the wake bound", "call: ReadPart checkpoint", "mechanism: result apart",
	// The S3 tier: parts kept as objects, shown by size and linked.
	"mechanism: part as an object",
	// Pauses racing enqueues, claims, slot releases and cancels.
	"operator: pause a kind", "operator: pause a lane", "operator: pause an owner's jobs of a kind", "operator: resume a kind",
	"operator: pause a schedule", "operator: resume a schedule",
	"call: Pauses", "call: SetPause", "call: RemovePause", "mechanism: waits on paused", "mechanism: pause held a delivery",
	// Durable steps, run once and read back by later runs, under the faults.
	"client: enqueue steps", "mechanism: step ran", "mechanism: step read back from an earlier run", "mechanism: step not stored (a fault)",
	// Signals, before a wait, while it waits, after its timeout, again.
	"call: Signal", "client: signal woke its job", "client: signal kept for a later wait", "client: signal (duplicate)",
	"mechanism: signal received", "mechanism: signal timed out",
	"client: callback token delivered its signal", "client: callback token expired", "client: callback token used",
	// Children started by their parents' handlers, by name, under the faults.
	"client: enqueue parent", "mechanism: child started", "mechanism: child found by its name again",
	"mechanism: child not started (a fault)", "invariant: a parent's children: one per name",
	// Tags: listed in pages and cancelled in bulk, under the faults.
	"tags: enqueue", "tags: list a page by tag", "tags: bulk cancel a page by tag", "call: List",
	"invariant: a listing by tag gave exactly the tagged jobs", "invariant: a bulk cancel by tag cancelled its jobs and no other",
}

// TestFindsAPlantedDefect plants a defect in the store (one in 50 claims
// that find their job running take it over anyway) and runs the default
// seeds until one finds it: the invariants catch a real defect within the
// budget of make test.
func TestFindsAPlantedDefect(t *testing.T) {
	began := time.Now()
	for seed := uint64(1); seed <= 2000; seed++ {
		res := Run(t, seed, Options{PlantClaimEvery: 50})
		if len(res.Violations) > 0 {
			t.Logf("seed %d found it after %v: %s (planted %d times)", seed, time.Since(began).Round(time.Millisecond), res.Violations[0], res.Coverage["planted: claim of a running job"])
			return
		}
	}
	t.Fatal("no seed of 2,000 found the planted defect")
}

// TestSeedsReplayIdentically runs 100 seeds twice: each trace must be the
// same, byte for byte.
func TestSeedsReplayIdentically(t *testing.T) {
	for seed := uint64(1); seed <= 100; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			a := strings.Join(Run(t, seed, Options{}).Trace, "\n")
			b := strings.Join(Run(t, seed, Options{}).Trace, "\n")
			if a != b {
				la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
				for i := range min(len(la), len(lb)) {
					if la[i] != lb[i] {
						t.Fatalf("seed %d: the traces differ at line %d:\n  %s\n  %s", seed, i+1, la[i], lb[i])
					}
				}
				t.Fatalf("seed %d: the traces differ in length: %d and %d lines", seed, len(la), len(lb))
			}
		})
	}
}

func coverageTable(c map[string]int) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-66s %8d\n", k, c[k])
	}
	return b.String()
}

func TestMain(m *testing.M) {
	flag.Parse()
	goleak.VerifyTestMain(m)
}

// TestNetsCatchALostMessage plants a defect in the event source (one in
// 5 messages its invocation listed as failures is deleted anyway) and runs
// message-first seeds until one finds it: a job left queued or running
// with neither a message nor a sweep entry is reported at the step that
// lost it, not only when it fails to end hours later.
func TestNetsCatchALostMessage(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		res := Run(t, seed, Options{PlantDropEvery: 5, MessageFirst: true})
		for _, v := range res.Violations {
			if strings.Contains(v, "no message on a queue and no sweep entry") {
				t.Logf("seed %d found it: %s (planted %d times)", seed, v, res.Coverage["planted: a failed message deleted"])
				return
			}
		}
	}
	t.Fatal("no seed of 300 found a job without a net")
}

// TestDeadRunBoundCatchesALongHide plants a defect in SQS (a hidden
// duplicate stays hidden an hour, whatever the worker asked) and runs
// seeds until one finds it: a killed run's job that its duplicate's
// redelivery would have ended stays running past the dead-worker bound.
func TestDeadRunBoundCatchesALongHide(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		res := Run(t, seed, Options{PlantHideFor: time.Hour, MessageFirst: true})
		for _, v := range res.Violations {
			if strings.Contains(v, "under its dead run") {
				t.Logf("seed %d found it: %s", seed, v)
				return
			}
		}
	}
	t.Fatal("no seed of 300 found a dead run past its bound")
}
