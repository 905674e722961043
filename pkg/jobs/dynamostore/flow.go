package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdajobs/lambdajobs/internal/storekey"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Flow control's items. A slot item holds its holders and their leases
// (attribute "h", a map of job id to lease end in ms) and a version ("v")
// every change bumps: an acquire reads the item, drops the holders whose
// lease ended, and writes the rest with itself conditional on the version
// it read, so two acquires cannot both take the last slot, and a release
// racing an acquire cannot be undone by it. A token bucket holds its
// tokens ("tk"), when it was last filled ("t") and a version. A unique
// key's item holds its job ("j") and, for a uniqueness for a period, when
// it frees itself ("u"). Each is one item: its key's heat is the kind's
// (or the key's) rate, which docs/FLOW_CONTROL.md bounds.
const (
	attrHolders = "h"
	attrVersion = "v"
	attrTokens  = "tk"
	attrFilled  = "t"
	attrUJob    = "j"
	attrUUntil  = "u"
)

// flowTries bounds an acquire's retries when another writer moved the item
// between its read and its write.
const flowTries = 4

// readFlowItem reads a flow control item (strongly consistent), nil when
// there is none.
func (s *Store) readFlowItem(ctx context.Context, id string) (map[string]types.AttributeValue, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: s.table, Key: key(id), ConsistentRead: aws.Bool(true),
		ReturnConsumedCapacity: s.capacity()})
	if err != nil {
		return nil, fmt.Errorf("dynamostore: read %s: %w", id, err)
	}
	s.report("flow_read", out.ConsumedCapacity)
	return out.Item, nil
}

func versionOf(item map[string]types.AttributeValue) int64 {
	if v, ok := item[attrVersion].(*types.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}

// writeVersioned runs upd on item id conditional on its version still
// being v (0: no item yet), bumping it; false when another writer moved it.
func (s *Store) writeVersioned(ctx context.Context, op, id string, v int64, upd expression.UpdateBuilder) (bool, error) {
	cond := expression.AttributeNotExists(expression.Name(attrVersion))
	if v != 0 {
		cond = expression.Name(attrVersion).Equal(expression.Value(v))
	}
	expr, err := expression.NewBuilder().WithUpdate(upd.Set(expression.Name(attrVersion), expression.Value(v+1))).WithCondition(cond).Build()
	if err != nil {
		return false, err
	}
	out, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{TableName: s.table, Key: key(id),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnConsumedCapacity: s.capacity()})
	if _, failed := conditionFailed(err); failed {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("dynamostore: %s %s: %w", op, id, err)
	}
	s.report(op, out.ConsumedCapacity)
	return true, nil
}

// AcquireSlot takes a slot of the slot item key.
func (s *Store) AcquireSlot(ctx context.Context, slotKey string, c driver.SlotClaim) (bool, error) {
	id := storekey.SlotPrefix + slotKey
	for range flowTries {
		item, err := s.readFlowItem(ctx, id)
		if err != nil {
			return false, err
		}
		live := map[string]types.AttributeValue{}
		if m, ok := item[attrHolders].(*types.AttributeValueMemberM); ok {
			for holder, lease := range m.Value {
				if n, ok := lease.(*types.AttributeValueMemberN); ok {
					if ms, _ := strconv.ParseInt(n.Value, 10, 64); ms > c.At.UnixMilli() && holder != c.Holder {
						live[holder] = n
					}
				}
			}
		}
		if len(live) >= c.Max {
			return false, nil
		}
		live[c.Holder] = &types.AttributeValueMemberN{Value: strconv.FormatInt(ms(c.LeaseUntil), 10)}
		ok, err := s.writeVersioned(ctx, "acquire_slot", id, versionOf(item),
			expression.Set(expression.Name(attrHolders), expression.Value(&types.AttributeValueMemberM{Value: live})))
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil // busy: the caller waits as for a full item
}

// ReleaseSlot frees holder's slot of key: a read, and a write of the
// holders without it conditional on the version read (no nested path, so
// the write is the same whole-attribute SET an acquire makes).
func (s *Store) ReleaseSlot(ctx context.Context, slotKey, holder string) error {
	id := storekey.SlotPrefix + slotKey
	for range flowTries {
		item, err := s.readFlowItem(ctx, id)
		if err != nil {
			return err
		}
		m, ok := item[attrHolders].(*types.AttributeValueMemberM)
		if !ok {
			return nil
		}
		if _, held := m.Value[holder]; !held {
			return nil
		}
		rest := map[string]types.AttributeValue{}
		for h, v := range m.Value {
			if h != holder {
				rest[h] = v
			}
		}
		ok, err = s.writeVersioned(ctx, "release_slot", id, versionOf(item),
			expression.Set(expression.Name(attrHolders), expression.Value(&types.AttributeValueMemberM{Value: rest})))
		if err != nil || ok {
			return err
		}
	}
	return fmt.Errorf("dynamostore: release slot %s: the item kept changing", slotKey)
}

// TakeToken takes a token of the bucket key.
func (s *Store) TakeToken(ctx context.Context, bucketKey string, b driver.TokenBucket) (time.Duration, error) {
	id := storekey.RatePrefix + bucketKey
	for range flowTries {
		item, err := s.readFlowItem(ctx, id)
		if err != nil {
			return 0, err
		}
		tokens, filled := b.Burst, b.At
		if n, ok := item[attrTokens].(*types.AttributeValueMemberN); ok {
			tokens, _ = strconv.ParseFloat(n.Value, 64)
			if t, ok := item[attrFilled].(*types.AttributeValueMemberN); ok {
				ms, _ := strconv.ParseInt(t.Value, 10, 64)
				filled = time.UnixMilli(ms)
			}
			if dt := b.At.Sub(filled).Seconds(); dt > 0 {
				tokens = math.Min(b.Burst, tokens+dt*b.PerSecond)
			}
		}
		if tokens < 1 {
			return time.Duration((1 - tokens) / b.PerSecond * float64(time.Second)), nil
		}
		ok, err := s.writeVersioned(ctx, "take_token", id, versionOf(item),
			expression.Set(expression.Name(attrTokens), expression.Value(tokens-1)).Set(expression.Name(attrFilled), expression.Value(ms(b.At))))
		if err != nil {
			return 0, err
		}
		if ok {
			return 0, nil
		}
	}
	return time.Duration(float64(time.Second) / b.PerSecond), nil // busy: come back after about one token's time
}

// ClaimUnique takes the unique key for u.JobID unless a live holder has it.
func (s *Store) ClaimUnique(ctx context.Context, uniqueKey string, u driver.UniqueClaim) (string, error) {
	id := storekey.UniquePrefix + uniqueKey
	upd := expression.Set(expression.Name(attrUJob), expression.Value(u.JobID))
	if !u.Until.IsZero() {
		upd = upd.Set(expression.Name(attrUUntil), expression.Value(ms(u.Until)))
	} else {
		upd = upd.Remove(expression.Name(attrUUntil))
	}
	// Free: no holder, its time passed, or this job already holds it (a
	// retried claim whose answer was lost).
	cond := expression.AttributeNotExists(expression.Name(attrUJob)).
		Or(expression.Name(attrUJob).Equal(expression.Value(u.JobID))).
		Or(expression.Name(attrUUntil).LessThanEqual(expression.Value(ms(u.At))))
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return "", err
	}
	out, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{TableName: s.table, Key: key(id),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld, ReturnConsumedCapacity: s.capacity()})
	if old, failed := conditionFailed(err); failed {
		if j, ok := old[attrUJob].(*types.AttributeValueMemberS); ok {
			return j.Value, nil
		}
		return "", errors.New("dynamostore: claim unique: the key's holder is unreadable")
	}
	if err != nil {
		return "", fmt.Errorf("dynamostore: claim unique: %w", err)
	}
	s.report("claim_unique", out.ConsumedCapacity)
	return u.JobID, nil
}

// ReleaseUnique frees the unique key if jobID holds it (an update that
// removes the holder: the functions need no DeleteItem).
func (s *Store) ReleaseUnique(ctx context.Context, uniqueKey, jobID string) error {
	id := storekey.UniquePrefix + uniqueKey
	expr, err := expression.NewBuilder().
		WithUpdate(expression.Remove(expression.Name(attrUJob)).Remove(expression.Name(attrUUntil))).
		WithCondition(expression.Name(attrUJob).Equal(expression.Value(jobID))).Build()
	if err != nil {
		return err
	}
	out, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{TableName: s.table, Key: key(id),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(), ReturnConsumedCapacity: s.capacity()})
	if _, failed := conditionFailed(err); failed {
		return nil // another job holds it now, or nobody
	}
	if err != nil {
		return fmt.Errorf("dynamostore: release unique: %w", err)
	}
	s.report("release_unique", out.ConsumedCapacity)
	return nil
}

// Debounce replaces a queued job's payload, request hash and run time.
func (s *Store) Debounce(ctx context.Context, id string, d driver.Debounce) error {
	upd := expression.Set(expression.Name(attrPayload), expression.Value(string(d.Payload))).
		Set(expression.Name(attrReqHash), expression.Value(d.RequestHash)).
		Set(expression.Name(attrRunAt), expression.Value(ms(d.RunAt))).
		Set(expression.Name(AttrSweepAt), expression.Value(ms(d.SweepAt))).
		Set(expression.Name(attrUpdated), expression.Value(ms(d.At)))
	_, err := s.update(ctx, id, change{op: "debounce", upd: upd, cond: statusIs(jobs.StatusQueued), sentinel: driver.ErrNotQueued})
	return err
}
