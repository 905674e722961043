package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/internal/storekey"
)

// A batch is an item of the same table, keyed storekey.BatchPrefix + its id.
const (
	attrBTotal     = "total"
	attrBRemaining = "remaining"
	attrBSucceeded = "succeeded"
	attrBFailed    = "failed"
	attrBCancelled = "cancelled"
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
	Remaining   int    `dynamodbav:"remaining"`
	Succeeded   int    `dynamodbav:"succeeded"`
	Failed      int    `dynamodbav:"failed"`
	Cancelled   int    `dynamodbav:"cancelled"`
	CompKind    string `dynamodbav:"completion_kind"`
	CompPayload string `dynamodbav:"completion_payload"`
	ReqHash     string `dynamodbav:"req_hash"`
	Created     int64  `dynamodbav:"created_ms"`
	Ended       int64  `dynamodbav:"ended_ms"`
	SweepAt     int64  `dynamodbav:"sweep_at"`
	Expires     int64  `dynamodbav:"expires"`
	Creating    bool   `dynamodbav:"creating"`
}

func fromBatchItem(av map[string]types.AttributeValue) (*jobs.Batch, error) {
	var it batchItem
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return nil, fmt.Errorf("dynamostore: decode batch: %w", err)
	}
	b := &jobs.Batch{
		ID: it.Key[len(storekey.BatchPrefix):], Owner: it.Owner, Status: jobs.Status(it.Status),
		Total: it.Total, Remaining: it.Remaining, Succeeded: it.Succeeded, Failed: it.Failed, Cancelled: it.Cancelled,
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

// CreateBatch stores b, being created, with all its jobs pending, unless a
// live batch has its id. An expired batch (TTL not yet applied) is
// replaced: every counter is set, not added to.
func (s *Store) CreateBatch(ctx context.Context, b *jobs.Batch) (*jobs.Batch, error) {
	upd := expression.Set(expression.Name(attrOwner), expression.Value(b.Owner)).
		Set(expression.Name(attrStatus), expression.Value(string(jobs.StatusRunning))).
		Set(expression.Name(attrBCreating), expression.Value(true)).
		Set(expression.Name(attrBTotal), expression.Value(b.Total)).
		Set(expression.Name(attrBRemaining), expression.Value(b.Total)).
		Set(expression.Name(attrBSucceeded), expression.Value(0)).
		Set(expression.Name(attrBFailed), expression.Value(0)).
		Set(expression.Name(attrBCancelled), expression.Value(0)).
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
		return cur, jobs.ErrExists
	}
	if err != nil {
		return nil, fmt.Errorf("dynamostore: create batch %s: %w", b.ID, err)
	}
	s.report("create_batch", out.ConsumedCapacity)
	return fromBatchItem(out.Attributes)
}

// OpenBatch ends a batch's creation; missing jobs count as cancelled.
func (s *Store) OpenBatch(ctx context.Context, id string, missing int) error {
	upd := expression.Remove(expression.Name(attrBCreating))
	if missing > 0 {
		upd = upd.Add(expression.Name(attrBRemaining), expression.Value(-missing)).
			Add(expression.Name(attrBCancelled), expression.Value(missing))
	}
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
		return jobs.ErrBatchOpened
	}
	if err != nil {
		return fmt.Errorf("dynamostore: open batch %s: %w", id, err)
	}
	s.report("open_batch", out.ConsumedCapacity)
	return nil
}

// GetBatch reads a batch (strongly consistent).
func (s *Store) GetBatch(ctx context.Context, id string) (*jobs.Batch, error) {
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

// EndBatch records the end of a running batch with nothing pending.
func (s *Store) EndBatch(ctx context.Context, id string, status jobs.Status, at, expiresAt time.Time) error {
	upd := expression.Set(expression.Name(attrStatus), expression.Value(string(status))).
		Set(expression.Name(attrBEnded), expression.Value(ms(at))).
		Set(expression.Name(AttrExpires), expression.Value(expiresAt.Unix())).
		Remove(expression.Name(AttrSweepShard)).
		Remove(expression.Name(AttrSweepAt))
	cond := statusIs(jobs.StatusRunning).And(expression.Name(attrBRemaining).Equal(expression.Value(0))).
		And(expression.AttributeNotExists(expression.Name(attrBCreating)))
	return s.batchUpdate(ctx, "end_batch", id, upd, cond)
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
		ReturnConsumedCapacity: s.capacity(),
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return jobs.ErrBatchNotDone
	}
	if err != nil {
		return fmt.Errorf("dynamostore: %s %s: %w", op, id, err)
	}
	s.report(op, out.ConsumedCapacity)
	return nil
}
