package reliability_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/faultproxy"
	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
)

// TestLongRunThroughContinuationsAndKills runs example.export in the long
// lane, work three times longer than its worker's timeout, through the
// whole local stack. Untouched, it goes on through continuations and ends
// succeeded on its first attempt with no chunk processed twice. Then
// another export's worker is SIGKILLed at five random points, one of them
// while a checkpoint write is on the wire: each time the run is
// interrupted one heartbeat lease after the kill (the dispatch grace is
// two minutes: it is not what finds the run), retried, and resumed from
// its last landed checkpoint, read from DynamoDB as the retry claims the
// job: the chunks run after each kill start at that checkpoint, so no
// chunk whose checkpoint landed runs again, and the only chunk run again
// is the one whose checkpoint had not landed when the worker died.
func TestLongRunThroughContinuationsAndKills(t *testing.T) {
	ctx := context.Background()
	ddbP := testenv.StartDynamoDB(t, ctx, localaws.Options{Root: root})
	proxy, err := faultproxy.StartHTTP(ddbP.Endpoint, 7)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	const workerTimeout, grace, sweepEvery = 5 * time.Second, 2 * time.Minute, time.Second
	lease := examplekinds.ExportOpts.Heartbeat
	dir := t.TempDir()
	// A payload key of the test's own: it opens the stored checkpoints.
	key := bytes.Repeat([]byte{7}, 32)
	sealer, err := jobs.NewAESSealer(key)
	if err != nil {
		t.Fatal(err)
	}
	stack, _ := testenv.StartStack(t, ctx, localstack.Config{
		Root: root, Bootstraps: bootstraps, RIE: rie, APIAddr: "127.0.0.1:0", SQSPort: 0,
		DynamoDBEndpoint: proxy.URL(), Table: "longrun", Queue: "longrun", WorkerTimeout: workerTimeout, WorkerInstances: 1,
		// example.export runs in the long lane, on its own worker.
		LaneTimeouts: map[string]time.Duration{examplekinds.ExportLane: workerTimeout},
		SweepEvery:   sweepEvery,
		FunctionEnv: []string{"JOBS_DISPATCH_GRACE=" + grace.String(), "JOBS_HANDLER_RESERVE=1s", "JOBS_FINAL_WRITE_TIMEOUT=500ms",
			"JOBS_PAYLOAD_KEY=" + base64.StdEncoding.EncodeToString(key), examplekinds.ExportDirEnv + "=" + dir},
	})
	worker := stack.LaneWorker(examplekinds.ExportLane)
	if worker == nil {
		t.Fatalf("lanes %v: no %s lane worker", stack.Lanes, examplekinds.ExportLane)
	}
	store := dynamostore.New(localaws.DynamoDBClient(ddbP.Endpoint), "longrun", dynamostore.Config{})
	c := &client{api: stack.APIURL, http: &http.Client{Timeout: 10 * time.Second}}
	const chunkMS = 200

	// 1. Untouched: three worker timeouts of work, through continuations.
	chunks := int(3*workerTimeout/time.Millisecond/chunkMS) + 10
	quiet, _, err := c.enqueue(examplekinds.Export, fmt.Sprintf(`{"chunks":%d,"chunk_ms":%d}`, chunks, chunkMS), "quiet")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rec := settle(t, store, []string{quiet}, 3*time.Duration(chunks)*chunkMS*time.Millisecond+30*time.Second)[quiet]
	took := time.Since(start)
	if rec == nil || rec.Status != jobs.StatusSucceeded || rec.Attempt != 1 || rec.Continuations < 3 || rec.Lane != examplekinds.ExportLane {
		t.Fatalf("the untouched export: %+v, want succeeded on attempt 1 through 3 or more continuations, in the %s lane", rec, examplekinds.ExportLane)
	}
	if again := againFiles(t, dir, quiet); len(again) > 0 || countFiles(t, dir, quiet) != chunks {
		t.Fatalf("the untouched export processed chunks %v twice, or not %d chunks", again, chunks)
	}
	t.Logf("untouched: %d chunks of %d ms in %v (%.1fx the long lane worker's timeout), %d continuations, attempt %d",
		chunks, chunkMS, took.Round(100*time.Millisecond), took.Seconds()/workerTimeout.Seconds(), rec.Continuations, rec.Attempt)

	// 2. Killed five times.
	const kills = 5
	victim, _, err := c.enqueue(examplekinds.Export, fmt.Sprintf(`{"chunks":%d,"chunk_ms":%d}`, 100, chunkMS), "victim")
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("kill points from seed %d", seed)
	duringWrite := rng.IntN(kills)
	var worst time.Duration
	// At each kill: the chunk files written by then, and the checkpoint
	// the next run resumes from (the last that landed).
	done := make([]map[string]bool, kills)
	landed := make([]int, kills)
	for k := range kills {
		run := waitRunning(t, store, victim, 20*time.Second)
		if k == duringWrite {
			killDuringCheckpoint(t, proxy, worker, victim)
		} else {
			// A random point: after 1 to 8 more chunks of this run.
			target := checkpointOf(t, sealer, store, victim) + 1 + rng.IntN(8)
			for checkpointOf(t, sealer, store, victim) < target && time.Since(run.StartedAt) < workerTimeout {
				time.Sleep(20 * time.Millisecond)
			}
			worker.Kill()
		}
		killed := time.Now()
		done[k] = chunkFiles(t, dir, victim)
		next := waitNextRun(t, store, victim, run.Attempt, 3*lease+10*time.Second)
		resumed := time.Since(killed)
		// Read as the retry claimed the job, before its first chunk (200
		// ms) could checkpoint: what it resumes from.
		landed[k] = openCheckpoint(t, sealer, next)
		worst = max(worst, resumed)
		// One lease (from the last heartbeat, before the kill), a sweep,
		// the retry's backoff, a worker's restart and a claim.
		if bound := lease + 2*sweepEvery + 4*time.Second; resumed > bound {
			t.Errorf("kill %d: the run resumed %v after it, over the %v bound (a lease, not the %v grace)", k+1, resumed, bound, grace)
		}
		t.Logf("kill %d%s: resumed %v later as attempt %d from the checkpoint at chunk %d, %d chunks done", k+1, map[bool]string{true: " (during a checkpoint write)"}[k == duringWrite],
			resumed.Round(10*time.Millisecond), next.Attempt, landed[k], len(done[k]))
	}
	rec = settle(t, store, []string{victim}, 60*time.Second)[victim]
	if rec == nil || rec.Status != jobs.StatusSucceeded || rec.Attempt != kills+1 {
		t.Fatalf("the killed export: %+v, want succeeded on attempt %d", rec, kills+1)
	}
	// After each kill, the chunks run until the next kill (or the end):
	// they start at the checkpoint that landed, so none before it ran
	// again; the chunks run again are those done after it, at most the
	// one whose checkpoint was on its way when the worker died.
	final := chunkFiles(t, dir, victim)
	for k := range kills {
		until := final
		if k+1 < kills {
			until = done[k+1]
		}
		first, again := -1, 0
		for f := range until {
			if done[k][f] {
				continue
			}
			c := chunkOf(f)
			if c < landed[k] {
				t.Errorf("kill %d: chunk %d ran again (%s), though the checkpoint at %d had landed", k+1, c, f, landed[k])
			}
			if first < 0 || c < first {
				first = c
			}
			if strings.Contains(f, ".again-") {
				again++
			}
		}
		ran := countDone(done[k])
		if k == duringWrite && ran-landed[k] != 1 {
			t.Errorf("kill %d, its checkpoint write dropped: %d chunks done and the checkpoint at %d, want the last chunk's checkpoint lost", k+1, ran, landed[k])
		}
		if first != landed[k] || ran-landed[k] > 1 || again != ran-landed[k] {
			t.Errorf("kill %d: %d chunks done, checkpoint at %d landed; the next runs began at chunk %d and ran %d again: want them to begin at the checkpoint and run again only the chunks after it (at most the one in flight)",
				k+1, ran, landed[k], first, again)
		}
	}
	again := againFiles(t, dir, victim)
	if countFiles(t, dir, victim) != 100 {
		t.Errorf("the killed export wrote %d distinct chunks, want 100", countFiles(t, dir, victim))
	}
	record(row{
		Scenario: "long", Load: fmt.Sprintf("example.export in the long lane: %d chunks of %d ms (%.1fx its worker's %v timeout) untouched, then 100 chunks with kills",
			chunks, chunkMS, took.Seconds()/workerTimeout.Seconds(), workerTimeout),
		Faults: fmt.Sprintf("SIGKILL to the long lane's worker %d times at random points, one while a checkpoint write was held on the wire", kills),
		Lost:   0, Stuck: 0, MaxSettle: worst, Bound: lease + 2*sweepEvery + 4*time.Second,
		Notes: fmt.Sprintf("untouched: succeeded on attempt 1 through %d continuations, no chunk twice; killed: resumed from its last landed checkpoint each time (read from DynamoDB), no chunk before it run again, %d chunks run again (their checkpoint had not landed)",
			rec.Continuations, len(again)),
	})
}

// waitRunning waits until the job runs and returns it.
func waitRunning(t *testing.T, store *dynamostore.Store, id string, within time.Duration) *driver.Record {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if rec, err := store.Get(context.Background(), id); err == nil && rec.Status == jobs.StatusRunning {
			return rec
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("job %s never ran within %v", id, within)
	return nil
}

// waitNextRun waits for a run of the job after attempt: a retry's claim.
func waitNextRun(t *testing.T, store *dynamostore.Store, id string, attempt int, within time.Duration) *driver.Record {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if rec, err := store.Get(context.Background(), id); err == nil && rec.Status == jobs.StatusRunning && rec.Attempt > attempt {
			return rec
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("job %s: no run after attempt %d within %v", id, attempt, within)
	return nil
}

// checkpointOf is the job's stored checkpoint: the next chunk to do.
func checkpointOf(t *testing.T, sealer jobs.Sealer, store *dynamostore.Store, id string) int {
	rec, err := store.Get(context.Background(), id)
	if err != nil {
		return 0
	}
	return openCheckpoint(t, sealer, rec)
}

// openCheckpoint opens rec's sealed checkpoint, as the worker does (bound
// to its job: pkg/jobs' checkpointAAD), and returns its next chunk (0:
// none yet).
func openCheckpoint(t *testing.T, sealer jobs.Sealer, rec *driver.Record) int {
	t.Helper()
	if len(rec.Checkpoint) == 0 {
		return 0
	}
	raw, err := sealer.Open(string(rec.Checkpoint), []byte(rec.ID+"\x00checkpoint"))
	if err != nil {
		t.Fatalf("job %s: its checkpoint does not open: %v", rec.ID, err)
	}
	var st examplekinds.ExportState
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatalf("job %s: checkpoint %s: %v", rec.ID, raw, err)
	}
	return st.Next
}

// killDuringCheckpoint holds the job's next checkpoint write on the wire,
// kills the worker while it is held, then drops it: the write never
// reaches DynamoDB, as one whose worker died before it arrived, so the
// chunk it checkpointed must run again.
func killDuringCheckpoint(t *testing.T, proxy *faultproxy.HTTPProxy, worker *localstack.Function, id string) {
	t.Helper()
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	proxy.SetHold(func(target string, body []byte) bool {
		// A Job.Checkpoint write (a continuation's requeue, which also
		// stores one, sets the job queued).
		if target != "DynamoDB_20120810.UpdateItem" || !bytes.Contains(body, []byte(id)) || !bytes.Contains(body, []byte(`"cp"`)) ||
			bytes.Contains(body, []byte(`"queued"`)) {
			return true
		}
		first := false
		once.Do(func() { close(held); first = true })
		<-release
		return !first
	})
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("no checkpoint write was held")
	}
	worker.Kill()
	proxy.SetHold(nil)
	close(release)
}

func countFiles(t *testing.T, dir, id string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), id+"-") && !strings.Contains(e.Name(), ".again-") {
			n++
		}
	}
	return n
}

func againFiles(t *testing.T, dir, id string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), id+"-") && strings.Contains(e.Name(), ".again-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// chunkFiles is the set of the chunk files of job id in dir.
func chunkFiles(t *testing.T, dir, id string) map[string]bool {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), id+"-") {
			out[e.Name()] = true
		}
	}
	return out
}

// chunkOf is the chunk a file is of: <id>-<chunk>[.again-<n>].
func chunkOf(name string) int {
	name, _, _ = strings.Cut(name, ".again-")
	n, _ := strconv.Atoi(name[strings.LastIndexByte(name, '-')+1:])
	return n
}

// countDone is how many distinct chunks files holds.
func countDone(files map[string]bool) int {
	n := 0
	for f := range files {
		if !strings.Contains(f, ".again-") {
			n++
		}
	}
	return n
}
