package reliability_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/dynamostore"
)

// TestEventSentAfterWorkerKilledBeforeTheSend kills the worker (SIGKILL to
// its emulator and bootstrap) between a job's final write and its event's
// send: the local bus holds the worker's PutEvents, the worker is killed
// while it is held, and the request is then dropped unanswered, as if it
// never left. The job is final with its event step pending; the next
// delivery of the job's message (the job's net, as the event source
// brings it back) sends it, once, under the outcome's id; and neither
// another delivery nor a sweep sends it again.
func TestEventSentAfterWorkerKilledBeforeTheSend(t *testing.T) {
	ctx := context.Background()
	const workerTimeout, grace, sweepEvery = 5 * time.Second, 3 * time.Second, time.Second
	stack, _ := testenv.StartStack(t, ctx, localstack.Config{
		Root: root, Bootstraps: bootstraps, RIE: rie, APIAddr: "127.0.0.1:0", DynamoDBPort: 0, SQSPort: 0,
		Table: "events", Queue: "events", WorkerTimeout: workerTimeout, WorkerInstances: 1, BatchSize: 1,
		SweepEvery: sweepEvery, StartPaused: true,
		FunctionEnv: []string{"JOBS_EVENTS=all", "JOBS_DISPATCH_GRACE=" + grace.String()},
	})
	c := &client{api: stack.APIURL, http: &http.Client{Timeout: 10 * time.Second}}
	id, _, err := c.enqueue("example.hash", `{"text":"announced","rounds":1}`, "announced")
	if err != nil {
		t.Fatal(err)
	}

	// The bus holds the worker's first PutEvents of the job until the
	// worker is dead, then drops it; every other sender of the job's event
	// (the sweeper) waits until the duplicate delivery below is done.
	held, killed, open := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var (
		mu         sync.Mutex
		from       []string // the principal of each PutEvents of the job's event the bus took
		workerHeld bool
	)
	stack.Events.SetHold(func(principal string, details []string) bool {
		if !slices.ContainsFunc(details, func(d string) bool { return strings.Contains(d, id) }) {
			return true
		}
		if principal == "worker" {
			mu.Lock()
			first := !workerHeld
			workerHeld = true
			mu.Unlock()
			if first {
				close(held)
				<-killed
				return false // it never arrives
			}
		} else {
			<-open
		}
		mu.Lock()
		from = append(from, principal)
		mu.Unlock()
		return true
	})
	stack.Resume()
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("the worker never sent the job's event")
	}
	store := dynamostore.New(localaws.DynamoDBClient(stack.DynamoDBEndpoint), "events", dynamostore.Config{})
	rec, err := store.Get(ctx, id)
	if err != nil || rec.Status != jobs.StatusSucceeded || rec.Outcomes != 1 || !slices.Contains(rec.After, "event") {
		t.Fatalf("while the send is held: %+v %v; want the final write landed (succeeded, outcome 1) with its event pending", rec, err)
	}
	stack.Workers()[0].Kill()
	killedAt := time.Now()
	close(killed)

	jobEvents := func() []jobs.Event {
		var out []jobs.Event
		for _, ev := range stack.Events.Events() {
			var e jobs.Event
			if json.Unmarshal(ev.Detail, &e) == nil && e.JobID == id {
				out = append(out, e)
			}
		}
		return out
	}
	// A duplicate delivery of the job's message to a fresh worker, as the
	// event source would deliver it, while the event is pending.
	redeliver := func() {
		t.Helper()
		ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: wire.NewID(), Body: message.Encode(id), EventSource: "aws:sqs",
			EventSourceARN: stack.Queues.QueueARN, Attributes: map[string]string{"ApproximateReceiveCount": "2"}}}}
		payload, _ := json.Marshal(ev)
		ictx, cancel := context.WithTimeout(ctx, workerTimeout+5*time.Second)
		defer cancel()
		out, err := stack.Workers()[0].Invoke(ictx, payload)
		var resp events.SQSEventResponse
		if err != nil || json.Unmarshal(out, &resp) != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("the duplicate delivery: %s %v, want it acknowledged", out, err)
		}
	}
	redeliver()
	sent := time.Since(killedAt)
	got := jobEvents()
	if len(got) != 1 || got[0].ID != id+"/1" || got[0].Status != jobs.StatusSucceeded || got[0].Sequence != 1 {
		t.Fatalf("%v after the kill, the job's events on the bus: %+v; want one, %s/1, succeeded, sent by the redelivery", sent, got, id)
	}
	close(open)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	// The worker clears the step once the bus has taken the event: the
	// bus answers first, so the clear may land a moment after.
	for deadline := time.Now().Add(5 * time.Second); ; <-tick.C {
		rec, err := store.Get(ctx, id)
		if err == nil && len(rec.After) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the redelivery's send: %+v %v, want no step pending", rec, err)
		}
	}
	// Again: another duplicate delivery, another sweep.
	redeliver()
	if err := stack.SweepNow(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	senders := slices.Clone(from)
	mu.Unlock()
	if got := jobEvents(); len(got) != 1 || !slices.Equal(senders, []string{"worker"}) {
		t.Fatalf("after another delivery and a sweep: %d events for the job, sent by %v; want one, by the redelivery's worker", len(got), senders)
	}
	t.Logf("the event was sent by the redelivery %v after the kill, once; worker restarts %d", sent.Round(10*time.Millisecond), stack.Workers()[0].Restarts)
}
