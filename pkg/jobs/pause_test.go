package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// pauseRig is a Runner with two kinds of the default lane ("a", "b") and
// one of the lane "bulk" ("c"), counting each job's runs.
type pauseRig struct {
	*jobstest.Runner
	mu   sync.Mutex
	runs map[string]int
	a, b jobs.Kind[struct{}]
	c    jobs.Kind[struct{}]
}

func newPauseRig(t *testing.T) *pauseRig {
	t.Helper()
	r := &pauseRig{runs: map[string]int{}}
	reg := jobs.NewRegistry()
	handle := func(_ context.Context, j *jobs.Job[struct{}]) (jobs.NoResult, error) {
		r.mu.Lock()
		r.runs[j.ID]++
		r.mu.Unlock()
		return jobs.NoResult{}, nil
	}
	r.a = jobs.MustRegister(reg, "a", handle, nil)
	r.b = jobs.MustRegister(reg, "b", handle, nil)
	r.c = jobs.MustRegister(reg, "c", handle, &jobs.KindOpts{Lane: "bulk"})
	runner, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	r.Runner = runner
	return r
}

func (r *pauseRig) enqueue(t *testing.T, k jobs.Kind[struct{}], owner string) string {
	t.Helper()
	res, err := k.Enqueue(context.Background(), r.Service, owner, struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.Job.ID
}

func (r *pauseRig) work(t *testing.T) {
	t.Helper()
	if _, err := r.Work(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (r *pauseRig) ran(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[id]
}

// held checks that the job id has not run, is queued with no attempt spent
// and no write since its creation, and shows waiting_on "paused".
func (r *pauseRig) held(t *testing.T, owner, id string) {
	t.Helper()
	v, err := r.Service.Get(context.Background(), owner, id)
	if err != nil {
		t.Fatal(err)
	}
	if r.ran(id) != 0 || v.Status != jobs.StatusQueued || v.Attempt != 0 || v.WaitingOn != "paused" || !v.UpdatedAt.Equal(v.CreatedAt) {
		t.Fatalf("job %s: ran %d times, %s after %d attempts waiting on %q, updated %v after its creation; want held: not run, no write, waiting on paused",
			id, r.ran(id), v.Status, v.Attempt, v.WaitingOn, v.UpdatedAt.Sub(v.CreatedAt))
	}
}

// A paused kind's jobs are handed back unclaimed (no write, no attempt)
// however long the pause lasts, while other kinds run; after the resume
// each runs once, within the delay it was last handed back with (at most
// SQS's 15 minutes).
func TestAPausedKindIsHeldUntilResumed(t *testing.T) {
	r := newPauseRig(t)
	ctx := context.Background()
	if _, err := r.Service.Pause(ctx, "", jobs.PauseRequest{Kind: "a"}); err != nil {
		t.Fatal(err)
	}
	var held []string
	for range 3 {
		held = append(held, r.enqueue(t, r.a, "alice"))
	}
	other := r.enqueue(t, r.b, "alice")
	r.work(t)
	if r.ran(other) != 1 {
		t.Fatalf("the other kind's job ran %d times, want 1", r.ran(other))
	}
	for range 8 { // two hours, the delays growing to 15 minutes
		r.Clock.Advance(15 * time.Minute)
		r.work(t)
		for _, id := range held {
			r.held(t, "alice", id)
		}
	}
	if err := r.Service.Resume(ctx, "", jobs.PauseRequest{Kind: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := r.Service.Resume(ctx, "", jobs.PauseRequest{Kind: "a"}); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("a second resume: %v, want ErrNotFound", err)
	}
	r.Clock.Advance(driver.MaxQueueDelay + time.Minute)
	r.work(t)
	for _, id := range held {
		if v, _ := r.Service.Get(ctx, "alice", id); r.ran(id) != 1 || v.Status != jobs.StatusSucceeded || v.Attempt != 1 {
			t.Fatalf("job %s after the resume: ran %d times, %s after %d attempts; want once, succeeded at its first attempt", id, r.ran(id), v.Status, v.Attempt)
		}
	}
}

// An owner pauses its own jobs of a kind: another owner's run; the owner
// cannot resume (or change) a pause an operator put on its jobs, and sees
// only the pauses that hold its jobs.
func TestAnOwnerPausesItsOwnJobsOfAKind(t *testing.T) {
	r := newPauseRig(t)
	ctx := context.Background()
	if _, err := r.Service.Pause(ctx, "alice", jobs.PauseRequest{Kind: "a", For: time.Hour}); err != nil {
		t.Fatal(err)
	}
	mine, theirs := r.enqueue(t, r.a, "alice"), r.enqueue(t, r.a, "bob")
	r.work(t)
	r.held(t, "alice", mine)
	if r.ran(theirs) != 1 {
		t.Fatalf("bob's job ran %d times, want 1: alice paused her own jobs only", r.ran(theirs))
	}
	if list, err := r.Service.Pauses(ctx, "bob"); err != nil || len(list) != 0 {
		t.Fatalf("bob's pauses: %+v %v, want none: alice's is hers", list, err)
	}
	if list, err := r.Service.Pauses(ctx, "alice"); err != nil || len(list) != 1 || list[0].ID != "kind:a:owner:"+list[0].OwnerKey || list[0].By != "owner" {
		t.Fatalf("alice's pauses: %+v %v", list, err)
	}
	// An operator pauses alice's jobs too: a row apart, which alice can
	// neither end nor overwrite. Her own resume ends her own pause only.
	if _, err := r.Service.Pause(ctx, "", jobs.PauseRequest{Kind: "a", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	if err := r.Service.Resume(ctx, "alice", jobs.PauseRequest{Kind: "a"}); err != nil {
		t.Fatalf("alice resumes her own pause: %v", err)
	}
	if _, err := r.Service.Pause(ctx, "alice", jobs.PauseRequest{Kind: "a", For: time.Minute}); err != nil {
		t.Fatalf("alice pauses again beside the operator: %v", err)
	}
	if err := r.Service.Resume(ctx, "alice", jobs.PauseRequest{Kind: "a"}); err != nil {
		t.Fatal(err)
	}
	r.Clock.Advance(time.Minute)
	r.work(t)
	r.held(t, "alice", mine)
	var re *jobs.RequestError
	if err := r.Service.Resume(ctx, "alice", jobs.PauseRequest{Kind: "a"}); !errors.As(err, &re) || re.Code != "paused_by_operator" {
		t.Fatalf("alice resumes with only the operator's pause left: %v, want paused_by_operator", err)
	}
	if err := r.Service.Resume(ctx, "", jobs.PauseRequest{Kind: "a", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	r.Clock.Advance(driver.MaxQueueDelay + time.Minute)
	r.work(t)
	if r.ran(mine) != 1 {
		t.Fatalf("alice's job ran %d times after the resume, want 1", r.ran(mine))
	}
}

// A lane's pause holds every kind of the lane and no other; a pause ends
// by itself at its end, its jobs then run.
func TestALanePauseHoldsItsKindsUntilItEnds(t *testing.T) {
	r := newPauseRig(t)
	ctx := context.Background()
	if _, err := r.Service.Pause(ctx, "", jobs.PauseRequest{Lane: "bulk", For: 20 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	inLane, outside := r.enqueue(t, r.c, "alice"), r.enqueue(t, r.a, "alice")
	r.work(t)
	r.held(t, "alice", inLane)
	if r.ran(outside) != 1 {
		t.Fatalf("the default lane's job ran %d times, want 1", r.ran(outside))
	}
	for range 5 {
		r.Clock.Advance(5 * time.Minute)
		r.work(t)
	}
	if r.ran(inLane) != 1 {
		t.Fatalf("the lane's job ran %d times 25 minutes on, its pause ended at 20; want 1", r.ran(inLane))
	}
	if list, err := r.Service.Pauses(ctx, ""); err != nil || len(list) != 0 {
		t.Fatalf("pauses in force after the end: %+v %v, want none", list, err)
	}
}

// Bad pause requests are refused, and change nothing.
func TestPauseRequestsAreChecked(t *testing.T) {
	r := newPauseRig(t)
	ctx := context.Background()
	for name, c := range map[string]struct {
		by   string
		req  jobs.PauseRequest
		code string
	}{
		"nothing named":           {"", jobs.PauseRequest{}, "invalid_request"},
		"a kind and a lane":       {"", jobs.PauseRequest{Kind: "a", Lane: "bulk"}, "invalid_request"},
		"an owner and a lane":     {"", jobs.PauseRequest{Lane: "bulk", Owner: "alice"}, "invalid_request"},
		"an unknown kind":         {"", jobs.PauseRequest{Kind: "nope"}, "unknown_kind"},
		"an unknown lane":         {"", jobs.PauseRequest{Lane: "nope"}, "invalid_request"},
		"longer than 13 days":     {"", jobs.PauseRequest{Kind: "a", For: jobs.MaxPause + time.Second}, "invalid_request"},
		"negative":                {"", jobs.PauseRequest{Kind: "a", For: -time.Second}, "invalid_request"},
		"an owner's lane":         {"alice", jobs.PauseRequest{Lane: "bulk"}, "invalid_request"},
		"an owner's whole kind":   {"alice", jobs.PauseRequest{Kind: "a", Owner: "bob"}, "invalid_request"},
		"an owner without kind":   {"alice", jobs.PauseRequest{}, "invalid_request"},
		"an owner of no one":      {"\x01", jobs.PauseRequest{Kind: "a"}, "invalid_request"},
		"a resume of no pause":    {"", jobs.PauseRequest{Kind: "b"}, "not_found"},
		"an owner's empty resume": {"alice", jobs.PauseRequest{Kind: "b"}, "not_found"},
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			if name == "a resume of no pause" || name == "an owner's empty resume" {
				err = r.Service.Resume(ctx, c.by, c.req)
				if !errors.Is(err, jobs.ErrNotFound) {
					t.Fatalf("got %v, want ErrNotFound", err)
				}
				return
			}
			_, err = r.Service.Pause(ctx, c.by, c.req)
			var re *jobs.RequestError
			if !errors.As(err, &re) || re.Code != c.code {
				t.Fatalf("got %v, want %s", err, c.code)
			}
		})
	}
	if list, err := r.Service.Pauses(ctx, ""); err != nil || len(list) != 0 {
		t.Fatalf("after refused requests: %+v %v, want no pause", list, err)
	}
	// The default lane is named "default" here.
	if p, err := r.Service.Pause(ctx, "", jobs.PauseRequest{Lane: "default"}); err != nil || p.ID != "lane:default" || !p.Until.Equal(p.Since.Add(jobs.MaxPause)) {
		t.Fatalf("the default lane paused: %+v %v, want lane:default for MaxPause", p, err)
	}
}

// pauseCounter counts a worker's reads of the pause set.
type pauseCounter struct {
	*jobstest.MemStore
	reads int
}

func (p *pauseCounter) Pauses(ctx context.Context) ([]driver.Pause, error) {
	p.reads++
	return p.MemStore.Pauses(ctx)
}

// A worker instance reads the pause set at most once every 5 s, whatever
// it delivers meanwhile, and not at all while it gets no message. A job
// whose message carries no hint (a message sent before hints, a routed
// job) is claimed and parked instead: waiting on "paused", no attempt.
func TestPauseSetReadsAreBoundedPerInstance(t *testing.T) {
	clock := jobstest.NewClock(jobstest.Epoch)
	store := &pauseCounter{MemStore: jobstest.NewMemStore(clock)}
	queue := &jobstest.MemQueue{}
	reg := jobs.NewRegistry()
	a := jobs.MustRegister(reg, "a", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
	c, err := jobs.NewClient(jobs.Config{Registry: reg, Store: store, Queue: queue, Clock: clock, CancelCheck: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Service().Pause(ctx, "", jobs.PauseRequest{Kind: "a"}); err != nil {
		t.Fatal(err)
	}
	res, err := a.Enqueue(ctx, c.Service(), "alice", struct{}{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := res.Job.ID
	hinted := events.SQSMessage{MessageId: "m", Body: message.Encode(id), MessageAttributes: message.EventAttributes(queue.Messages()[0])}
	store.reads = 0
	for i := range 100 { // 100 deliveries over 10 s
		if resp, _ := c.Worker().HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{hinted}}); len(resp.BatchItemFailures) != 0 {
			t.Fatalf("delivery %d given back: %v", i, resp.BatchItemFailures)
		}
		clock.Advance(100 * time.Millisecond)
	}
	if store.reads != 2 {
		t.Fatalf("100 deliveries over 10 s read the pause set %d times, want 2 (once in 5 s)", store.reads)
	}
	clock.Advance(time.Hour)
	if store.reads != 2 {
		t.Fatalf("an idle hour read the pause set %d times more", store.reads-2)
	}
	rec, _ := store.Get(ctx, id)
	if rec.Status != jobs.StatusQueued || rec.Attempt != 0 || rec.WaitingOn != "" {
		t.Fatalf("after hinted deliveries: %s, %d attempts, waiting on %q; want untouched", rec.Status, rec.Attempt, rec.WaitingOn)
	}
	// Without the hint: claimed, then parked.
	plain := events.SQSMessage{MessageId: "p", Body: message.Encode(id)}
	if resp, _ := c.Worker().HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{plain}}); len(resp.BatchItemFailures) != 0 {
		t.Fatalf("given back: %v", resp.BatchItemFailures)
	}
	rec, _ = store.Get(ctx, id)
	if rec.Status != jobs.StatusQueued || rec.Attempt != 0 || rec.WaitingOn != "paused" {
		t.Fatalf("after a delivery without hints: %s, %d attempts, waiting on %q; want parked on paused, no attempt", rec.Status, rec.Attempt, rec.WaitingOn)
	}
	if d := queue.Delay(id); d < 15*time.Second {
		t.Fatalf("the parked job's message waits %v, want about 30 s or more", d)
	}
}

// Callers cannot fill the pause set: an owner has at most 10 pauses in
// force, and an operator can still pause when owners have.
func TestOwnersCannotFillThePauseSet(t *testing.T) {
	reg := jobs.NewRegistry()
	for i := range 11 {
		jobs.MustRegister(reg, fmt.Sprintf("k%d", i), func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
	}
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 10 {
		if _, err := r.Service.Pause(ctx, "mallory", jobs.PauseRequest{Kind: fmt.Sprintf("k%d", i)}); err != nil {
			t.Fatalf("pause %d: %v", i, err)
		}
	}
	var re *jobs.RequestError
	if _, err := r.Service.Pause(ctx, "mallory", jobs.PauseRequest{Kind: "k10"}); !errors.As(err, &re) || re.Code != "pause_limit" {
		t.Fatalf("an owner's 11th pause: %v, want pause_limit", err)
	}
	if _, err := r.Service.Pause(ctx, "mallory", jobs.PauseRequest{Kind: "k3", For: time.Hour}); err != nil {
		t.Fatalf("an owner replaces one of its pauses at the limit: %v", err)
	}
	if _, err := r.Service.Pause(ctx, "", jobs.PauseRequest{Kind: "k10"}); err != nil {
		t.Fatalf("an operator pauses with the owner at its limit: %v", err)
	}
}
