package reliability_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/internal/localaws"
	"github.com/lambdajobs/lambdajobs/internal/localstack"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
)

// urgentBound is how soon an urgent job must start behind a bulk backlog
// (docs/LANES.md, docs/BENCHMARKS.md).
const urgentBound = 5 * time.Second

// TestUrgentStartsBehindBulkBacklog: with 2,000 bulk jobs queued in the
// bulk lane (example.hold_bulk, 100 ms each) and its worker busy with
// them, an urgent job (example.hold_urgent) starts within urgentBound of
// its enqueue, while the bulk backlog is still there: the urgent lane is
// its own queue, worker and event source. Without lanes it would wait
// behind the 2,000 (about 40 s of work for this worker).
func TestUrgentStartsBehindBulkBacklog(t *testing.T) {
	ctx := context.Background()
	var buf bytes.Buffer
	logs := syncWriter{w: &buf}
	stack, err := localstack.Start(ctx, localstack.Config{
		Root: root, Bootstraps: bootstraps, RIE: rie, APIAddr: "127.0.0.1:0", DynamoDBPort: 0, SQSPort: 0,
		Table: "lanes", Queue: "lanes", WorkerInstances: 1, BatchSize: 10, StartPaused: true, Output: &logs,
		FunctionEnv: []string{"JOBS_WORKER_CONCURRENCY=10"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer stack.Stop()
	defer func() {
		if t.Failed() {
			logs.mu.Lock()
			t.Logf("stack output (last 20 KB):\n%s", tail(buf.String(), 20000))
			logs.mu.Unlock()
		}
	}()
	bulk, urgent := stack.Lanes["bulk"], stack.Lanes["urgent"]
	if bulk.Queue == "" || urgent.Queue == "" || stack.LaneWorker("bulk") == nil || stack.LaneWorker("urgent") == nil {
		t.Fatalf("lanes %v: want bulk and urgent, each with its queue and worker", stack.Lanes)
	}
	// 2,000 bulk jobs, queued while the event sources are paused.
	began := time.Now()
	for i := range 2 {
		var specs []jobs.JobSpec
		for range 1000 {
			specs = append(specs, jobs.JobSpec{Kind: examplekinds.HoldBulk, Payload: json.RawMessage(`{"ms":100}`)})
		}
		postBatch(t, stack, specs, "bulk-"+strconv.Itoa(i))
	}
	sqsc := localaws.SQSClient(stack.SQSEndpoint)
	if n := depth(t, sqsc, bulk.Queue, sqstypes.QueueAttributeNameApproximateNumberOfMessages); n != 2000 {
		t.Fatalf("bulk queue holds %d messages, want 2,000", n)
	}
	t.Logf("2,000 bulk jobs queued in %v", time.Since(began).Round(time.Millisecond))
	stack.Resume()
	// The bulk lane's worker is busy before the urgent job arrives.
	busy := time.Now().Add(30 * time.Second)
	for depth(t, sqsc, bulk.Queue, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible) == 0 {
		if time.Now().After(busy) {
			t.Fatal("the bulk lane's worker never took a batch")
		}
		time.Sleep(50 * time.Millisecond)
	}
	c := &client{api: stack.APIURL, http: &http.Client{Timeout: 10 * time.Second}}
	enqueued := time.Now()
	id, _, err := c.enqueue(examplekinds.HoldUrgent, `{"ms":0}`, "urgent-1")
	if err != nil {
		t.Fatal(err)
	}
	store := dynamostore.New(localaws.DynamoDBClient(stack.DynamoDBEndpoint), "lanes", dynamostore.Options{})
	var rec *driver.Record
	for deadline := enqueued.Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if rec, err = store.Get(ctx, id); err == nil && !rec.StartedAt.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the urgent job %s never started: %+v %v", id, rec, err)
		}
	}
	left := depth(t, sqsc, bulk.Queue, sqstypes.QueueAttributeNameApproximateNumberOfMessages)
	took := rec.StartedAt.Sub(enqueued)
	t.Logf("urgent job started %v after its enqueue, %d bulk jobs still queued", took.Round(time.Millisecond), left)
	record(row{Scenario: "urgent job behind 2,000 queued bulk jobs (separate lanes)", Load: "2,000 bulk + 1 urgent", Bound: urgentBound, MaxSettle: took,
		Notes: fmt.Sprintf("urgent start %v after enqueue; %d bulk jobs still queued then", took.Round(time.Millisecond), left)})
	if rec.Lane != "urgent" {
		t.Errorf("the urgent job ran in lane %q", rec.Lane)
	}
	if took > urgentBound {
		t.Errorf("the urgent job started %v after its enqueue, want within %v", took, urgentBound)
	}
	if left < 1000 {
		t.Errorf("only %d bulk jobs were still queued: the backlog had drained, the test proves nothing", left)
	}
}

func postBatch(t *testing.T, stack *localstack.Stack, specs []jobs.JobSpec, key string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jobs": specs})
	for attempt := 1; ; attempt++ {
		req, _ := http.NewRequest("POST", stack.APIURL+"/v1/batches", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		req.Header.Set(localstack.CallerHeader, "reliability")
		resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 202 || resp.StatusCode == 200 {
				return
			}
			err = fmt.Errorf("%d %s", resp.StatusCode, b)
		}
		if attempt == 5 {
			t.Fatalf("POST /v1/batches: %v", err)
		}
	}
}

func depth(t *testing.T, c *sqs.Client, url string, attr sqstypes.QueueAttributeName) int {
	t.Helper()
	out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{attr}})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(out.Attributes[string(attr)])
	return n
}
