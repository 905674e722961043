package jobs

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/metricnames"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Listing: Service.List pages through an owner's jobs, newest first;
// Service.Retry puts a failed or cancelled job back in the queue;
// Service.Bulk cancels or retries the jobs a filter selects, a bounded
// number per call. Page and continuation tokens are opaque and
// tamper-evident: an HMAC binds each to the caller and the filter it was
// issued for (see PageTokenKey); a batch's page tokens (Service.GetBatch)
// are the same tokens, bound to the caller and the batch.

// List limits.
const (
	DefaultListLimit = 50
	MaxListLimit     = 200
	// bulkPageSize is how many jobs one Bulk call examines at most.
	bulkPageSize = 100
)

// ListRequest selects the caller's jobs.
type ListRequest struct {
	Status Status
	Kind   string
	// CreatedBefore keeps jobs created strictly before it (zero: all).
	CreatedBefore time.Time
	// Tag keeps the jobs with this tag ("key=value", EnqueueOpts.Tags):
	// the listing reads the tagged jobs only, however many others the
	// owner has.
	Tag string
	// Limit is 1 to MaxListLimit (0: DefaultListLimit).
	Limit     int
	PageToken string
}

// ListResult is one page.
type ListResult struct {
	Jobs []View
	// NextPageToken continues the listing ("" on the last page). A page
	// may hold fewer than Limit jobs, even none, and still have a next
	// page: a status that only the job itself tells is read within a
	// budget of twice the limit (see Store.List).
	NextPageToken string
}

// BulkAction is what Bulk does to each job it selects.
type BulkAction string

const (
	// BulkCancel cancels each job as Service.Cancel does.
	BulkCancel BulkAction = "cancel"
	// BulkResubmit resubmits each job as Service.Resubmit does (POST
	// /v1/bulk/retry).
	BulkResubmit BulkAction = "retry"
)

// BulkRequest selects the caller's jobs for a bulk action: a Status, a
// Kind or a Tag is required (any of them together narrows it).
type BulkRequest struct {
	Action        BulkAction
	Status        Status
	Kind          string
	CreatedBefore time.Time
	// Tag: ListRequest.Tag.
	Tag               string
	ContinuationToken string
}

// BulkResult says what one Bulk call did.
type BulkResult struct {
	// Matched is how many jobs the filter selected in this call, Changed
	// how many of them were cancelled (or marked to stop) or retried; the
	// others had moved on (finished, or retried by someone else).
	Matched, Changed int
	// CancelRequested is how many of Changed were running (a cancel's):
	// like Service.Cancel, the cancel of each is requested and its run
	// ends cancelled when its worker notices; the others were cancelled
	// at once.
	CancelRequested int
	// ContinuationToken continues with the next jobs ("" when done).
	ContinuationToken string
}

// pageToken is what a token carries, signed.
type pageToken struct {
	V      int    `json:"v"`
	Use    string `json:"u"` // "list", the bulk action or "batch"
	Filter string `json:"f"` // hash of owner and filter (tokenScope)
	Pos    string `json:"p"` // the store's position
}

func (s *Service) filterHash(use, owner string, f listFilter) string {
	what := []string{string(f.status), f.kind, f.before.UTC().Format(time.RFC3339Nano)}
	if f.tag != "" {
		what = append(what, "tag="+f.tag) // untagged filters hash as before tags
	}
	return tokenScope(use, owner, what...)
}

// listFilter is what a listing or a bulk action selects.
type listFilter struct {
	status Status
	kind   string
	before time.Time
	tag    string
}

// tokenScope is what a token is bound to: its use, its owner and what it
// pages through (a listing's filter, a batch's id), hashed.
func tokenScope(use, owner string, what ...string) string {
	h := sha256.New()
	for _, part := range append([]string{use, wire.OwnerKey(owner)}, what...) {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16])
}

func (s *Service) signToken(t pageToken) string {
	body, _ := json.Marshal(t)
	mac := hmac.New(sha256.New, s.pageKey)
	mac.Write(body)
	return base64.RawURLEncoding.EncodeToString(body) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil)[:16])
}

func (s *Service) openToken(tok, use, filter string) (string, error) {
	if tok == "" {
		return "", nil
	}
	body64, mac64, ok := strings.Cut(tok, ".")
	body, err1 := base64.RawURLEncoding.DecodeString(body64)
	sum, err2 := base64.RawURLEncoding.DecodeString(mac64)
	if !ok || err1 != nil || err2 != nil || len(tok) > 2048 {
		return "", errPageToken
	}
	mac := hmac.New(sha256.New, s.pageKey)
	mac.Write(body)
	if !hmac.Equal(sum, mac.Sum(nil)[:16]) {
		return "", errPageToken
	}
	var t pageToken
	if json.Unmarshal(body, &t) != nil || t.V != 1 || t.Use != use || t.Filter != filter || t.Pos == "" {
		return "", errPageToken
	}
	return t.Pos, nil
}

func (s *Service) checkFilter(f listFilter) error {
	st, kind := f.status, f.kind
	if _, _, err := parseTag(f.tag); err != nil {
		return err
	}
	switch st {
	case "", StatusQueued, StatusRunning, StatusSucceeded, StatusFailed, StatusCancelled:
	default:
		return refuse(codeInvalidRequest, fmt.Sprintf("status %q: want queued, running, succeeded, failed or cancelled", st))
	}
	if kind != "" {
		if _, ok := s.reg.lookup(kind); !ok {
			return refuse(codeInvalidRequest, fmt.Sprintf("kind %q is not registered", kind))
		}
	}
	if s.pageKey == nil {
		return errors.New("jobs: listing needs Config.PageTokenKey")
	}
	return nil
}

// List returns a page of the owner's jobs, newest first.
func (s *Service) List(ctx context.Context, owner string, req ListRequest) (*ListResult, error) {
	if checkOwner(owner) != nil {
		return nil, errOwner
	}
	f := listFilter{status: req.Status, kind: req.Kind, before: req.CreatedBefore, tag: req.Tag}
	if err := s.checkFilter(f); err != nil {
		return nil, err
	}
	switch {
	case req.Limit == 0:
		req.Limit = DefaultListLimit
	case req.Limit < 1 || req.Limit > MaxListLimit:
		return nil, refuse(codeInvalidRequest, fmt.Sprintf("limit %d: want 1 to %d", req.Limit, MaxListLimit))
	}
	filter := s.filterHash("list", owner, f)
	pos, err := s.openToken(req.PageToken, "list", filter)
	if err != nil {
		return nil, err
	}
	page, err := s.store.List(ctx, driver.ListQuery{OwnerKey: wire.OwnerKey(owner), Status: req.Status, Kind: req.Kind,
		CreatedBefore: req.CreatedBefore, Tag: req.Tag, Limit: req.Limit, After: pos})
	if err != nil {
		return nil, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	out := &ListResult{Jobs: []View{}}
	for _, r := range page.Records {
		// The indexes are keyed by hashes: never trust them alone.
		if r.Owner == owner && (req.Tag == "" || hasTag(r.Tags, req.Tag)) {
			v, err := s.eng.viewRead(ctx, r)
			if err != nil {
				return nil, err
			}
			out.Jobs = append(out.Jobs, v)
		}
	}
	if page.Next != "" {
		out.NextPageToken = s.signToken(pageToken{V: 1, Use: "list", Filter: filter, Pos: page.Next})
	}
	return out, nil
}

// maxUnfinishedCount is the most unfinished jobs CountUnfinished counts.
const maxUnfinishedCount = 10000

// CountUnfinished counts the owner's queued and running jobs by kind, now,
// from the indexes that hold only unfinished jobs: its cost grows with
// them (up to maxUnfinishedCount), never with the owner's history.
func (s *Service) CountUnfinished(ctx context.Context, owner string) (UnfinishedCounts, error) {
	if checkOwner(owner) != nil {
		return UnfinishedCounts{}, errOwner
	}
	c, err := s.store.CountUnfinished(ctx, wire.OwnerKey(owner), maxUnfinishedCount)
	if err != nil {
		return UnfinishedCounts{}, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	if c.Kinds == nil {
		c.Kinds = map[string]KindCounts{}
	}
	return c, nil
}

// Resubmit puts the owner's failed or cancelled job back in the queue for
// another attempt with the same id (POST /v1/jobs/{id}/retry) and returns
// it: ErrNotFound as for reads, ErrNotResubmittable for any other status
// (or a job of a batch, whose counts are final). The kind's retry policy
// counts its attempts afresh.
func (s *Service) Resubmit(ctx context.Context, owner, id string) (*View, error) {
	rec, err := s.get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if err := s.callerActs(rec); err != nil {
		return nil, err
	}
	if rec.Status == StatusFailed || rec.Status == StatusCancelled {
		if err := s.retakeUnique(ctx, rec); err != nil {
			return nil, err
		}
	}
	if err := s.eng.resubmit(ctx, rec); err != nil {
		var ce *driver.ConflictError
		if errors.As(err, &ce) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrInvalidRequest) {
			return nil, err // not retryable; or a parent failed (dependency_failed)
		}
		return nil, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	s.count(rec.Kind, metricnames.JobsResubmitted, 1)
	if rec, err = s.get(ctx, owner, id); err != nil {
		return nil, err
	}
	v := viewOf(rec)
	return &v, nil
}

// Bulk cancels or retries the owner's jobs that req selects, examining at
// most bulkPageSize of them; follow ContinuationToken for the rest. A
// cancel does to each job what Cancel does (queued: cancelled; running:
// its cancel requested, counted in CancelRequested). Jobs that moved on
// between the listing and the action are matched but not changed.
func (s *Service) Bulk(ctx context.Context, owner string, req BulkRequest) (*BulkResult, error) {
	if checkOwner(owner) != nil {
		return nil, errOwner
	}
	if req.Action != BulkCancel && req.Action != BulkResubmit {
		return nil, refuse(codeInvalidRequest, fmt.Sprintf("action %q: want cancel or retry", req.Action))
	}
	if req.Status == "" && req.Kind == "" && req.Tag == "" {
		return nil, refuse(codeInvalidRequest, "give a status, a kind, a tag or more of them")
	}
	f := listFilter{status: req.Status, kind: req.Kind, before: req.CreatedBefore, tag: req.Tag}
	if err := s.checkFilter(f); err != nil {
		return nil, err
	}
	filter := s.filterHash(string(req.Action), owner, f)
	pos, err := s.openToken(req.ContinuationToken, string(req.Action), filter)
	if err != nil {
		return nil, err
	}
	page, err := s.store.List(ctx, driver.ListQuery{OwnerKey: wire.OwnerKey(owner), Status: req.Status, Kind: req.Kind,
		CreatedBefore: req.CreatedBefore, Tag: req.Tag, Limit: bulkPageSize, After: pos})
	if err != nil {
		return nil, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	res := &BulkResult{}
	counted := map[string]int{} // kind -> changed
	defer func() {
		name := map[BulkAction]string{BulkCancel: metricnames.JobsCancelled, BulkResubmit: metricnames.JobsResubmitted}[req.Action]
		for kind, n := range counted {
			s.count(kind, name, n)
		}
	}()
	for _, r := range page.Records {
		if r.Owner != owner || (req.Tag != "" && !hasTag(r.Tags, req.Tag)) || s.callerActs(r) != nil {
			continue
		}
		switch req.Action {
		case BulkCancel:
			if r.Status.Final() {
				continue // not cancellable: not matched
			}
			res.Matched++
			// As Cancel does: the listing may be older than the job (one
			// listed queued may be running now, and is asked to stop).
			cur, err := s.cancelAsRead(ctx, owner, r)
			switch {
			case err == nil && cur.Status == StatusQueued:
				res.Changed++
				counted[cur.Kind]++
			case err == nil:
				res.Changed++
				res.CancelRequested++
			case errors.Is(err, ErrAlreadyFinal), errors.Is(err, ErrNotFound):
				// moved on: finished, or expired
			default:
				return nil, err
			}
		case BulkResubmit:
			if (r.Status != StatusFailed && r.Status != StatusCancelled) || r.BatchID != "" {
				continue
			}
			res.Matched++
			if err := s.retakeUnique(ctx, r); errors.Is(err, ErrUnavailable) {
				return nil, err
			} else if err != nil {
				continue // its key is another job's now: left as it is
			}
			if err := s.eng.resubmit(ctx, r); err == nil {
				res.Changed++
				counted[r.Kind]++
			} else if !movedOn(err) {
				return nil, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
			}
		}
	}
	if page.Next != "" {
		res.ContinuationToken = s.signToken(pageToken{V: 1, Use: string(req.Action), Filter: filter, Pos: page.Next})
	}
	return res, nil
}

// movedOn reports an error that means the job was no longer as listed.
func movedOn(err error) bool {
	// ErrInvalidRequest: a job that runs after one still failed
	// (dependency_failed) waits for that job's retry; it is matched, not
	// changed, and the action goes on with the others.
	return isConflict(err) || errors.Is(err, ErrNotResubmittable) || errors.Is(err, ErrAlreadyFinal) || errors.Is(err, ErrInvalidRequest)
}
