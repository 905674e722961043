package dynamostore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// queriesPerPartition bounds the index queries of one List call, per
// partition it merges (a kind filter may skip many index entries: they
// are small, but not free).
const queriesPerPartition = 4

// prefillWidth is how many partitions a listing queries at once when
// several need reading (a listing by tag reads TagSlots*ListShards).
const prefillWidth = 16

// ErrBadPosition is a List position this store did not issue for the query.
var ErrBadPosition = errors.New("dynamostore: list position does not belong to this query")

// List reads an owner's jobs newest first from OwnerIndex, or, for failed
// and cancelled jobs, from the sparse AttentionIndex, and for queued and
// running jobs from QueuedIndex and RunningIndex: the owner's ListShards
// partitions of the index (and, for the owner and attention indexes, the
// partition of its jobs created before the shards), merged newest first. A kind filter is applied to the
// index entries (the kind is projected), so the jobs read are the ones
// returned. A status the index cannot tell (queued, running, succeeded) is
// checked on the jobs themselves, reading at most q.MaxReads of them
// (twice Limit by default). A listing by tag reads the tag's partitions
// of the TagIndexes instead: only the tagged jobs, whatever else the owner
// has. A page carries Next only when more entries may follow.
func (s *Store) List(ctx context.Context, q driver.ListQuery) (driver.ListPage, error) {
	if q.OwnerKey == "" || q.Limit < 1 || q.Limit > 1000 {
		return driver.ListPage{}, errors.New("dynamostore: list needs an owner key and a limit of 1 to 1000")
	}
	index, pkAttr := OwnerIndex, AttrListOwner
	// exact: the index alone selects the jobs, so no read budget applies.
	exact := q.Status == ""
	legacy := true
	switch q.Status {
	case jobs.StatusFailed, jobs.StatusCancelled:
		index, pkAttr, exact = AttentionIndex, AttrAttention, true
	case jobs.StatusQueued:
		index, pkAttr, exact, legacy = QueuedIndex, AttrQueued, true, false
	case jobs.StatusRunning:
		index, pkAttr, exact, legacy = RunningIndex, AttrRunning, true, false
	}
	var parts []*partition
	if q.Tag != "" {
		// A tag's jobs are in its partitions of the tag indexes, the status
		// (if given) is checked on the jobs.
		exact = q.Status == ""
		for i := range TagSlots {
			for _, pk := range tagPartitions(q.OwnerKey, q.Tag) {
				parts = append(parts, &partition{index: TagIndexes[i], pkAttr: TagAttrs[i], pk: pk, more: true})
			}
		}
	} else {
		for _, pk := range listPartitions(q.OwnerKey, legacy) {
			parts = append(parts, &partition{index: index, pkAttr: pkAttr, pk: pk, more: true})
		}
	}
	maxReads := q.MaxReads
	if maxReads <= 0 {
		maxReads = 2 * q.Limit
	}
	after, err := decodePosition(q.After)
	if err != nil {
		return driver.ListPage{}, err
	}
	upper := position{}
	if !q.CreatedBefore.IsZero() {
		upper = position{created: listCreated(q.CreatedBefore)}
	}
	if after.created != "" && (upper.created == "" || after.less(upper)) {
		upper = after
	}
	m := &merge{s: s, q: q, upper: upper, seen: map[string]bool{}, parts: parts, maxQueries: queriesPerPartition * int32(len(parts))}
	var page driver.ListPage
	reads := 0
	var last position
	for len(page.Records) < q.Limit {
		want := q.Limit - len(page.Records)
		if !exact {
			want = min(want, maxReads-reads)
		}
		if want <= 0 {
			break
		}
		entries, err := m.next(ctx, want)
		if err != nil {
			return driver.ListPage{}, err
		}
		if len(entries) == 0 {
			break
		}
		ids := make([]string, len(entries))
		for i, e := range entries {
			ids[i] = e.id
		}
		recs, err := s.getMany(ctx, ids, "list_get")
		if err != nil {
			return driver.ListPage{}, err
		}
		reads += len(ids)
		now := s.clock.Now()
		for _, e := range entries {
			last = e
			r, ok := recs[e.id]
			// The status is checked on the job even when the attention index
			// selected it: in AWS an index entry can outlive its job's
			// failure for a moment (a retried job is queued again before its
			// entry goes), and DynamoDB Local never shows that lag.
			if !ok || r.Expired(now) || (q.Status != "" && r.Status != q.Status) {
				continue
			}
			page.Records = append(page.Records, r)
		}
	}
	switch more, err := m.more(ctx); {
	case err != nil:
		return driver.ListPage{}, err
	case more && last.created != "":
		page.Next = last.encode()
	case more:
		// Nothing taken (the query budget ran out): continue below what
		// was read of every partition.
		page.Next = m.frontier().encode()
	}
	return page, nil
}

// listPartitions are the partition key values of an owner's entries in an
// index: its ListShards shards and, with legacy, its key alone. Only the
// owner and attention indexes have that one (entries written before the
// shards); the queued and running indexes were created sharded.
func listPartitions(ownerKey string, legacy bool) []string {
	pks := make([]string, 0, ListShards+1)
	for i := range ListShards {
		pks = append(pks, ownerKey+"#"+strconv.Itoa(i))
	}
	if legacy {
		pks = append(pks, ownerKey)
	}
	return pks
}

// position is an entry's place in a listing: its creation time (the sort
// key) and its id, newest first (descending by both).
type position struct{ created, id string }

// less reports whether p comes after o in the listing (is older).
func (p position) less(o position) bool {
	if p.created != o.created {
		return p.created < o.created
	}
	return p.id < o.id
}

func (p position) encode() string {
	b, _ := json.Marshal([]string{p.created, p.id})
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodePosition turns a position string back into a position.
func decodePosition(pos string) (position, error) {
	if pos == "" {
		return position{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(pos)
	if err != nil {
		return position{}, ErrBadPosition
	}
	var p []string
	if json.Unmarshal(b, &p) != nil || len(p) != 2 || len(p[0]) != 13 {
		return position{}, ErrBadPosition
	}
	return position{created: p[0], id: p[1]}, nil
}

// partition is one index partition of a merged listing: what was read of
// it and not taken yet, and where its next query starts.
type partition struct {
	// index and pkAttr: the index it is a partition of, and that index's
	// partition key attribute.
	index, pkAttr string
	pk            string
	// below, once set, is the millisecond whose entries p has all read:
	// its next query reads older ones.
	below string
	buf   []position
	start map[string]types.AttributeValue
	more  bool
}

// merge takes the entries of several index partitions newest first.
type merge struct {
	s *Store
	q driver.ListQuery
	// upper: only entries older than it (a position, or a creation time
	// alone, exclusive).
	upper position
	parts []*partition
	// queries counts the index queries made, up to maxQueries.
	queries, maxQueries int32
	// seen: the ids taken (an entry shows in one partition; a lagging
	// index may show one twice for a moment).
	seen map[string]bool
}

// fill reads more of p: up to n entries older than the merge's upper
// bound (and than what p has read), newest first. Entries of one
// millisecond come in no order of ours, and a page's position is a (time,
// id) within one: so when a query stops inside a millisecond, the rest of
// that millisecond's entries are read too (a batch's jobs share one), and
// the buffer holds every entry of each millisecond it holds.
func (m *merge) fill(ctx context.Context, p *partition, n int) error {
	if atomic.AddInt32(&m.queries, 1) > m.maxQueries {
		return errQueryBudget
	}
	kc := expression.Key(p.pkAttr).Equal(expression.Value(p.pk))
	switch {
	case p.below != "":
		kc = kc.And(expression.Key(AttrListCreated).LessThan(expression.Value(p.below)))
	case m.upper.created == "":
	case m.upper.id == "":
		kc = kc.And(expression.Key(AttrListCreated).LessThan(expression.Value(m.upper.created)))
	default:
		// Inclusive: entries of the bound's millisecond are sorted out by id.
		kc = kc.And(expression.Key(AttrListCreated).LessThanEqual(expression.Value(m.upper.created)))
	}
	last, err := m.query(ctx, p, kc, n, p.start)
	if err != nil {
		return err
	}
	p.start, p.more = last, len(last) > 0
	if lc, _ := last[AttrListCreated].(*types.AttributeValueMemberS); lc != nil {
		group := expression.Key(p.pkAttr).Equal(expression.Value(p.pk)).And(expression.Key(AttrListCreated).Equal(expression.Value(lc.Value)))
		var start map[string]types.AttributeValue
		for {
			if start, err = m.query(ctx, p, group, 100, start); err != nil {
				return err
			}
			if len(start) == 0 {
				break
			}
		}
		p.start, p.below = nil, lc.Value
	}
	// Keep each partition's buffer newest first by (created, id).
	slices.SortFunc(p.buf, func(a, b position) int {
		switch {
		case a == b:
			return 0
		case b.less(a):
			return -1
		}
		return 1
	})
	return nil
}

// query runs one query of p with the key condition kc and the listing's
// filters, adds the entries it finds to p's buffer (each once), and
// returns where the next would start (nil: nothing follows).
func (m *merge) query(ctx context.Context, p *partition, kc expression.KeyConditionBuilder, n int, start map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	b := expression.NewBuilder().WithKeyCondition(kc)
	var filters []expression.ConditionBuilder
	if m.q.Kind != "" {
		filters = append(filters, expression.Name(attrKind).Equal(expression.Value(m.q.Kind)))
	}
	if p.index == AttentionIndex {
		filters = append(filters, expression.Name(attrStatus).Equal(expression.Value(string(m.q.Status))))
	}
	switch len(filters) {
	case 1:
		b = b.WithFilter(filters[0])
	case 2:
		b = b.WithFilter(filters[0].And(filters[1]))
	}
	expr, err := b.Build()
	if err != nil {
		return nil, err
	}
	out, err := m.s.api.Query(ctx, &dynamodb.QueryInput{
		TableName: m.s.table, IndexName: aws.String(p.index),
		KeyConditionExpression: expr.KeyCondition(), FilterExpression: expr.Filter(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ScanIndexForward: aws.Bool(false), Limit: aws.Int32(int32(n)),
		ExclusiveStartKey: start, ReturnConsumedCapacity: m.s.capacity(),
	})
	if err != nil {
		return nil, fmt.Errorf("dynamostore: list: %w", err)
	}
	m.s.report("list", out.ConsumedCapacity)
	for _, it := range out.Items {
		id, _ := it[AttrID].(*types.AttributeValueMemberS)
		lc, _ := it[AttrListCreated].(*types.AttributeValueMemberS)
		if id == nil || lc == nil {
			continue
		}
		if e := (position{created: lc.Value, id: id.Value}); m.admits(e) && !slices.Contains(p.buf, e) {
			p.buf = append(p.buf, e)
		}
	}
	return out.LastEvaluatedKey, nil
}

// admits reports whether e is below the merge's upper bound: older than a
// position, or created before a time.
func (m *merge) admits(e position) bool {
	switch {
	case m.upper.created == "":
		return true
	case m.upper.id == "":
		return e.created < m.upper.created
	}
	return e.less(m.upper)
}

// errQueryBudget stops a page whose index queries reached the merge's
// maxQueries.
var errQueryBudget = errors.New("dynamostore: list query budget spent")

// next takes up to n entries, newest first across the partitions.
func (m *merge) next(ctx context.Context, n int) ([]position, error) {
	var out []position
	per := n/len(m.parts) + 2
	if err := m.prefill(ctx, per); err != nil {
		if errors.Is(err, errQueryBudget) {
			return m.takeSafe(out, n), nil
		}
		return nil, err
	}
	for len(out) < n {
		var best *partition
		for _, p := range m.parts {
			for len(p.buf) == 0 && p.more {
				// (A filter may skip everything one query reads.)
				if err := m.fill(ctx, p, per); err != nil {
					if errors.Is(err, errQueryBudget) {
						return m.takeSafe(out, n), nil
					}
					return nil, err
				}
			}
			if len(p.buf) > 0 && (best == nil || best.buf[0].less(p.buf[0])) {
				best = p
			}
		}
		if best == nil {
			return out, nil
		}
		e := best.buf[0]
		best.buf = best.buf[1:]
		if !m.seen[e.id] {
			m.seen[e.id] = true
			out = append(out, e)
		}
	}
	return out, nil
}

// prefill reads, prefillWidth at a time, every partition that has nothing
// buffered and may hold more: the first read of each, which the merge
// needs before it can take any entry.
func (m *merge) prefill(ctx context.Context, per int) error {
	var need []*partition
	for _, p := range m.parts {
		if len(p.buf) == 0 && p.more {
			need = append(need, p)
		}
	}
	if len(need) < 2 {
		return nil
	}
	errs := make([]error, len(need))
	sem := make(chan struct{}, prefillWidth)
	var wg sync.WaitGroup
	for i, p := range need {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = m.fill(ctx, p, per)
		}()
	}
	wg.Wait()
	var budget error
	for _, err := range errs {
		switch {
		case errors.Is(err, errQueryBudget):
			budget = err
		case err != nil:
			return err
		}
	}
	return budget
}

// more reports whether any entry may follow what was taken: one is
// buffered, or a partition's last query stopped at its limit (then one
// more entry is read to know).
func (m *merge) more(ctx context.Context) (bool, error) {
	for _, p := range m.parts {
		if len(p.buf) > 0 {
			return true, nil
		}
	}
	for _, p := range m.parts {
		for p.more && len(p.buf) == 0 {
			if err := m.fill(ctx, p, 1); err != nil {
				if errors.Is(err, errQueryBudget) {
					return true, nil
				}
				return false, err
			}
		}
		if len(p.buf) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// bound is the newest position below which a partition still to read
// (more to read, nothing buffered) may hold entries: every entry newer
// than it has been read. False when such a partition was never read.
func (m *merge) bound() (position, bool) {
	var f position
	for _, p := range m.parts {
		if !p.more || len(p.buf) > 0 {
			continue
		}
		r := p.readTo()
		if r.created == "" {
			return position{}, false
		}
		if f.created == "" || f.less(r) {
			f = r
		}
	}
	return f, true
}

// takeSafe, when the query budget ran out, appends to out (up to n) the
// buffered entries newer than bound, in order: no unread entry can come
// before them. Those left in the buffers are older than bound, which the
// next page starts below (frontier), and are read again there.
func (m *merge) takeSafe(out []position, n int) []position {
	f, ok := m.bound()
	for ok && len(out) < n {
		var best *partition
		for _, p := range m.parts {
			if len(p.buf) > 0 && (best == nil || best.buf[0].less(p.buf[0])) {
				best = p
			}
		}
		if best == nil || (f.created != "" && !f.less(best.buf[0])) {
			break
		}
		e := best.buf[0]
		best.buf = best.buf[1:]
		if !m.seen[e.id] {
			m.seen[e.id] = true
			out = append(out, e)
		}
	}
	return out
}

// frontier is where the next page starts when this one took nothing (the
// query budget ran out): bound, below which every unread entry is, and
// the buffered entries too (takeSafe took those above it). A partition
// never read leaves the page where it began.
func (m *merge) frontier() position {
	if f, ok := m.bound(); ok && f.created != "" {
		return f
	}
	return m.upper
}

// readTo is the oldest position read of p (its last buffered entry, or
// where its next query starts).
func (p *partition) readTo() position {
	if len(p.buf) > 0 {
		return p.buf[len(p.buf)-1]
	}
	if p.below != "" {
		return position{created: p.below} // all of it read: strictly older
	}
	id, _ := p.start[AttrID].(*types.AttributeValueMemberS)
	lc, _ := p.start[AttrListCreated].(*types.AttributeValueMemberS)
	if id == nil || lc == nil {
		return position{}
	}
	return position{created: lc.Value, id: id.Value}
}

// GetMany reads jobs by id (driver.ManyGetter): getMany, without the
// jobs past their expiry that TTL has not removed yet, as Get.
func (s *Store) GetMany(ctx context.Context, ids []string) (map[string]*driver.Record, error) {
	// BatchGetItem refuses a request that names a key twice.
	ids = slices.Compact(slices.Sorted(slices.Values(ids)))
	recs, err := s.getMany(ctx, ids, "get_many")
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	maps.DeleteFunc(recs, func(_ string, r *driver.Record) bool { return r.Expired(now) })
	return recs, nil
}

// getMany reads jobs by id (BatchGetItem, strongly consistent: 1 read unit
// per job up to 4 KB), retrying what DynamoDB leaves unprocessed; op names
// the reads in the capacity reports.
func (s *Store) getMany(ctx context.Context, ids []string, op string) (map[string]*driver.Record, error) {
	out := map[string]*driver.Record{}
	if len(ids) == 0 {
		return out, nil
	}
	var keys []map[string]types.AttributeValue
	for _, id := range ids {
		keys = append(keys, key(id))
	}
	for len(keys) > 0 {
		chunk := keys[:min(100, len(keys))]
		keys = keys[len(chunk):]
		req := map[string]types.KeysAndAttributes{*s.table: {Keys: chunk, ConsistentRead: aws.Bool(true)}}
		for try := 0; len(req) > 0; try++ {
			if try > 0 {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(time.Duration(try*20) * time.Millisecond):
				}
			}
			res, err := s.api.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req, ReturnConsumedCapacity: s.capacity()})
			if err != nil {
				return nil, fmt.Errorf("dynamostore: read jobs: %w", err)
			}
			for i := range res.ConsumedCapacity {
				s.report(op, &res.ConsumedCapacity[i])
			}
			for _, it := range res.Responses[*s.table] {
				if _, isJob := it[attrKind]; !isJob {
					continue
				}
				r, err := fromItem(it)
				if err != nil {
					return nil, err
				}
				out[r.ID] = r
			}
			req = res.UnprocessedKeys
		}
	}
	return out, nil
}

// Resubmit puts a failed or cancelled job back to queued: due at once, in
// the sweep index, out of the attention index, without its outcome or
// expiry. Attempts go on counting from where they were, and its retry
// policy counts from there (AttemptBase). A job whose last run's handler
// was abandoned keeps its lease until it ends: not before then.
func (s *Store) Resubmit(ctx context.Context, id string, r driver.Resubmit) error {
	e := newExpr()
	at := e.vn(ms(r.At))
	e.setTo(attrStatus, e.vs(string(jobs.StatusQueued)))
	e.moveUnfinished(AttrQueued, AttrRunning)
	e.setTo(attrAttemptBase, e.n(attrAttempt))
	e.setTo(attrUpdated, at)
	e.setTo(attrRunAt, at)
	e.setTo(AttrSweepShard, e.vs(ShardOf(id)))
	e.setTo(AttrSweepAt, e.vn(ms(r.SweepAt)))
	e.setTo(attrLastError, e.ifNotExists(attrErrorCode, e.vs(string(jobs.StatusCancelled))))
	// Its MaxRunTime counts from its own first start (attrFirstStarted).
	e.del(attrDispatches, attrLease, AttrAttention, AttrExpires, attrFinished, attrErrorCode, attrResult, attrResultRef, attrResultBytes, attrCancel, attrCancelledBy, attrFirstStarted)
	if r.WaitingOn != "" {
		e.setTo(attrWaitingOn, e.vs(r.WaitingOn))
	}
	e.when(e.statusIs(jobs.StatusFailed) + " OR " + e.statusIs(jobs.StatusCancelled))
	e.when(e.notExists("batch_id"))
	e.when(e.notExists(attrAfter))
	e.when(e.notExists(attrLease) + " OR " + e.n(attrLease) + " <= " + at)
	_, err := s.update(ctx, id, change{op: "resubmit", raw: e})
	return err
}

// CountUnfinished reads the owner's entries of QueuedIndex and
// RunningIndex (keys and kind only, eventually consistent: half a read
// unit per 4 KB, about 40 entries) and counts them by kind, at most max,
// and, for each partition holding queued entries, those of WaitingIndex:
// the queued jobs that wait (an owner with nothing queued reads no more
// than before).
func (s *Store) CountUnfinished(ctx context.Context, ownerKey string, max int) (jobs.UnfinishedCounts, error) {
	out := jobs.UnfinishedCounts{Kinds: map[string]jobs.KindCounts{}}
	n := 0
	for _, ix := range []struct {
		index, pk string
		running   bool
	}{{QueuedIndex, AttrQueued, false}, {RunningIndex, AttrRunning, true}} {
		for _, part := range listPartitions(ownerKey, false) {
			queued, err := s.countKinds(ctx, ix.index, ix.pk, part, func(kind string) bool {
				if n == max {
					out.Truncated = true
					return false
				}
				n++
				c := out.Kinds[kind]
				if ix.running {
					c.Running++
				} else {
					c.Queued++
				}
				out.Kinds[kind] = c
				return true
			})
			if err != nil {
				return out, err
			}
			if out.Truncated {
				return out, nil
			}
			if ix.running || queued == 0 {
				continue
			}
			if _, err := s.countKinds(ctx, WaitingIndex, AttrQueued, part, func(kind string) bool {
				c := out.Kinds[kind]
				c.Waiting = min(c.Waiting+1, c.Queued)
				out.Kinds[kind] = c
				return true
			}); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

// countKinds reads the entries of partition part (pk's value) of index,
// projecting only the kind, and calls add with each entry's kind until it
// says stop; it returns how many it read.
func (s *Store) countKinds(ctx context.Context, index, pk, part string, add func(kind string) bool) (int, error) {
	kc := expression.Key(pk).Equal(expression.Value(part))
	expr, err := expression.NewBuilder().WithKeyCondition(kc).WithProjection(expression.NamesList(expression.Name(attrKind))).Build()
	if err != nil {
		return 0, err
	}
	in := &dynamodb.QueryInput{TableName: s.table, IndexName: aws.String(index),
		KeyConditionExpression: expr.KeyCondition(), ProjectionExpression: expr.Projection(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(), ReturnConsumedCapacity: s.capacity()}
	read := 0
	for {
		res, err := s.api.Query(ctx, in)
		if err != nil {
			return read, fmt.Errorf("dynamostore: count unfinished: %w", err)
		}
		s.report("count_unfinished", res.ConsumedCapacity)
		for _, it := range res.Items {
			kind := ""
			if v, ok := it[attrKind].(*types.AttributeValueMemberS); ok {
				kind = v.Value
			}
			read++
			if !add(kind) {
				return read, nil
			}
		}
		if len(res.LastEvaluatedKey) == 0 {
			return read, nil
		}
		in.ExclusiveStartKey = res.LastEvaluatedKey
	}
}

var _ driver.QueueCounter = (*Store)(nil)

// CountQueued counts q.Kind's queued jobs with Select COUNT queries (no
// item returned; half a read unit per 4 KB of entries read, eventually
// consistent), at most 8 at once: an owner's (q.OwnerKey) from its
// QueuedIndex partitions, filtered on the kind (every queued entry of the
// owner is read), or the kind's across owners from its KindShards
// KindQueuedIndex partitions (about 37 entries per half unit). A partition
// stops being read once q.Limit entries are counted in all.
func (s *Store) CountQueued(ctx context.Context, q driver.QueueCount) (int, error) {
	var parts []*dynamodb.QueryInput
	if q.OwnerKey != "" {
		for _, part := range listPartitions(q.OwnerKey, false) {
			expr, err := expression.NewBuilder().WithKeyCondition(expression.Key(AttrQueued).Equal(expression.Value(part))).
				WithFilter(expression.Name(attrKind).Equal(expression.Value(q.Kind))).Build()
			if err != nil {
				return 0, err
			}
			parts = append(parts, &dynamodb.QueryInput{IndexName: aws.String(QueuedIndex), KeyConditionExpression: expr.KeyCondition(),
				FilterExpression: expr.Filter(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()})
		}
	} else {
		for i := range KindShards {
			expr, err := expression.NewBuilder().WithKeyCondition(expression.Key(AttrKindCap).Equal(expression.Value(q.Kind + "#" + strconv.Itoa(i)))).Build()
			if err != nil {
				return 0, err
			}
			parts = append(parts, &dynamodb.QueryInput{IndexName: aws.String(KindQueuedIndex), KeyConditionExpression: expr.KeyCondition(),
				ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values()})
		}
	}
	var (
		mu    sync.Mutex
		total int
		first error
		wg    sync.WaitGroup
		sem   = make(chan struct{}, 8)
	)
	enough := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return first != nil || (q.Limit > 0 && total >= q.Limit)
	}
	for _, in := range parts {
		in.TableName, in.Select, in.ReturnConsumedCapacity = s.table, types.SelectCount, s.capacity()
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			for !enough() {
				res, err := s.api.Query(ctx, in)
				mu.Lock()
				if err != nil {
					if first == nil {
						first = fmt.Errorf("dynamostore: count queued: %w", err)
					}
					mu.Unlock()
					return
				}
				total += int(res.Count)
				mu.Unlock()
				s.report("count_queued", res.ConsumedCapacity)
				if len(res.LastEvaluatedKey) == 0 {
					return
				}
				in.ExclusiveStartKey = res.LastEvaluatedKey
			}
		})
	}
	wg.Wait()
	return total, first
}
