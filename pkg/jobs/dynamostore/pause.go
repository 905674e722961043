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
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// The pause set: one item, id "pauses", each pause an attribute
// "p.<pause id>" holding its JSON, and "n" their count, so a worker reads
// every pause in one GetItem and the set's bound is one condition. Pauses
// are few and rarely written; reads are at most one per worker instance
// every 5 s (docs/evidence/CAPACITY.md, "Pauses").
const (
	attrPauseCount  = "n"
	attrPausePrefix = "p."
)

var _ driver.PauseStore = (*Store)(nil)

// Pauses reads the pause set (strongly consistent: a pause written before
// the read is in it).
func (s *Store) Pauses(ctx context.Context) ([]driver.Pause, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: s.table, Key: key(storekey.PausesKey), ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: s.capacity(),
	})
	if err != nil {
		return nil, fmt.Errorf("dynamostore: pauses: %w", err)
	}
	s.report("pauses", out.ConsumedCapacity)
	var list []driver.Pause
	for name, v := range out.Item {
		sv, ok := v.(*types.AttributeValueMemberS)
		if !ok || !strings.HasPrefix(name, attrPausePrefix) {
			continue
		}
		var p driver.Pause
		if err := json.Unmarshal([]byte(sv.Value), &p); err != nil {
			return nil, fmt.Errorf("dynamostore: pause %s: %w", name, err)
		}
		list = append(list, p)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].ID() < list[j].ID() })
	return list, nil
}

// SetPause adds p's attribute and counts it, on condition that it is new
// and the set has fewer than max; a pause already there is replaced in a
// second write, uncounted (1 write unit each for a set under 1 KB).
func (s *Store) SetPause(ctx context.Context, p driver.Pause, max int) error {
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	attr := expression.NameNoDotSplit(attrPausePrefix + p.ID())
	n := expression.Name(attrPauseCount)
	fresh := expression.AttributeNotExists(attr).And(expression.Or(expression.AttributeNotExists(n), n.LessThan(expression.Value(max))))
	err = s.writePause(ctx, expression.Set(attr, expression.Value(string(body))).Add(n, expression.Value(1)), fresh)
	old, failed := conditionFailed(err)
	if !failed {
		return err
	}
	if _, there := old[attrPausePrefix+p.ID()]; !there {
		return &driver.ConflictError{} // the set has max pauses
	}
	err = s.writePause(ctx, expression.Set(attr, expression.Value(string(body))), expression.AttributeExists(attr))
	if _, failed := conditionFailed(err); failed {
		return &driver.ConflictError{} // resumed meanwhile: the caller may try again
	}
	return err
}

// RemovePause removes the pause's attribute and uncounts it.
func (s *Store) RemovePause(ctx context.Context, id string) error {
	attr := expression.NameNoDotSplit(attrPausePrefix + id)
	err := s.writePause(ctx, expression.Remove(attr).Add(expression.Name(attrPauseCount), expression.Value(-1)), expression.AttributeExists(attr))
	if _, failed := conditionFailed(err); failed {
		return driver.ErrNotFound
	}
	return err
}

// writePause makes one conditional update of the pause set.
func (s *Store) writePause(ctx context.Context, upd expression.UpdateBuilder, cond expression.ConditionBuilder) error {
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return err
	}
	out, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: s.table, Key: key(storekey.PausesKey),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              s.capacity(),
	})
	if _, failed := conditionFailed(err); failed {
		return err
	}
	if err != nil {
		return fmt.Errorf("dynamostore: pauses: %w", err)
	}
	s.report("update", out.ConsumedCapacity)
	return nil
}
