package dynamostore

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/internal/storekey"
)

// attrLastJob is the schedule state's only attribute: the job of its last
// enqueued fire. The item (id "schedule#<name>") never enters the sweep
// index and has no TTL: one per OverlapSkip schedule.
const attrLastJob = "last_job"

// LastFire reads the schedule's state (strongly consistent: 1 read unit).
func (s *Store) LastFire(ctx context.Context, schedule string) (string, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: s.table, Key: key(storekey.SchedulePrefix + schedule), ConsistentRead: aws.Bool(true),
		ReturnConsumedCapacity: s.capacity(),
	})
	if err != nil {
		return "", fmt.Errorf("dynamostore: last fire of %s: %w", schedule, err)
	}
	s.report("get", out.ConsumedCapacity)
	v, _ := out.Item[attrLastJob].(*types.AttributeValueMemberS)
	if v == nil {
		return "", nil
	}
	return v.Value, nil
}

// SetLastFire moves the schedule's state from prev to id (1 write unit).
func (s *Store) SetLastFire(ctx context.Context, schedule, prev, id string) error {
	cond := expression.AttributeNotExists(expression.Name(attrLastJob))
	if prev != "" {
		cond = expression.Name(attrLastJob).Equal(expression.Value(prev))
	}
	expr, err := expression.NewBuilder().WithUpdate(expression.Set(expression.Name(attrLastJob), expression.Value(id))).WithCondition(cond).Build()
	if err != nil {
		return err
	}
	out, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: key(storekey.SchedulePrefix + schedule),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              s.capacity(),
	})
	if old, ok := conditionFailed(err); ok {
		// Our own write whose answer was lost: the SDK retried it.
		if v, _ := old[attrLastJob].(*types.AttributeValueMemberS); v != nil && v.Value == id {
			return nil
		}
		return jobs.ErrFireRaced
	}
	if err != nil {
		return fmt.Errorf("dynamostore: set last fire of %s: %w", schedule, err)
	}
	s.report("update", out.ConsumedCapacity)
	return nil
}
