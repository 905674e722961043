package dynamostore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// maxIndexPages bounds the index queries of one List call (a kind filter
// may skip many index entries: they are small, but not free).
const maxIndexPages = 10

// ErrBadPosition is a List position this store did not issue for the query.
var ErrBadPosition = errors.New("dynamostore: list position does not belong to this query")

// List reads an owner's jobs newest first from OwnerIndex, or, for failed
// and cancelled jobs, from the sparse AttentionIndex; a kind filter is
// applied to the index entries (the kind is projected), so the jobs read
// are the ones returned. A status the index cannot tell (queued, running,
// succeeded) is checked on the jobs themselves, reading at most
// q.MaxReads of them (twice Limit by default).
func (s *Store) List(ctx context.Context, q jobs.ListQuery) (jobs.ListPage, error) {
	if q.OwnerKey == "" || q.Limit < 1 || q.Limit > 1000 {
		return jobs.ListPage{}, errors.New("dynamostore: list needs an owner key and a limit of 1 to 1000")
	}
	index, pkAttr := OwnerIndex, AttrListOwner
	// exact: the index alone selects the jobs, so no read budget applies.
	exact := q.Status == ""
	if q.Status == jobs.StatusFailed || q.Status == jobs.StatusCancelled {
		index, pkAttr, exact = AttentionIndex, AttrAttention, true
	}
	maxReads := q.MaxReads
	if maxReads <= 0 {
		maxReads = 2 * q.Limit
	}
	kc := expression.Key(pkAttr).Equal(expression.Value(q.OwnerKey))
	if !q.CreatedBefore.IsZero() {
		kc = kc.And(expression.Key(AttrListCreated).LessThan(expression.Value(listCreated(q.CreatedBefore))))
	}
	b := expression.NewBuilder().WithKeyCondition(kc)
	var filters []expression.ConditionBuilder
	if q.Kind != "" {
		filters = append(filters, expression.Name(attrKind).Equal(expression.Value(q.Kind)))
	}
	if index == AttentionIndex {
		filters = append(filters, expression.Name(attrStatus).Equal(expression.Value(string(q.Status))))
	}
	switch len(filters) {
	case 1:
		b = b.WithFilter(filters[0])
	case 2:
		b = b.WithFilter(filters[0].And(filters[1]))
	}
	expr, err := b.Build()
	if err != nil {
		return jobs.ListPage{}, err
	}
	start, err := decodePosition(q.After, pkAttr, q.OwnerKey)
	if err != nil {
		return jobs.ListPage{}, err
	}
	var page jobs.ListPage
	reads := 0
	for pages := 0; pages < maxIndexPages; pages++ {
		want := q.Limit - len(page.Records)
		if !exact {
			want = min(want, maxReads-reads)
		}
		if want <= 0 {
			break
		}
		out, err := s.api.Query(ctx, &dynamodb.QueryInput{
			TableName: s.table, IndexName: aws.String(index),
			KeyConditionExpression: expr.KeyCondition(), FilterExpression: expr.Filter(),
			ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
			ScanIndexForward: aws.Bool(false), Limit: aws.Int32(int32(want)),
			ExclusiveStartKey: start, ReturnConsumedCapacity: s.capacity(),
		})
		if err != nil {
			return jobs.ListPage{}, fmt.Errorf("dynamostore: list: %w", err)
		}
		s.report("list", out.ConsumedCapacity)
		ids := make([]string, 0, len(out.Items))
		for _, it := range out.Items {
			if v, ok := it[AttrID].(*types.AttributeValueMemberS); ok {
				ids = append(ids, v.Value)
			}
		}
		recs, err := s.getMany(ctx, ids)
		if err != nil {
			return jobs.ListPage{}, err
		}
		reads += len(ids)
		now := s.clock.Now()
		for _, id := range ids {
			r, ok := recs[id]
			// The status is checked on the job even when the attention index
			// selected it: in AWS an index entry can outlive its job's
			// failure for a moment (a retried job is queued again before its
			// entry goes), and DynamoDB Local never shows that lag.
			if !ok || r.Expired(now) || (q.Status != "" && r.Status != q.Status) {
				continue
			}
			page.Records = append(page.Records, r)
		}
		start = out.LastEvaluatedKey
		if len(start) == 0 {
			return page, nil
		}
	}
	if len(start) > 0 {
		page.Next = encodePosition(start)
	}
	return page, nil
}

// getMany reads jobs by id (BatchGetItem, strongly consistent: 1 read unit
// per job up to 4 KB), retrying what DynamoDB leaves unprocessed.
func (s *Store) getMany(ctx context.Context, ids []string) (map[string]*jobs.Record, error) {
	out := map[string]*jobs.Record{}
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
				s.report("list_get", &res.ConsumedCapacity[i])
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

// encodePosition makes a LastEvaluatedKey (all strings: id and the index
// keys) a position string.
func encodePosition(k map[string]types.AttributeValue) string {
	m := map[string]string{}
	for name, v := range k {
		if sv, ok := v.(*types.AttributeValueMemberS); ok {
			m[name] = sv.Value
		}
	}
	b, _ := json.Marshal(m)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodePosition turns a position back into an ExclusiveStartKey, checking
// that it names the same index partition.
func decodePosition(pos, pkAttr, pk string) (map[string]types.AttributeValue, error) {
	if pos == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(pos)
	if err != nil {
		return nil, ErrBadPosition
	}
	var m map[string]string
	if json.Unmarshal(b, &m) != nil || len(m) != 3 || m[pkAttr] != pk || m[AttrID] == "" || m[AttrListCreated] == "" {
		return nil, ErrBadPosition
	}
	out := map[string]types.AttributeValue{}
	for name, v := range m {
		out[name] = &types.AttributeValueMemberS{Value: v}
	}
	return out, nil
}

// Resubmit puts a failed or cancelled job back to queued: due at once, in
// the sweep index, out of the attention index, without its outcome or
// expiry. Attempts go on counting from where they were.
func (s *Store) Resubmit(ctx context.Context, id string, r jobs.Resubmit) error {
	upd := expression.Set(expression.Name(attrStatus), expression.Value(string(jobs.StatusQueued))).
		Set(expression.Name(attrUpdated), expression.Value(ms(r.At))).
		Set(expression.Name(attrRunAt), expression.Value(ms(r.At))).
		Set(expression.Name(AttrSweepShard), expression.Value(ShardOf(id))).
		Set(expression.Name(AttrSweepAt), expression.Value(ms(r.SweepAt))).
		Set(expression.Name(attrLastError), expression.IfNotExists(expression.Name(attrErrorCode), expression.Value(string(jobs.StatusCancelled)))).
		Remove(expression.Name(AttrAttention)).
		Remove(expression.Name(AttrExpires)).
		Remove(expression.Name(attrFinished)).
		Remove(expression.Name(attrErrorCode)).
		Remove(expression.Name(attrResult)).
		Remove(expression.Name(attrCancel))
	cond := expression.Or(statusIs(jobs.StatusFailed), statusIs(jobs.StatusCancelled)).
		And(expression.AttributeNotExists(expression.Name("batch_id")))
	_, err := s.update(ctx, "resubmit", id, upd, cond, jobs.ErrNotRetryable)
	return err
}
