package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// payloadMarker is in every payload of these tests: no event may carry it.
const payloadMarker = "PAYLOAD_MARKER_never_in_events"

type evPayload struct {
	Mode string `json:"mode"`
	Note string `json:"note"`
}

// eventRig is a service, worker and sweeper sharing a MemStore, a queue
// and a MemBus, with kinds that announce their outcomes.
type eventRig struct {
	clock   *jobstest.Clock
	mem     *jobstest.MemStore
	store   driver.Store
	queue   *jobstest.MemQueue
	bus     *jobstest.MemBus
	svc     *jobs.Service
	worker  *jobs.Worker
	sweeper *jobs.Sweeper
	logs    testenv.SyncBuffer
}

func newEventRig(t *testing.T, wrap func(*jobstest.MemStore) driver.Store) *eventRig {
	t.Helper()
	r := &eventRig{clock: jobstest.NewClock(time.Now()), queue: &jobstest.MemQueue{}, bus: &jobstest.MemBus{}}
	r.mem = jobstest.NewMemStore(r.clock)
	r.store = r.mem
	if wrap != nil {
		r.store = wrap(r.mem)
	}
	reg := jobs.NewRegistry()
	handle := func(ctx context.Context, j *jobs.Job[evPayload]) (jobs.Result, error) {
		switch j.Payload.Mode {
		case "declared":
			return nil, jobs.Fail("card_declined", fmt.Errorf("gateway said %s", secret))
		case "internal":
			return nil, fmt.Errorf("GET https://api.example.test/?token=%s: 500", secret)
		case "big":
			return jobs.JSON[string]{V: strings.Repeat("r", 9000)}, nil
		case "mid":
			return jobs.JSON[string]{V: strings.Repeat("m", 500)}, nil
		case "honour_deadline":
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return jobs.JSON[map[string]string]{V: map[string]string{"done": "yes"}}, nil
	}
	jobs.MustRegister(reg, "ev", handle, &jobs.KindOpts{Events: true, FailureCodes: []string{"card_declined"}, OnFailure: "ev.failed"})
	jobs.MustRegister(reg, "quiet", handle, &jobs.KindOpts{FailureCodes: []string{"card_declined"}})
	jobs.MustRegister(reg, "ev.failed", func(ctx context.Context, j *jobs.Job[jobs.FailedJob]) (jobs.NoResult, error) {
		return jobs.NoResult{}, nil
	}, nil)
	logger := slog.New(slog.NewJSONHandler(&r.logs, nil))
	bus := dyingBus{r.bus}
	var err error
	if r.svc, err = testroles.Service(jobs.Config{Registry: reg, Store: r.store, Queue: r.queue, Clock: r.clock, Logger: logger, Bus: bus}); err != nil {
		t.Fatal(err)
	}
	if r.worker, err = testroles.Worker(jobs.Config{Registry: reg, Store: r.store, Queue: r.queue, Clock: r.clock, Logger: logger, Bus: bus, CancelCheck: -1}); err != nil {
		t.Fatal(err)
	}
	if r.sweeper, err = testroles.Sweeper(jobs.Config{Registry: reg, Store: r.store, Queue: r.queue, Clock: r.clock, Logger: logger, Bus: bus}); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *eventRig) enqueue(t *testing.T, kind, mode string) string {
	t.Helper()
	p, _ := json.Marshal(evPayload{Mode: mode, Note: payloadMarker})
	rec, _, err := enqueued(r.svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "alice", Kind: kind, Payload: p}))
	if err != nil {
		t.Fatal(err)
	}
	return rec.ID
}

func (r *eventRig) run(t *testing.T, ctx context.Context, ids ...string) {
	t.Helper()
	bodies := make([]string, len(ids))
	for i, id := range ids {
		bodies[i] = message.Encode(id)
	}
	if resp, _ := r.worker.HandleSQS(ctx, sqsEvent(bodies...)); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch item failures %v", failedIDs(resp))
	}
}

// sweepLater runs a sweep once every sweep time has passed.
func (r *eventRig) sweepLater(t *testing.T) jobs.SweepReport {
	t.Helper()
	r.clock.Advance(time.Hour)
	rep, err := r.sweeper.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func (r *eventRig) get(t *testing.T, id string) *driver.Record {
	t.Helper()
	rec, err := r.mem.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// eventsOf returns the events the bus accepted for job id.
func (r *eventRig) eventsOf(id string) []jobs.Event {
	var out []jobs.Event
	for _, ev := range r.bus.Events() {
		if ev.JobID == id {
			out = append(out, ev)
		}
	}
	return out
}

// checkClean fails when a sent event holds payload or handler text.
func (r *eventRig) checkClean(t *testing.T) {
	t.Helper()
	for _, ev := range r.bus.Raw() {
		if ev.DetailType != jobs.EventDetailType {
			t.Errorf("detail type %q, want %q", ev.DetailType, jobs.EventDetailType)
		}
		if d := string(ev.Detail); strings.Contains(d, payloadMarker) || strings.Contains(d, secret) || strings.Contains(d, "gateway") {
			t.Errorf("event carries payload or handler text: %s", d)
		}
	}
	if strings.Contains(r.logs.String(), secret) {
		t.Errorf("handler text in the logs")
	}
}

func TestEventsAnnounceEachOutcome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, mode string
		status     jobs.Status
		code       string
		result     string
		resultURL  bool
	}{
		{name: "succeeded", status: jobs.StatusSucceeded, result: `{"done":"yes"}`},
		{name: "failed with a declared code", mode: "declared", status: jobs.StatusFailed, code: "card_declined"},
		{name: "failed with handler text", mode: "internal", status: jobs.StatusFailed, code: jobs.CodeInternal},
		{name: "a result above 8 KiB is a pointer", mode: "big", status: jobs.StatusSucceeded, resultURL: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newEventRig(t, nil)
			id := r.enqueue(t, "ev", tt.mode)
			r.run(t, context.Background(), id)
			evs := r.eventsOf(id)
			if len(evs) != 1 {
				t.Fatalf("got %d events, want 1", len(evs))
			}
			ev := evs[0]
			want := jobs.Event{ID: id + "/1", JobID: id, Sequence: 1, Kind: "ev", Owner: "alice", Status: tt.status, Code: tt.code, Attempt: 1,
				FinishedAt: r.get(t, id).FinishedAt.UTC()}
			if tt.result != "" {
				want.Result = json.RawMessage(tt.result)
			}
			if tt.resultURL {
				want.ResultURL = "/v1/jobs/" + id
			}
			if g, w := fmt.Sprintf("%+v", ev), fmt.Sprintf("%+v", want); g != w {
				t.Errorf("event\n got %s\nwant %s", g, w)
			}
			if got := r.get(t, id); len(got.After) != 0 || got.Outcomes != 1 {
				t.Errorf("after the send: steps %v, outcomes %d; want none pending, 1 outcome", got.After, got.Outcomes)
			}
			r.checkClean(t)
		})
	}
}

func TestEventsOfCancelledTimedOutAndInterruptedJobs(t *testing.T) {
	t.Parallel()
	t.Run("cancelled while queued", func(t *testing.T) {
		t.Parallel()
		r := newEventRig(t, nil)
		id := r.enqueue(t, "ev", "")
		if _, err := r.svc.Cancel(context.Background(), "alice", id); err != nil {
			t.Fatal(err)
		}
		evs := r.eventsOf(id)
		if len(evs) != 1 || evs[0].Status != jobs.StatusCancelled || evs[0].ID != id+"/1" || evs[0].Code != "" {
			t.Fatalf("events %+v, want one cancelled, id %s/1", evs, id)
		}
	})
	t.Run("timed out", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			r := newEventRig(t, nil)
			id := r.enqueue(t, "ev", "honour_deadline")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			r.run(t, ctx, id)
			evs := r.eventsOf(id)
			if len(evs) != 1 || evs[0].Status != jobs.StatusFailed || evs[0].Code != jobs.CodeTimedOut {
				t.Fatalf("events %+v, want one failed timed_out", evs)
			}
		})
	})
	t.Run("interrupted, by the sweeper", func(t *testing.T) {
		t.Parallel()
		r := newEventRig(t, nil)
		id := r.enqueue(t, "ev", "")
		// A worker claims it and dies.
		if _, err := r.mem.Claim(context.Background(), id, driver.Claim{Token: "dead", At: r.clock.Now(), LeaseUntil: r.clock.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		r.sweepLater(t)
		evs := r.eventsOf(id)
		if len(evs) != 1 || evs[0].Status != jobs.StatusFailed || evs[0].Code != jobs.CodeInterrupted || evs[0].Attempt != 1 {
			t.Fatalf("events %+v, want one failed interrupted, attempt 1", evs)
		}
		if got := r.get(t, id); len(got.After) != 0 {
			t.Fatalf("steps %v left pending", got.After)
		}
	})
}

// A kind that does not opt in pays nothing: no event, no outcome count,
// no step pending (so no DoneAfter write).
func TestEventsCostNothingForKindsWithout(t *testing.T) {
	t.Parallel()
	r := newEventRig(t, nil)
	ok, failed := r.enqueue(t, "quiet", ""), r.enqueue(t, "quiet", "declared")
	r.run(t, context.Background(), ok, failed)
	if n := len(r.bus.Events()); n != 0 || r.bus.Puts() != 0 {
		t.Fatalf("%d events in %d puts for kinds without events", n, r.bus.Puts())
	}
	for _, id := range []string{ok, failed} {
		if got := r.get(t, id); got.Events || got.Outcomes != 0 || len(got.After) != 0 || !got.SweepAt.IsZero() {
			t.Fatalf("job %s: events %v outcomes %d steps %v sweep %v; want nothing stored for events", id, got.Events, got.Outcomes, got.After, got.SweepAt)
		}
	}
}

// The events of one worker invocation go out in one request.
func TestEventsAreBatchedPerInvocation(t *testing.T) {
	t.Parallel()
	r := newEventRig(t, nil)
	var ids []string
	for range 5 {
		ids = append(ids, r.enqueue(t, "ev", ""))
	}
	r.run(t, context.Background(), ids...)
	if n, puts := len(r.bus.Events()), r.bus.Puts(); n != 5 || puts != 1 {
		t.Fatalf("%d events in %d requests, want 5 in 1", n, puts)
	}
}

// A bus that fails leaves the event pending on the job (never reported as
// sent); the sweeper sends it later, once.
func TestEventLeftPendingOnBusFailureIsSentBySweeper(t *testing.T) {
	t.Parallel()
	r := newEventRig(t, nil)
	id := r.enqueue(t, "ev", "")
	r.bus.SetFail(errors.New("eventbridge: throttled"))
	r.run(t, context.Background(), id)
	if got := r.get(t, id); got.Status != jobs.StatusSucceeded || !slices.Contains(got.After, "event") {
		t.Fatalf("after a failed send: %s, steps %v; want succeeded with the event pending", got.Status, got.After)
	}
	r.sweepLater(t) // still failing: stays pending
	if got := r.get(t, id); !slices.Contains(got.After, "event") {
		t.Fatalf("steps %v after a failed sweep; want the event pending", got.After)
	}
	r.bus.SetFail(nil)
	r.sweepLater(t)
	r.sweepLater(t)
	if evs := r.eventsOf(id); len(evs) != 1 || evs[0].ID != id+"/1" {
		t.Fatalf("events %+v, want one, id %s/1", evs, id)
	}
	if got := r.get(t, id); len(got.After) != 0 {
		t.Fatalf("steps %v after the sweeper sent it", got.After)
	}
}

// A result kept in an item of its own reaches the event the sweeper sends
// for a job whose worker could not: read from its item (up to 8 KiB), or
// named by its URL beyond.
func TestAResultApartIsAnnouncedBySweeper(t *testing.T) {
	t.Parallel()
	r := newEventRig(t, nil)
	r.mem.KeepPayloadsApart(64)
	mid, big := r.enqueue(t, "ev", "mid"), r.enqueue(t, "ev", "big")
	r.bus.SetFail(errors.New("eventbridge: throttled"))
	r.run(t, context.Background(), mid, big)
	if got := r.get(t, mid); got.ResultRef == "" || !slices.Contains(got.After, "event") {
		t.Fatalf("after a failed send: result ref %q, steps %v; want the result apart and the event pending", got.ResultRef, got.After)
	}
	r.bus.SetFail(nil)
	r.sweepLater(t)
	r.sweepLater(t)
	evs := r.eventsOf(mid)
	if len(evs) != 1 || !strings.Contains(string(evs[0].Result), strings.Repeat("m", 500)) || evs[0].ResultURL != "" {
		t.Fatalf("events %+v, want one carrying the 500-byte result", evs)
	}
	if evs := r.eventsOf(big); len(evs) != 1 || evs[0].Result != nil || evs[0].ResultURL == "" {
		t.Fatalf("events %+v, want one naming its 9 KB result's URL", evs)
	}
}

// Entries the bus refused in a partly failed request stay pending; the
// others are done. The sweeper sends the refused ones.
func TestEventPartialFailureIsRetried(t *testing.T) {
	t.Parallel()
	r := newEventRig(t, nil)
	ids := []string{r.enqueue(t, "ev", ""), r.enqueue(t, "ev", ""), r.enqueue(t, "ev", "")}
	r.bus.Reject(1)
	r.run(t, context.Background(), ids...)
	pending := 0
	for _, id := range ids {
		if len(r.get(t, id).After) > 0 {
			pending++
		}
	}
	if n := len(r.bus.Events()); n != 2 || pending != 1 {
		t.Fatalf("%d sent, %d pending; want 2 sent, the refused one pending", n, pending)
	}
	r.sweepLater(t)
	for _, id := range ids {
		if evs := r.eventsOf(id); len(evs) != 1 {
			t.Fatalf("job %s: %d events after the sweep, want 1", id, len(evs))
		}
	}
}

// The worker dies between the final write and the send (its steps never
// run): the sweeper sends the event; a duplicate delivery of the job's
// message sends no second one.
func TestEventOfDeadWorkerIsSentOnce(t *testing.T) {
	t.Parallel()
	r := newEventRig(t, func(m *jobstest.MemStore) driver.Store { return dyingAfterFinish{m} })
	id := r.enqueue(t, "ev", "")
	r.run(t, context.WithValue(context.Background(), dieKey{}, true), id)
	if n := len(r.eventsOf(id)); n != 0 {
		t.Fatalf("%d events from the dead worker", n)
	}
	r.sweepLater(t)
	r.run(t, context.Background(), id) // the duplicate delivery
	r.sweepLater(t)
	if evs := r.eventsOf(id); len(evs) != 1 || evs[0].ID != id+"/1" || evs[0].Status != jobs.StatusSucceeded {
		t.Fatalf("events %+v; want exactly one, succeeded", evs)
	}
}

// The worker dies between the final write and the send: the next
// delivery of the job's message (its net, which the dead worker never
// acknowledged) sends the event, before any sweep; a sweep and another
// delivery send no second one.
func TestEventOfDeadWorkerIsSentByTheRedelivery(t *testing.T) {
	t.Parallel()
	r := newEventRig(t, func(m *jobstest.MemStore) driver.Store { return dyingAfterFinish{m} })
	id := r.enqueue(t, "ev", "")
	r.run(t, context.WithValue(context.Background(), dieKey{}, true), id)
	r.run(t, context.Background(), id) // the message comes back
	if evs := r.eventsOf(id); len(evs) != 1 || evs[0].ID != id+"/1" || len(r.get(t, id).After) != 0 {
		t.Fatalf("after the redelivery: events %+v, steps %v; want the one event sent, no step pending", evs, r.get(t, id).After)
	}
	r.sweepLater(t)
	r.run(t, context.Background(), id)
	if evs := r.eventsOf(id); len(evs) != 1 {
		t.Fatalf("events %+v; want exactly one", evs)
	}
}

type dieKey struct{}

// dyingAfterFinish lands the final write, then "kills" the worker: every
// later call of its invocation (one whose context has dieKey) fails, as if
// the process were gone.
type dyingAfterFinish struct{ *jobstest.MemStore }

// dyingBus is the bus as the dead worker sees it: unreachable.
type dyingBus struct{ *jobstest.MemBus }

func (b dyingBus) Put(ctx context.Context, evs []driver.Event) ([]bool, error) {
	if ctx.Value(dieKey{}) != nil {
		return nil, errWorkerDied
	}
	return b.MemBus.Put(ctx, evs)
}

func (s dyingAfterFinish) DoneAfter(ctx context.Context, id string, of driver.AfterOf) error {
	if ctx.Value(dieKey{}) != nil {
		return errWorkerDied
	}
	return s.MemStore.DoneAfter(ctx, id, of)
}

func (s dyingAfterFinish) Create(ctx context.Context, rec *driver.Record) error {
	if ctx.Value(dieKey{}) != nil {
		return errWorkerDied
	}
	return s.MemStore.Create(ctx, rec)
}

var errWorkerDied = errors.New("worker died")

// Each final write counts an outcome: a job cancelled, retried and
// cancelled again has two events with distinct ids.
func TestEventIDsAreDistinctPerOutcome(t *testing.T) {
	t.Parallel()
	r := newEventRig(t, nil)
	id := r.enqueue(t, "ev", "")
	ctx := context.Background()
	if _, err := r.svc.Cancel(ctx, "alice", id); err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.Resubmit(ctx, "alice", id); err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.Cancel(ctx, "alice", id); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range r.eventsOf(id) {
		got = append(got, ev.ID)
	}
	if want := []string{id + "/1", id + "/2"}; !slices.Equal(got, want) {
		t.Fatalf("event ids %v, want %v", got, want)
	}
}

// A retry of a job whose last event is still pending sends that event
// first; while it cannot be sent the retry is refused, so no outcome's
// event is ever lost to a retry.
func TestRetrySendsThePendingEventFirst(t *testing.T) {
	t.Parallel()
	r := newEventRig(t, nil)
	id := r.enqueue(t, "ev", "declared")
	r.bus.SetFail(errors.New("eventbridge: unavailable"))
	r.run(t, context.Background(), id)
	ctx := context.Background()
	if _, err := r.svc.Resubmit(ctx, "alice", id); !errors.Is(err, jobs.ErrNotResubmittable) {
		t.Fatalf("retry with the event unsendable: %v, want ErrNotResubmittable", err)
	}
	r.bus.SetFail(nil)
	if _, err := r.svc.Resubmit(ctx, "alice", id); err != nil {
		t.Fatalf("retry once the bus is back: %v", err)
	}
	if evs := r.eventsOf(id); len(evs) != 1 || evs[0].ID != id+"/1" || evs[0].Status != jobs.StatusFailed {
		t.Fatalf("events %+v, want the failed outcome's, once", evs)
	}
}

// An event's result_url is the route table's GET /v1/jobs/{id} (the table
// imports package jobs, so jobs writes the path itself).
func TestEventsResultPathIsTheGetJobRoute(t *testing.T) {
	want, err := deploy.PathOf(deploy.RouteGetJob, map[string]string{"id": "j-1"})
	if err != nil {
		t.Fatal(err)
	}
	if got := jobs.ResultPath + "j-1"; got != want {
		t.Fatalf("result_url %q, the route table's %q", got, want)
	}
}
