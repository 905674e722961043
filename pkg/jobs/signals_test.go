package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

type approval struct {
	Approved bool   `json:"approved"`
	By       string `json:"by"`
}

type approvalResult struct {
	TimedOut bool   `json:"timed_out"`
	By       string `json:"by,omitempty"`
}

type approvePayload struct {
	// Script, per run: "signal-first" delivers the signal from inside the
	// run, before its wait (as a signal that comes while the run runs);
	// "retry" asks for another attempt after the wait answered; "bytype"
	// waits with another payload type than the kind declares.
	Script []string `json:"script,omitempty"`
}

// approveRig runs one "approve" kind (a step, a wait for the signal
// "approval" of at most 48 h, then the code after it) in a
// jobstest.Runner, counting what each part did.
type approveRig struct {
	r  *jobstest.Runner
	mu sync.Mutex
	n  struct{ runs, before, after, deferred int }
	// answers are what each run's wait returned: "by" or "timeout".
	answers []string
	err     error
}

func newApproveRig(t *testing.T) *approveRig {
	t.Helper()
	s := &approveRig{}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "approve", func(ctx context.Context, job *jobs.Job[approvePayload]) (jobs.JSON[approvalResult], error) {
		s.mu.Lock()
		run := s.n.runs
		s.n.runs++
		s.mu.Unlock()
		script := ""
		if run < len(job.Payload.Script) {
			script = job.Payload.Script[run]
		}
		defer func() {
			s.mu.Lock()
			s.n.deferred++
			s.mu.Unlock()
		}()
		if _, err := jobs.Step(ctx, job, "before", func(context.Context) (int, error) {
			s.mu.Lock()
			s.n.before++
			s.mu.Unlock()
			return 1, nil
		}); err != nil {
			return jobs.JSON[approvalResult]{}, err
		}
		if script == "signal-first" {
			if _, err := s.r.Service.Signal(ctx, "o", job.ID, "approval", []byte(`{"approved":true,"by":"early"}`)); err != nil {
				return jobs.JSON[approvalResult]{}, err
			}
		}
		var a approval
		var ok bool
		var err error
		if script == "bytype" {
			_, ok, err = jobs.WaitForSignal[approvalResult](ctx, job, "approval", 48*time.Hour)
		} else {
			a, ok, err = jobs.WaitForSignal[approval](ctx, job, "approval", 48*time.Hour)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if err != nil {
			s.err = err
			return jobs.JSON[approvalResult]{}, jobs.Fail("bad_wait", err)
		}
		s.n.after++
		if ok {
			s.answers = append(s.answers, a.By)
		} else {
			s.answers = append(s.answers, "timeout")
		}
		if script == "retry" {
			return jobs.JSON[approvalResult]{}, jobs.Retry(errors.New("once more"))
		}
		return jobs.JSON[approvalResult]{V: approvalResult{TimedOut: !ok, By: a.By}}, nil
	}, &jobs.KindOpts{FailureCodes: []string{"bad_wait"}, Retry: jobs.RetryPolicy{MaxAttempts: 3, BaseDelay: time.Second},
		Signals: map[string]any{"approval": approval{}, "note": ""}})
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	s.r = r
	return s
}

func (s *approveRig) enqueue(t *testing.T, p string) string {
	t.Helper()
	res, err := s.r.Service.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: "o", Kind: "approve", Payload: []byte(p)})
	if err != nil {
		t.Fatal(err)
	}
	return res.Job.ID
}

func (s *approveRig) work(t *testing.T) int {
	t.Helper()
	n, err := s.r.Work(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (s *approveRig) get(t *testing.T, id string) *jobs.View {
	t.Helper()
	v, err := s.r.Service.Get(context.Background(), "o", id)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (s *approveRig) signal(t *testing.T, id, body string) *jobs.SignalResult {
	t.Helper()
	res, err := s.r.Service.Signal(context.Background(), "o", id, "approval", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// A job whose handler waits for a signal waits queued on it (no attempt
// spent, run_at its timeout); the signal makes it due at once, its next run
// gets the signal's payload, its earlier step read back, and a duplicate
// changes nothing.
func TestSignalWakesTheJobThatWaitsForIt(t *testing.T) {
	s := newApproveRig(t)
	start := s.r.Clock.Now()
	id := s.enqueue(t, `{}`)
	s.work(t)
	v := s.get(t, id)
	if v.Status != jobs.StatusQueued || v.WaitingOn != "signal" || v.Signal != "approval" || v.RunAt == nil ||
		!v.RunAt.Equal(start.Add(48*time.Hour)) || v.Attempt != 0 {
		t.Fatalf("waiting: %s on %q (%q), run at %v, attempt %d; want queued on the signal approval for 48 h, attempt 0", v.Status, v.WaitingOn, v.Signal, v.RunAt, v.Attempt)
	}
	if s.n.runs != 1 || s.n.after != 0 || s.n.deferred != 1 {
		t.Fatalf("the run that waits: %+v; want the code after the wait never, the deferred call once", s.n)
	}
	// Its view shows its steps: names, states and times, no results.
	if got := marks(v.Steps); got != "before step done "+start.Format(time.RFC3339)+"; approval signal waiting "+start.Format(time.RFC3339)+" until "+start.Add(48*time.Hour).Format(time.RFC3339) {
		t.Fatalf("the waiting job's steps: %s", got)
	}
	s.r.Clock.Advance(time.Hour)
	if res := s.signal(t, id, `{"approved":true,"by":"ana"}`); !res.Woke || res.Duplicate {
		t.Fatalf("the signal: %+v, want it to wake the job", res)
	}
	if res := s.signal(t, id, `{"approved":false,"by":"bob"}`); !res.Duplicate || res.Woke {
		t.Fatalf("the second signal: %+v, want a duplicate", res)
	}
	// Woken and not yet claimed, it waits on nothing: it is due now.
	if v := s.get(t, id); v.Status != jobs.StatusQueued || v.WaitingOn != "" || v.Signal != "" || v.RunAt == nil || !v.RunAt.Equal(s.r.Clock.Now()) {
		t.Fatalf("woken: %s on %q (%q), run at %v; want queued on nothing, due now", v.Status, v.WaitingOn, v.Signal, v.RunAt)
	}
	if n := s.work(t); n != 1 {
		t.Fatalf("%d deliveries after the signal, want 1", n)
	}
	v = s.get(t, id)
	if v.Status != jobs.StatusSucceeded || string(v.Result) != `{"timed_out":false,"by":"ana"}` || v.Attempt != 1 {
		t.Fatalf("after the signal: %s %s attempt %d", v.Status, v.Result, v.Attempt)
	}
	if s.n.runs != 2 || s.n.before != 1 || s.n.after != 1 {
		t.Fatalf("counts %+v: want two runs, the step once, the code after the wait once", s.n)
	}
	if got := marks(v.Steps); got != "before step done "+start.Format(time.RFC3339)+"; approval signal done "+start.Add(time.Hour).Format(time.RFC3339) {
		t.Fatalf("the finished job's steps: %s", got)
	}
	// Once it ended, the same signal again is still a duplicate (a
	// webhook's retry), and a new one is refused.
	if res := s.signal(t, id, `{"approved":true,"by":"ana"}`); !res.Duplicate {
		t.Fatalf("the signal again after the end: %+v", res)
	}
	if _, err := s.r.Service.Signal(context.Background(), "o", id, "note", []byte(`"late"`)); !errors.Is(err, jobs.ErrAlreadyFinal) {
		t.Fatalf("a new signal to a finished job: %v, want ErrAlreadyFinal", err)
	}
}

// A signal that comes before the wait is kept until the wait asks: the run
// passes the wait without suspending.
func TestSignalBeforeTheWait(t *testing.T) {
	s := newApproveRig(t)
	id := s.enqueue(t, `{}`)
	if res := s.signal(t, id, `{"approved":true,"by":"ana"}`); res.Woke || res.Duplicate {
		t.Fatalf("a signal to a job that waits for nothing yet: %+v", res)
	}
	s.work(t)
	if v := s.get(t, id); v.Status != jobs.StatusSucceeded || string(v.Result) != `{"timed_out":false,"by":"ana"}` || s.n.runs != 1 {
		t.Fatalf("%s %s after %d runs, want succeeded with the signal in one", v.Status, v.Result, s.n.runs)
	}
}

// A signal delivered while the run that will wait for it runs is not
// missed: the run's park finds it and makes the job due instead.
func TestSignalWhileTheRunRuns(t *testing.T) {
	s := newApproveRig(t)
	id := s.enqueue(t, `{"script":["signal-first"]}`)
	s.work(t)
	if v := s.get(t, id); v.Status != jobs.StatusSucceeded || string(v.Result) != `{"timed_out":false,"by":"early"}` || s.n.runs != 2 || s.n.after != 1 {
		t.Fatalf("%s %s, counts %+v: want succeeded with the signal in a second run, at once", v.Status, v.Result, s.n)
	}
}

// A wait whose timeout comes first answers false, and keeps answering
// false: the timeout is stored before the handler sees it, so a signal
// delivered later (here between a retry's two runs) changes nothing.
func TestSignalTimeoutIsStored(t *testing.T) {
	s := newApproveRig(t)
	id := s.enqueue(t, `{"script":["","retry"]}`)
	s.work(t)
	s.r.Clock.Advance(47 * time.Hour)
	if n := s.work(t); n != 0 {
		t.Fatalf("%d deliveries before the timeout", n)
	}
	s.r.Clock.Advance(time.Hour)
	s.work(t) // the timeout: the run retries
	if v := s.get(t, id); v.Status != jobs.StatusQueued || v.WaitingOn != "" {
		t.Fatalf("after the timed-out run asked for a retry: %s on %q", v.Status, v.WaitingOn)
	}
	if res := s.signal(t, id, `{"approved":true,"by":"late"}`); res.Woke {
		t.Fatalf("a late signal woke the job: %+v", res)
	}
	s.r.Clock.Advance(time.Minute)
	s.work(t)
	v := s.get(t, id)
	if v.Status != jobs.StatusSucceeded || string(v.Result) != `{"timed_out":true}` || strings.Join(s.answers, ",") != "timeout,timeout" {
		t.Fatalf("%s %s, answers %v: want the timeout in both runs", v.Status, v.Result, s.answers)
	}
	if got := marks(v.Steps); !strings.HasSuffix(got, "; approval signal timed_out "+jobstest.Epoch.Add(48*time.Hour).Format(time.RFC3339)) {
		t.Fatalf("the timed-out job's steps: %s", got)
	}
}

// A signal the kind does not declare, one whose payload does not decode
// into its type, another owner's job, and a job that holds as many
// signals as it keeps are refused, and store nothing.
func TestSignalRefusals(t *testing.T) {
	s := newApproveRig(t)
	ctx := context.Background()
	id := s.enqueue(t, `{}`)
	var re *jobs.RequestError
	if _, err := s.r.Service.Signal(ctx, "o", id, "approvals", []byte(`{}`)); !errors.As(err, &re) || re.Code != "unknown_signal" {
		t.Fatalf("an undeclared signal: %v", err)
	}
	for _, body := range []string{`{"approved":true,"extra":1}`, `{"approved":"yes"}`, `null`, `[`} {
		if _, err := s.r.Service.Signal(ctx, "o", id, "approval", []byte(body)); !errors.Is(err, jobs.ErrInvalidPayload) {
			t.Fatalf("signal payload %s: %v, want ErrInvalidPayload", body, err)
		}
	}
	if _, err := s.r.Service.Signal(ctx, "p", id, "approval", []byte(`{}`)); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("another owner's job: %v", err)
	}
	// None of them was stored: the first good one is no duplicate.
	if res := s.signal(t, id, `{"approved":true,"by":"ana"}`); res.Duplicate {
		t.Fatal("a refused signal was stored")
	}
	if res, err := s.r.Service.Signal(ctx, "o", id, "note", []byte(`"hello"`)); err != nil || res.Duplicate {
		t.Fatalf("a second name: %+v %v", res, err)
	}
}

// A signal to a job of a kind this instance does not register (a deploy
// that removed it) is refused as an unknown signal, never a panic.
func TestSignalToAKindNotRegisteredHere(t *testing.T) {
	store := jobstest.NewMemStore(nil)
	sealer, err := jobs.NewAESSealer([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	service := func(reg *jobs.Registry) *jobs.Service {
		svc, err := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: &jobstest.MemQueue{}, Sealer: sealer, PageTokenKey: []byte(strings.Repeat("p", 32))})
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "approve", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil },
		&jobs.KindOpts{Signals: map[string]any{"approval": approval{}}})
	ctx := context.Background()
	res, err := service(reg).Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "approve", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	var re *jobs.RequestError
	if _, err := service(jobs.NewRegistry()).Signal(ctx, "o", res.Job.ID, "approval", []byte(`{}`)); !errors.As(err, &re) || re.Code != "unknown_signal" {
		t.Fatalf("a signal to a kind not registered here: %v", err)
	}
}

// A job keeps at most 8 signals, so a kind declares at most 8: all of
// them are delivered, and a ninth declared is refused at registration.
func TestSignalLimit(t *testing.T) {
	names := map[string]any{}
	for i := range 9 {
		names[fmt.Sprint("s", i)] = 0
	}
	noop := func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }
	if _, err := jobs.Register(jobs.NewRegistry(), "many", noop, &jobs.KindOpts{Signals: names}); err == nil {
		t.Fatal("a kind with 9 signals registered")
	}
	delete(names, "s8")
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "many", noop, &jobs.KindOpts{Signals: names})
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := r.Service.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "many", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if _, err := r.Service.Signal(ctx, "o", res.Job.ID, fmt.Sprint("s", i), []byte(`1`)); err != nil {
			t.Fatalf("signal %d: %v", i, err)
		}
	}
}

// A wait for a signal with another payload type than the kind declares is
// an error, and a name that is no signal's refuses the kind.
func TestSignalMisuse(t *testing.T) {
	s := newApproveRig(t)
	id := s.enqueue(t, `{"script":["bytype"]}`)
	s.work(t)
	if v := s.get(t, id); v.Status != jobs.StatusFailed || s.err == nil || !strings.Contains(s.err.Error(), "does not declare it") {
		t.Fatalf("a wait with another type: %s (%v)", v.Status, s.err)
	}
	for _, name := range []string{"", "Approval", "a b", strings.Repeat("a", 65)} {
		_, err := jobs.Register(jobs.NewRegistry(), "k", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.NoResult, error) {
			return jobs.NoResult{}, nil
		}, &jobs.KindOpts{Signals: map[string]any{name: 0}})
		if err == nil {
			t.Fatalf("signal name %q accepted", name)
		}
	}
}

// A callback token delivers its signal without a caller: once (a second
// delivery, by it or another token for the signal, is token_used); a token
// altered or expired is refused before anything is read, and one under a
// key the ring lacks is unavailable for now; none stores anything.
func TestCallbackTokens(t *testing.T) {
	var tokens []string
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "pay", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.JSON[approval], error) {
		if _, err := jobs.Step(ctx, job, "charge", func(context.Context) (int, error) {
			for range 2 {
				tok, err := job.CallbackToken("paid", time.Hour)
				if err != nil {
					return 0, err
				}
				tokens = append(tokens, tok)
			}
			if _, err := job.CallbackToken("unknown", time.Hour); err == nil {
				t.Error("a token for an undeclared signal")
			}
			return 1, nil
		}); err != nil {
			return jobs.JSON[approval]{}, err
		}
		a, ok, err := jobs.WaitForSignal[approval](ctx, job, "paid", 2*time.Hour)
		if err != nil || !ok {
			return jobs.JSON[approval]{}, jobs.Fail("unpaid", err)
		}
		return jobs.JSON[approval]{V: a}, nil
	}, &jobs.KindOpts{FailureCodes: []string{"unpaid"}, Signals: map[string]any{"paid": approval{}}})
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := r.Service.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "pay", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 2 || tokens[0] == tokens[1] || strings.Contains(tokens[0], res.Job.ID) || strings.ContainsAny(tokens[0], "/+=") {
		t.Fatalf("tokens %q: want two distinct URL-safe tokens that do not show the job's id", tokens)
	}
	code := func(err error) string {
		var re *jobs.RequestError
		if errors.As(err, &re) {
			return re.Code
		}
		return fmt.Sprint(err)
	}
	altered := tokens[0][:len(tokens[0])-2] + "AA"
	if tokens[0][len(tokens[0])-2:] == "AA" {
		altered = tokens[0][:len(tokens[0])-2] + "BB"
	}
	for _, bad := range []string{"", "cb1.", "cb1.!!", altered, "x" + tokens[0]} {
		if _, err := r.Service.Callback(ctx, bad, []byte(`{"approved":true}`)); code(err) != "invalid_token" {
			t.Fatalf("token %.30q: %v, want invalid_token", bad, err)
		}
	}
	if _, err := r.Service.Callback(ctx, tokens[0], []byte(`{"approved":"yes"}`)); !errors.Is(err, jobs.ErrInvalidPayload) {
		t.Fatalf("a bad payload: %v", err)
	}
	got, err := r.Service.Callback(ctx, tokens[0], []byte(`{"approved":true,"by":"provider"}`))
	if err != nil || !got.Woke {
		t.Fatalf("the callback: %+v %v", got, err)
	}
	for _, tok := range tokens {
		if _, err := r.Service.Callback(ctx, tok, []byte(`{"approved":false}`)); code(err) != "token_used" {
			t.Fatalf("a second delivery: %v, want token_used", err)
		}
	}
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	if v, _ := r.Service.Get(ctx, "o", res.Job.ID); v.Status != jobs.StatusSucceeded || string(v.Result) != `{"approved":true,"by":"provider"}` {
		t.Fatalf("the job: %s %s", v.Status, v.Result)
	}
	// Expiry: a token an hour old is refused, whatever its job.
	res2, err := r.Service.Enqueue(ctx, jobs.EnqueueRequest{Owner: "o", Kind: "pay", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	tokens = nil
	if _, err := r.Work(ctx); err != nil {
		t.Fatal(err)
	}
	r.Clock.Advance(time.Hour)
	if _, err := r.Service.Callback(ctx, tokens[0], []byte(`{"approved":true}`)); code(err) != "token_expired" {
		t.Fatalf("an expired token: %v", err)
	}
	if v, _ := r.Service.Get(ctx, "o", res2.Job.ID); v.WaitingOn != "signal" {
		t.Fatalf("the expired token's job: %s on %q, want it still waiting", v.Status, v.WaitingOn)
	}
	// Another deployment's key ring: refused as altered.
	other, err := jobstest.NewRunner(func() *jobs.Registry {
		reg := jobs.NewRegistry()
		jobs.MustRegister(reg, "pay", func(ctx context.Context, job *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil },
			&jobs.KindOpts{Signals: map[string]any{"paid": approval{}}})
		return reg
	}())
	if err != nil {
		t.Fatal(err)
	}
	// A key its ring lacks may be a rotation on its way: try again later
	// (503), nothing read.
	if _, err := other.Service.Callback(ctx, tokens[1], []byte(`{"approved":true}`)); !errors.Is(err, jobs.ErrUnavailable) {
		t.Fatalf("a token under a key the ring lacks: %v, want ErrUnavailable", err)
	}
}

// marks renders a view's steps for comparison.
func marks(steps []jobs.StepMark) string {
	var out []string
	for _, m := range steps {
		line := m.Name + " " + m.Kind + " " + m.Status
		if m.At != nil {
			line += " " + m.At.Format(time.RFC3339)
		}
		if m.Until != nil {
			line += " until " + m.Until.Format(time.RFC3339)
		}
		out = append(out, line)
	}
	return strings.Join(out, "; ")
}
