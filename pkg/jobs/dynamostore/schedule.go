package dynamostore

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdajobs/lambdajobs/internal/storekey"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
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
		return &driver.ConflictError{} // another fire recorded its job first
	}
	if err != nil {
		return fmt.Errorf("dynamostore: set last fire of %s: %w", schedule, err)
	}
	s.report("update", out.ConsumedCapacity)
	return nil
}

// Runtime schedules: one item per owner, id "schedules#<owner key>", each
// schedule an attribute "s.<name>" holding its JSON, and "n" their count,
// so listing is one GetItem and the per-owner limit one condition.
const (
	attrScheduleCount  = "n"
	attrSchedulePrefix = "s."
)

func ownerSchedulesKey(ownerKey string) map[string]types.AttributeValue {
	return key(storekey.OwnerSchedulesPrefix + ownerKey)
}

// OwnerSchedules reads the owner's item (strongly consistent).
func (s *Store) OwnerSchedules(ctx context.Context, ownerKey string) ([]jobs.Schedule, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: s.table, Key: ownerSchedulesKey(ownerKey), ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: s.capacity(),
	})
	if err != nil {
		return nil, fmt.Errorf("dynamostore: schedules of an owner: %w", err)
	}
	s.report("get", out.ConsumedCapacity)
	var list []jobs.Schedule
	for name, v := range out.Item {
		sv, ok := v.(*types.AttributeValueMemberS)
		if !ok || !strings.HasPrefix(name, attrSchedulePrefix) {
			continue
		}
		var sc jobs.Schedule
		if err := json.Unmarshal([]byte(sv.Value), &sc); err != nil {
			return nil, fmt.Errorf("dynamostore: schedule %s: %w", name, err)
		}
		list = append(list, sc)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	return list, nil
}

// AddOwnerSchedule adds the schedule's attribute and counts it, on
// condition that neither the name nor the limit is taken (1 write unit for
// an item under 1 KB).
func (s *Store) AddOwnerSchedule(ctx context.Context, ownerKey string, sc jobs.Schedule, max int) error {
	body, err := json.Marshal(sc)
	if err != nil {
		return err
	}
	attr := expression.NameNoDotSplit(attrSchedulePrefix + sc.Name)
	n := expression.Name(attrScheduleCount)
	cond := expression.AttributeNotExists(attr).And(expression.Or(expression.AttributeNotExists(n), n.LessThan(expression.Value(max))))
	upd := expression.Set(attr, expression.Value(string(body))).Add(n, expression.Value(1))
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return err
	}
	out, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: ownerSchedulesKey(ownerKey),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              s.capacity(),
	})
	if old, ok := conditionFailed(err); ok {
		if v, _ := old[attrSchedulePrefix+sc.Name].(*types.AttributeValueMemberS); v != nil {
			if v.Value == string(body) {
				return nil // our own write, retried by the SDK after a lost answer
			}
			return driver.ErrExists
		}
		return &driver.ConflictError{} // the owner has max schedules
	}
	if err != nil {
		return fmt.Errorf("dynamostore: add a schedule: %w", err)
	}
	s.report("update", out.ConsumedCapacity)
	return nil
}

// RemoveOwnerSchedule removes the schedule's attribute and uncounts it.
func (s *Store) RemoveOwnerSchedule(ctx context.Context, ownerKey, name string) error {
	attr := expression.NameNoDotSplit(attrSchedulePrefix + name)
	upd := expression.Remove(attr).Add(expression.Name(attrScheduleCount), expression.Value(-1))
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(expression.AttributeExists(attr)).Build()
	if err != nil {
		return err
	}
	out, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: ownerSchedulesKey(ownerKey),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnConsumedCapacity: s.capacity(),
	})
	if _, ok := conditionFailed(err); ok {
		return jobs.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("dynamostore: remove a schedule: %w", err)
	}
	s.report("update", out.ConsumedCapacity)
	return nil
}
