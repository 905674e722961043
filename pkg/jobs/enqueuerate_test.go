package jobs_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// tokenStore records the token buckets taken from.
type tokenStore struct {
	*jobstest.MemStore
	mu    sync.Mutex
	takes map[string]int
}

func (s *tokenStore) TakeToken(ctx context.Context, key string, b driver.TokenBucket) (time.Duration, error) {
	s.mu.Lock()
	s.takes[key]++
	s.mu.Unlock()
	return s.MemStore.TakeToken(ctx, key, b)
}

func (s *tokenStore) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, v := range s.takes {
		n += v
	}
	return n
}

func newEnqueueRateRig(t *testing.T, rate int) (*jobs.Service, *tokenStore, *jobstest.Clock) {
	t.Helper()
	clock := jobstest.NewClock(time.Unix(1_800_000_000, 0))
	store := &tokenStore{MemStore: jobstest.NewMemStore(clock), takes: map[string]int{}}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "k", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: &jobstest.MemQueue{}, Clock: clock, EnqueueRatePerOwner: rate})
	if err != nil {
		t.Fatal(err)
	}
	return svc, store, clock
}

// Config.EnqueueRatePerOwner: an owner's requests that make jobs
// (enqueue, batch, replay) past its rate are refused, rate_limited with a
// RetryAfter, nothing stored; another owner is untouched; a refusal
// reserves nothing (a second later the owner gets its full rate again,
// however many it was refused), and an instance refuses a refused owner
// without a store write until its token is due.
func TestEnqueueRatePerOwner(t *testing.T) {
	ctx := context.Background()
	svc, store, clock := newEnqueueRateRig(t, 5)
	enqueue := func(owner string) error {
		_, err := svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: owner, Kind: "k", Payload: []byte(`{}`)})
		return err
	}
	accepted := func(owner string, n int) (ok int, last error) {
		for range n {
			if err := enqueue(owner); err == nil {
				ok++
			} else {
				last = err
			}
		}
		return ok, last
	}
	ok, err := accepted("owner-a", 50)
	var re *jobs.RequestError
	if ok != 5 || !errors.As(err, &re) || re.Code != "rate_limited" || re.RetryAfter() <= 0 || re.RetryAfter() > time.Second {
		t.Fatalf("50 requests at once at 5 a second: %d accepted, last refusal %v, want 5 and rate_limited with a RetryAfter", ok, err)
	}
	if !errors.Is(err, jobs.ErrInvalidRequest) || strings.Contains(err.Error(), "owner-a") {
		t.Errorf("a refusal: %v", err)
	}
	if n := store.Len(); n != 5 {
		t.Fatalf("%d jobs stored, want the 5 accepted", n)
	}
	// 5 granted and 1 refused write: the other 44 refusals wrote nothing.
	if n := store.total(); n != 6 {
		t.Errorf("%d token takes for 50 requests, want 6 (the refused owner is refused locally)", n)
	}
	if ok, _ := accepted("owner-b", 5); ok != 5 {
		t.Errorf("another owner: %d of 5 accepted", ok)
	}
	// A batch and a replay are requests too.
	clock.Advance(time.Second)
	first, err := svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "owner-a", Kind: "k", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatalf("a second later: %v (the refusals reserved something)", err)
	}
	for range 3 {
		if _, err := svc.EnqueueBatch(ctx, jobs.BatchRequest{Owner: "owner-a", Jobs: []jobs.JobSpec{{Kind: "k", Payload: []byte(`{}`)}, {Kind: "k", Payload: []byte(`{}`)}}}); err != nil {
			t.Fatalf("a batch within the rate: %v", err)
		}
	}
	if _, err := svc.Replay(ctx, jobs.ReplayRequest{Owner: "owner-a", ID: first.Job.ID}); err != nil {
		t.Fatalf("a replay within the rate: %v", err)
	}
	before := store.Len()
	if _, err := svc.EnqueueBatch(ctx, jobs.BatchRequest{Owner: "owner-a", Jobs: []jobs.JobSpec{{Kind: "k", Payload: []byte(`{}`)}}}); !errors.As(err, &re) || re.Code != "rate_limited" {
		t.Errorf("a sixth request in the second, a batch: %v, want rate_limited", err)
	}
	if _, err := svc.Replay(ctx, jobs.ReplayRequest{Owner: "owner-a", ID: first.Job.ID}); !errors.As(err, &re) || re.Code != "rate_limited" {
		t.Errorf("a seventh, a replay: %v, want rate_limited", err)
	}
	if store.Len() != before {
		t.Error("a refused batch or replay stored jobs")
	}
	// Bad input is refused for what it is, and takes no token.
	takes := store.total()
	if _, err := svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "owner-c", Kind: "nope", Payload: []byte(`{}`)}); !errors.Is(err, jobs.ErrInvalidRequest) || store.total() != takes {
		t.Errorf("an unknown kind: %v, %d takes", err, store.total()-takes)
	}
}

// A rate above what one item should take is spread over several bucket
// items, and the owner's requests still never pass the rate.
func TestEnqueueRateSpreadsOverItems(t *testing.T) {
	ctx := context.Background()
	svc, store, clock := newEnqueueRateRig(t, 250)
	total := 0
	for range 3 {
		ok := 0
		for range 400 {
			if _, err := svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: "owner-a", Kind: "k", Payload: []byte(`{}`)}); err == nil {
				ok++
			}
			clock.Advance(time.Millisecond) // 400 requests over 0.4s
		}
		if ok > 250*4/10+250 { // the burst (a second's worth) and 0.4s of refill
			t.Fatalf("%d accepted in 0.4s at 250 a second", ok)
		}
		total += ok
		clock.Advance(600 * time.Millisecond)
	}
	if total < 250 {
		t.Errorf("%d accepted over 3 seconds at 250 a second: the rate is under-used", total)
	}
	if n := len(store.takes); n != 3 {
		t.Errorf("%d bucket items, want 3 (250 a second, at most 100 an item)", n)
	}
}
