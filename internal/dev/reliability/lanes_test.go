package reliability_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
)

// urgentBound is how soon an urgent job must start behind a bulk backlog
// (docs/guide/LANES.md, docs/evidence/BENCHMARKS.md).
const urgentBound = 5 * time.Second

// TestUrgentStartsBehindBulkBacklog: with 2,000 bulk jobs queued in the
// bulk lane (example.hold_bulk, 100 ms each) and its worker busy with
// them, an urgent job (example.hold_urgent) starts within urgentBound of
// its enqueue, while the bulk backlog is still there: the urgent lane is
// its own queue, worker and event source. Without lanes it would wait
// behind the 2,000 (about 40 s of work for this worker).
func TestUrgentStartsBehindBulkBacklog(t *testing.T) {
	ctx := context.Background()
	stack, _ := testenv.StartStack(t, ctx, localstack.Config{
		Root: root, Bootstraps: bootstraps, RIE: rie, APIAddr: "127.0.0.1:0", DynamoDBPort: 0, SQSPort: 0,
		Table: "lanes", Queue: "lanes", WorkerInstances: 1, BatchSize: 10, StartPaused: true,
		FunctionEnv: []string{"JOBS_WORKER_CONCURRENCY=10"},
	})
	if stack.LaneWorker("bulk") == nil || stack.LaneWorker("urgent") == nil {
		t.Fatalf("lanes %v: want bulk and urgent, each with its queue and worker", stack.Lanes)
	}
	r, err := stack.UrgentBehindBulk(ctx, localstack.LaneLoad{Kind: examplekinds.HoldBulk, Payload: json.RawMessage(`{"ms":100}`), Jobs: 2000},
		localstack.LaneLoad{Kind: examplekinds.HoldUrgent, Payload: json.RawMessage(`{"ms":0}`), Jobs: 1})
	if err != nil {
		t.Fatal(err)
	}
	took, left := r.Starts[0], r.BulkLeft[0]
	t.Logf("urgent job started %v after its enqueue, %d of %d bulk jobs still queued", took.Round(time.Millisecond), left, r.BulkQueued)
	record(row{Scenario: "urgent job behind 2,000 queued bulk jobs (separate lanes)", Load: "2,000 bulk + 1 urgent", Bound: urgentBound, MaxSettle: took,
		Notes: fmt.Sprintf("urgent start %v after enqueue; %d bulk jobs still queued then", took.Round(time.Millisecond), left)})
	switch {
	case r.BulkQueued != 2000:
		t.Errorf("%d bulk jobs queued, want 2,000", r.BulkQueued)
	case r.Lanes[0] != "urgent":
		t.Errorf("the urgent job ran in lane %q", r.Lanes[0])
	case took > urgentBound:
		t.Errorf("the urgent job started %v after its enqueue, want within %v", took, urgentBound)
	case left < 1000:
		t.Errorf("only %d bulk jobs were still queued: the backlog had drained, the test proves nothing", left)
	}
}
