package jobs_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// A foreign message reaches the default lane's queue; the job it makes,
// of a kind in another lane, is sent to that lane's queue and run there,
// not by the default lane's worker (whose timeout and concurrency are
// not the lane's). Redelivered, it makes no second job.
func TestRoutedJobRunsInItsKindsLane(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, workerLane string
		wantRun          bool
	}{
		{"default lane's worker sends it on", "", false},
		{"its own lane's worker runs it", "urgent", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			store, queue := jobstest.NewMemStore(nil), &jobstest.MemQueue{}
			reg := jobs.NewRegistry()
			runs := 0
			jobs.MustRegister(reg, "alert", func(_ context.Context, j *jobs.Job[events.SNSEntity]) (jobs.JSON[string], error) {
				runs++
				return jobs.JSON[string]{V: j.Payload.Subject}, nil
			}, &jobs.KindOpts{Lane: "urgent"})
			routes := &jobs.Routes{SNS: []jobs.SNSRoute{{TopicARN: "arn:aws:sns:us-east-1:123456789012:alerts", Kind: "alert", Owner: routeOwner}}}
			w, err := testroles.Worker(jobs.Config{Registry: reg, Store: store, Queue: queue, Routes: routes, Lane: c.workerLane})
			if err != nil {
				t.Fatal(err)
			}
			body := fixtureBody(t, "sns-notification.json")
			for range 2 { // delivered twice
				resp, err := w.HandleSQS(context.Background(), sqsEvent(body))
				if err != nil || len(resp.BatchItemFailures) != 0 {
					t.Fatalf("failures %v, err %v", resp.BatchItemFailures, err)
				}
			}
			all := store.All()
			if len(all) != 1 || all[0].Lane != "urgent" {
				t.Fatalf("jobs %+v, want one in the urgent lane", all)
			}
			if c.wantRun {
				if runs != 1 || all[0].Status != jobs.StatusSucceeded || len(queue.Messages()) != 0 {
					t.Fatalf("runs %d, status %s, sent %v: want one run here, nothing sent", runs, all[0].Status, queue.Messages())
				}
				return
			}
			msgs := queue.Messages()
			if runs != 0 || all[0].Status != jobs.StatusQueued || len(msgs) == 0 {
				t.Fatalf("runs %d, status %s, sent %v: want no run here, the job sent to its lane", runs, all[0].Status, msgs)
			}
			for _, m := range msgs {
				if m.JobID != all[0].ID || m.Lane != "urgent" {
					t.Fatalf("sent %+v, want job %s to the urgent lane", m, all[0].ID)
				}
			}
		})
	}
}

// Every send of a job goes to its own lane's queue, whoever sends it and
// whichever lane its kind names: the enqueue, a continuation, a retry (the
// requeue), a resubmit from the API, the sweeper's re-send of a job whose
// message was lost, a park (waiting for a concurrency slot) and the wake
// that follows it. A job enqueued into another lane than its kind's
// (EnqueueOpts.Lane) stays there. Each message is delivered to its lane's
// worker, as the lanes' event sources do.
func TestEverySendKeepsTheJobInItsLane(t *testing.T) {
	ctx := context.Background()
	clock := jobstest.NewClock(jobstest.Epoch)
	store, queue := jobstest.NewMemStore(clock), &jobstest.MemQueue{}
	reg := jobs.NewRegistry()
	var mu sync.Mutex
	ran := map[string]int{}
	jobs.MustRegister(reg, "steps", func(_ context.Context, job *jobs.Job[struct{}]) (jobs.NoResult, error) {
		mu.Lock()
		defer mu.Unlock()
		if ran[job.ID]++; ran[job.ID] == 1 {
			return jobs.NoResult{}, jobs.Continue(nil)
		}
		return jobs.NoResult{}, jobs.Retry(errors.New("again")) // until out of attempts
	}, &jobs.KindOpts{Lane: "bulk", Retry: jobs.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Second}})
	// While one "held" job runs, the next one's delivery parks it.
	var whileHeld func()
	jobs.MustRegister(reg, "held", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) {
		if f := whileHeld; f != nil {
			whileHeld = nil
			f()
		}
		return jobs.NoResult{}, nil
	}, &jobs.KindOpts{Lane: "bulk", Concurrency: 1})
	jobs.MustRegister(reg, "alert", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) {
		return jobs.NoResult{}, nil
	}, &jobs.KindOpts{Lane: "urgent"})
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: queue, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	sw, err := testroles.Sweeper(jobs.Config{Store: store, Queue: queue, Clock: clock, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	workers := map[string]*jobs.Worker{}
	for _, lane := range reg.Lanes() {
		if workers[lane], err = testroles.Worker(jobs.Config{Registry: reg, Store: store, Queue: queue, Clock: clock, Lane: lane, CancelCheck: -1}); err != nil {
			t.Fatal(err)
		}
	}
	lanes := map[string]string{} // job id -> the lane it must stay in
	enqueue := func(kind, lane, want string) string {
		t.Helper()
		res, err := svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: kind, Payload: []byte(`{}`), EnqueueOpts: jobs.EnqueueOpts{Lane: lane}})
		if err != nil {
			t.Fatal(err)
		}
		lanes[res.Job.ID] = want
		return res.Job.ID
	}
	deliver := func(id string) {
		t.Helper()
		resp, err := workers[lanes[id]].HandleSQS(ctx, sqsEvent(message.Encode(id)))
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("job %s: failures %v, err %v", id, resp.BatchItemFailures, err)
		}
	}
	// sends runs do and checks that it sent a message for each of ids
	// (else the scenario did not take the path), each message to its
	// job's lane.
	sends := func(what string, do func(), ids ...string) {
		t.Helper()
		before := len(queue.Messages())
		do()
		sent := map[string]bool{}
		for _, m := range queue.Messages()[before:] {
			sent[m.JobID] = true
			if m.Lane != lanes[m.JobID] {
				t.Errorf("%s: job %s sent to lane %q, want %q", what, m.JobID, m.Lane, lanes[m.JobID])
			}
		}
		for _, id := range ids {
			if !sent[id] {
				t.Fatalf("%s: nothing sent for job %s: the scenario did not take that path", what, id)
			}
		}
	}

	var bulk, moved string
	sends("enqueue", func() {
		bulk = enqueue("steps", "", "bulk")          // its kind's lane
		moved = enqueue("steps", "urgent", "urgent") // another lane than its kind's
	})
	for _, id := range []string{bulk, moved} {
		sends("continuation", func() { deliver(id) }, id)
		sends("retry", func() { deliver(id) }, id)
		clock.Advance(time.Minute)
		deliver(id) // out of attempts: failed
		if rec, _ := store.Get(ctx, id); rec.Status != jobs.StatusFailed {
			t.Fatalf("job %s %s after its retries, want failed", id, rec.Status)
		}
		sends("resubmit", func() {
			if _, err := svc.Resubmit(ctx, "o", id); err != nil {
				t.Fatal(err)
			}
		}, id)
	}
	queue.SetFail(errors.New("send lost"))
	lost := enqueue("steps", "", "bulk")
	queue.SetFail(nil)
	clock.Advance(time.Hour) // past its dispatch grace
	sends("sweeper's re-send", func() {
		if _, err := sw.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
	}, lost)
	first, second := enqueue("held", "", "bulk"), enqueue("held", "", "bulk")
	sends("park", func() { whileHeld = func() { deliver(second) }; deliver(first) }, second)
	// The park's own send (delayed to its backstop) went to its lane; when
	// the first freed its slot, the worker that freed it took the waiter
	// and ran it under the same slot (no message).
	if n := countSent(queue, second); n < 2 {
		t.Fatalf("%d messages of the parked job, want its enqueue and its park", n)
	}
	if rec, _ := store.Get(ctx, second); rec.Status != jobs.StatusSucceeded {
		t.Fatalf("job %s %s waiting on %q, want run by the worker that freed its slot", second, rec.Status, rec.WaitingOn)
	}
}

func countSent(q *jobstest.MemQueue, id string) int {
	n := 0
	for _, m := range q.Messages() {
		if m.JobID == id {
			n++
		}
	}
	return n
}
