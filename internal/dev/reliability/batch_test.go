package reliability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/faultproxy"
	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// TestBatchUnderThrottlesAndLostAnswers runs one big batch through the
// whole local stack while the fault proxy throttles 5% of DynamoDB's
// requests and loses the answer of 3% (the write happened; the caller
// retries it): every job's count in its batch is a post-outcome step, an
// add to a set, which a retried or repeated count must not count twice.
// Every job's stored outcome must be its handler's outcome, the batch's
// counts exact, and the batch must end once.
func TestBatchUnderThrottlesAndLostAnswers(t *testing.T) {
	ctx := context.Background()
	ddbP := testenv.StartDynamoDB(t, ctx, localaws.Options{Root: root})
	ddbFaults, err := faultproxy.StartHTTP(ddbP.Endpoint, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ddbFaults.Close)
	const workerTimeout, grace, sweepEvery = 10 * time.Second, 15 * time.Second, 2 * time.Second
	stack, logs := testenv.StartStack(t, ctx, localstack.Config{
		Root: root, Bootstraps: bootstraps, RIE: rie, APIAddr: "127.0.0.1:0", SQSPort: 0,
		DynamoDBEndpoint: ddbFaults.URL(),
		Table:            "batchfaults", Queue: "batchfaults", WorkerTimeout: workerTimeout, WorkerInstances: 2, BatchSize: 10,
		SweepEvery: sweepEvery, FunctionEnv: []string{"JOBS_DISPATCH_GRACE=" + grace.String()},
	})
	ddbFaults.SetFaults(faultproxy.Faults{Throttle: 0.05, LostResponse: 0.03})

	n := size(200, 1000)
	var specs []jobs.JobSpec
	wantFailed := 0
	for i := range n {
		if i%10 == 3 {
			specs = append(specs, jobs.JobSpec{Kind: "example.fail", Payload: json.RawMessage(`{"mode":"declared","secret":"s"}`)})
			wantFailed++
			continue
		}
		specs = append(specs, jobs.JobSpec{Kind: "example.hash", Payload: json.RawMessage(fmt.Sprintf(`{"text":"b%d","rounds":1}`, i))})
	}
	body, _ := json.Marshal(map[string]any{"jobs": specs, "completion": jobs.JobSpec{Kind: "example.hash", Payload: json.RawMessage(`{"text":"done","rounds":1}`)}})
	var batch jobs.Batch
	start := time.Now()
	for attempt := 1; ; attempt++ {
		req, _ := http.NewRequest("POST", stack.APIURL+"/v1/batches", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "big-batch")
		req.Header.Set(localstack.CallerHeader, "reliability")
		resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 202 || resp.StatusCode == 200 {
				if err := json.Unmarshal(b, &batch); err != nil {
					t.Fatal(err)
				}
				break
			}
			err = fmt.Errorf("%d %s", resp.StatusCode, b)
		}
		if attempt == 10 {
			t.Fatalf("POST /v1/batches: %v", err)
		}
	}
	visibility := sqsqueue.SpecFor(workerTimeout, 0).VisibilityTimeout
	bound := (time.Since(start) + 2*(visibility+grace+sweepEvery)).Round(time.Second)
	store := dynamostore.New(localaws.DynamoDBClient(ddbP.Endpoint), "batchfaults", dynamostore.Config{})
	deadline := time.Now().Add(bound)
	var b *driver.Batch
	for {
		b, err = store.GetBatch(ctx, batch.ID)
		if err == nil && b.Status.Final() {
			if b, err = store.CountBatch(ctx, b); err != nil {
				t.Fatal(err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("batch %+v %v: not ended within %v", b, err, bound)
		}
		time.Sleep(500 * time.Millisecond)
	}
	settled := time.Since(start)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = wire.BatchJobID(batch.ID, i)
	}
	got := settle(t, store, ids, 10*time.Second)
	lost, stuck, wrong := 0, 0, 0
	for i, id := range ids {
		rec, ok := got[id]
		switch {
		case !ok:
			lost++
		case !rec.Status.Final():
			stuck++
		case specs[i].Kind == "example.fail" && (rec.Status != jobs.StatusFailed || rec.ErrorCode != "example_failed"),
			specs[i].Kind == "example.hash" && rec.Status != jobs.StatusSucceeded:
			wrong++
			if wrong <= 5 {
				t.Errorf("job %d (%s) ended %s %q, not its handler's outcome; its log lines:\n%s", i, specs[i].Kind, rec.Status, rec.ErrorCode, linesNaming(logs, id))
			}
		}
	}
	if lost+stuck+wrong > 0 {
		t.Errorf("%d lost, %d stuck, %d with another outcome than their handler's", lost, stuck, wrong)
	}
	if b.Total != n || b.Succeeded != n-wantFailed || b.Failed != wantFailed || b.Cancelled != 0 || b.Remaining != 0 || b.Status != jobs.StatusFailed {
		t.Errorf("batch counts %+v, want %d succeeded and %d failed exactly", b, n-wantFailed, wantFailed)
	}
	ended := strings.Count(logs.String(), `"message":"batch ended"`)
	if ended != 1 {
		t.Errorf("the batch's end was recorded %d times, want once", ended)
	}
	if c, err := store.Get(ctx, wire.DerivedID("batch-completion", batch.ID)); err != nil || c.BatchCounts == nil || c.BatchCounts.Succeeded != n-wantFailed {
		t.Errorf("completion job %+v %v, want it with the exact counts", c, err)
	}
	st := ddbFaults.Stats()
	if st.Throttled == 0 || st.LostResponses == 0 {
		t.Fatalf("no request was throttled or lost its answer (%+v): the scenario tested nothing", st)
	}
	t.Logf("%d jobs: of %d DynamoDB requests %d throttled, %d answers lost; batch ended once after %v (bound %v)",
		n, st.Requests, st.Throttled, st.LostResponses, settled, bound)
	record(row{
		Scenario: "batch", Load: fmt.Sprintf("one batch of %d jobs over HTTP (9 in 10 succeed, 1 in 10 fails with a declared code), 2 workers", n),
		Faults: fmt.Sprintf("of %d DynamoDB requests, %d throttled (5%%) and %d answers lost (3%%) by the proxy",
			st.Requests, st.Throttled, st.LostResponses),
		Lost: lost, Stuck: stuck + wrong, MaxSettle: settled, Bound: bound,
		Notes: fmt.Sprintf("every job ended with its handler's outcome; batch counts exact (%d succeeded, %d failed); the batch ended once and its completion job got the exact counts",
			b.Succeeded, b.Failed),
	})
}

// linesNaming is the stack's log lines that name id (no handler text is
// ever logged), to tell why a job ended as it did.
func linesNaming(logs *testenv.SyncBuffer, id string) string {
	var out []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, id) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
