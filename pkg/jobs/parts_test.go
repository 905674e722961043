package jobs_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
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
