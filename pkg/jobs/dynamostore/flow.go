package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/lambdajobs/lambdajobs/internal/storekey"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Flow control's items. A slot item holds its holders and their leases
// (attribute "h", a map of job id to lease end in ms), its waiters ("w",
// a bounded list of job ids, in order, always present once the item is)
// and a version ("v") every change bumps. A take, a join and a release
// are each one conditional write with no read (see AcquireSlot and
// ReleaseSlot), so workers at one item never collide on a version: 30
// handlers at one busy limit made the read-modify-writes of an earlier
// version give up and wait a second on "store". Only a holder whose lease
// ended (a killed worker's run) is dropped by a read-modify-write
// conditional on the version. A token bucket holds its next free time
// ("n"; see TakeToken). A unique key's item holds its job ("j") and, for a
// uniqueness for a period, when it frees itself ("u"). Each is one item:
// its key's heat is the kind's (or the key's) rate, which
// docs/guide/FLOW_CONTROL.md bounds.
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

// flowTries bounds a flow item's retries when its state changed between
// what a failed condition answered and the next write (a slot freed as a
// job was joining the waiters, a bucket went idle); between tries it backs
// off (backoff), so many workers at one item take turns rather than
// collide again at once.
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

func versionOf(item map[string]types.AttributeValue) int64 {
	if v, ok := item[attrVersion].(*types.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}

// slotWrite runs one conditional update of slot item id, bumping its
// version, and returns the item as it was before (ReturnValues ALL_OLD,
// which costs no read unit) and whether the condition held; when it did
// not, the item is as the condition found it (nil: no item).
func (s *Store) slotWrite(ctx context.Context, op, id string, upd expression.UpdateBuilder, cond expression.ConditionBuilder) (map[string]types.AttributeValue, bool, error) {
	expr, err := expression.NewBuilder().WithUpdate(upd.Add(expression.Name(attrVersion), expression.Value(1))).WithCondition(cond).Build()
	if err != nil {
		return nil, false, err
	}
	out, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{TableName: s.table, Key: key(id),
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
		ReturnValues: types.ReturnValueAllOld, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity: s.capacity()})
	if old, failed := conditionFailed(err); failed {
		return old, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("dynamostore: %s %s: %w", op, id, err)
	}
	s.report(op, out.ConsumedCapacity)
	return out.Attributes, true, nil
}

// holderPath is holder's lease in a slot item's holders.
func holderPath(holder string) expression.NameBuilder {
	return expression.Name(attrHolders).AppendName(expression.Name(holder))
}

// emptyList is an empty waiters list.
var emptyList = &types.AttributeValueMemberL{Value: []types.AttributeValue{}}

// AcquireSlot takes a slot of the slot item key, or queues c's waiter
// among its waiters. Each step is one conditional write, with no read:
//
//   - take: the holder's lease set in the holders, if they are fewer than
//     c.Max or the holder is one of them (a renewal);
//   - join, when the take finds the item full (or first, when
//     c.ExpectFull): the waiter appended to the waiters, if every slot is
//     still held and the list has room and lacks it.
//
// A failed condition answers the item (ALL_OLD), which says what comes
// next: create the item (the first take), drop the holders whose lease
// ended (a read-modify-write of the holders conditional on the version:
// only a killed worker's run leaves one), say queued (the waiter is one
// already) or full, or try the other step.
func (s *Store) AcquireSlot(ctx context.Context, slotKey string, c driver.SlotClaim) (driver.SlotState, error) {
	id := storekey.SlotPrefix + slotKey
	waiter := c.WaiterOf()
	ttl := expression.Value(c.LeaseUntil.Add(flowItemTTL).Unix())
	join := c.ExpectFull && c.Waiters > 0
	for i := range flowTries {
		backoff(ctx, i)
		if join {
			st, old, done, err := s.joinWaiters(ctx, id, c, waiter, ttl)
			if err != nil || done {
				return st, err
			}
			if holders, ok := old[attrHolders].(*types.AttributeValueMemberM); ok && len(holders.Value) >= c.Max {
				// Full, and the list too, or the holders' leases ended:
				// the take below says which.
				if st, done := queuedOrFull(old, c, waiter); done && len(liveHolders(holders, c.At)) >= c.Max {
					return st, nil
				}
			}
		}
		join = true
		me := holderPath(c.Holder)
		old, ok, err := s.slotWrite(ctx, "acquire_slot", id, expression.Set(me, expression.Value(ms(c.LeaseUntil))).Set(expression.Name(AttrExpires), ttl),
			expression.AttributeExists(expression.Name(attrHolders)).And(
				expression.Name(attrHolders).Size().LessThan(expression.Value(c.Max)).Or(expression.AttributeExists(me))))
		if err != nil {
			return driver.SlotFull, err
		}
		if ok {
			s.leaveWaiters(ctx, id, waiter, waitersOf(old))
			return driver.SlotHeld, nil
		}
		holders, hasHolders := old[attrHolders].(*types.AttributeValueMemberM)
		if !hasHolders {
			// No item yet (or one without holders): create its holders.
			mine := &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{c.Holder: &types.AttributeValueMemberN{Value: strconv.FormatInt(ms(c.LeaseUntil), 10)}}}
			_, ok, err := s.slotWrite(ctx, "acquire_slot", id,
				expression.Set(expression.Name(attrHolders), expression.Value(mine)).
					Set(expression.Name(attrWaiters), expression.IfNotExists(expression.Name(attrWaiters), expression.Value(emptyList))).
					Set(expression.Name(AttrExpires), ttl),
				expression.AttributeNotExists(expression.Name(attrHolders)))
			if err != nil {
				return driver.SlotFull, err
			}
			if ok {
				s.leaveWaiters(ctx, id, waiter, waitersOf(old))
				return driver.SlotHeld, nil
			}
			join = false
			continue
		}
		if live := liveHolders(holders, c.At); len(live) < len(holders.Value) && len(live) < c.Max {
			// A holder's lease ended: its slot frees itself.
			live[c.Holder] = &types.AttributeValueMemberN{Value: strconv.FormatInt(ms(c.LeaseUntil), 10)}
			rest := slices.DeleteFunc(waitersOf(old), func(w string) bool { return w == waiter })
			cond := expression.Name(attrVersion).Equal(expression.Value(versionOf(old)))
			if versionOf(old) == 0 {
				cond = expression.AttributeNotExists(expression.Name(attrVersion))
			}
			_, ok, err := s.slotWrite(ctx, "acquire_slot", id,
				setWaiters(expression.Set(expression.Name(attrHolders), expression.Value(&types.AttributeValueMemberM{Value: live})), rest).
					Set(expression.Name(AttrExpires), ttl), cond)
			if err != nil {
				return driver.SlotFull, err
			}
			if ok {
				return driver.SlotHeld, nil
			}
			join = false
			continue
		}
		if st, done := queuedOrFull(old, c, waiter); done {
			return st, nil
		}
	}
	return driver.SlotFull, fmt.Errorf("dynamostore: acquire slot %s: the item kept changing", slotKey)
}

// queuedOrFull says, from a full item as read, whether c's waiter is
// queued already or the waiters are at their bound (done), or it may join.
func queuedOrFull(item map[string]types.AttributeValue, c driver.SlotClaim, waiter string) (driver.SlotState, bool) {
	waiters := waitersOf(item)
	switch {
	case slices.Contains(waiters, waiter):
		return driver.SlotQueued, true
	case len(waiters) >= c.Waiters:
		return driver.SlotFull, true
	}
	return driver.SlotFull, false
}

// joinWaiters appends waiter to slot item id's waiters, if every slot is
// held (counting holders whose lease ended: AcquireSlot's take drops
// those) and the list has room and lacks it. done says it answered
// (queued); else old is the item as the condition found it.
func (s *Store) joinWaiters(ctx context.Context, id string, c driver.SlotClaim, waiter string, ttl expression.OperandBuilder) (driver.SlotState, map[string]types.AttributeValue, bool, error) {
	mine := &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: waiter}}}
	w := expression.Name(attrWaiters)
	old, ok, err := s.slotWrite(ctx, "queue_slot", id,
		expression.Set(w, expression.ListAppend(expression.IfNotExists(w, expression.Value(emptyList)), expression.Value(mine))).
			Set(expression.Name(AttrExpires), ttl),
		expression.Name(attrHolders).Size().GreaterThanEqual(expression.Value(c.Max)).And(
			expression.AttributeNotExists(w).Or(w.Size().LessThan(expression.Value(c.Waiters)).And(expression.Not(expression.Contains(w, waiter))))))
	switch {
	case err != nil:
		return driver.SlotFull, nil, true, err
	case ok:
		return driver.SlotQueued, old, true, nil
	}
	return driver.SlotFull, old, false, nil
}

// liveHolders are the holders whose lease has not ended at at.
func liveHolders(holders *types.AttributeValueMemberM, at time.Time) map[string]types.AttributeValue {
	live := map[string]types.AttributeValue{}
	for holder, lease := range holders.Value {
		if n, ok := lease.(*types.AttributeValueMemberN); ok {
			if v, _ := strconv.ParseInt(n.Value, 10, 64); v > at.UnixMilli() {
				live[holder] = n
			}
		}
	}
	return live
}

// leaveWaiters takes holder, which just took a slot, out of the waiters
// (as they were before its take) when it was one: a waiter whose message
// came while it was queued. Best effort, a few tries: a waiter left in
// the list is woken in its turn, finds itself running and is dropped.
func (s *Store) leaveWaiters(ctx context.Context, id, holder string, waiters []string) {
	for range 3 {
		i := slices.Index(waiters, holder)
		if i < 0 {
			return
		}
		at := expression.Name(fmt.Sprintf("%s[%d]", attrWaiters, i))
		old, ok, err := s.slotWrite(ctx, "acquire_slot", id, expression.Remove(at), at.Equal(expression.Value(holder)))
		if ok || err != nil {
			return
		}
		waiters = waitersOf(old)
	}
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
// holders) to upd; an empty list stays, so that a release can take its
// first element off.
func setWaiters(upd expression.UpdateBuilder, waiters []string) expression.UpdateBuilder {
	l := make([]types.AttributeValue, len(waiters))
	for i, w := range waiters {
		l[i] = &types.AttributeValueMemberS{Value: w}
	}
	return upd.Set(expression.Name(attrWaiters), expression.Value(&types.AttributeValueMemberL{Value: l}))
}

// ReleaseSlot frees holder's slot of key and takes the first waiter off,
// in one write with no read: the holder's member and the waiters' first
// element removed, conditional on the holder holding a slot; the item as
// it was (ALL_OLD, no read unit) names the waiter taken. It cannot fail
// for contention. An item written before its waiters were always present
// refuses the removal of a list's element: the slot is then freed alone
// and the list created.
func (s *Store) ReleaseSlot(ctx context.Context, slotKey, holder string) (string, error) {
	id := storekey.SlotPrefix + slotKey
	path := holderPath(holder)
	old, ok, err := s.slotWrite(ctx, "release_slot", id,
		expression.Remove(path).Remove(expression.Name(attrWaiters+"[0]")), expression.AttributeExists(path))
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "ValidationException" {
		w := expression.Name(attrWaiters)
		_, _, err = s.slotWrite(ctx, "release_slot", id,
			expression.Remove(path).Set(w, expression.IfNotExists(w, expression.Value(emptyList))), expression.AttributeExists(path))
		return "", err
	}
	if err != nil || !ok {
		return "", err // !ok: it holds none (released already, or freed by its lease)
	}
	if waiters := waitersOf(old); len(waiters) > 0 {
		return waiters[0], nil
	}
	return "", nil
}

var _ driver.WaiterPopper = (*Store)(nil)

// PopWaiter takes the first waiter off slot item key, if holder holds a
// slot: one write (the list's first element removed, conditional on the
// holder and a waiter being there), whose ALL_OLD names the waiter.
func (s *Store) PopWaiter(ctx context.Context, slotKey, holder string) (string, int, error) {
	id := storekey.SlotPrefix + slotKey
	w := expression.Name(attrWaiters)
	old, ok, err := s.slotWrite(ctx, "pop_waiter", id, expression.Remove(expression.Name(attrWaiters+"[0]")),
		expression.AttributeExists(holderPath(holder)).And(w.Size().GreaterThan(expression.Value(0))))
	if err != nil || !ok {
		return "", 0, err
	}
	waiters := waitersOf(old)
	if len(waiters) == 0 {
		return "", 0, nil
	}
	return waiters[0], len(waiters) - 1, nil
}

// TakeToken reserves the bucket key's next token. The item holds the
// bucket's next free time ("n", Unix microseconds: the generic cell rate
// algorithm's theoretical arrival time). While that is not in the past,
// a take adds one interval to it (one conditional write, answering the
// old value: the reservation); when it is, or there is no item, a take
// sets it to now plus one interval and starts now. A failed condition
// answers the item, which says which of the two to write next. With
// b.IfDue the first write is conditioned on a token being due (the next
// free time within the burst's tolerance of now): a failed condition
// answering a later time is the refusal, and nothing is written.
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
			if b.IfDue {
				// Only a token due now: a refusal writes nothing.
				cond = expression.Name(attrNextFree).Between(expression.Value(now), expression.Value(now+tolerance))
			}
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
			if b.IfDue && ok && next > now+tolerance {
				return time.Duration(next-tolerance-now) * time.Microsecond, nil
			}
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

// debounceInline is the largest payload a debounce keeps in the job's
// item: with the rest of a typical job's item (about 450 bytes as its claim
// writes it) within one write unit.
const debounceInline = 512

// Debounce replaces a queued job's payload, request hash and run time,
// and puts it in the sweep index at d.SweepAt (a job sent first was not
// in it: its message may now come before its run time, too early).
//
// A payload over debounceInline bytes goes into an item of its own first
// (Create's rule needs the whole item; a debounce has only the payload).
// The one it replaces stays until its TTL.
func (s *Store) Debounce(ctx context.Context, id string, d driver.Debounce) error {
	var upd expression.UpdateBuilder
	if len(d.Payload) > debounceInline {
		rec := &driver.Record{ID: id, Payload: d.Payload, PayloadUntil: d.PayloadUntil}
		object, err := s.asObject(s.storedSize(d.Payload))
		if err != nil {
			return fmt.Errorf("dynamostore: debounce %s: %w", id, err)
		}
		ref := payloadRef(d.Payload)
		if object {
			if _, err := s.putObject(ctx, id, driver.PartPayload, d.Payload, d.PayloadUntil); err != nil {
				return err
			}
			upd = expression.Set(expression.Name(attrPayloadBytes), expression.Value(len(d.Payload)))
		} else {
			if err := s.putPayload(ctx, rec, ref); err != nil {
				return err
			}
			upd = expression.Remove(expression.Name(attrPayloadBytes))
		}
		upd = upd.Set(expression.Name(attrPayloadRef), expression.Value(ref)).Remove(expression.Name(attrPayload))
	} else {
		upd = expression.Set(expression.Name(attrPayload), expression.Value(string(d.Payload))).Remove(expression.Name(attrPayloadRef)).Remove(expression.Name(attrPayloadBytes))
	}
	upd = upd.Set(expression.Name(attrReqHash), expression.Value(d.RequestHash)).
		Set(expression.Name(attrRunAt), expression.Value(ms(d.RunAt))).
		Set(expression.Name(AttrSweepShard), expression.IfNotExists(expression.Name(AttrSweepShard), expression.Value(ShardOf(id)))).
		Set(expression.Name(AttrSweepAt), expression.Value(ms(d.SweepAt))).
		Set(expression.Name(attrUpdated), expression.Value(ms(d.At)))
	_, err := s.update(ctx, id, change{op: "debounce", upd: upd, cond: statusIs(jobs.StatusQueued)})
	return err
}
