package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdajobs/lambdajobs/internal/storekey"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// A batch is an item of the same table, keyed storekey.BatchPrefix + its
// id; its counts are in its shards' items, keyed storekey.BatchShardPrefix
// + its id + "#" + the shard's number, each holding the indexes of the
// jobs it counted, in one number set per outcome (so a job counted twice
// is counted once), and the number of jobs it counts.
const (
	attrBTotal     = "total"
	attrBShards    = "shards"
	attrBDone      = "done_shards"
	attrBSucceeded = "succeeded"
	attrBFailed    = "failed"
	attrBCancelled = "cancelled"
	attrBJobs      = "jobs"
	attrBCompKind  = "completion_kind"
	attrBCompLoad  = "completion_payload"
	attrBEnded     = "ended_ms"
	attrBCreating  = "creating"
	attrItemType   = "item_type"
	itemTypeBatch  = "batch"
)

type batchItem struct {
	Key         string `dynamodbav:"id"`
	Owner       string `dynamodbav:"owner"`
	Status      string `dynamodbav:"status"`
	Total       int    `dynamodbav:"total"`
	Shards      int    `dynamodbav:"shards"`
	Done        []int  `dynamodbav:"done_shards,numberset,omitempty"`
	CompKind    string `dynamodbav:"completion_kind"`
	CompPayload string `dynamodbav:"completion_payload"`
	ReqHash     string `dynamodbav:"req_hash"`
	Created     int64  `dynamodbav:"created_ms"`
	Ended       int64  `dynamodbav:"ended_ms"`
	SweepAt     int64  `dynamodbav:"sweep_at"`
	Expires     int64  `dynamodbav:"expires"`
	Creating    bool   `dynamodbav:"creating"`
}

func fromBatchItem(av map[string]types.AttributeValue) (*driver.Batch, error) {
	var it batchItem
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return nil, fmt.Errorf("dynamostore: decode batch: %w", err)
	}
	b := &driver.Batch{
		ID: it.Key[len(storekey.BatchPrefix):], Owner: it.Owner, Status: jobs.Status(it.Status),
		Total: it.Total, Shards: it.Shards, DoneShards: len(it.Done),
		CompletionKind: it.CompKind, RequestHash: it.ReqHash, Creating: it.Creating,
		CreatedAt: fromMS(it.Created), EndedAt: fromMS(it.Ended), SweepAt: fromMS(it.SweepAt),
	}
	if it.CompPayload != "" {
		b.CompletionPayload = []byte(it.CompPayload)
	}
	if it.Expires != 0 {
		b.ExpiresAt = time.Unix(it.Expires, 0).UTC()
	}
	return b, nil
}

// CreateBatch stores b, being created, unless a live batch has its id. An
// expired batch (TTL not yet applied) is replaced. (A replaced batch's
// shards, if TTL has not deleted them yet either, would hold the old
// counts: an id is only reused by an idempotency key after the retention,
// when both are past their expiry; see CountInBatch.)
func (s *Store) CreateBatch(ctx context.Context, b *driver.Batch) (*driver.Batch, error) {
	upd := expression.Set(expression.Name(attrOwner), expression.Value(b.Owner)).
		Set(expression.Name(attrStatus), expression.Value(string(jobs.StatusRunning))).
		Set(expression.Name(attrBCreating), expression.Value(true)).
		Set(expression.Name(attrBTotal), expression.Value(b.Total)).
		Set(expression.Name(attrBShards), expression.Value(b.Shards)).
		Remove(expression.Name(attrBDone)).
		Set(expression.Name(attrReqHash), expression.Value(b.RequestHash)).
		Set(expression.Name(attrCreated), expression.Value(ms(b.CreatedAt))).
		Set(expression.Name(attrItemType), expression.Value(itemTypeBatch)).
		Set(expression.Name(AttrSweepShard), expression.Value(ShardOf(b.ID))).
		Set(expression.Name(AttrSweepAt), expression.Value(ms(b.SweepAt))).
		Remove(expression.Name(attrBEnded)).
		Remove(expression.Name(AttrExpires))
	if b.CompletionKind != "" {
		upd = upd.Set(expression.Name(attrBCompKind), expression.Value(b.CompletionKind)).
			Set(expression.Name(attrBCompLoad), expression.Value(string(b.CompletionPayload)))
	} else {
		upd = upd.Remove(expression.Name(attrBCompKind)).Remove(expression.Name(attrBCompLoad))
	}
	cond := expression.AttributeNotExists(expression.Name(attrBTotal)).
		Or(expression.Name(AttrExpires).LessThanEqual(expression.Value(s.clock.Now().Unix())))
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return nil, err
	}
	out, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: key(storekey.BatchPrefix + b.ID),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              s.capacity(),
	})
	if old, ok := conditionFailed(err); ok {
		cur, derr := fromBatchItem(old)
		if derr != nil {
			return nil, derr
		}
		return cur, driver.ErrExists
	}
	if err != nil {
		return nil, fmt.Errorf("dynamostore: create batch %s: %w", b.ID, err)
	}
	s.report("create_batch", out.ConsumedCapacity)
	return fromBatchItem(out.Attributes)
}

// OpenBatch ends a batch's creation.
func (s *Store) OpenBatch(ctx context.Context, id string) error {
	upd := expression.Remove(expression.Name(attrBCreating))
	cond := expression.Name(attrBCreating).Equal(expression.Value(true))
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return err
	}
	out, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: key(storekey.BatchPrefix + id),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              s.capacity(),
	})
	if old, ok := conditionFailed(err); ok {
		if _, has := old[attrBTotal]; !has {
			return jobs.ErrNotFound
		}
		return &driver.ConflictError{}
	}
	if err != nil {
		return fmt.Errorf("dynamostore: open batch %s: %w", id, err)
	}
	s.report("open_batch", out.ConsumedCapacity)
	return nil
}

// GetBatch reads a batch (strongly consistent).
func (s *Store) GetBatch(ctx context.Context, id string) (*driver.Batch, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: s.table, Key: key(storekey.BatchPrefix + id), ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: s.capacity(),
	})
	if err != nil {
		return nil, fmt.Errorf("dynamostore: get batch %s: %w", id, err)
	}
	s.report("get", out.ConsumedCapacity)
	if len(out.Item) == 0 {
		return nil, jobs.ErrNotFound
	}
	if _, ok := out.Item[attrBTotal]; !ok {
		return nil, jobs.ErrNotFound // only counters from jobs of a batch never stored
	}
	b, err := fromBatchItem(out.Item)
	if err != nil {
		return nil, err
	}
	if b.Expired(s.clock.Now()) {
		return nil, jobs.ErrNotFound
	}
	return b, nil
}

// EndBatch records the end of a running batch whose shards are all done.
// Its shard items carry no TTL while it runs (its jobs may end further
// apart than the retention); EndBatch gives each the batch's, first, so a
// batch item that ended never leaves shards behind for good: a read of the
// batch and one write per shard, once per batch.
func (s *Store) EndBatch(ctx context.Context, id string, status jobs.Status, at, expiresAt time.Time) error {
	if b, err := s.GetBatch(ctx, id); err == nil && b.Status == jobs.StatusRunning && b.DoneShards >= b.Shards {
		for shard := range b.Shards {
			if err := s.expireShard(ctx, id, shard, expiresAt); err != nil {
				return err
			}
		}
	}
	upd := expression.Set(expression.Name(attrStatus), expression.Value(string(status))).
		Set(expression.Name(attrBEnded), expression.Value(ms(at))).
		Set(expression.Name(AttrExpires), expression.Value(expiresAt.Unix())).
		Remove(expression.Name(AttrSweepShard)).
		Remove(expression.Name(AttrSweepAt))
	cond := statusIs(jobs.StatusRunning).And(expression.Size(expression.Name(attrBDone)).Equal(expression.Name(attrBShards))).
		And(expression.AttributeNotExists(expression.Name(attrBCreating)))
	err := s.batchUpdate(ctx, "end_batch", id, upd, cond)
	var nd notDone
	if errors.As(err, &nd) && nd.old != nil {
		old := nd.old
		// Our own end, retried by the SDK after its answer was lost, finds
		// the batch as it left it: it landed.
		if b, derr := fromBatchItem(old); derr == nil && b.Status == status && b.EndedAt.Equal(at.Truncate(time.Millisecond)) {
			return nil
		}
	}
	return err
}

// expireShard sets the TTL of a shard item that exists.
func (s *Store) expireShard(ctx context.Context, id string, shard int, expiresAt time.Time) error {
	expr, err := expression.NewBuilder().WithUpdate(expression.Set(expression.Name(AttrExpires), expression.Value(expiresAt.Unix()))).
		WithCondition(expression.AttributeExists(expression.Name(attrBJobs))).Build()
	if err != nil {
		return err
	}
	out, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: shardKey(id, shard),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(), ReturnConsumedCapacity: s.capacity(),
	})
	if _, ok := conditionFailed(err); ok {
		return nil // a shard none of whose jobs was counted: no item
	}
	if err != nil {
		return fmt.Errorf("dynamostore: expire shard %d of batch %s: %w", shard, id, err)
	}
	s.report("expire_shard", out.ConsumedCapacity)
	return nil
}

// notDone is the *driver.ConflictError of a batch's write, with the batch
// as the failed condition found it.
type notDone struct {
	old map[string]types.AttributeValue
}

func (notDone) Error() string { return (&driver.ConflictError{}).Error() }
func (notDone) Unwrap() error { return &driver.ConflictError{} }

func shardKey(batchID string, shard int) map[string]types.AttributeValue {
	return key(storekey.BatchShardPrefix + batchID + "#" + strconv.Itoa(shard))
}

// numberSet is a DynamoDB number set of one number.
func numberSet(n int) *types.AttributeValueMemberNS {
	return &types.AttributeValueMemberNS{Value: []string{strconv.Itoa(n)}}
}

var statusSet = map[jobs.Status]string{jobs.StatusSucceeded: attrBSucceeded, jobs.StatusFailed: attrBFailed, jobs.StatusCancelled: attrBCancelled}

// CountInBatch adds the job's index to its shard's set for its outcome
// (ADD to a set: counting it again changes nothing) and returns the
// shard's counts. One write of an item of up to about 1 KB (the indexes
// of the shard's jobs, at most 157 of them for the largest batch).
func (s *Store) CountInBatch(ctx context.Context, b *driver.Batch, c driver.BatchCount) (driver.BatchShard, error) {
	set, ok := statusSet[c.Status]
	if !ok || b.Shards < 1 {
		return driver.BatchShard{}, fmt.Errorf("dynamostore: count in batch: status %q, %d shards", c.Status, b.Shards)
	}
	shard := c.Index % b.Shards
	// No TTL while the batch runs: EndBatch sets it.
	upd := expression.Add(expression.Name(set), expression.Value(numberSet(c.Index))).
		Set(expression.Name(attrBJobs), expression.Value(driver.ShardJobs(b.Total, b.Shards, shard)))
	expr, err := expression.NewBuilder().WithUpdate(upd).Build()
	if err != nil {
		return driver.BatchShard{}, err
	}
	out, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: shardKey(b.ID, shard),
		UpdateExpression: expr.Update(), ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValues: types.ReturnValueAllNew, ReturnConsumedCapacity: s.capacity(),
	})
	if err != nil {
		return driver.BatchShard{}, fmt.Errorf("dynamostore: count in batch %s: %w", b.ID, err)
	}
	s.report("count_in_batch", out.ConsumedCapacity)
	return fromShardItem(out.Attributes)
}

type shardItem struct {
	Jobs      int   `dynamodbav:"jobs"`
	Succeeded []int `dynamodbav:"succeeded,numberset,omitempty"`
	Failed    []int `dynamodbav:"failed,numberset,omitempty"`
	Cancelled []int `dynamodbav:"cancelled,numberset,omitempty"`
}

func fromShardItem(av map[string]types.AttributeValue) (driver.BatchShard, error) {
	var it shardItem
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return driver.BatchShard{}, fmt.Errorf("dynamostore: decode batch shard: %w", err)
	}
	return driver.BatchShard{Jobs: it.Jobs, Succeeded: len(it.Succeeded), Failed: len(it.Failed), Cancelled: len(it.Cancelled)}, nil
}

// ShardDone adds the shard to the batch's set of done shards (once
// however often) and returns how many are done.
func (s *Store) ShardDone(ctx context.Context, batchID string, shard int) (int, error) {
	upd := expression.Add(expression.Name(attrBDone), expression.Value(numberSet(shard)))
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(expression.AttributeExists(expression.Name(attrBTotal))).Build()
	if err != nil {
		return 0, err
	}
	out, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: key(storekey.BatchPrefix + batchID),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValues: types.ReturnValueUpdatedNew, ReturnConsumedCapacity: s.capacity(),
	})
	if _, ok := conditionFailed(err); ok {
		return 0, jobs.ErrNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("dynamostore: shard done %s: %w", batchID, err)
	}
	s.report("shard_done", out.ConsumedCapacity)
	var done struct {
		Done []int `dynamodbav:"done_shards,numberset"`
	}
	if err := attributevalue.UnmarshalMap(out.Attributes, &done); err != nil {
		return 0, fmt.Errorf("dynamostore: decode done shards: %w", err)
	}
	return len(done.Done), nil
}

// CountBatch sums b's counts from its shards: one strongly consistent
// read of each (BatchGetItem, 100 keys a call).
func (s *Store) CountBatch(ctx context.Context, b *driver.Batch) (*driver.Batch, error) {
	out := *b
	out.Succeeded, out.Failed, out.Cancelled = 0, 0, 0
	keys := make([]map[string]types.AttributeValue, 0, b.Shards)
	for i := range b.Shards {
		keys = append(keys, shardKey(b.ID, i))
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
				return nil, fmt.Errorf("dynamostore: count batch %s: %w", b.ID, err)
			}
			for i := range res.ConsumedCapacity {
				s.report("count_batch", &res.ConsumedCapacity[i])
			}
			for _, it := range res.Responses[*s.table] {
				sh, err := fromShardItem(it)
				if err != nil {
					return nil, err
				}
				out.Succeeded += sh.Succeeded
				out.Failed += sh.Failed
				out.Cancelled += sh.Cancelled
			}
			req = res.UnprocessedKeys
		}
	}
	out.Remaining = max(0, out.Total-out.Succeeded-out.Failed-out.Cancelled)
	return &out, nil
}

// RescheduleBatch moves a running batch's sweep time.
func (s *Store) RescheduleBatch(ctx context.Context, id string, at time.Time) error {
	return s.batchUpdate(ctx, "reschedule", id, expression.Set(expression.Name(AttrSweepAt), expression.Value(ms(at))), statusIs(jobs.StatusRunning))
}

func (s *Store) batchUpdate(ctx context.Context, op, id string, upd expression.UpdateBuilder, cond expression.ConditionBuilder) error {
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return err
	}
	out, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: key(storekey.BatchPrefix + id),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              s.capacity(),
	})
	if old, ok := conditionFailed(err); ok {
		return notDone{old: old}
	}
	if err != nil {
		return fmt.Errorf("dynamostore: %s %s: %w", op, id, err)
	}
	s.report(op, out.ConsumedCapacity)
	return nil
}
