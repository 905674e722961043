package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// claimedAfterListing is a store whose listing is older than its jobs, as
// an index read is: the jobs in claim are listed as they were (queued),
// then a worker claims them before the caller acts on the listing.
type claimedAfterListing struct {
	*jobstest.MemStore
	claim map[string]bool
}

func (s claimedAfterListing) List(ctx context.Context, q driver.ListQuery) (driver.ListPage, error) {
	page, err := s.MemStore.List(ctx, q)
	for _, r := range page.Records {
		if s.claim[r.ID] {
			claimJob(ctx, s.MemStore, r.ID)
		}
	}
	return page, err
}

func claimJob(ctx context.Context, mem *jobstest.MemStore, id string) {
	now := time.Now()
	if _, err := mem.Claim(ctx, id, driver.Claim{Token: wire.NewID(), At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
		panic(err)
	}
}

// A bulk cancel does to each job what the single cancel does: a queued job
// is cancelled, a running one (running when listed, or claimed since it
// was listed queued) has its cancel requested; the counts say which. Only
// the queued ones count as JobsCancelled, as for the single cancel.
func TestBulkCancelRequestsTheCancelOfRunningJobs(t *testing.T) {
	for name, filter := range map[string]jobs.BulkRequest{"by kind": {Kind: "ok"}, "queued": {Status: jobs.StatusQueued}} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			mem := jobstest.NewMemStore(nil)
			store := claimedAfterListing{MemStore: mem, claim: map[string]bool{}}
			reg := jobs.NewRegistry()
			k := jobs.MustRegister(reg, "ok", sleeper, nil)
			svc, err := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: &jobstest.MemQueue{}, PageTokenKey: []byte(strings.Repeat("k", 32))})
			if err != nil {
				t.Fatal(err)
			}
			ids := make([]string, 4)
			for i := range ids {
				res, err := k.Enqueue(ctx, svc, "o", sleepPayload{}, nil)
				if err != nil {
					t.Fatal(err)
				}
				ids[i] = res.Job.ID
			}
			queued, claimedSince, running := ids[:2], ids[2], ids[3]
			claimJob(ctx, mem, running)
			store.claim[claimedSince] = true
			filter.Action = jobs.BulkCancel
			res, err := svc.Bulk(ctx, "o", filter)
			if err != nil {
				t.Fatal(err)
			}
			wantMatched, wantRequested := 4, 2
			if filter.Status == jobs.StatusQueued {
				wantMatched, wantRequested = 3, 1 // the job running when listed is not selected
			}
			if res.Matched != wantMatched || res.Changed != wantMatched || res.CancelRequested != wantRequested {
				t.Fatalf("bulk cancel %+v: %+v, want %d matched and changed, %d cancels requested", filter, res, wantMatched, wantRequested)
			}
			for _, id := range queued {
				if got, _ := mem.Get(ctx, id); got.Status != jobs.StatusCancelled {
					t.Errorf("queued job %s: %s, want cancelled", id, got.Status)
				}
			}
			if got, _ := mem.Get(ctx, claimedSince); got.Status != jobs.StatusRunning || !got.CancelRequested {
				t.Errorf("job claimed since it was listed: %s, cancel requested %v; want its cancel requested", got.Status, got.CancelRequested)
			}
			if got, _ := mem.Get(ctx, running); got.CancelRequested != (filter.Status == "") {
				t.Errorf("running job: cancel requested %v", got.CancelRequested)
			}
		})
	}
}
