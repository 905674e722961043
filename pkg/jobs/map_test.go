package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

type basketIn struct {
	Items  int  `json:"items"`
	Window int  `json:"window"`
	FailAt int  `json:"fail_at,omitempty"` // 1-based: that item's quote fails
	Hold   bool `json:"hold,omitempty"`
}

type basketOut struct {
	Total  int      `json:"total"`
	Failed []string `json:"failed,omitempty"`
}

// mapRig: a "basket" kind that maps a "quote" child over its items, a
// window at a time, in a jobstest.Runner, counting the runs of each.
type mapRig struct {
	*invokeRig
	basketRuns int
}

func newMapRig(t *testing.T) *mapRig {
	t.Helper()
	s := &mapRig{invokeRig: &invokeRig{quotes: map[string]int{}}}
	var mu sync.Mutex
	reg := jobs.NewRegistry()
	quoteKind := jobs.MustRegister(reg, "quote", func(ctx context.Context, job *jobs.Job[quotePayload]) (jobs.JSON[quoteV], error) {
		mu.Lock()
		s.quotes[job.Payload.Item]++
		mu.Unlock()
		if job.Payload.Hold {
			if _, _, err := jobs.WaitForSignal[string](ctx, job, "go", time.Hour); err != nil {
				return jobs.JSON[quoteV]{}, err
			}
		}
		if job.Payload.Fail {
			return jobs.JSON[quoteV]{}, jobs.Fail("sold_out", errors.New("sold out"))
		}
		return jobs.JSON[quoteV]{V: quoteV{Item: job.Payload.Item, Cents: len(job.Payload.Item)}}, nil
	}, &jobs.KindOpts{FailureCodes: []string{"sold_out"}, Signals: map[string]any{"go": ""}})
	jobs.MustRegister(reg, "basket", func(ctx context.Context, job *jobs.Job[basketIn]) (jobs.JSON[basketOut], error) {
		mu.Lock()
		s.basketRuns++
		mu.Unlock()
		calls := make([]jobs.Call, job.Payload.Items)
		for i := range calls {
			calls[i] = quoteKind.Call(quotePayload{Item: strings.Repeat("x", i+1), Fail: i+1 == job.Payload.FailAt, Hold: job.Payload.Hold}, nil)
		}
		quotes, err := jobs.Map[quoteV](ctx, job, "quotes", calls, job.Payload.Window)
		var out basketOut
		for _, e := range unjoin(err) {
			var ce *jobs.ChildError
			if !errors.As(e, &ce) {
				return jobs.JSON[basketOut]{}, err
			}
			out.Failed = append(out.Failed, ce.Code)
		}
		for i, q := range quotes {
			if q.Cents != 0 && q.Cents != i+1 {
				return jobs.JSON[basketOut]{}, fmt.Errorf("result %d is %d: out of order", i, q.Cents)
			}
			out.Total += q.Cents
		}
		return jobs.JSON[basketOut]{V: out}, nil
	}, nil)
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	s.r = r
	return s
}

// unjoin is the errors errors.Join joined (err itself if it is another).
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err != nil {
		return []error{err}
	}
	return nil
}

func (s *mapRig) basket(t *testing.T, p string) string {
	t.Helper()
	res, err := s.r.Service.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "o", Kind: "basket", Payload: []byte(p)})
	if err != nil {
		t.Fatal(err)
	}
	return res.Job.ID
}

// A Map of 25 children in windows of 10 runs them in three waves, each a
// batch: every child runs once, the parent is woken once per wave (four
// runs, not 25), and the results come back in the calls' order.
func TestMapWakesTheParentOncePerWave(t *testing.T) {
	s := newMapRig(t)
	ctx := context.Background()
	id := s.basket(t, `{"items":25,"window":10}`)
	if _, err := s.r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	v := s.get(t, id)
	if v.Status != jobs.StatusSucceeded || string(v.Result) != `{"total":325}` {
		t.Fatalf("the basket: %s %s", v.Status, v.Result)
	}
	if len(s.quotes) != 25 || s.basketRuns != 4 || v.Attempt != 1 {
		t.Fatalf("runs: quotes %d, the basket %d, attempt %d; want 25 children, the basket 4 times, one attempt", len(s.quotes), s.basketRuns, v.Attempt)
	}
	for item, n := range s.quotes {
		if n != 1 {
			t.Fatalf("child %q ran %d times", item, n)
		}
	}
	if got := marks(v.Steps); !strings.HasPrefix(got, "quotes children done ") {
		t.Fatalf("the basket's steps: %s", got)
	}
	list, err := s.r.Service.List(ctx, "o", jobs.ListRequest{Kind: "quote", Limit: 100})
	if err != nil || len(list.Jobs) != 25 {
		t.Fatalf("the children: %d %v", len(list.Jobs), err)
	}
}

// A child that fails with a declared code surfaces as a *ChildError with
// that code; the other children's results come back.
func TestMapChildFailure(t *testing.T) {
	s := newMapRig(t)
	id := s.basket(t, `{"items":4,"fail_at":2}`)
	if _, err := s.r.Work(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := s.get(t, id); v.Status != jobs.StatusSucceeded || string(v.Result) != `{"total":8,"failed":["sold_out"]}` {
		t.Fatalf("the basket: %s %s", v.Status, v.Result)
	}
}

// Cancelling a parent that waits in a Map cancels every child of the
// waves it started, and none of a later wave is started.
func TestMapCancelCascades(t *testing.T) {
	s := newMapRig(t)
	ctx := context.Background()
	id := s.basket(t, `{"items":6,"window":3,"hold":true}`)
	if _, err := s.r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	if v := s.get(t, id); v.Status != jobs.StatusQueued || v.WaitingOn != "child" || !strings.HasPrefix(marks(v.Steps), "quotes children waiting ") {
		t.Fatalf("the basket while its children wait: %s waiting on %q, %s", v.Status, v.WaitingOn, marks(v.Steps))
	}
	if _, err := s.r.Service.Cancel(ctx, "o", id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	list, err := s.r.Service.List(ctx, "o", jobs.ListRequest{Kind: "quote", Limit: 100})
	if err != nil || len(list.Jobs) != 3 {
		t.Fatalf("the children: %d %v; want the first wave's 3", len(list.Jobs), err)
	}
	for _, c := range list.Jobs {
		if c.Status != jobs.StatusCancelled {
			t.Fatalf("child %s after its parent's cancel: %s", c.ID, c.Status)
		}
	}
}

// Bad calls start nothing and say why.
func TestMapRefusesBadCalls(t *testing.T) {
	reg := jobs.NewRegistry()
	k := jobs.MustRegister(reg, "q", func(context.Context, *jobs.Job[quotePayload]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
	job := jobstest.NewJob(orderIn{}, nil)
	ctx := context.Background()
	for name, calls := range map[string][]jobs.Call{
		"none":          nil,
		"not a Call":    {{}},
		"with options":  {k.Call(quotePayload{}, &jobs.EnqueueOpts{Delay: time.Minute})},
		"built by hand": {k.Call(quotePayload{}, nil)},
	} {
		if _, err := jobs.Map[jobs.NoResult](ctx, job, "m", calls, 0); err == nil {
			t.Errorf("%s: Map started children", name)
		}
	}
	if _, err := jobs.Map[jobs.NoResult](ctx, job, "m", make([]jobs.Call, 101), 1); err == nil {
		t.Error("Map took 101 waves")
	}
}

// readCountingStore counts the reads of a MemStore (every other method, the
// optional interfaces included, is the MemStore's).
type readCountingStore struct {
	*jobstest.MemStore
	mu             sync.Mutex
	gets           map[string]int
	manyCalls, ids int
}

func (s *readCountingStore) Get(ctx context.Context, id string) (*driver.Record, error) {
	s.mu.Lock()
	s.gets[id]++
	s.mu.Unlock()
	return s.MemStore.Get(ctx, id)
}

func (s *readCountingStore) GetMany(ctx context.Context, ids []string) (map[string]*driver.Record, error) {
	s.mu.Lock()
	s.manyCalls++
	s.ids += len(ids)
	s.mu.Unlock()
	return s.MemStore.GetMany(ctx, ids)
}

// A Map's answer reads its children together (driver.ManyGetter: one
// BatchGetItem per 100 on DynamoDB), not one Get each.
func TestMapReadsItsChildrenTogether(t *testing.T) {
	ctx := context.Background()
	mem := jobstest.NewMemStore(nil)
	st := &readCountingStore{MemStore: mem, gets: map[string]int{}}
	sealer, err := jobs.NewAESSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	r := newEngineRig(t, mem, st, jobs.Config{Sealer: sealer}, func(reg *jobs.Registry) {
		quote := jobs.MustRegister(reg, "quote", func(_ context.Context, job *jobs.Job[quotePayload]) (jobs.JSON[quoteV], error) {
			return jobs.JSON[quoteV]{V: quoteV{Item: job.Payload.Item, Cents: len(job.Payload.Item)}}, nil
		}, nil)
		jobs.MustRegister(reg, "basket", func(ctx context.Context, job *jobs.Job[basketIn]) (jobs.JSON[basketOut], error) {
			calls := make([]jobs.Call, job.Payload.Items)
			for i := range calls {
				calls[i] = quote.Call(quotePayload{Item: strings.Repeat("x", i+1)}, nil)
			}
			quotes, err := jobs.Map[quoteV](ctx, job, "quotes", calls, 0)
			var out basketOut
			for _, q := range quotes {
				out.Total += q.Cents
			}
			return jobs.JSON[basketOut]{V: out}, err
		}, nil)
	})
	id := r.enqueue(t, "basket", `{"items":120}`)
	for ran := 0; ran < len(r.queue.Sent()); ran++ {
		if resp, err := r.worker.HandleSQS(ctx, sqsEvent(message.Encode(r.queue.Sent()[ran]))); err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("message %d: %v %v", ran, resp, err)
		}
	}
	if got := r.get(t, id); got.Status != jobs.StatusSucceeded || string(got.Result) != `{"total":7260}` {
		t.Fatalf("the basket: %s %s %s\n%s", got.Status, got.ErrorCode, got.Result, r.log())
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	childGets := 0
	for gid, n := range st.gets {
		if rec, err := mem.Get(ctx, gid); err == nil && rec.Kind == "quote" {
			childGets += n
		}
	}
	if st.manyCalls == 0 || st.ids < 120 || childGets > 120 {
		t.Fatalf("the answer read the children with %d GetMany calls (%d ids) and %d Gets; want them read together", st.manyCalls, st.ids, childGets)
	}
}
