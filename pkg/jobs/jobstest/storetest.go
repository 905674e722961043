package jobstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// NewStoreFunc returns an empty store for one test, reading time from clock.
type NewStoreFunc func(t *testing.T, clock jobs.Clock) driver.Store

// Epoch is the time the conformance suite's clocks start at.
var Epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// NewRecord returns a queued record as enqueue would write it.
func NewRecord(id string, now time.Time) *driver.Record {
	return &driver.Record{
		ID: id, Kind: "test.kind", Owner: "arn:aws:iam::000000000000:user/alice", Status: jobs.StatusQueued,
		Payload: []byte(`{"n":1}`), RequestHash: "h1",
		CreatedAt: now, UpdatedAt: now, SweepAt: now.Add(2 * time.Minute),
	}
}

// RunStoreTests runs the conformance suite against the stores newStore
// makes. Each test gets its own store and fake clock, so the tests run in
// parallel (go test -parallel sets how many at once); newStore must be
// safe to call from parallel tests.
func RunStoreTests(t *testing.T, newStore NewStoreFunc) {
	c := suite{newStore: newStore}
	c.createAndGet(t)
	c.claims(t)
	c.publishAndFinish(t)
	c.retriesCancelsAndResubmits(t)
	c.sweepIndex(t)
	c.batches(t)
	c.listing(t)
	c.schedules(t)
	c.longWork(t)
	c.flowControl(t)
	c.parents(t)
	c.payloads(t)
	c.checkpoints(t)
	c.results(t)
	c.staleParts(t)
	c.pauses(t)
	c.signals(t)
}

// suite is the conformance suite over the stores of one implementation.
type suite struct{ newStore NewStoreFunc }

// run runs the conformance test named name in parallel with the others,
// on a store of its own and a clock stopped at Epoch.
func (c suite) run(t *testing.T, name string, test func(t *testing.T, s driver.Store, clock *Clock)) {
	t.Run(name, func(t *testing.T) {
		t.Parallel()
		clock := NewClock(Epoch)
		test(t, c.newStore(t, clock), clock)
	})
}

// mustCreate stores a new queued job created at now.
func mustCreate(t *testing.T, s driver.Store, now time.Time) *driver.Record {
	t.Helper()
	rec := NewRecord(wire.NewID(), now)
	if err := s.Create(context.Background(), rec); err != nil {
		t.Fatalf("Create: %v", err)
	}
	return rec
}

// mustClaim claims job id at now, with a lease of a minute, and returns
// the claimed job and its token.
func mustClaim(t *testing.T, s driver.Store, id string, now time.Time) (*driver.Record, string) {
	t.Helper()
	token := wire.NewID()
	rec, err := s.Claim(context.Background(), id, driver.Claim{Token: token, At: now, LeaseUntil: now.Add(time.Minute)})
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return rec, token
}

// mustGet reads job id.
func mustGet(t *testing.T, s driver.Store, id string) *driver.Record {
	t.Helper()
	rec, err := s.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	return rec
}

// wantConflict fails t unless err is a *driver.ConflictError whose
// Current, when the store said it, is the job in wantStatus ("": any).
func wantConflict(t *testing.T, err error, wantStatus jobs.Status) {
	t.Helper()
	var ce *driver.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v (%T), want a *driver.ConflictError", err, err)
	}
	if wantStatus != "" && ce.Current != nil && ce.Current.Status != wantStatus {
		t.Fatalf("conflict reports current %+v, want status %s", ce.Current, wantStatus)
	}
}

// currentOf is the job a conflict of a write of job id reports, as the
// engine sees it: its Current, or the job read again when the store could
// not say. It fails t unless err is a *driver.ConflictError.
func currentOf(t *testing.T, s driver.Store, id string, err error) *driver.Record {
	t.Helper()
	var ce *driver.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v (%T), want a *driver.ConflictError", err, err)
	}
	if ce.Current != nil {
		if ce.Current.ID != id {
			t.Fatalf("conflict reports job %s, want %s", ce.Current.ID, id)
		}
		return ce.Current
	}
	return mustGet(t, s, id)
}

// runOf names a run: its job and its claim token.
type runOf struct{ id, token string }

// wantRunConflict fails t unless err is a conflict of a write by the run
// r that the engine reads as the run's cancel (cancelled), or as a lost
// claim: the job it reports runs under r's token with a cancel requested,
// or not.
func wantRunConflict(t *testing.T, s driver.Store, r runOf, err error, cancelled bool) {
	t.Helper()
	cur := currentOf(t, s, r.id, err)
	got := cur.Status == jobs.StatusRunning && cur.ClaimToken == r.token && cur.CancelRequested
	if got != cancelled {
		t.Fatalf("conflict reports %s under token %q, cancel requested %v: the run's cancel %v, want %v",
			cur.Status, cur.ClaimToken, cur.CancelRequested, got, cancelled)
	}
}

// isConflict reports whether err is a *driver.ConflictError.
func isConflict(err error) bool {
	var ce *driver.ConflictError
	return errors.As(err, &ce)
}

func set(ids []string) map[string]bool {
	m := map[string]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}
