package jobs_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

type reportPayload struct {
	Team string `json:"team"`
}

type cardOnFile struct {
	Card string `json:"card" jobs:"secret"`
}

func TestScheduleDeclarationsAreChecked(t *testing.T) {
	reg := jobs.NewRegistry()
	report := jobs.MustRegister(reg, "report", func(context.Context, *jobs.Job[reportPayload]) (jobs.NoResult, error) {
		return jobs.NoResult{}, nil
	}, nil)
	card := jobs.MustRegister(reg, "card", func(context.Context, *jobs.Job[cardOnFile]) (jobs.NoResult, error) {
		return jobs.NoResult{}, nil
	}, nil)
	if err := report.Every(reg, "nightly", "cron(0 2 * * ? *)", reportPayload{Team: "a"}, &jobs.ScheduleOpts{TimeZone: "Europe/Paris", Overlap: jobs.OverlapSkip}); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"duplicate name": report.Every(reg, "nightly", "rate(1 hour)", reportPayload{}, nil),
		"bad name":       report.Every(reg, "night ly", "rate(1 hour)", reportPayload{}, nil),
		"bad expression": report.Every(reg, "a", "cron(0 2 * * * *)", reportPayload{}, nil),
		"one-time":       report.Every(reg, "b", "at(2026-12-01T00:00:00)", reportPayload{}, nil),
		"bad zone":       report.Every(reg, "c", "rate(1 hour)", reportPayload{}, &jobs.ScheduleOpts{TimeZone: "Mars/Olympus"}),
		"bad overlap":    report.Every(reg, "d", "rate(1 hour)", reportPayload{}, &jobs.ScheduleOpts{Overlap: "queue"}),
		"secret fields":  card.Every(reg, "e", "rate(1 hour)", cardOnFile{Card: "4242"}, nil),
		"unknown kind":   jobs.AddSchedule(reg, jobs.Schedule{Name: "f", Expression: "rate(1 hour)", Kind: "nope"}),
		"stale payload":  jobs.AddSchedule(reg, jobs.Schedule{Name: "g", Expression: "rate(1 hour)", Kind: "report", Payload: []byte(`{"team":"a","old_field":1}`)}),
		"null payload":   jobs.AddSchedule(reg, jobs.Schedule{Name: "h", Expression: "rate(1 hour)", Kind: "report"}),
		"bad owner":      report.Every(reg, "i", "rate(1 hour)", reportPayload{}, &jobs.ScheduleOpts{Owner: "tab\there"}),
	} {
		if !errors.Is(err, jobs.ErrInvalidSchedule) {
			t.Errorf("%s: %v, want ErrInvalidSchedule", name, err)
		}
	}
	got := reg.Schedules()
	if len(got) != 1 || got[0].Name != "nightly" || got[0].TimeZone != "Europe/Paris" || got[0].Owner != driver.DefaultScheduleOwner ||
		got[0].Overlap != jobs.OverlapSkip || string(got[0].Payload) != `{"team":"a"}` {
		t.Fatalf("declared: %+v", got)
	}
	// Once the registry is in use, nothing more is declared.
	_, _ = testroles.Worker(jobs.Config{Registry: reg, Store: jobstest.NewMemStore(nil)})
	if err := report.Every(reg, "late", "rate(1 hour)", reportPayload{}, nil); !errors.Is(err, jobs.ErrInvalidSchedule) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("a declaration after use: %v", err)
	}
}

// scheduleFixture is a worker with one schedule whose handler counts its
// runs and, when hold is set, waits for it.
type scheduleFixture struct {
	mem  *jobstest.MemStore
	w    *jobs.Worker
	runs atomic.Int32
	hold chan struct{}
	in   chan struct{}
}

func newScheduleFixture(t *testing.T, overlap jobs.Overlap) *scheduleFixture {
	f := &scheduleFixture{mem: jobstest.NewMemStore(nil), in: make(chan struct{}, 10)}
	reg := jobs.NewRegistry()
	k := jobs.MustRegister(reg, "report", func(ctx context.Context, j *jobs.Job[reportPayload]) (jobs.NoResult, error) {
		f.runs.Add(1)
		f.in <- struct{}{}
		if f.hold != nil {
			<-f.hold
		}
		return jobs.NoResult{}, nil
	}, nil)
	if err := k.Every(reg, "nightly", "rate(1 hour)", reportPayload{Team: "a"}, &jobs.ScheduleOpts{Overlap: overlap, Owner: "team"}); err != nil {
		t.Fatal(err)
	}
	w, err := testroles.Worker(jobs.Config{Registry: reg, Store: f.mem, CancelCheck: -1})
	if err != nil {
		t.Fatal(err)
	}
	f.w = w
	return f
}

func (f *scheduleFixture) fire(t *testing.T, at time.Time, copies int) events.SQSEventResponse {
	t.Helper()
	var ev events.SQSEvent
	for i := range copies {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: at.Format(time.RFC3339) + "-" + string(rune('a'+i)), Body: wire.FireMessage("nightly", at.Format(time.RFC3339))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, _ := f.w.HandleSQS(ctx, ev)
	return resp
}

// A fire delivered three times (Scheduler's retry and two SQS duplicates),
// in one batch and in later ones, creates one job, run once, owned by the
// schedule's owner.
func TestEachFireCreatesOneJob(t *testing.T) {
	f := newScheduleFixture(t, jobs.OverlapAllow)
	at := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	if resp := f.fire(t, at, 2); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	if resp := f.fire(t, at, 1); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("failures %v", resp.BatchItemFailures)
	}
	if n := f.runs.Load(); n != 1 {
		t.Fatalf("one fire delivered 3 times ran %d times", n)
	}
	rec, err := f.mem.Get(context.Background(), wire.FireJobID("nightly", at))
	if err != nil || rec.Status != jobs.StatusSucceeded || rec.Owner != "team" || rec.Kind != "report" || string(rec.Payload) != `{"team":"a"}` {
		t.Fatalf("the fire's job: %+v %v", rec, err)
	}
	// The next fire is another job.
	f.fire(t, at.Add(time.Hour), 1)
	if n := f.runs.Load(); n != 2 {
		t.Fatalf("two fires ran %d times", n)
	}
}

// With OverlapSkip, fires while the previous fire's job runs are skipped
// (no job), duplicates of the running fire are not mistaken for overlap,
// and the first fire after it finishes runs.
func TestSkipOverlap(t *testing.T) {
	f := newScheduleFixture(t, jobs.OverlapSkip)
	f.hold = make(chan struct{})
	t1 := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	done := make(chan struct{})
	go func() { f.fire(t, t1, 1); close(done) }()
	<-f.in // the first fire's job is running
	for _, at := range []time.Time{t1.Add(time.Hour), t1.Add(2 * time.Hour), t1.Add(time.Hour)} {
		if resp := f.fire(t, at, 1); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("a skipped fire came back: %v", resp.BatchItemFailures)
		}
		if _, err := f.mem.Get(context.Background(), wire.FireJobID("nightly", at)); !errors.Is(err, jobs.ErrNotFound) {
			t.Fatalf("a fire during the run created a job: %v", err)
		}
	}
	f.fire(t, t1, 1) // a duplicate of the running fire: not a skip, not a second run
	close(f.hold)
	<-done
	if n := f.runs.Load(); n != 1 {
		t.Fatalf("%d runs while the first was unfinished", n)
	}
	t4 := t1.Add(3 * time.Hour)
	f.fire(t, t4, 1)
	if n := f.runs.Load(); n != 2 {
		t.Fatalf("the fire after the run finished: %d runs, want 2", n)
	}
	if rec, err := f.mem.Get(context.Background(), wire.FireJobID("nightly", t4)); err != nil || rec.Status != jobs.StatusSucceeded {
		t.Fatalf("the next fire's job: %+v %v", rec, err)
	}
}

// A fire of a schedule the worker does not declare is acknowledged without
// a job; a fire without a valid time comes back (and reaches the DLQ).
func TestFiresOfUnknownSchedulesAndBadTimes(t *testing.T) {
	f := newScheduleFixture(t, jobs.OverlapAllow)
	ctx := context.Background()
	resp, _ := f.w.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "removed", Body: wire.FireMessage("removed-schedule", "2026-11-30T02:00:00Z")},
		{MessageId: "bad-time", Body: wire.FireMessage("nightly", "yesterday")},
	}})
	if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "bad-time" || f.runs.Load() != 0 {
		t.Fatalf("failures %v, runs %d", resp.BatchItemFailures, f.runs.Load())
	}
}
