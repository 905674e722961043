package jobstest

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// listing checks finding an owner's jobs: listed newest first, filtered and
// paged, and counted, never another owner's.
func (c suite) listing(t *testing.T) {
	ctx := context.Background()

	c.run(t, "ListIsOwnedNewestFirstFilteredAndPaged", func(t *testing.T, s driver.Store, clock *Clock) {
		mine, theirs := wire.OwnerKey("alice"), wire.OwnerKey("bob")
		var ids []string // alice's, oldest first
		for i := range 7 {
			rec := NewRecord(wire.NewID(), clock.Now())
			rec.Owner = "alice"
			if i%2 == 1 {
				rec.Kind = "other"
			}
			if err := s.Create(ctx, rec); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, rec.ID)
			clock.Advance(time.Second)
		}
		bobs := NewRecord(wire.NewID(), clock.Now())
		bobs.Owner = "bob"
		if err := s.Create(ctx, bobs); err != nil {
			t.Fatal(err)
		}
		// ids[0] fails, ids[1] is cancelled while queued, ids[2] succeeds.
		_, tok := mustClaim(t, s, ids[0], clock.Now())
		if err := s.Finish(ctx, ids[0], tok, driver.Outcome{Status: jobs.StatusFailed, Code: "boom", At: clock.Now(), ExpiresAt: clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		if err := s.CancelQueued(ctx, ids[1], driver.CancelQueued{At: clock.Now(), ExpiresAt: clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		_, tok = mustClaim(t, s, ids[2], clock.Now())
		if err := s.Finish(ctx, ids[2], tok, driver.Outcome{Status: jobs.StatusSucceeded, At: clock.Now(), ExpiresAt: clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		all := func(q driver.ListQuery) []string {
			t.Helper()
			var got []string
			for i := 0; i < 50; i++ {
				page, err := s.List(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if len(page.Records) > q.Limit {
					t.Fatalf("a page of %d with limit %d", len(page.Records), q.Limit)
				}
				for _, r := range page.Records {
					if wire.OwnerKey(r.Owner) != q.OwnerKey {
						t.Fatalf("listed %s's job", r.Owner)
					}
					got = append(got, r.ID)
				}
				if page.Next == "" {
					return got
				}
				q.After = page.Next
			}
			t.Fatal("the listing never ended")
			return nil
		}
		rev := func(xs ...string) []string {
			out := append([]string(nil), xs...)
			slices.Reverse(out)
			return out
		}
		for name, c := range map[string]struct {
			q    driver.ListQuery
			want []string
		}{
			"all, in pages of 3": {driver.ListQuery{OwnerKey: mine, Limit: 3}, rev(ids...)},
			"failed":             {driver.ListQuery{OwnerKey: mine, Limit: 2, Status: jobs.StatusFailed}, ids[:1]},
			"cancelled":          {driver.ListQuery{OwnerKey: mine, Limit: 2, Status: jobs.StatusCancelled}, ids[1:2]},
			"succeeded":          {driver.ListQuery{OwnerKey: mine, Limit: 2, Status: jobs.StatusSucceeded}, ids[2:3]},
			"queued":             {driver.ListQuery{OwnerKey: mine, Limit: 2, Status: jobs.StatusQueued}, rev(ids[3:]...)},
			"kind other":         {driver.ListQuery{OwnerKey: mine, Limit: 2, Kind: "other"}, rev(ids[1], ids[3], ids[5])},
			"cancelled of kind":  {driver.ListQuery{OwnerKey: mine, Limit: 2, Kind: "other", Status: jobs.StatusCancelled}, ids[1:2]},
			"created before":     {driver.ListQuery{OwnerKey: mine, Limit: 10, CreatedBefore: Epoch.Add(2 * time.Second)}, rev(ids[:2]...)},
			"bob's":              {driver.ListQuery{OwnerKey: theirs, Limit: 10}, nil},
		} {
			got := all(c.q)
			if name == "bob's" {
				c.want = []string{bobs.ID}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("%s: %v, want %v", name, got, c.want)
			}
		}
		// Retried, the failed job is queued again and no longer failed.
		if err := s.Resubmit(ctx, ids[0], driver.Resubmit{At: clock.Now(), SweepAt: clock.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
		if got := all(driver.ListQuery{OwnerKey: mine, Limit: 5, Status: jobs.StatusFailed}); len(got) != 0 {
			t.Fatalf("a retried job is still listed as failed: %v", got)
		}
	})

	// Tags: a job's tags come back as written, and a listing by tag finds
	// the owner's jobs with it, whichever of a job's (up to 3) tags it is,
	// newest first and paged, narrowed by a status or a kind, never
	// another owner's job with the same tag.
	c.run(t, "ListByTag", func(t *testing.T, s driver.Store, clock *Clock) {
		mine := wire.OwnerKey("alice")
		tagSets := []map[string]string{
			{"import": "42"},
			{"import": "42", "customer": "acme", "release": "r7"}, // import=42 sorts second
			{"import": "43"},
			nil,
			{"a": "1", "b": "2", "import": "42"}, // and third
			{"import": "42"},
		}
		var tagged []string // alice's with import=42, oldest first
		for i, tags := range tagSets {
			rec := NewRecord(wire.NewID(), clock.Now())
			rec.Owner, rec.Tags = "alice", tags
			if i == 5 {
				rec.Kind = "other"
			}
			if err := s.Create(ctx, rec); err != nil {
				t.Fatal(err)
			}
			if tags["import"] == "42" {
				tagged = append(tagged, rec.ID)
			}
			got, err := s.Get(ctx, rec.ID)
			if err != nil || !reflect.DeepEqual(got.Tags, rec.Tags) {
				t.Fatalf("tags %v read back as %v (%v)", rec.Tags, got.Tags, err)
			}
			clock.Advance(time.Second)
		}
		bobs := NewRecord(wire.NewID(), clock.Now())
		bobs.Owner, bobs.Tags = "bob", map[string]string{"import": "42"}
		if err := s.Create(ctx, bobs); err != nil {
			t.Fatal(err)
		}
		_, tok := mustClaim(t, s, tagged[0], clock.Now())
		if err := s.Finish(ctx, tagged[0], tok, driver.Outcome{Status: jobs.StatusFailed, Code: "boom", At: clock.Now(), ExpiresAt: clock.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		list := func(q driver.ListQuery) []string {
			t.Helper()
			var got []string
			for range 50 {
				page, err := s.List(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range page.Records {
					if wire.OwnerKey(r.Owner) != q.OwnerKey || r.Tags["import"] != "42" {
						t.Fatalf("listed %s's job tagged %v", r.Owner, r.Tags)
					}
					got = append(got, r.ID)
				}
				if page.Next == "" {
					return got
				}
				q.After = page.Next
			}
			t.Fatal("the listing never ended")
			return nil
		}
		newest := slices.Clone(tagged)
		slices.Reverse(newest)
		for name, c := range map[string]struct {
			q    driver.ListQuery
			want []string
		}{
			"in pages of 1":  {driver.ListQuery{OwnerKey: mine, Tag: "import=42", Limit: 1}, newest},
			"in one page":    {driver.ListQuery{OwnerKey: mine, Tag: "import=42", Limit: 10}, newest},
			"failed":         {driver.ListQuery{OwnerKey: mine, Tag: "import=42", Status: jobs.StatusFailed, Limit: 10}, tagged[:1]},
			"queued":         {driver.ListQuery{OwnerKey: mine, Tag: "import=42", Status: jobs.StatusQueued, Limit: 10}, newest[:3]},
			"of kind other":  {driver.ListQuery{OwnerKey: mine, Tag: "import=42", Kind: "other", Limit: 10}, newest[:1]},
			"another value":  {driver.ListQuery{OwnerKey: mine, Tag: "import=4", Limit: 10}, nil},
			"created before": {driver.ListQuery{OwnerKey: mine, Tag: "import=42", CreatedBefore: Epoch.Add(2 * time.Second), Limit: 10}, []string{tagged[1], tagged[0]}},
		} {
			if got := list(c.q); !slices.Equal(got, c.want) {
				t.Errorf("%s: %v, want %v", name, got, c.want)
			}
		}
		if got := list(driver.ListQuery{OwnerKey: wire.OwnerKey("bob"), Tag: "import=42", Limit: 10}); !slices.Equal(got, []string{bobs.ID}) {
			t.Errorf("bob's: %v, want %v", got, []string{bobs.ID})
		}
	})

	// A batch's jobs share one creation time: paged through in pages
	// smaller than their number (a store's index may hand out entries of
	// one millisecond in any order), each is listed exactly once, by
	// owner, status and tag alike.
	c.run(t, "ListPagesJobsOfOneMillisecond", func(t *testing.T, s driver.Store, clock *Clock) {
		const n = 150
		want := map[string]bool{}
		for range n {
			rec := NewRecord(wire.NewID(), clock.Now())
			rec.Owner, rec.Tags = "alice", map[string]string{"import": "7"}
			if err := s.Create(ctx, rec); err != nil {
				t.Fatal(err)
			}
			want[rec.ID] = true
		}
		key := wire.OwnerKey("alice")
		for name, q := range map[string]driver.ListQuery{
			"owner":  {OwnerKey: key, Limit: 7},
			"queued": {OwnerKey: key, Limit: 7, Status: jobs.StatusQueued},
			"tag":    {OwnerKey: key, Limit: 7, Tag: "import=7"},
		} {
			seen := map[string]bool{}
			for pages := 0; ; pages++ {
				if pages > 3*n {
					t.Fatalf("%s: the listing never ended", name)
				}
				page, err := s.List(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range page.Records {
					if seen[r.ID] || !want[r.ID] {
						t.Fatalf("%s: %s listed twice or not alice's", name, r.ID)
					}
					seen[r.ID] = true
				}
				if page.Next == "" {
					break
				}
				q.After = page.Next
			}
			if len(seen) != n {
				t.Errorf("%s: %d of the %d jobs listed", name, len(seen), n)
			}
		}
	})

	c.run(t, "ExactlyFullLastPageHasNoNext", func(t *testing.T, s driver.Store, clock *Clock) {
		// An owner's 4 jobs, 2 failed and 2 queued, and another owner's:
		// every listing that ends on a page holding exactly its limit says
		// it is the last (GET /v1/jobs answers "next_page_token": null).
		key := wire.OwnerKey("alice")
		for i := range 4 {
			rec := NewRecord(wire.NewID(), clock.Now())
			rec.Owner = "alice"
			if err := s.Create(ctx, rec); err != nil {
				t.Fatal(err)
			}
			if i < 2 {
				_, tok := mustClaim(t, s, rec.ID, clock.Now())
				if err := s.Finish(ctx, rec.ID, tok, driver.Outcome{Status: jobs.StatusFailed, Code: "boom", At: clock.Now(), ExpiresAt: clock.Now().Add(time.Hour)}); err != nil {
					t.Fatal(err)
				}
			}
			clock.Advance(time.Second)
		}
		other := NewRecord(wire.NewID(), clock.Now())
		other.Owner = "bob"
		if err := s.Create(ctx, other); err != nil {
			t.Fatal(err)
		}
		for name, c := range map[string]struct {
			q     driver.ListQuery
			pages []int // the jobs of each page
		}{
			"all, 2 pages of 2": {driver.ListQuery{OwnerKey: key, Limit: 2}, []int{2, 2}},
			"all, 1 page of 4":  {driver.ListQuery{OwnerKey: key, Limit: 4}, []int{4}},
			"failed, 1 of 2":    {driver.ListQuery{OwnerKey: key, Limit: 2, Status: jobs.StatusFailed}, []int{2}},
			"queued, 2 of 1":    {driver.ListQuery{OwnerKey: key, Limit: 1, Status: jobs.StatusQueued}, []int{1, 1}},
		} {
			q := c.q
			for i, want := range c.pages {
				page, err := s.List(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				last := i == len(c.pages)-1
				if len(page.Records) != want || (page.Next == "") != last {
					t.Errorf("%s: page %d holds %d jobs, next %q; want %d and a next position only if a page follows", name, i+1, len(page.Records), page.Next, want)
					break
				}
				q.After = page.Next
			}
		}
	})

	c.run(t, "CountUnfinishedCountsTheOwnersQueuedAndRunning", func(t *testing.T, s driver.Store, clock *Clock) {
		now := clock.Now()
		mk := func(owner, kind string) *driver.Record {
			rec := NewRecord(wire.NewID(), now)
			rec.Owner, rec.Kind = owner, kind
			if err := s.Create(ctx, rec); err != nil {
				t.Fatal(err)
			}
			return rec
		}
		mk("o", "a")
		mk("o", "a")
		running := mk("o", "b")
		mustClaim(t, s, running.ID, now)
		done := mk("o", "b")
		_, tok := mustClaim(t, s, done.ID, now)
		if err := s.Finish(ctx, done.ID, tok, driver.Outcome{Status: jobs.StatusSucceeded, At: now}); err != nil {
			t.Fatal(err)
		}
		mk("p", "a")
		got, err := s.CountUnfinished(ctx, wire.OwnerKey("o"), 100)
		want := map[string]jobs.KindCounts{"a": {Queued: 2}, "b": {Running: 1}}
		if err != nil || got.Truncated || !reflect.DeepEqual(got.Kinds, want) {
			t.Fatalf("counts %+v %v, want %v", got, err, want)
		}
		if got, _ := s.CountUnfinished(ctx, wire.OwnerKey("o"), 2); !got.Truncated {
			t.Fatalf("counts at most 2: %+v, want truncated", got)
		}
	})
	// A queued job that waits on something (a park's WaitingOn, whatever
	// its value) is counted queued and waiting; once claimed, running only
	// (its WaitingOn stays on it through the claim); parked again, waiting
	// again; retried, queued only.
	c.run(t, "CountUnfinishedCountsTheWaiting", func(t *testing.T, s driver.Store, clock *Clock) {
		now := clock.Now()
		mk := func(kind string) *driver.Record {
			rec := NewRecord(wire.NewID(), now)
			rec.Owner, rec.Kind = "o", kind
			if err := s.Create(ctx, rec); err != nil {
				t.Fatal(err)
			}
			return rec
		}
		park := func(id, on string) {
			t.Helper()
			_, tok := mustClaim(t, s, id, now)
			if err := s.Requeue(ctx, id, tok, driver.Requeue{At: now, RunAt: now, SweepAt: now.Add(time.Minute), WaitingOn: on}); err != nil {
				t.Fatal(err)
			}
		}
		counts := func() map[string]jobs.KindCounts {
			t.Helper()
			got, err := s.CountUnfinished(ctx, wire.OwnerKey("o"), 100)
			if err != nil {
				t.Fatal(err)
			}
			return got.Kinds
		}
		a, b, c := mk("limited"), mk("limited"), mk("limited")
		mk("plain")
		park(a.ID, "concurrency")
		park(b.ID, "parents") // any value: what a job waits on is the feature's
		if got, want := counts(), map[string]jobs.KindCounts{"limited": {Queued: 3, Waiting: 2}, "plain": {Queued: 1}}; !reflect.DeepEqual(got, want) {
			t.Fatalf("after two parks: %+v, want %+v", got, want)
		}
		_, tok := mustClaim(t, s, a.ID, now)
		if got, want := counts()["limited"], (jobs.KindCounts{Queued: 2, Running: 1, Waiting: 1}); got != want {
			t.Fatalf("a waiter claimed: %+v, want %+v", got, want)
		}
		if err := s.Requeue(ctx, a.ID, tok, driver.Requeue{At: now, RunAt: now, SweepAt: now.Add(time.Minute), LastError: "boom"}); err != nil {
			t.Fatal(err)
		}
		park(c.ID, "rate")
		if got, want := counts()["limited"], (jobs.KindCounts{Queued: 3, Waiting: 2}); got != want {
			t.Fatalf("a retried and c parked: %+v, want %+v", got, want)
		}
	})
	c.run(t, "CountQueuedCountsAKindsQueuedJobs", func(t *testing.T, s driver.Store, clock *Clock) {
		qc, ok := s.(driver.QueueCounter)
		if !ok {
			t.Skip("the store does not count queued jobs (driver.QueueCounter)")
		}
		now := clock.Now()
		mk := func(owner, kind string, capped bool) *driver.Record {
			rec := NewRecord(wire.NewID(), now)
			rec.Owner, rec.Kind, rec.QueueCapped = owner, kind, capped
			if err := s.Create(ctx, rec); err != nil {
				t.Fatal(err)
			}
			return rec
		}
		count := func(q driver.QueueCount) int {
			t.Helper()
			n, err := qc.CountQueued(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		var capped []*driver.Record
		for i := range 5 {
			capped = append(capped, mk([]string{"o", "p"}[i%2], "capped", true))
		}
		mk("o", "other", true)
		mk("o", "plain", false)
		running := capped[0]
		mustClaim(t, s, running.ID, now)
		if err := s.CancelQueued(ctx, capped[1].ID, driver.CancelQueued{At: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
		// Queued: capped[2] (o), capped[3] (p), capped[4] (o).
		if got := count(driver.QueueCount{Kind: "capped"}); got != 3 {
			t.Fatalf("the kind's queued jobs: %d, want 3 (one runs, one was cancelled)", got)
		}
		if got := count(driver.QueueCount{Kind: "capped", OwnerKey: wire.OwnerKey("o")}); got != 2 {
			t.Fatalf("owner o's queued jobs of the kind: %d, want 2", got)
		}
		if got := count(driver.QueueCount{Kind: "plain"}); got != 0 {
			t.Fatalf("a kind created without the cap counted %d across owners, want 0 (only capped jobs are)", got)
		}
		if got := count(driver.QueueCount{Kind: "plain", OwnerKey: wire.OwnerKey("o")}); got != 1 {
			t.Fatalf("owner o's queued jobs of a kind without a kind cap: %d, want 1", got)
		}
		if got := count(driver.QueueCount{Kind: "capped", Limit: 2}); got < 2 || got > 3 {
			t.Fatalf("counted up to 2: %d, want 2 or 3", got)
		}
		// Back to queued (a retry): counted again.
		_, tok := mustClaim(t, s, capped[2].ID, now)
		if got := count(driver.QueueCount{Kind: "capped"}); got != 2 {
			t.Fatalf("after a claim: %d, want 2", got)
		}
		if err := s.Requeue(ctx, capped[2].ID, tok, driver.Requeue{At: now, RunAt: now, SweepAt: now.Add(time.Minute), LastError: "boom"}); err != nil {
			t.Fatal(err)
		}
		if got := count(driver.QueueCount{Kind: "capped"}); got != 3 {
			t.Fatalf("after a retry: %d, want 3", got)
		}
	})
}
