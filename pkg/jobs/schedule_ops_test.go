package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// scheduleRig is a deployment with the declared schedule "tick" (of the
// kind "a", OverlapSkip) over a store that outlives its clients: a new
// client is a redeploy. via, when set, is the store the clients use over
// it.
type scheduleRig struct {
	store *jobstest.MemStore
	queue *jobstest.MemQueue
	clock *jobstest.Clock
	via   driver.Store
}

func (r *scheduleRig) deploy(t *testing.T) *jobs.Client {
	t.Helper()
	reg := jobs.NewRegistry()
	a := jobs.MustRegister(reg, "a", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
	if err := a.Every(reg, "tick", "rate(1 hour)", struct{}{}, &jobs.ScheduleOpts{Overlap: jobs.OverlapSkip, Owner: "team"}); err != nil {
		t.Fatal(err)
	}
	var store driver.Store = r.store
	if r.via != nil {
		store = r.via
	}
	c, err := jobs.NewClient(jobs.Config{Registry: reg, Store: store, Queue: r.queue, Clock: r.clock, CancelCheck: -1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fire delivers a fire of schedule at the hour h and returns the jobs the
// store holds then.
func (r *scheduleRig) fire(t *testing.T, c *jobs.Client, schedule, ownerKey string, h int) int {
	t.Helper()
	at := time.Date(2026, 1, 2, h, 0, 0, 0, time.UTC).Format(time.RFC3339)
	body := wire.EncodeFire(wire.Fire{Schedule: schedule, OwnerKey: ownerKey, ScheduledTime: at})
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: fmt.Sprint("fire-", h), Body: body}}}
	if resp, _ := c.Worker().HandleSQS(context.Background(), ev); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("the fire at %s came back", at)
	}
	return r.store.Len()
}

// A paused schedule's fires make no job, also after a redeploy (the pause
// is in the table); once resumed, a fire makes its job.
func TestAPausedScheduleFiresNoJobAcrossADeploy(t *testing.T) {
	r := &scheduleRig{store: jobstest.NewMemStore(nil), queue: &jobstest.MemQueue{}, clock: jobstest.NewClock(jobstest.Epoch)}
	ctx := context.Background()
	c := r.deploy(t)
	p, err := c.Service().Pause(ctx, "", jobs.PauseRequest{Schedule: "tick"})
	if err != nil || p.ID != "schedule:tick" || !p.Until.Equal(p.Since.Add(jobs.MaxDelay)) {
		t.Fatalf("pause: %+v %v", p, err)
	}
	for h := range 2 {
		if n := r.fire(t, c, "tick", "", h); n != 0 {
			t.Fatalf("fire %d of the paused schedule made a job (%d jobs)", h+1, n)
		}
	}
	c = r.deploy(t) // a redeploy: new instances, the same table
	if n := r.fire(t, c, "tick", "", 2); n != 0 {
		t.Fatalf("a fire after the redeploy made a job (%d jobs)", n)
	}
	if err := c.Service().Resume(ctx, "", jobs.PauseRequest{Schedule: "tick"}); err != nil {
		t.Fatal(err)
	}
	if n := r.fire(t, c, "tick", "", 3); n != 1 {
		t.Fatalf("the fire after the resume: %d jobs, want 1", n)
	}
}

// claimFailsOnce refuses the first claim (throttled), then claims.
type claimFailsOnce struct {
	*jobstest.MemStore
	failed atomic.Bool
}

func (s *claimFailsOnce) Claim(ctx context.Context, id string, c driver.Claim) (*driver.Record, error) {
	if s.failed.CompareAndSwap(false, true) {
		return nil, errors.New("dynamodb: throttled")
	}
	return s.MemStore.Claim(ctx, id, c)
}

// A fire whose first delivery made its job and came back (the claim
// failed; a run that died or lost its final write comes back alike) is
// that job's net: paused since, the schedule makes no new job, but the
// fire's redelivery runs the job it made rather than being acknowledged
// and leaving it with no message (the simulator's seeds 7881 and 3979,
// without a sweeper: the job stayed running for good).
func TestARedeliveredFireOfAPausedScheduleRunsTheJobItMade(t *testing.T) {
	r := &scheduleRig{store: jobstest.NewMemStore(nil), queue: &jobstest.MemQueue{}, clock: jobstest.NewClock(jobstest.Epoch)}
	r.via = &claimFailsOnce{MemStore: r.store}
	ctx := context.Background()
	c := r.deploy(t)
	deliver := func(h int, receives string) events.SQSEventResponse {
		at := time.Date(2026, 1, 2, h, 0, 0, 0, time.UTC).Format(time.RFC3339)
		msg := events.SQSMessage{MessageId: fmt.Sprint("fire-", h), Body: wire.EncodeFire(wire.Fire{Schedule: "tick", ScheduledTime: at}),
			Attributes: map[string]string{"ApproximateReceiveCount": receives}}
		resp, _ := c.Worker().HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{msg}})
		return resp
	}
	if resp := deliver(0, "1"); len(resp.BatchItemFailures) != 1 || r.store.Len() != 1 {
		t.Fatalf("first delivery: %d failures, %d jobs; want the fire back and its job made", len(resp.BatchItemFailures), r.store.Len())
	}
	if _, err := c.Service().Pause(ctx, "", jobs.PauseRequest{Schedule: "tick"}); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(time.Minute)
	if resp := deliver(0, "2"); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("the fire's redelivery came back again")
	}
	all := r.store.All()
	if len(all) != 1 || all[0].Status != jobs.StatusSucceeded {
		t.Fatalf("after the redelivery: %d jobs, the fire's %s; want it succeeded", len(all), all[0].Status)
	}
	// A fire that made no job makes none while paused, redelivered or not.
	if resp := deliver(1, "2"); len(resp.BatchItemFailures) != 0 || r.store.Len() != 1 {
		t.Fatalf("a paused fire without a job: %d failures, %d jobs; want it acknowledged, no job", len(resp.BatchItemFailures), r.store.Len())
	}
}

// Run now makes exactly one job per idempotency key, marked as run by
// hand, as the schedule's owner; it obeys OverlapSkip; a caller runs its
// own runtime schedules only, an operator declared ones and any owner's.
func TestRunNowMakesOneJobPerKey(t *testing.T) {
	r := &scheduleRig{store: jobstest.NewMemStore(nil), queue: &jobstest.MemQueue{}, clock: jobstest.NewClock(jobstest.Epoch)}
	ctx := context.Background()
	c := r.deploy(t)
	svc := c.Service()
	first, err := svc.RunNow(ctx, "", jobs.RunNowRequest{Schedule: "tick", IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := svc.RunNow(ctx, "", jobs.RunNowRequest{Schedule: "tick", IdempotencyKey: "k1"})
	if err != nil || again.Job.ID != first.Job.ID || !again.Replayed || first.Replayed {
		t.Fatalf("run now again with the key: %+v %v; want the first job, replayed", again, err)
	}
	if r.store.Len() != 1 || first.Job.ManualRunOf != "tick" || first.Job.Kind != "a" {
		t.Fatalf("%d jobs; the job %+v; want one, of kind a, run by hand of tick", r.store.Len(), first.Job)
	}
	if v, err := svc.Get(ctx, "team", first.Job.ID); err != nil || v.ManualRunOf != "tick" {
		t.Fatalf("the schedule's owner reads the job: %+v %v", v, err)
	}
	// OverlapSkip: another run while the first is queued is refused, as a
	// fire would be skipped.
	var re *jobs.RequestError
	if _, err := svc.RunNow(ctx, "", jobs.RunNowRequest{Schedule: "tick", IdempotencyKey: "k2"}); !errors.As(err, &re) || re.Code != "schedule_overlap" {
		t.Fatalf("a second run while the first is unfinished: %v, want schedule_overlap", err)
	}
	if n := r.fire(t, c, "tick", "", 5); n != 1 {
		t.Fatalf("a fire while the manual run is unfinished: %d jobs, want 1 (the fire skipped: it is the schedule's last run)", n)
	}
	// A caller's runtime schedule.
	if err := r.store.AddOwnerSchedule(ctx, wire.OwnerKey("alice"), jobs.Schedule{Name: "mine", Expression: "rate(1 day)", TimeZone: "UTC", Kind: "a",
		Payload: []byte(`{}`), Overlap: jobs.OverlapAllow, Owner: "alice"}, 20); err != nil {
		t.Fatal(err)
	}
	mine, err := svc.RunNow(ctx, "alice", jobs.RunNowRequest{Schedule: "mine"})
	if err != nil || mine.Job.ManualRunOf != "mine" {
		t.Fatalf("alice runs her schedule: %+v %v", mine, err)
	}
	if _, err := svc.Get(ctx, "alice", mine.Job.ID); err != nil {
		t.Fatalf("alice reads the job her run made: %v", err)
	}
	for who, req := range map[string]jobs.RunNowRequest{
		"bob":   {Schedule: "mine"},                 // not his
		"alice": {Schedule: "tick"},                 // declared: operators'
		"carol": {Schedule: "mine", Owner: "alice"}, // another's, named
	} {
		if _, err := svc.RunNow(ctx, who, req); err == nil {
			t.Errorf("%s runs %+v: no error", who, req)
		}
	}
	if _, err := svc.RunNow(ctx, "", jobs.RunNowRequest{Schedule: "mine", Owner: "alice", IdempotencyKey: "op"}); err != nil {
		t.Fatalf("an operator runs alice's schedule: %v", err)
	}
	// A paused runtime schedule: its fires make nothing.
	if _, err := svc.Pause(ctx, "alice", jobs.PauseRequest{Schedule: "mine", For: time.Hour}); err != nil {
		t.Fatal(err)
	}
	before := r.store.Len()
	if n := r.fire(t, c, "mine", wire.OwnerKey("alice"), 7); n != before {
		t.Fatalf("a fire of alice's paused schedule made a job")
	}
	if list, err := svc.Pauses(ctx, "bob"); err != nil || len(list) != 0 {
		t.Fatalf("bob sees %+v %v, want no pause: alice's schedule is hers", list, err)
	}
	if _, err := svc.Pause(ctx, "bob", jobs.PauseRequest{Schedule: "mine"}); !errors.Is(err, jobs.ErrNotFound) && !errors.As(err, &re) {
		t.Fatalf("bob pauses alice's schedule: %v, want refused", err)
	}
}
