package jobs_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// A schedule's fire and a foreign message (S3,
// EventBridge, SNS) that reach a worker with too little time left to start
// their job are not handed back as they are, which would count towards
// maxReceiveCount with no job to show for it and end in the dead-letter
// queue with nothing the sweeper can recover. Their job is created first
// (queued, no attempt spent, in the sweep index), the job's own message is
// sent for a later invocation (after a second), and the original message
// is acknowledged: it is never listed for redelivery.
func TestFiresAndForeignMessagesHandedBackCreateTheirJobFirst(t *testing.T) {
	fired := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	for name, body := range map[string]func(t *testing.T) string{
		"schedule fire": func(*testing.T) string { return wire.FireMessage("tick", fired.Format(time.RFC3339)) },
		"S3":            func(t *testing.T) string { return fixtureBody(t, "s3-two-records.json") },
		"EventBridge":   func(t *testing.T) string { return fixtureBody(t, "eventbridge.json") },
		"SNS":           func(t *testing.T) string { return fixtureBody(t, "sns-notification.json") },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := jobstest.NewMemStore(nil)
				routes := &jobs.Routes{
					S3:          []jobs.S3Route{{Bucket: "uploads-example", EventPrefix: "ObjectCreated:", Kind: "s3.object", Owner: routeOwner}},
					EventBridge: []jobs.EventBridgeRoute{{Source: "lambdajobs.example", DetailType: "OrderPlaced", Kind: "order.placed", Owner: routeOwner}},
					SNS:         []jobs.SNSRoute{{TopicARN: "arn:aws:sns:us-east-1:123456789012:alerts", Kind: "alert", Owner: routeOwner}},
				}
				// Message first: the job made from the message keeps its
				// sweep entry all the same (the message names no job the
				// dead-letter drain could settle).
				r := newEngineRig(t, mem, mem, jobs.Config{Concurrency: 1, CancelCheck: -1, Routes: routes, MessageFirst: true}, func(reg *jobs.Registry) {
					tick := jobs.MustRegister(reg, "tick", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
					if err := tick.Every(reg, "tick", "rate(1 minute)", struct{}{}, nil); err != nil {
						t.Fatal(err)
					}
					jobs.MustRegister(reg, "s3.object", func(context.Context, *jobs.Job[events.S3EventRecord]) (jobs.NoResult, error) {
						return jobs.NoResult{}, nil
					}, nil)
					jobs.MustRegister(reg, "order.placed", func(context.Context, *jobs.Job[events.EventBridgeEvent]) (jobs.NoResult, error) {
						return jobs.NoResult{}, nil
					}, nil)
					jobs.MustRegister(reg, "alert", func(context.Context, *jobs.Job[events.SNSEntity]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
				})
				// The batch's first record takes 10 of the 10.5 s of handler
				// time (a 13.5 s Lambda, 3 s reserve): nothing is left for
				// the second.
				long := r.enqueue(t, "sleep", `{"for":"10s"}`)
				ctx, cancel := context.WithTimeout(context.Background(), 13500*time.Millisecond)
				defer cancel()
				resp, _ := r.worker.HandleSQS(ctx, sqsEvent(message.Encode(long), body(t)))
				if got := failedIDs(resp); len(got) != 0 {
					t.Fatalf("failures %v, want none: the message is acknowledged, not given back towards the DLQ", got)
				}
				var made []string
				for _, rec := range mem.All() {
					if rec.ID == long {
						continue
					}
					made = append(made, rec.ID)
					if rec.Status != jobs.StatusQueued || rec.Attempt != 0 || rec.SweepAt.IsZero() {
						t.Errorf("job %s made from the message: %s after %d attempts (sweep at %v), want queued, no attempt spent, in the sweep index",
							rec.ID, rec.Status, rec.Attempt, rec.SweepAt)
					}
					if d := r.queue.Delay(rec.ID); d != time.Second {
						t.Errorf("job %s: its message was sent with a delay of %v, want 1s (a later invocation)", rec.ID, d)
					}
				}
				if len(made) == 0 {
					t.Fatal("no job was made from the message before it was handed back")
				}
				if name == "schedule fire" && (len(made) != 1 || made[0] != wire.FireJobID("tick", fired)) {
					t.Fatalf("the fire made %v, want its one job %s", made, wire.FireJobID("tick", fired))
				}
				// The job's own message, in a fresh invocation, runs it.
				var refs []string
				for _, id := range made {
					refs = append(refs, message.Encode(id))
				}
				ctx2, cancel2 := context.WithTimeout(context.Background(), 15*time.Second)
				defer cancel2()
				if resp, _ := r.worker.HandleSQS(ctx2, sqsEvent(refs...)); len(resp.BatchItemFailures) != 0 {
					t.Fatalf("the jobs' own messages: failures %v", failedIDs(resp))
				}
				for _, id := range made {
					if rec := r.get(t, id); rec.Status != jobs.StatusSucceeded || rec.Attempt != 1 {
						t.Errorf("job %s: %s after %d attempts, want succeeded on attempt 1", id, rec.Status, rec.Attempt)
					}
				}
			})
		})
	}
}
