package jobs_test

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"

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
			w, err := jobs.NewWorker(jobs.WorkerConfig{Registry: reg, Store: store, Queue: queue, Routes: routes, Lane: c.workerLane})
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
