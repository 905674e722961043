package jobs_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

type quotePayload struct {
	Item string `json:"item"`
	// Fail makes the child fail with the declared code "sold_out".
	Fail bool `json:"fail,omitempty"`
	// Hold makes the child wait for a signal first ("go").
	Hold bool `json:"hold,omitempty"`
}

type quoteV struct {
	Item  string `json:"item"`
	Cents int    `json:"cents"`
}

type orderIn struct {
	Items []string `json:"items"`
	Fail  bool     `json:"fail,omitempty"`
	Hold  bool     `json:"hold,omitempty"`
}

type orderOut struct {
	Total int    `json:"total"`
	Code  string `json:"code,omitempty"`
}

// invokeRig: an "order" kind that invokes a "quote" child per item in
// turn, in a jobstest.Runner, counting the runs of each.
type invokeRig struct {
	r       *jobstest.Runner
	mu      sync.Mutex
	parents int
	quotes  map[string]int
	after   int // the parent's code after its last Invoke ran
}

func newInvokeRig(t *testing.T) *invokeRig {
	t.Helper()
	s := &invokeRig{quotes: map[string]int{}}
	reg := jobs.NewRegistry()
	quoteKind := jobs.MustRegister(reg, "quote", func(ctx context.Context, job *jobs.Job[quotePayload]) (jobs.JSON[quoteV], error) {
		s.mu.Lock()
		s.quotes[job.Payload.Item]++
		s.mu.Unlock()
		if job.Payload.Hold {
			if _, _, err := jobs.WaitForSignal[string](ctx, job, "go", time.Hour); err != nil {
				return jobs.JSON[quoteV]{}, err
			}
		}
		if job.Payload.Fail {
			return jobs.JSON[quoteV]{}, jobs.Fail("sold_out", errors.New("sold out"))
		}
		return jobs.JSON[quoteV]{V: quoteV{Item: job.Payload.Item, Cents: 100 * len(job.Payload.Item)}}, nil
	}, &jobs.KindOpts{FailureCodes: []string{"sold_out"}, Signals: map[string]any{"go": ""}})
	jobs.MustRegister(reg, "order", func(ctx context.Context, job *jobs.Job[orderIn]) (jobs.JSON[orderOut], error) {
		s.mu.Lock()
		s.parents++
		s.mu.Unlock()
		total := 0
		for _, item := range job.Payload.Items {
			q, err := jobs.Invoke[quoteV](ctx, job, "quote-"+item, quoteKind.Call(quotePayload{Item: item, Fail: job.Payload.Fail, Hold: job.Payload.Hold}, nil))
			var ce *jobs.ChildError
			if errors.As(err, &ce) && ce.Code == "" {
				return jobs.JSON[orderOut]{V: orderOut{Code: string(ce.Status)}}, nil // a cancelled child has no code
			}
			if errors.As(err, &ce) {
				return jobs.JSON[orderOut]{V: orderOut{Code: ce.Code}}, nil
			}
			if err != nil {
				return jobs.JSON[orderOut]{}, err
			}
			total += q.Cents
		}
		s.mu.Lock()
		s.after++
		s.mu.Unlock()
		return jobs.JSON[orderOut]{V: orderOut{Total: total}}, nil
	}, nil)
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	s.r = r
	return s
}

func (s *invokeRig) enqueue(t *testing.T, p string) string {
	t.Helper()
	res, err := s.r.Service.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "o", Kind: "order", Payload: []byte(p)})
	if err != nil {
		t.Fatal(err)
	}
	return res.Job.ID
}

func (s *invokeRig) get(t *testing.T, id string) *jobs.View {
	t.Helper()
	v, err := s.r.Service.Get(context.Background(), "o", id)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A parent invokes its children in turn: it waits for each without a
// worker (waiting_on child), each child's end wakes it, each child runs
// once, and the parent's runs are one per child and one more.
func TestInvokeWaitsForEachChild(t *testing.T) {
	s := newInvokeRig(t)
	id := s.enqueue(t, `{"items":["ab","cde"]}`)
	ctx := context.Background()
	if _, err := s.r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	v := s.get(t, id)
	if v.Status != jobs.StatusSucceeded || string(v.Result) != `{"total":500}` {
		t.Fatalf("the order: %s %s", v.Status, v.Result)
	}
	if s.quotes["ab"] != 1 || s.quotes["cde"] != 1 || s.parents != 3 || s.after != 1 || v.Attempt != 1 {
		t.Fatalf("runs: quotes %v, parent %d (after the last Invoke %d), attempt %d; want each child once, the parent 3 times, one attempt",
			s.quotes, s.parents, s.after, v.Attempt)
	}
	if got := marks(v.Steps); !strings.Contains(got, "quote-ab child done") || !strings.Contains(got, "quote-cde child done") {
		t.Fatalf("the order's steps: %s", got)
	}
	child, err := s.r.Service.List(ctx, "o", jobs.ListRequest{Kind: "quote"})
	if err != nil || len(child.Jobs) != 2 || child.Jobs[0].ChildOf != id {
		t.Fatalf("the children: %+v %v", child, err)
	}
}

// A child that fails with a declared code answers its parent with a
// *ChildError carrying that code.
func TestInvokeChildFailure(t *testing.T) {
	s := newInvokeRig(t)
	id := s.enqueue(t, `{"items":["ab"],"fail":true}`)
	if _, err := s.r.Work(context.Background()); err != nil {
		t.Fatal(err)
	}
	if v := s.get(t, id); v.Status != jobs.StatusSucceeded || string(v.Result) != `{"total":0,"code":"sold_out"}` {
		t.Fatalf("the order: %s %s", v.Status, v.Result)
	}
}

// Cancelling a parent that waits for its child cancels the child.
func TestInvokeCancelCascades(t *testing.T) {
	s := newInvokeRig(t)
	ctx := context.Background()
	id := s.enqueue(t, `{"items":["ab"],"hold":true}`)
	if _, err := s.r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	v := s.get(t, id)
	if v.Status != jobs.StatusQueued || v.WaitingOn != "child" {
		t.Fatalf("the order while its child waits: %s waiting on %q", v.Status, v.WaitingOn)
	}
	list, err := s.r.Service.List(ctx, "o", jobs.ListRequest{Kind: "quote"})
	if err != nil || len(list.Jobs) != 1 {
		t.Fatalf("the child: %+v %v", list, err)
	}
	childID := list.Jobs[0].ID
	if c := s.get(t, childID); c.Status != jobs.StatusQueued || c.WaitingOn != "signal" {
		t.Fatalf("the child: %s waiting on %q", c.Status, c.WaitingOn)
	}
	if _, err := s.r.Service.Cancel(ctx, "o", id); err != nil {
		t.Fatal(err)
	}
	if c := s.get(t, childID); c.Status != jobs.StatusCancelled {
		t.Fatalf("the child after its parent's cancel: %s", c.Status)
	}
}

// On a Job built by hand, Invoke starts nothing and says why.
func TestInvokeOnAJobBuiltByHand(t *testing.T) {
	reg := jobs.NewRegistry()
	k := jobs.MustRegister(reg, "q", func(context.Context, *jobs.Job[quotePayload]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
	job := jobstest.NewJob(orderIn{}, nil)
	if _, err := jobs.Invoke[jobs.NoResult](context.Background(), job, "x", k.Call(quotePayload{}, nil)); err == nil {
		t.Fatal("Invoke on a Job built by hand started a child")
	}
}

// A parent cancelled while it waited, then retried by hand, does not
// start its child again: its Invoke answers the child's cancellation.
func TestInvokeRetriedByHandAfterACascade(t *testing.T) {
	s := newInvokeRig(t)
	ctx := context.Background()
	id := s.enqueue(t, `{"items":["ab"],"hold":true}`)
	if _, err := s.r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.r.Service.Cancel(ctx, "o", id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.r.Service.Resubmit(ctx, "o", id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	v := s.get(t, id)
	if v.Status != jobs.StatusSucceeded || string(v.Result) != `{"total":0,"code":"cancelled"}` {
		t.Fatalf("the order retried after its cancel: %s %s", v.Status, v.Result)
	}
	if s.quotes["ab"] != 1 {
		t.Fatalf("the child ran %d times, want once", s.quotes["ab"])
	}
}
