package jobs_test

import (
	"context"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

const routeOwner = "arn:aws:iam::123456789012:role/uploads"

// routed is a worker with routes for every shape.
type routed struct {
	*harness
	w *jobs.Worker
}

func newRouted(t *testing.T) *routed {
	t.Helper()
	h := newHarness(t, jobs.DefaultDeadlines)
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "echo", func(ctx context.Context, j *jobs.Job[echoPayload]) (echoResult, error) {
		v, _ := h.runs.LoadOrStore(j.ID, new(atomic.Int32))
		v.(*atomic.Int32).Add(1)
		return echo(ctx, j)
	}, nil)
	jobs.MustRegister(reg, "s3.object",
		func(_ context.Context, j *jobs.Job[events.S3EventRecord]) (jobs.JSON[map[string]any], error) {
			o := j.Payload.S3.Object
			return jobs.JSON[map[string]any]{V: map[string]any{"key": o.URLDecodedKey, "size": o.Size, "sequencer": o.Sequencer, "event": j.Payload.EventName}}, nil
		}, nil)
	jobs.MustRegister(reg, "order.placed",
		func(_ context.Context, j *jobs.Job[events.EventBridgeEvent]) (jobs.JSON[string], error) {
			return jobs.JSON[string]{V: j.Payload.DetailType + ":" + j.Payload.ID}, nil
		}, nil)
	jobs.MustRegister(reg, "alert",
		func(_ context.Context, j *jobs.Job[events.SNSEntity]) (jobs.JSON[string], error) {
			return jobs.JSON[string]{V: j.Payload.Subject}, nil
		}, nil)
	routes := &jobs.Routes{
		S3:          []jobs.S3Route{{Bucket: "uploads-example", EventPrefix: "ObjectCreated:", Kind: "s3.object", Owner: routeOwner}},
		EventBridge: []jobs.EventBridgeRoute{{Source: "lambdajobs.example", DetailType: "OrderPlaced", Kind: "order.placed", Owner: routeOwner}},
		SNS:         []jobs.SNSRoute{{TopicARN: "arn:aws:sns:us-east-1:123456789012:alerts", Kind: "alert", Owner: routeOwner}},
		Envelope:    []jobs.EnvelopeRoute{{Kinds: []string{"echo"}, Owner: routeOwner}},
		RelayTopics: []string{"arn:aws:sns:us-east-1:123456789012:orders"},
	}
	w, err := testroles.Worker(jobs.Config{Registry: reg, Store: h.store, Routes: routes, Logger: h.logger})
	if err != nil {
		t.Fatal(err)
	}
	return &routed{harness: h, w: w}
}

func fixtureBody(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/foreign/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func (r *routed) deliver(t *testing.T, bodies ...string) []string {
	t.Helper()
	resp, err := r.w.HandleSQS(context.Background(), sqsEvent(bodies...))
	if err != nil {
		t.Fatal(err)
	}
	return failedIDs(resp)
}

func (r *routed) only(t *testing.T) []*driver.Record {
	t.Helper()
	return r.store.All()
}

func TestRouteS3Records(t *testing.T) {
	t.Parallel()
	r := newRouted(t)
	if failed := r.deliver(t, fixtureBody(t, "s3-two-records.json")); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	all := r.only(t)
	if len(all) != 2 {
		t.Fatalf("%d jobs, want one per record", len(all))
	}
	results := map[string]bool{}
	for _, rec := range all {
		if rec.Status != jobs.StatusSucceeded || rec.Owner != routeOwner || rec.Kind != "s3.object" {
			t.Fatalf("job %+v", rec)
		}
		results[string(rec.Result)] = true
	}
	if !results[`{"event":"ObjectCreated:Put","key":"photos/Happy Face.jpg","sequencer":"0055AED6DCD90281E5","size":1024}`] {
		t.Fatalf("results %v", results)
	}
	// Delivered again: no new job, no second run.
	if failed := r.deliver(t, fixtureBody(t, "s3-two-records.json")); len(failed) != 0 || len(r.only(t)) != 2 {
		t.Fatalf("redelivery: failures %v, %d jobs", failed, len(r.only(t)))
	}
}

func TestRouteS3TestEventIsAcknowledged(t *testing.T) {
	t.Parallel()
	r := newRouted(t)
	if failed := r.deliver(t, fixtureBody(t, "s3-test-event.json")); len(failed) != 0 || len(r.only(t)) != 0 {
		t.Fatalf("failures %v, jobs %d", failed, len(r.only(t)))
	}
	if !strings.Contains(r.logs.String(), "s3:TestEvent") {
		t.Fatal("the test event was not logged")
	}
}

func TestRouteEventBridgeDirectAndThroughSNS(t *testing.T) {
	t.Parallel()
	r := newRouted(t)
	direct, wrapped := fixtureBody(t, "eventbridge.json"), fixtureBody(t, "sns-wrapped-eventbridge.json")
	if failed := r.deliver(t, direct, wrapped, direct); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	// The same event id: one job, whichever way it came.
	all := r.only(t)
	if len(all) != 1 || all[0].Status != jobs.StatusSucceeded || string(all[0].Result) != `"OrderPlaced:6a7e8feb-b491-4cf7-a9f1-bf3703467718"` {
		t.Fatalf("jobs %+v", all)
	}
	if all[0].ID != wire.DerivedID("eventbridge", "lambdajobs.example", "6a7e8feb-b491-4cf7-a9f1-bf3703467718") {
		t.Fatal("the job id is not derived from the event id")
	}
}

func TestRouteSNSNotificationByTopic(t *testing.T) {
	t.Parallel()
	r := newRouted(t)
	if failed := r.deliver(t, fixtureBody(t, "sns-notification.json")); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	all := r.only(t)
	if len(all) != 1 || all[0].Kind != "alert" || string(all[0].Result) != `"Disk almost full"` {
		t.Fatalf("jobs %+v", all)
	}
}

func TestRouteEnvelopes(t *testing.T) {
	t.Parallel()
	r := newRouted(t)
	keyed := fixtureBody(t, "envelope.json")
	raw := fixtureBody(t, "sns-raw-envelope.json")
	// The keyed envelope twice (two SQS messages, one key); the raw one once.
	if failed := r.deliver(t, keyed, keyed, raw); len(failed) != 0 {
		t.Fatalf("failures %v", failed)
	}
	all := r.only(t)
	if len(all) != 2 {
		t.Fatalf("%d jobs, want 2", len(all))
	}
	keyedID := wire.DerivedID("envelope-idempotency", routeOwner, "nightly-2026-11-29")
	for _, rec := range all {
		if rec.Status != jobs.StatusSucceeded || rec.Owner != routeOwner {
			t.Fatalf("job %+v", rec)
		}
		if rec.ID == keyedID && r.runCount(rec.ID) != 1 {
			t.Fatalf("keyed envelope ran %d times", r.runCount(rec.ID))
		}
	}
}

func TestRouteUndecodablePayloadFailsVisibly(t *testing.T) {
	t.Parallel()
	r := newRouted(t)
	if failed := r.deliver(t, `{"kind":"echo","payload":{"text":"x","unexpected":true}}`); len(failed) != 0 {
		t.Fatalf("failures %v: a routed message with a bad payload is a failed job, not a retry", failed)
	}
	all := r.only(t)
	if len(all) != 1 || all[0].Status != jobs.StatusFailed || all[0].ErrorCode != jobs.CodeInvalidPayload {
		t.Fatalf("jobs %+v", all)
	}
	// Its owner reads it through the service.
	svc, _ := testroles.Service(jobs.Config{Registry: jobs.NewRegistry(), Store: r.store, Queue: &jobstest.MemQueue{}})
	if _, err := svc.Get(context.Background(), routeOwner, all[0].ID); err != nil {
		t.Fatalf("owner cannot read it: %v", err)
	}
}

func TestRouteNothingMatches(t *testing.T) {
	t.Parallel()
	r := newRouted(t)
	otherBucket := strings.ReplaceAll(fixtureBody(t, "s3-two-records.json"), "uploads-example", "somebody-else")
	otherSource := strings.ReplaceAll(fixtureBody(t, "eventbridge.json"), "lambdajobs.example", "aws.ec2")
	failed := r.deliver(t,
		`{"kind":"not.allowed","payload":{}}`,
		otherBucket,
		otherSource,
		`{"Type":"Notification","MessageId":"m","TopicArn":"arn:aws:sns:us-east-1:123456789012:unknown","Message":"hi `+secret+`"}`,
		`["a","list"]`,
	)
	if !sameSet(failed, []string{"m-0", "m-1", "m-2", "m-3", "m-4"}) {
		t.Fatalf("failures %v, want all five", failed)
	}
	if len(r.only(t)) != 0 {
		t.Fatal("an unroutable message created a job")
	}
	if logs := r.logs.String(); strings.Contains(logs, secret) || strings.Contains(logs, "somebody-else") || !strings.Contains(logs, "no route accepts") {
		t.Fatalf("logs: %s", logs)
	}
}

func TestRoutesAreCheckedAgainstTheRegistry(t *testing.T) {
	t.Parallel()
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "echo", echo, nil)
	tests := map[string]*jobs.Routes{
		"unregistered kind":     {S3: []jobs.S3Route{{Kind: "nope", Owner: "o"}}},
		"wrong payload type":    {S3: []jobs.S3Route{{Kind: "echo", Owner: "o"}}},
		"no source":             {EventBridge: []jobs.EventBridgeRoute{{Kind: "echo", Owner: "o"}}},
		"no owner":              {Envelope: []jobs.EnvelopeRoute{{Kinds: []string{"echo"}}}},
		"envelope unregistered": {Envelope: []jobs.EnvelopeRoute{{Kinds: []string{"x"}, Owner: "o"}}},
	}
	for name, routes := range tests {
		if _, err := testroles.Worker(jobs.Config{Registry: reg, Store: jobstest.NewMemStore(nil), Routes: routes}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzRouteForeignMessage(f *testing.F) {
	for _, name := range []string{"s3-two-records.json", "s3-test-event.json", "eventbridge.json", "sns-wrapped-eventbridge.json", "sns-notification.json", "envelope.json"} {
		b, err := os.ReadFile("testdata/foreign/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add(`{"job_id":"x"}`)
	f.Fuzz(func(t *testing.T, body string) {
		r := newRouted(t)
		resp, err := r.w.HandleSQS(context.Background(), sqsEvent(body))
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range r.store.All() {
			if rec.Owner != routeOwner {
				t.Fatalf("a message made a job for owner %q", rec.Owner)
			}
			if !rec.Status.Final() {
				t.Fatalf("job left %s", rec.Status)
			}
		}
		_ = resp
	})
}

func TestDerivedJobIDsMatchTheWorker(t *testing.T) {
	t.Parallel()
	if ids, ack := wire.DerivedJobIDs(fixtureBody(t, "s3-test-event.json"), "m", ""); len(ids) != 0 || !ack {
		t.Fatalf("s3:TestEvent: %v %v", ids, ack)
	}
	for _, name := range []string{"s3-two-records.json", "eventbridge.json", "sns-wrapped-eventbridge.json", "sns-notification.json", "envelope.json", "sns-raw-envelope.json"} {
		r := newRouted(t)
		body := fixtureBody(t, name)
		r.deliver(t, body)
		var made []string
		for _, rec := range r.store.All() {
			made = append(made, rec.ID)
		}
		if got, _ := wire.DerivedJobIDs(body, "m-0", routeOwner); !sameSet(got, made) {
			t.Errorf("%s: DerivedJobIDs = %v, the worker made %v", name, got, made)
		}
	}
}

// A message wrapped in an SNS notification is unwrapped only when its topic
// may relay: a publisher to any other topic subscribed to the queue cannot
// pass for EventBridge or S3.
func TestRouteSNSRelayOnlyFromAllowedTopics(t *testing.T) {
	t.Parallel()
	r := newRouted(t)
	forged := strings.ReplaceAll(fixtureBody(t, "sns-wrapped-eventbridge.json"), ":orders", ":anyone-may-publish")
	if failed := r.deliver(t, forged); len(failed) != 1 {
		t.Fatalf("failures %v: a relay from a topic not allowed was accepted", failed)
	}
	if all := r.only(t); len(all) != 0 {
		t.Fatalf("jobs %+v from a forged relay", all)
	}
}

// An envelope's idempotency key lives in its own namespace: a sender on the
// queue cannot take the job id an owner's HTTP enqueue with the same key
// would get.
func TestEnvelopeKeysCannotPreemptAnOwnersKey(t *testing.T) {
	t.Parallel()
	ids, _ := wire.DerivedJobIDs(`{"kind":"echo","payload":{"text":"x"},"idempotency_key":"order-1"}`, "m-1", routeOwner)
	if len(ids) != 1 || ids[0] == wire.DerivedID("idempotency", routeOwner, "order-1") {
		t.Fatalf("envelope ids %v: the same id as the owner's own idempotency key", ids)
	}
}
