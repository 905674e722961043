package simulation

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Tags. An owner of its own enqueues plain jobs, some tagged import=a,
// some import=b, some not, lists its import=a jobs in small pages, then
// cancels them in bulk (bounded by a creation time it took before its
// last few tagged jobs), all under the store's faults. This owner never
// cancels a job any other way. The invariants, at the end:
//   - a listing that completed holds each import=a job accepted before
//     it began, once, and nothing else;
//   - no job lacking the tag, or created after the bound, is cancelled;
//   - a bulk cancel that completed leaves no tagged job accepted before
//     it began (a create still in flight may land later, its creation
//     time before the bound) that was not final at the bulk's end both
//     uncancelled and not asked to stop.

const (
	tagOwner  = "sim-tags"
	bulkTag   = "import=a"
	otherTag  = "import=b"
	tagsLimit = 3 // the listing's page size: several pages
)

// tagRun is what the tagger did, for the checks.
type tagRun struct {
	tagged       []string // the jobs accepted with bulkTag, in order
	acceptedAt   map[string]time.Time
	bulkStart    time.Time // when the bulk cancel's first call began
	listedBefore int       // how many of tagged were accepted before the listing began
	listed       []string  // the listing's ids, in order (nil: it failed)
	bound        time.Time // the bulk cancel's CreatedBefore (zero: none made)
	bulkEnd      time.Time // when the bulk cancel's last call answered (zero: it failed)
}

// tagger is the tags owner (random stream 96).
func (w *world) tagger(ctx context.Context, span time.Duration) {
	rng := rand.New(rand.NewPCG(w.seed, 96))
	a, st, q, b := w.newActor("tagger", false)
	svc, err := testroles.Service(jobs.Config{Registry: w.regOld, Store: st, Queue: q, Bus: b, Sealer: w.sealer, DispatchGrace: w.grace,
		LaneDispatchGrace: w.laneGraces(), Rand: newSimRand(w.seed, a.name), MessageFirst: w.messageFirst, Logger: w.logger,
		PageTokenKey: make([]byte, 32)})
	if err != nil {
		panic(err)
	}
	call := func(f func(context.Context) error) error {
		octx, cancel := context.WithTimeout(ctx, apiTimeout)
		defer cancel()
		return f(octx)
	}
	enqueue := func(i int, tag string) {
		p := script(rng, 80_000+i)
		raw, _ := json.Marshal(p)
		req := jobs.EnqueueRequest{Owner: tagOwner, Kind: kindPlain, Payload: raw}
		req.Delay = time.Duration(rng.IntN(3)*rng.IntN(300)) * time.Second
		if k, v, ok := strings.Cut(tag, "="); ok {
			req.Tags = map[string]string{k: v}
			if rng.IntN(2) == 0 {
				req.Tags["customer"] = fmt.Sprint("c", rng.IntN(3))
			}
		}
		var res *jobs.EnqueueResult
		err := call(func(ctx context.Context) (err error) { res, err = svc.Enqueue(ctx, req); return err })
		w.cover("tags", "enqueue"+outcome(err))
		if err != nil {
			return
		}
		w.accept(res.Job.ID, "tagged")
		if tag == bulkTag {
			w.mu.Lock()
			w.tags.tagged = append(w.tags.tagged, res.Job.ID)
			if w.tags.acceptedAt == nil {
				w.tags.acceptedAt = map[string]time.Time{}
			}
			w.tags.acceptedAt[res.Job.ID] = time.Now()
			w.mu.Unlock()
		}
	}
	tagOf := func() string { return []string{bulkTag, bulkTag, otherTag, ""}[rng.IntN(4)] }
	n := 6 + rng.IntN(10)
	for i := range n {
		if !sleep(ctx, time.Duration(rng.Int64N(int64(span)/int64(2*n)))) {
			return
		}
		enqueue(i, tagOf())
	}

	// The listing, page by page.
	w.mu.Lock()
	w.tags.listedBefore = len(w.tags.tagged)
	w.mu.Unlock()
	var listed []string
	token := ""
	for {
		var page *jobs.ListResult
		err := call(func(ctx context.Context) (err error) {
			page, err = svc.List(ctx, tagOwner, jobs.ListRequest{Tag: bulkTag, Limit: tagsLimit, PageToken: token})
			return err
		})
		w.cover("tags", "list a page by tag"+outcome(err))
		if err != nil {
			listed = nil
			break
		}
		for _, v := range page.Jobs {
			listed = append(listed, v.ID)
		}
		if page.NextPageToken == "" {
			w.mu.Lock()
			w.tags.listed = append([]string{}, listed...)
			w.mu.Unlock()
			break
		}
		token = page.NextPageToken
	}

	// The bulk cancel's bound, then a few more tagged jobs it must spare.
	bound := time.Now()
	w.mu.Lock()
	w.tags.bound = bound
	w.mu.Unlock()
	for i := range 1 + rng.IntN(3) {
		if !sleep(ctx, time.Duration(1+rng.IntN(3000))*time.Millisecond) {
			return
		}
		enqueue(n+i, bulkTag)
	}
	if !sleep(ctx, time.Duration(rng.Int64N(int64(span)/4))) {
		return
	}
	req := jobs.BulkRequest{Action: jobs.BulkCancel, Tag: bulkTag, CreatedBefore: bound}
	w.mu.Lock()
	w.tags.bulkStart = time.Now()
	w.mu.Unlock()
	for {
		var res *jobs.BulkResult
		err := call(func(ctx context.Context) (err error) { res, err = svc.Bulk(ctx, tagOwner, req); return err })
		w.cover("tags", "bulk cancel a page by tag"+outcome(err))
		if err != nil {
			return
		}
		if res.ContinuationToken == "" {
			w.mu.Lock()
			w.tags.bulkEnd = time.Now()
			w.mu.Unlock()
			return
		}
		req.ContinuationToken = res.ContinuationToken
	}
}

// checkTags checks the tags owner's jobs (all: every job by id) against
// what the tagger did.
func (w *world) checkTags(all map[string]*driver.Record) {
	run := w.tags
	if run.listed != nil {
		seen := map[string]bool{}
		for _, id := range run.listed {
			r := all[id]
			switch {
			case seen[id]:
				w.violate("the listing by tag %s gave job %s twice", bulkTag, id)
			case r == nil || r.Owner != tagOwner || r.Tags["import"] != "a":
				w.violate("the listing by tag %s gave job %s, which is not the owner's with the tag", bulkTag, id)
			}
			seen[id] = true
		}
		for _, id := range run.tagged[:run.listedBefore] {
			if !seen[id] {
				w.violate("the listing by tag %s lacks job %s, accepted before it began", bulkTag, id)
			}
		}
		w.cover("invariant", "a listing by tag gave exactly the tagged jobs")
	}
	for _, id := range sortedKeys(all) {
		r := all[id]
		if r.Owner != tagOwner {
			continue
		}
		inBulk := r.Tags["import"] == "a" && !run.bound.IsZero() && r.CreatedAt.Before(run.bound)
		if r.Status == jobs.StatusCancelled && !inBulk {
			w.violate("job %s (tags %v, created %v after the bound) was cancelled, but no cancel selected it",
				id, r.Tags, r.CreatedAt.Sub(run.bound))
		}
		if at, ok := run.acceptedAt[id]; !inBulk || run.bulkEnd.IsZero() || !ok || !at.Before(run.bulkStart) {
			continue
		}
		finishedFirst := r.Status.Final() && !r.FinishedAt.IsZero() && !r.FinishedAt.After(run.bulkEnd)
		if !finishedFirst && r.Status != jobs.StatusCancelled && !r.CancelRequested {
			w.violate("job %s (tag %s, created before the bound) is %s, neither cancelled nor asked to stop by the bulk cancel that ended %v before",
				id, bulkTag, r.Status, time.Since(run.bulkEnd))
		}
		if r.Status == jobs.StatusCancelled {
			w.cover("invariant", "a bulk cancel by tag cancelled its jobs and no other")
		}
	}
}
