package jobs_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/message"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

type blob struct {
	Data string `json:"data"`
}

func blobRun(_ context.Context, j *jobs.Job[blob]) (jobs.JSON[blob], error) {
	return jobs.JSON[blob]{V: blob{Data: strings.Repeat("r", len(j.Payload.Data))}}, nil
}

// A kind's bounds: out of range is refused at registration; within, a
// payload past the kind's bound is refused with the bound (413 over HTTP)
// and stores nothing, one within it runs, and a result past the kind's
// result bound fails result_too_large.
func TestKindBoundsOnParts(t *testing.T) {
	for _, o := range []jobs.KindOpts{{MaxPayloadBytes: -1}, {MaxResultBytes: 100<<20 + 1}} {
		if _, err := jobs.Register(jobs.NewRegistry(), "blob", blobRun, &o); err == nil {
			t.Errorf("bounds %d/%d accepted", o.MaxPayloadBytes, o.MaxResultBytes)
		}
	}
	reg := jobs.NewRegistry()
	big := jobs.MustRegister(reg, "blob", blobRun, &jobs.KindOpts{MaxPayloadBytes: 1 << 20, MaxResultBytes: 200 << 10})
	small := jobs.MustRegister(reg, "small", blobRun, nil)
	if !reg.LargeParts() {
		t.Fatal("a registry with a 1 MiB kind: LargeParts false")
	}
	r, err := jobstest.NewRunner(reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var pe *jobs.PayloadError
	if _, err := small.Enqueue(ctx, r.Service, "o", blob{Data: strings.Repeat("a", 130<<10)}, nil); !errors.As(err, &pe) || pe.Limit != jobs.MaxPayloadBytes {
		t.Fatalf("130 KiB to a default kind: %v, want a PayloadError with the 128 KiB limit", err)
	}
	if _, err := big.Enqueue(ctx, r.Service, "o", blob{Data: strings.Repeat("a", 1<<20)}, nil); !errors.As(err, &pe) || pe.Limit != 1<<20 {
		t.Fatalf("1 MiB of data (past the bound once encoded): %v, want the kind's limit", err)
	}
	if page, err := r.Service.List(ctx, "o", jobs.ListRequest{}); err != nil || len(page.Jobs) != 0 {
		t.Fatalf("after the refusals: %d jobs (%v), want none", len(page.Jobs), err)
	}
	ok, err := big.Enqueue(ctx, r.Service, "o", blob{Data: strings.Repeat("a", 150<<10)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tooBig, err := big.Enqueue(ctx, r.Service, "o", blob{Data: strings.Repeat("a", 300<<10)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Work(ctx)
	if v, _ := r.Service.Get(ctx, "o", ok.Job.ID); v.Status != jobs.StatusSucceeded {
		t.Fatalf("a 150 KiB payload and result: %+v", v)
	}
	if v, _ := r.Service.Get(ctx, "o", tooBig.Job.ID); v.Status != jobs.StatusFailed || *v.Error != jobs.CodeResultTooLarge {
		t.Fatalf("a 300 KiB result past the kind's 200 KiB: %+v", v)
	}
}

// smallStore says it keeps parts of at most 256 KiB.
type smallStore struct{ driver.Store }

func (smallStore) MaxPartBytes() int { return 256 << 10 }

// NewClient refuses a kind whose bounds pass what its store says it keeps
// (a dynamostore without an object tier), and takes one within.
func TestNewClientRefusesPartsItsStoreCannotKeep(t *testing.T) {
	for _, n := range []int{256 << 10, 1 << 20} {
		reg := jobs.NewRegistry()
		jobs.MustRegister(reg, "blob", blobRun, &jobs.KindOpts{MaxPayloadBytes: n})
		store := smallStore{jobstest.NewMemStore(jobstest.NewClock(jobstest.Epoch))}
		_, err := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: &jobstest.MemQueue{}})
		if refused := err != nil && strings.Contains(err.Error(), `kind "blob"`); refused != (n > 256<<10) {
			t.Errorf("a %d-byte kind on a 256 KiB store: %v", n, err)
		}
	}
}

type secretBlob struct {
	Data string `json:"data" jobs:"secret"`
}

// A payload within its kind's bound whose secret fields, sealed, pass
// what the store keeps is refused as too large (413), and stores nothing.
func TestASealedPayloadPastTheStoresBoundIsTooLarge(t *testing.T) {
	reg := jobs.NewRegistry()
	k := jobs.MustRegister(reg, "secret", func(context.Context, *jobs.Job[secretBlob]) (jobs.NoResult, error) { return jobs.NoResult{}, nil },
		&jobs.KindOpts{MaxPayloadBytes: 200 << 10})
	sealer, _ := jobs.NewAESSealer([]byte(strings.Repeat("k", 32)))
	mem := jobstest.NewMemStore(jobstest.NewClock(jobstest.Epoch))
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: smallStore{mem}, Queue: &jobstest.MemQueue{}, Sealer: sealer})
	if err != nil {
		t.Fatal(err)
	}
	_, err = k.Enqueue(context.Background(), svc, "o", secretBlob{Data: strings.Repeat("s", 195<<10)}, nil)
	var pe *jobs.PayloadError
	if !errors.As(err, &pe) || pe.Limit != 200<<10 || !strings.Contains(pe.Reason, "sealed") {
		t.Fatalf("a 195 KiB secret field (260 KiB sealed) on a 256 KiB store: %v, want too large", err)
	}
	if n := mem.Len(); n != 0 {
		t.Fatalf("%d jobs stored for a payload refused", n)
	}
	if _, err := k.Enqueue(context.Background(), svc, "o", secretBlob{Data: strings.Repeat("s", 150<<10)}, nil); err != nil {
		t.Fatalf("a 150 KiB secret field (200 KiB sealed): %v", err)
	}
}

// slowKeeper is a MemStore whose KeepPart takes as long as it is let,
// and whose Requeue, as a network call would, fails once its context
// has ended.
type slowKeeper struct {
	*jobstest.MemStore
	kept int
}

func (s *slowKeeper) KeepPart(ctx context.Context, rec *driver.Record, p driver.Part, until time.Time) error {
	s.kept++
	<-ctx.Done()
	return ctx.Err()
}

func (s *slowKeeper) Requeue(ctx context.Context, id, token string, q driver.Requeue) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.MemStore.Requeue(ctx, id, token, q)
}

// Extending a payload's life before a long wait (a copy of tens of MB)
// takes at most half the final write's budget: the write that puts the
// job back still lands, and the next claim extends the payload.
func TestAPayloadsKeepLeavesTheFinalWriteItsTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := jobs.NewRegistry()
		k := jobs.MustRegister(reg, "later", func(context.Context, *jobs.Job[blob]) (jobs.NoResult, error) {
			return jobs.NoResult{}, jobs.RetryAfter(72*time.Hour, errors.New("not yet"))
		}, &jobs.KindOpts{Retry: jobs.RetryPolicy{MaxAttempts: 3}})
		store := &slowKeeper{MemStore: jobstest.NewMemStore(nil)}
		store.KeepPayloadsApart(1)
		queue := &jobstest.MemQueue{}
		cfg := jobs.Config{Registry: reg, Store: store, Queue: queue, CancelCheck: -1}
		svc, err := testroles.Service(cfg)
		if err != nil {
			t.Fatal(err)
		}
		w, err := testroles.Worker(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		res, err := k.Enqueue(ctx, svc, "o", blob{Data: "x"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ictx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		w.HandleSQS(ictx, sqsEvent(message.Encode(res.Job.ID)))
		v, err := svc.Get(ctx, "o", res.Job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if store.kept == 0 || v.Status != jobs.StatusQueued || v.RunAt == nil {
			t.Fatalf("a retry in 3 days whose payload's keep hangs: kept %d times, the job %s (run at %v); want queued for its retry", store.kept, v.Status, v.RunAt)
		}
	})
}

// stagingStore is a MemStore that stages results as an object tier does
// (driver.ResultStager), recording when it was asked and until when it
// may take, and the outcome the final write then got.
type stagingStore struct {
	*jobstest.MemStore
	mu       sync.Mutex
	deadline time.Time
	until    time.Time // how long the staged result must last
	staged   int
	fail     error // what StageResult answers
	finished driver.Outcome
}

func (s *stagingStore) StageResult(ctx context.Context, id string, result []byte, until time.Time) (driver.Staged, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deadline, _ = ctx.Deadline()
	s.until = until
	s.staged++
	return driver.Staged{}, s.fail // nil: the result stays in items, the final write stores it
}

func (s *stagingStore) Finish(ctx context.Context, id, token string, o driver.Outcome) error {
	s.mu.Lock()
	s.finished = o
	s.mu.Unlock()
	return s.MemStore.Finish(ctx, id, token, o)
}

// A succeeded run's result is offered to the store's stager before the
// final write, with the run's time (up to the final write's budget before
// the Lambda deadline), not the final write's few seconds: an object of
// tens of MB is written from it.
func TestAResultIsStagedOnTheRunsTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := jobstest.NewMemStore(nil)
		store := &stagingStore{MemStore: mem}
		r := newEngineRig(t, mem, store, jobs.Config{CancelCheck: -1}, nil)
		id := r.enqueue(t, "sleep", `{"for":"1s"}`)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		lambda, _ := ctx.Deadline()
		if _, err := r.worker.HandleSQS(ctx, sqsEvent(message.Encode(id))); err != nil {
			t.Fatal(err)
		}
		d := jobs.DefaultDeadlines
		want := lambda.Add(-d.Safety - d.FinalWrite)
		if store.staged != 1 || !store.deadline.Equal(want) {
			t.Fatalf("staged %d times, until %v; want once, until the Lambda deadline less the safety and the final write's budget (%v)", store.staged, store.deadline, want)
		}
		if got := r.get(t, id); got.Status != jobs.StatusSucceeded || store.finished.Result == nil {
			t.Fatalf("after staging nothing: %s, final write's result %q", got.Status, store.finished.Result)
		}
		// The object outlasts the job: the final write lands by the
		// invocation's write deadline, and the job expires a retention
		// after it.
		if lasts := lambda.Add(-d.Safety).Add(jobs.DefaultRetention); !store.until.Equal(lasts) || store.until.Before(store.finished.ExpiresAt) {
			t.Fatalf("staged to last until %v, want %v (the job expires %v)", store.until, lasts, store.finished.ExpiresAt)
		}
	})
}

// A result its store could not write in the run's time is not handed to
// the final write (which would try again in its few seconds, and miss its
// deadline): the run counts as interrupted, and that outcome lands.
func TestAResultNotStagedMakesTheRunInterrupted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := jobstest.NewMemStore(nil)
		store := &stagingStore{MemStore: mem, fail: context.DeadlineExceeded}
		r := newEngineRig(t, mem, store, jobs.Config{CancelCheck: -1}, nil)
		id := r.enqueue(t, "sleep", `{"for":"1s"}`)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if _, err := r.worker.HandleSQS(ctx, sqsEvent(message.Encode(id))); err != nil {
			t.Fatal(err)
		}
		got := r.get(t, id)
		if store.staged != 1 || got.Status != jobs.StatusFailed || got.ErrorCode != jobs.CodeInterrupted || store.finished.Result != nil {
			t.Fatalf("after a failed staging: staged %d, %s %v, final write's result %d bytes; want failed interrupted with no result",
				store.staged, got.Status, got.ErrorCode, len(store.finished.Result))
		}
	})
}
