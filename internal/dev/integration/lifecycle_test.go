package integration_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/lambdajobs/lambdajobs/internal/dev/faultproxy"
	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

func TestLifecycleWithPartialResults(t *testing.T) {
	s := newStack(t, options{})
	hash := s.post("example.hash", `{"text":"hello","rounds":1}`)
	sleep := s.post("example.sleep", `{"ms":900,"steps":3}`)
	if st, v := s.get(sleep.ID); st != 200 || v.Status != jobs.StatusQueued || string(v.Result) != "null" {
		t.Fatalf("GET right after POST: %d %+v", st, v)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.source.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()

	// While the sleep job runs, GET shows its latest partial result.
	var partial string
	waitFor(t, 10*time.Second, "a partial result", func() bool {
		_, v := s.get(sleep.ID)
		if v.Status == jobs.StatusRunning && string(v.Result) != "null" {
			partial = string(v.Result)
			return true
		}
		return false
	})
	if partial != `{"done":1,"total":3}` && partial != `{"done":2,"total":3}` {
		t.Fatalf("partial result %s", partial)
	}
	waitFor(t, 10*time.Second, "both jobs to finish", func() bool {
		_, a := s.get(hash.ID)
		_, b := s.get(sleep.ID)
		return a.Status.Final() && b.Status.Final()
	})
	_, v := s.get(hash.ID)
	if v.Status != jobs.StatusSucceeded || string(v.Result) != `{"sha256":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}` || v.Attempt != 1 || v.StartedAt == nil || v.FinishedAt == nil {
		t.Fatalf("hash job %+v result %s", v, v.Result)
	}
	_, v = s.get(sleep.ID)
	if v.Status != jobs.StatusSucceeded || string(v.Result) != `{"done":3,"total":3}` {
		t.Fatalf("sleep job %+v result %s", v, v.Result)
	}
	cancel()
	wg.Wait()
	if n := s.queueDepth(); n != 0 {
		t.Fatalf("%d messages left on the queue", n)
	}
}

func TestDuplicateDeliveryRunsHandlerOnce(t *testing.T) {
	s := newStack(t, options{})
	v := s.post("test.count", `{"n":1}`)
	ctx := context.Background()
	// The same message three more times: SQS at-least-once, and a producer retrying.
	for range 3 {
		if err := s.queue.Send(ctx, driver.Message{JobID: v.ID}); err != nil {
			t.Fatal(err)
		}
	}
	s.drain()
	if n := s.runs1(v.ID); n != 1 {
		t.Fatalf("handler ran %d times, want 1", n)
	}
	if _, got := s.get(v.ID); got.Status != jobs.StatusSucceeded || got.Attempt != 1 {
		t.Fatalf("job %+v", got)
	}
	if n := depth(t, s.sqs, s.urls.DLQ); n != 0 {
		t.Fatalf("%d duplicates went to the DLQ; they must be acknowledged", n)
	}
}

func TestSweeperFailsJobWhoseWorkerDied(t *testing.T) {
	s := newStack(t, options{})
	v := s.post("test.count", `{"n":1}`)
	ctx := context.Background()
	// A worker claims the job and dies: no final write, and its message is
	// consumed (as if its batch had been reported done).
	if _, err := s.store.Claim(ctx, v.ID, driver.Claim{Token: "dead-worker", At: time.Now(), LeaseUntil: time.Now().Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	clock := jobstest.NewClock(time.Now().Add(jobs.DefaultDispatchGrace + time.Minute))
	sweeper, _ := testroles.Sweeper(jobs.Config{Registry: jobs.NewRegistry(), Store: s.store, Queue: s.queue, Clock: clock})
	rep, err := sweeper.Sweep(ctx)
	if err != nil || rep.Interrupted != 1 {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
	if _, got := s.get(v.ID); got.Status != jobs.StatusFailed || got.Error == nil || *got.Error != jobs.CodeInterrupted {
		t.Fatalf("job %+v", got)
	}
	// The redelivered message must not run it now.
	s.drain()
	if n := s.runs1(v.ID); n != 0 {
		t.Fatalf("interrupted job ran %d times", n)
	}
	// And a second sweep finds nothing: the index holds only unfinished jobs.
	if rep, _ := sweeper.Sweep(ctx); rep.Due != 0 {
		t.Fatalf("second sweep read %d jobs", rep.Due)
	}
}

func TestFinalWriteAgainstStalledDynamoDB(t *testing.T) {
	target := strings.TrimPrefix(testenv.DynamoDBEndpoint(t), "http://")
	proxy, err := faultproxy.Start(target)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	s := newStack(t, options{
		ddbEndpoint: proxy.URL(),
		lambdaTO:    3 * time.Second,
		extraKinds: func(_ *stack, reg *jobs.Registry) {
			// The handler's work is done the moment DynamoDB stops answering.
			jobs.MustRegister(reg, "test.stall", func(context.Context, *jobs.Job[countPayload]) (jobs.NoResult, error) {
				proxy.Stall()
				return jobs.NoResult{}, nil
			}, nil)
		},
	})
	v := s.post("test.stall", `{"n":1}`)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	msgs := receive(t, s.sqs, s.urls.Queue)
	resp, _ := s.worker.HandleSQS(ctx, msgs)
	returned := time.Now()
	// Drop the connections with the stalled write still held in the proxy:
	// resuming would deliver it late (which DynamoDB may also do, but then
	// this test could not see the job as the worker left it).
	proxy.Close()
	if !returned.Before(deadline) {
		t.Fatalf("worker returned %v after the Lambda deadline", returned.Sub(deadline))
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != msgs.Records[0].MessageId {
		t.Fatalf("batch item failures %+v, want the one message", resp.BatchItemFailures)
	}
	rec, err := jobsStore(s).Get(context.Background(), v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != jobs.StatusRunning || rec.ClaimToken == "" {
		t.Fatalf("job %s token %q: the failed final write must leave it running for redelivery or the sweeper", rec.Status, rec.ClaimToken)
	}
	t.Logf("worker returned %v before the deadline", deadline.Sub(returned))
}

// TestClaimAgainstStalledDynamoDB: DynamoDB stops answering before the
// claim. The claim has its own bound (Deadlines.Call), so the worker still
// answers before the Lambda deadline and lists the record for redelivery,
// instead of timing out and failing the whole batch.
func TestClaimAgainstStalledDynamoDB(t *testing.T) {
	target := strings.TrimPrefix(testenv.DynamoDBEndpoint(t), "http://")
	proxy, err := faultproxy.Start(target)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	s := newStack(t, options{ddbEndpoint: proxy.URL(), lambdaTO: 3 * time.Second})
	v := s.post("test.count", `{"n":1}`)
	msgs := receive(t, s.sqs, s.urls.Queue)
	proxy.Stall()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	resp, _ := s.worker.HandleSQS(ctx, msgs)
	returned := time.Now()
	proxy.Close() // drop the held claim: it must not land late and hide what the worker did
	if !returned.Before(deadline) {
		t.Fatalf("worker returned %v after the Lambda deadline", returned.Sub(deadline))
	}
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != msgs.Records[0].MessageId {
		t.Fatalf("batch item failures %+v, want the one message", resp.BatchItemFailures)
	}
	rec, err := jobsStore(s).Get(context.Background(), v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != jobs.StatusQueued || rec.Attempt != 0 {
		t.Fatalf("job %s after %d attempts, want queued and unclaimed", rec.Status, rec.Attempt)
	}
	t.Logf("worker returned %v before the deadline", deadline.Sub(returned))
}

// A handler that ignores its context is abandoned at the deadline: the job
// is recorded timed out and the worker returns in time, while the handler's
// goroutine runs on, counted as Abandoned until it returns. The test lets it
// return and waits for that (goleak in TestMain sees any left).
func TestHandlerIgnoringContextTimesOut(t *testing.T) {
	release := make(chan struct{})
	s := newStack(t, options{lambdaTO: 3 * time.Second, extraKinds: func(_ *stack, reg *jobs.Registry) {
		jobs.MustRegister(reg, "test.stubborn", func(context.Context, *jobs.Job[countPayload]) (jobs.NoResult, error) {
			<-release // deliberately ignores its context
			return jobs.NoResult{}, nil
		}, nil)
	}})
	v := s.post("test.stubborn", `{"n":1}`)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	resp, _ := s.worker.HandleSQS(ctx, receive(t, s.sqs, s.urls.Queue))
	if !time.Now().Before(deadline) {
		t.Fatal("worker returned after the Lambda deadline")
	}
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("a timed-out job was listed for retry: %+v", resp.BatchItemFailures)
	}
	if _, got := s.get(v.ID); got.Status != jobs.StatusFailed || *got.Error != jobs.CodeTimedOut {
		t.Fatalf("job %+v", got)
	}
	if n := s.worker.Abandoned(); n != 1 {
		t.Fatalf("Abandoned() = %d while the handler runs on, want 1", n)
	}
	close(release)
	waitAbandoned(t, s.worker)
}

// waitAbandoned waits until no handler w abandoned is still running.
func waitAbandoned(t *testing.T, w *jobs.Worker) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	limit := time.After(10 * time.Second)
	for w.Abandoned() != 0 {
		select {
		case <-tick.C:
		case <-limit:
			t.Fatalf("Abandoned() = %d 10 s after the handlers were released", w.Abandoned())
		}
	}
}

func TestSendFailureAfterPutLosesNoJob(t *testing.T) {
	s := newStack(t, options{})
	// An SQS endpoint nobody listens on: every send fails.
	port, err := localaws.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	deadSQS := localaws.SQSClient("http://127.0.0.1:"+itoa(port), func(o *sqs.Options) { o.RetryMaxAttempts = 2 })
	svc, err := testroles.Service(jobs.Config{Registry: s.reg, Store: s.store, Queue: sqsqueue.New(deadSQS, s.urls.Queue), Sealer: s.sealer})
	if err != nil {
		t.Fatal(err)
	}
	rec, created, err := enqueued(svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "arn:aws:iam::000000000000:user/alice", Kind: "test.count", Payload: []byte(`{"n":1}`)}))
	if err != nil || !created {
		t.Fatalf("enqueue with SQS down: %v (the put landed, so the job is accepted)", err)
	}
	if n := s.queueDepth(); n != 0 {
		t.Fatalf("%d messages on the queue; the send was meant to fail", n)
	}
	clock := jobstest.NewClock(time.Now().Add(jobs.DefaultDispatchGrace + time.Second))
	sweeper, _ := testroles.Sweeper(jobs.Config{Registry: jobs.NewRegistry(), Store: s.store, Queue: s.queue, Clock: clock})
	if rep, err := sweeper.Sweep(context.Background()); err != nil || rep.Resent != 1 {
		t.Fatalf("sweep: %+v %v", rep, err)
	}
	s.drain()
	if _, got := s.get(rec.ID); got.Status != jobs.StatusSucceeded || s.runs1(rec.ID) != 1 {
		t.Fatalf("job %+v ran %d times", got, s.runs1(rec.ID))
	}
}

func TestUnknownMessageReachesDLQ(t *testing.T) {
	s := newStack(t, options{})
	ctx := context.Background()
	if _, err := s.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(s.urls.Queue), MessageBody: aws.String(`{"hello":"world"}`)}); err != nil {
		t.Fatal(err)
	}
	// maxReceiveCount is 10 and the visibility timeout 2s in this stack.
	waitFor(t, 60*time.Second, "the message to reach the DLQ", func() bool {
		if err := s.source.PollOnce(ctx); err != nil {
			t.Fatal(err)
		}
		return depth(t, s.sqs, s.urls.DLQ) == 1
	})
}

func receive(t *testing.T, client *sqs.Client, url string) eventsSQSEvent {
	t.Helper()
	var ev eventsSQSEvent
	src := &captureSource{}
	es := sourceFor(client, url, src)
	waitFor(t, 5*time.Second, "a message", func() bool {
		if err := es.PollOnce(context.Background()); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		return len(src.ev.Records) > 0
	})
	ev = src.ev
	return ev
}
