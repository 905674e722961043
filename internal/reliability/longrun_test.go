package reliability_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/internal/faultproxy"
	"github.com/lambdajobs/lambdajobs/internal/localaws"
	"github.com/lambdajobs/lambdajobs/internal/localstack"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
)

// TestLongRunThroughContinuationsAndKills runs example.export, work three
// times longer than the worker's timeout, through the whole local stack.
// Untouched, it goes on through continuations and ends succeeded on its
// first attempt with no chunk processed twice. Then another export's
// worker is SIGKILLed at five random points, one of them while a
// checkpoint write is on the wire: each time the run is interrupted one
// heartbeat lease after the kill (the dispatch grace is two minutes: it is
// not what finds the run), retried, and resumed from its last landed
// checkpoint, so a chunk runs again only when its checkpoint never landed:
// at most one per kill.
func TestLongRunThroughContinuationsAndKills(t *testing.T) {
	ctx := context.Background()
	ddbP, err := localaws.StartDynamoDB(ctx, localaws.Options{Root: root})
	if err != nil {
		t.Fatal(err)
	}
	defer ddbP.Stop()
	proxy, err := faultproxy.StartHTTP(ddbP.Endpoint, 7)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	const workerTimeout, grace, sweepEvery = 5 * time.Second, 2 * time.Minute, time.Second
	lease := examplekinds.ExportOpts.Heartbeat
	dir := t.TempDir()
	var buf bytes.Buffer
	logs := syncWriter{w: &buf}
	stack, err := localstack.Start(ctx, localstack.Config{
		Root: root, Bootstraps: bootstraps, RIE: rie, APIAddr: "127.0.0.1:0", SQSPort: 0,
		DynamoDBEndpoint: proxy.URL(), Table: "longrun", Queue: "longrun", WorkerTimeout: workerTimeout, WorkerInstances: 1,
		SweepEvery: sweepEvery, Output: &logs,
		FunctionEnv: []string{"JOBS_DISPATCH_GRACE=" + grace.String(), "JOBS_HANDLER_RESERVE=1s", "JOBS_FINAL_WRITE_TIMEOUT=500ms",
			examplekinds.ExportDirEnv + "=" + dir},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stack.Stop()
	defer func() {
		if t.Failed() {
			logs.mu.Lock()
			t.Logf("stack output:\n%s", buf.String())
			logs.mu.Unlock()
		}
	}()
	store := dynamostore.New(localaws.DynamoDBClient(ddbP.Endpoint), "longrun", dynamostore.Options{})
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
	if rec == nil || rec.Status != jobs.StatusSucceeded || rec.Attempt != 1 || rec.Continuations < 3 {
		t.Fatalf("the untouched export: %+v, want succeeded on attempt 1 through 3 or more continuations", rec)
	}
	if again := againFiles(t, dir, quiet); len(again) > 0 || countFiles(t, dir, quiet) != chunks {
		t.Fatalf("the untouched export processed chunks %v twice, or not %d chunks", again, chunks)
	}
	t.Logf("untouched: %d chunks of %d ms in %v (%.1fx the worker's timeout), %d continuations, attempt %d",
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
	for k := range kills {
		run := waitRunning(t, store, victim, 20*time.Second)
		if k == duringWrite {
			killDuringCheckpoint(t, proxy, stack, victim)
		} else {
			// A random point: after 1 to 8 more chunks of this run.
			target := checkpointOf(t, store, victim) + 1 + rng.IntN(8)
			for checkpointOf(t, store, victim) < target && time.Since(run.StartedAt) < workerTimeout {
				time.Sleep(20 * time.Millisecond)
			}
			stack.Workers()[0].Kill()
		}
		killed := time.Now()
		next := waitNextRun(t, store, victim, run.Attempt, 3*lease+10*time.Second)
		resumed := time.Since(killed)
		worst = max(worst, resumed)
		// One lease (from the last heartbeat, before the kill), a sweep,
		// the retry's backoff, a worker's restart and a claim.
		if bound := lease + 2*sweepEvery + 4*time.Second; resumed > bound {
			t.Errorf("kill %d: the run resumed %v after it, over the %v bound (a lease, not the %v grace)", k+1, resumed, bound, grace)
		}
		t.Logf("kill %d%s: resumed %v later as attempt %d", k+1, map[bool]string{true: " (during a checkpoint write)"}[k == duringWrite],
			resumed.Round(10*time.Millisecond), next.Attempt)
	}
	rec = settle(t, store, []string{victim}, 60*time.Second)[victim]
	if rec == nil || rec.Status != jobs.StatusSucceeded || rec.Attempt != kills+1 {
		t.Fatalf("the killed export: %+v, want succeeded on attempt %d", rec, kills+1)
	}
	again := againFiles(t, dir, victim)
	if len(again) > kills {
		t.Errorf("chunks processed again: %v, more than one per kill (a chunk whose checkpoint landed ran again)", again)
	}
	record(row{
		Scenario: "long", Load: fmt.Sprintf("example.export: %d chunks of %d ms (%.1fx the worker's %v timeout) untouched, then 100 chunks with kills",
			chunks, chunkMS, took.Seconds()/workerTimeout.Seconds(), workerTimeout),
		Faults: fmt.Sprintf("SIGKILL to the worker %d times at random points, one while a checkpoint write was held on the wire", kills),
		Lost:   0, Stuck: 0, MaxSettle: worst, Bound: lease + 2*sweepEvery + 4*time.Second,
		Notes: fmt.Sprintf("untouched: succeeded on attempt 1 through %d continuations, no chunk twice; killed: resumed from its last checkpoint each time, %d chunks run again (their checkpoint had not landed)",
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

// checkpointOf is the job's published progress: its chunks done.
func checkpointOf(t *testing.T, store *dynamostore.Store, id string) int {
	rec, err := store.Get(context.Background(), id)
	if err != nil || len(rec.Result) == 0 {
		return 0
	}
	var done int
	_, _ = fmt.Sscanf(strings.TrimPrefix(string(rec.Result), `{"done":`), "%d", &done)
	return done
}

// killDuringCheckpoint holds the job's next checkpoint write on the wire,
// kills the worker while it is held, then lets it go.
func killDuringCheckpoint(t *testing.T, proxy *faultproxy.HTTPProxy, stack *localstack.Stack, id string) {
	t.Helper()
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	proxy.SetHold(func(target string, body []byte) {
		if target != "DynamoDB_20120810.UpdateItem" || !bytes.Contains(body, []byte(id)) || !bytes.Contains(body, []byte(`"cp"`)) {
			return
		}
		once.Do(func() { close(held) })
		<-release
	})
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("no checkpoint write was held")
	}
	stack.Workers()[0].Kill()
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
