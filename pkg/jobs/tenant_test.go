package jobs_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// A tenant is within its owner's: owner A naming owner B (or any name B
// also uses) as its tenant gets a fair-queue group of its own, never B's,
// and per-tenant limit keys of its own, so A's jobs neither join B's
// group nor take B's slots. No tenant, or the owner itself, is the
// owner's own group.
func TestTenantsAreWithinTheirOwner(t *testing.T) {
	t.Run("groups", func(t *testing.T) {
		ctx := context.Background()
		queue := &jobstest.MemQueue{}
		reg := jobs.NewRegistry()
		jobs.MustRegister(reg, "k", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
		svc, err := testroles.Service(jobs.Config{Registry: reg, Store: jobstest.NewMemStore(nil), Queue: queue})
		if err != nil {
			t.Fatal(err)
		}
		group := func(owner, tenant string) string {
			t.Helper()
			res, err := svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: owner, Kind: "k", Payload: []byte(`{}`), EnqueueOpts: jobs.EnqueueOpts{Tenant: tenant}})
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range queue.Messages() {
				if m.JobID == res.Job.ID {
					return m.Group
				}
			}
			t.Fatalf("no message for %s", res.Job.ID)
			return ""
		}
		bOwn, bShared := group("owner-b", ""), group("owner-b", "shared")
		for _, tt := range []struct{ owner, tenant, not string }{
			{"owner-a", "owner-b", bOwn},   // A naming B is not B
			{"owner-a", "shared", bShared}, // nor B's tenant of the same name
			{"owner-a", "other", wire.GroupID("other")},
		} {
			if g := group(tt.owner, tt.tenant); g == tt.not || g == "" {
				t.Errorf("%s with tenant %q: group %q, which is another owner's", tt.owner, tt.tenant, g)
			}
		}
		if bOwn != wire.GroupID("owner-b") || group("owner-b", "owner-b") != bOwn {
			t.Errorf("an owner's own group changed: %q, want %q", bOwn, wire.GroupID("owner-b"))
		}
		if first, again := group("owner-a", "shared"), group("owner-a", "shared"); first != again {
			t.Error("one owner's tenant has two groups")
		}
	})
	t.Run("slots", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			mem := jobstest.NewMemStore(nil)
			r := newFlowRig(t, mem, mem, func(r *flowRig) {
				r.holding("sync", time.Second, &jobs.KindOpts{ConcurrencyPerKey: 1, LimitKey: "tenant"})
			})
			var ids []string
			for i := range 10 {
				for _, j := range []struct{ owner, tenant, label string }{{"owner-a", "owner-b", "a-as-b"}, {"owner-b", "", "b"}} {
					raw := fmt.Sprintf(`{"account":%q,"n":%d}`, j.label, i)
					res, err := r.svc.Enqueue(context.Background(), jobs.EnqueueRequest{Owner: j.owner, Kind: "sync", Payload: []byte(raw), EnqueueOpts: jobs.EnqueueOpts{Tenant: j.tenant}})
					if err != nil {
						t.Fatal(err)
					}
					ids = append(ids, res.Job.ID)
				}
			}
			defer r.start(t, 2)()
			r.waitFinal(t, ids, 5*time.Minute)
			r.assertRanOnce(t, ids)
			for key, n := range r.g.keyMax {
				if n != 1 {
					t.Errorf("%s ran %d at once, want 1 (its own key's limit)", key, n)
				}
			}
			if r.g.peak != 2 {
				t.Errorf("peak %d, want 2: A's jobs for tenant B took B's slot", r.g.peak)
			}
		})
	})
}
