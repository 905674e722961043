package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
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
// (attribute "h", a map of job id to lease end in ms), its waiters ("w",
// a bounded list of job ids, in order) and a version ("v")
// every change bumps: an acquire reads the item, drops the holders whose
// lease ended, and writes the rest with itself conditional on the version
// it read, so two acquires cannot both take the last slot, and a release
// racing an acquire cannot be undone by it. A token bucket holds its
// next free time ("n"; see TakeToken). A unique
// key's item holds its job ("j") and, for a uniqueness for a period, when
// it frees itself ("u"). Each is one item: its key's heat is the kind's
// (or the key's) rate, which docs/FLOW_CONTROL.md bounds.
const (
	attrHolders  = "h"
	attrWaiters  = "w"
	attrVersion  = "v"
	attrNextFree = "n"
	attrUJob     = "j"
	attrUUntil   = "u"
)

// flowItemTTL is how long a flow control item stays once nothing needs
// it (its last lease, reservation, release or period past): every item
// carries the TTL attribute, so the keys of per-key limits and unique
// keys do not pile up. A slot's lease is at most 15 minutes and a
// reservation's horizon is the bucket's backlog, both within a day of
// the write that set them, which every later write moves on.
const flowItemTTL = 24 * time.Hour

// flowTries bounds a flow item's read-modify-write retries when another
// writer moved the item between its read and its write; between tries it
// backs off (backoff), so many workers at one item take turns rather
// than collide again at once.
const flowTries = 8

// backoff waits before try i (from 1) of a flow item's write: a random
// 1 to 2^i milliseconds, at most 64.
func backoff(ctx context.Context, i int) {
	if i == 0 {
		return
	}
	d := time.Duration(1+rand.IntN(min(1<<i, 64))) * time.Millisecond
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

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

// AcquireSlot takes a slot of the slot item key, or queues c.Holder
// among its waiters.
func (s *Store) AcquireSlot(ctx context.Context, slotKey string, c driver.SlotClaim) (driver.SlotState, error) {
	id := storekey.SlotPrefix + slotKey
	for i := range flowTries {
		backoff(ctx, i)
		item, err := s.readFlowItem(ctx, id)
		if err != nil {
			return driver.SlotFull, err
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
		waiters := waitersOf(item)
		state := driver.SlotHeld
		switch {
		case len(live) < c.Max:
			live[c.Holder] = &types.AttributeValueMemberN{Value: strconv.FormatInt(ms(c.LeaseUntil), 10)}
			waiters = slices.DeleteFunc(waiters, func(w string) bool { return w == c.Holder })
		case slices.Contains(waiters, c.Holder):
			return driver.SlotQueued, nil
		case len(waiters) < c.Waiters:
			waiters, state = append(waiters, c.Holder), driver.SlotQueued
		default:
			return driver.SlotFull, nil
		}
		ok, err := s.writeVersioned(ctx, "acquire_slot", id, versionOf(item),
			setWaiters(expression.Set(expression.Name(attrHolders), expression.Value(&types.AttributeValueMemberM{Value: live})), waiters).
				Set(expression.Name(AttrExpires), expression.Value(c.LeaseUntil.Add(flowItemTTL).Unix())))
		if err != nil {
			return driver.SlotFull, err
		}
		if ok {
			return state, nil
		}
	}
	return driver.SlotFull, fmt.Errorf("dynamostore: acquire slot %s: the item kept changing", slotKey)
}

// waitersOf is a slot item's waiters, in order.
func waitersOf(item map[string]types.AttributeValue) []string {
	l, _ := item[attrWaiters].(*types.AttributeValueMemberL)
	if l == nil {
		return nil
	}
	out := make([]string, 0, len(l.Value))
	for _, v := range l.Value {
		if s, ok := v.(*types.AttributeValueMemberS); ok {
			out = append(out, s.Value)
		}
	}
	return out
}

// setWaiters adds the write of a slot item's waiters (whole, like its
// holders) to upd.
func setWaiters(upd expression.UpdateBuilder, waiters []string) expression.UpdateBuilder {
	if len(waiters) == 0 {
		return upd.Remove(expression.Name(attrWaiters))
	}
	l := make([]types.AttributeValue, len(waiters))
	for i, w := range waiters {
		l[i] = &types.AttributeValueMemberS{Value: w}
	}
	return upd.Set(expression.Name(attrWaiters), expression.Value(&types.AttributeValueMemberL{Value: l}))
}

// ReleaseSlot frees holder's slot of key and takes the first waiter off:
// a read, and a write of the holders and waiters without them,
// conditional on the version read (no nested path, so the write is the
// same whole-attribute SET an acquire makes). A release must land however
// busy the item is (a slot not freed idles until the run's lease ends):
// when the item keeps changing it frees the slot alone (freeHolder),
// leaving the waiters to their backstop.
func (s *Store) ReleaseSlot(ctx context.Context, slotKey, holder string) (string, error) {
	id := storekey.SlotPrefix + slotKey
	for i := range flowTries {
		backoff(ctx, i)
		item, err := s.readFlowItem(ctx, id)
		if err != nil {
			break // throttled or failed: free the slot alone
		}
		m, ok := item[attrHolders].(*types.AttributeValueMemberM)
		if !ok {
			return "", nil
		}
		if _, held := m.Value[holder]; !held {
			return "", nil
		}
		rest := map[string]types.AttributeValue{}
		for h, v := range m.Value {
			if h != holder {
				rest[h] = v
			}
		}
		var next string
		waiters := waitersOf(item)
		if len(waiters) > 0 {
			next, waiters = waiters[0], waiters[1:]
		}
		ok, err = s.writeVersioned(ctx, "release_slot", id, versionOf(item),
			setWaiters(expression.Set(expression.Name(attrHolders), expression.Value(&types.AttributeValueMemberM{Value: rest})), waiters))
		if err != nil {
			break
		}
		if ok {
			return next, nil
		}
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("dynamostore: release slot %s: %w", slotKey, ctx.Err())
	}
	return "", s.freeHolder(ctx, id, holder)
}

// freeHolder removes holder from slot item id's holders in one write with
// no read, bumping the version so an acquire that read the item before
// writes again (an unconditional write cannot fail for contention; it is
// conditional only on the holder still being there).
func (s *Store) freeHolder(ctx context.Context, id, holder string) error {
	path := expression.Name(attrHolders).AppendName(expression.Name(holder))
	expr, err := expression.NewBuilder().
		WithUpdate(expression.Remove(path).Add(expression.Name(attrVersion), expression.Value(1))).
		WithCondition(expression.AttributeExists(path)).Build()
	if err != nil {
		return err
	}
	out, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{TableName: s.table, Key: key(id),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnConsumedCapacity: s.capacity()})
	if _, failed := conditionFailed(err); failed {
		return nil // released already, or freed by its lease and taken
	}
	if err != nil {
		return fmt.Errorf("dynamostore: release slot %s: %w", id, err)
	}
	s.report("release_slot", out.ConsumedCapacity)
	return nil
}

// TakeToken reserves the bucket key's next token. The item holds the
// bucket's next free time ("n", Unix microseconds: the generic cell rate
// algorithm's theoretical arrival time). While that is not in the past,
// a take adds one interval to it (one conditional write, answering the
// old value: the reservation); when it is, or there is no item, a take
// sets it to now plus one interval and starts now. A failed condition
// answers the item, which says which of the two to write next.
func (s *Store) TakeToken(ctx context.Context, bucketKey string, b driver.TokenBucket) (time.Duration, error) {
	id := storekey.RatePrefix + bucketKey
	interval := int64(float64(time.Second/time.Microsecond) / b.PerSecond)
	tolerance := int64((b.Burst - 1) * float64(interval))
	now := b.At.UnixMicro()
	expires := expression.Value(b.At.Add(flowItemTTL).Unix())
	busy := true // the common case under load; an idle bucket pays one failed condition
	for range flowTries {
		var upd expression.UpdateBuilder
		var cond expression.ConditionBuilder
		if busy {
			upd = expression.Set(expression.Name(attrNextFree), expression.Plus(expression.Name(attrNextFree), expression.Value(interval)))
			cond = expression.Name(attrNextFree).GreaterThanEqual(expression.Value(now))
		} else {
			upd = expression.Set(expression.Name(attrNextFree), expression.Value(now+interval))
			cond = expression.AttributeNotExists(expression.Name(attrNextFree)).Or(expression.Name(attrNextFree).LessThan(expression.Value(now)))
		}
		upd = upd.Set(expression.Name(AttrExpires), expires)
		expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
		if err != nil {
			return 0, err
		}
		out, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{TableName: s.table, Key: key(id),
			UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
			ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
			ReturnValues: types.ReturnValueUpdatedOld, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
			ReturnConsumedCapacity: s.capacity()})
		if cur, failed := conditionFailed(err); failed {
			next, ok := microsOf(cur[attrNextFree])
			busy = ok && next >= now
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("dynamostore: take token %s: %w", bucketKey, err)
		}
		s.report("take_token", out.ConsumedCapacity)
		if !busy {
			return 0, nil
		}
		old, _ := microsOf(out.Attributes[attrNextFree])
		wait := max(0, time.Duration(old-tolerance-now)*time.Microsecond)
		if wait > flowItemTTL/2 {
			// A backlog of more than half a day: keep the item past its
			// last reservation (rare: one more write).
			s.extendTTL(ctx, id, b.At.Add(wait+flowItemTTL))
		}
		return wait, nil
	}
	return 0, fmt.Errorf("dynamostore: take token %s: the item kept changing", bucketKey)
}

// extendTTL moves item id's TTL to at, if that is later (best effort: a
// failure leaves the item a day after its last write).
func (s *Store) extendTTL(ctx context.Context, id string, at time.Time) {
	v := expression.Value(at.Unix())
	expr, err := expression.NewBuilder().WithUpdate(expression.Set(expression.Name(AttrExpires), v)).
		WithCondition(expression.Name(AttrExpires).LessThan(v)).Build()
	if err != nil {
		return
	}
	out, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{TableName: s.table, Key: key(id),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(), ReturnConsumedCapacity: s.capacity()})
	if err == nil {
		s.report("extend_ttl", out.ConsumedCapacity)
	}
}

func microsOf(av types.AttributeValue) (int64, bool) {
	n, ok := av.(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	return v, err == nil
}

// ClaimUnique takes the unique key for u.JobID unless a live holder has it.
func (s *Store) ClaimUnique(ctx context.Context, uniqueKey string, u driver.UniqueClaim) (string, error) {
	id := storekey.UniquePrefix + uniqueKey
	upd := expression.Set(expression.Name(attrUJob), expression.Value(u.JobID))
	if !u.Until.IsZero() {
		upd = upd.Set(expression.Name(attrUUntil), expression.Value(ms(u.Until))).
			Set(expression.Name(AttrExpires), expression.Value(u.Until.Add(flowItemTTL).Unix()))
	} else {
		// Held until released: TTL must not take it meanwhile.
		upd = upd.Remove(expression.Name(attrUUntil)).Remove(expression.Name(AttrExpires))
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
		WithUpdate(expression.Remove(expression.Name(attrUJob)).Remove(expression.Name(attrUUntil)).
			Set(expression.Name(AttrExpires), expression.Value(s.clock.Now().Add(flowItemTTL).Unix()))).
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
