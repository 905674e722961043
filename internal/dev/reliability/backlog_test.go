package reliability_test

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
)

// TestABacklogIsNotReSent queues jobs behind a paused event source (a
// bulk lane's normal day, or a mapping an operator disabled) for longer
// than three dispatch graces, sweeping all along: with message first the
// sweeper has nothing to re-send, since every job's message is its net.
// Then the backlog drains: every job runs exactly once. Set
// LAMBDAJOBS_BACKLOG_MESSAGE_FIRST=off to measure the re-sends without it
// (docs/evidence/CAPACITY.md).
func TestABacklogIsNotReSent(t *testing.T) {
	ctx := context.Background()
	const grace = 4 * time.Second
	n := size(1000, 3000)
	flag := "on"
	if v := os.Getenv("LAMBDAJOBS_BACKLOG_MESSAGE_FIRST"); v != "" {
		flag = v
	}
	stack, _ := testenv.StartStack(t, ctx, localstack.Config{
		Root: root, Bootstraps: bootstraps, RIE: rie, APIAddr: "127.0.0.1:0", DynamoDBPort: 0, SQSPort: 0,
		Table: "backlog", Queue: "backlog", WorkerTimeout: 20 * time.Second, WorkerInstances: 2, BatchSize: 10,
		StartPaused: true,
		FunctionEnv: []string{"JOBS_DISPATCH_GRACE=" + grace.String(), "JOBS_MESSAGE_FIRST=" + flag},
	})
	c := &client{api: stack.APIURL, http: &http.Client{Timeout: 10 * time.Second}}
	began := time.Now()
	ids := enqueueAll(t, c, "example.hash", "backlog", n, func(int) string { return `{"text":"waits","rounds":1}` })
	enqueued := time.Since(began)

	// Three graces and more behind the paused source, a sweep every
	// grace: each must run, and none may re-send.
	var sweeps, resent, due int
	for until := time.Now().Add(3*grace + time.Second); sweeps < 4 || time.Now().Before(until); sweeps++ {
		time.Sleep(grace)
		rep, err := stack.Sweep(ctx)
		if err != nil {
			t.Fatalf("sweep %d: %v", sweeps+1, err)
		}
		resent += rep.Resent
		due += rep.Due
	}
	t.Logf("%d jobs enqueued in %v; %d sweeps over %v of backlog read %d due and re-sent %d (message first %s)",
		n, enqueued.Round(time.Millisecond), sweeps, time.Since(began).Round(time.Second), due, resent, flag)
	if flag == "on" && (resent != 0 || due != 0) {
		t.Fatalf("the sweeper read %d due jobs and re-sent %d during the backlog, want none", due, resent)
	}

	stack.Resume()
	store := dynamostore.New(localaws.DynamoDBClient(stack.DynamoDBEndpoint), "backlog", dynamostore.Config{})
	got := settle(t, store, ids, 3*time.Minute)
	for i, id := range ids {
		rec := got[id]
		if rec == nil || rec.Status != jobs.StatusSucceeded || rec.Attempt != 1 {
			t.Fatalf("job %d (%s): %+v; want succeeded at its first attempt", i, id, rec)
		}
	}
	if flag == "on" {
		if rep, err := stack.Sweep(ctx); err != nil || rep.Resent != 0 || rep.DeadLettersSettled != 0 {
			t.Fatalf("the sweep after the drain: %+v %v; want nothing to do", rep, err)
		}
	}
	t.Logf("drained: %s jobs ran once each, %v after the first enqueue", strconv.Itoa(n), time.Since(began).Round(time.Second))
}
