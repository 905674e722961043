package dynamostore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdajobs/lambdajobs/internal/wallclock"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// API is the part of the DynamoDB client the store uses.
type API interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// Config configures a Store.
type Config struct {
	// Clock decides what "expired" means on reads; the wall clock if nil.
	Clock jobs.Clock
	// OnCapacity, when set, asks DynamoDB for the consumed capacity of every
	// call (ReturnConsumedCapacity INDEXES) and reports it, with the
	// operation's name. For benchmarks and cost figures.
	OnCapacity func(op string, cc *types.ConsumedCapacity)
	// Objects, when set, keeps payloads and final results whose stored
	// form is over ObjectThreshold bytes (DefaultObjectThreshold when 0)
	// as objects (S3: package s3objects). Without it every part is kept
	// in items, up to an item's bound (MaxPartBytes).
	Objects         Objects
	ObjectThreshold int
}

// Store is a driver.Store on one DynamoDB table built from CreateTableInput.
type Store struct {
	api   API
	table *string
	opts  Config
	clock jobs.Clock
	// dueCalls rotates the shard Due starts from.
	dueCalls atomic.Uint64
	// inline keeps every payload in its job's item (tests' figures of
	// before payload items).
	inline bool
}

var _ driver.Store = (*Store)(nil)
var _ driver.Signaller = (*Store)(nil)
var _ driver.ManyGetter = (*Store)(nil)

// New returns a Store on the named table.
func New(api API, table string, opts Config) *Store {
	c := opts.Clock
	if c == nil {
		c = wallclock.Clock{}
	}
	return &Store{api: api, table: aws.String(table), opts: opts, clock: c}
}

// item is a job as stored. Times are Unix milliseconds; expires is Unix
// seconds, as DynamoDB TTL wants.
type item struct {
	ID          string   `dynamodbav:"id"`
	Kind        string   `dynamodbav:"kind"`
	Owner       string   `dynamodbav:"owner"`
	Status      string   `dynamodbav:"status"`
	Payload     string   `dynamodbav:"payload,omitempty"`
	PayloadRef  string   `dynamodbav:"pr,omitempty"`
	Result      *string  `dynamodbav:"result,omitempty"`
	ResultRef   string   `dynamodbav:"rr,omitempty"`
	PayloadSize int      `dynamodbav:"pb,omitempty"`
	ResultSize  int      `dynamodbav:"rb,omitempty"`
	ErrorCode   string   `dynamodbav:"error_code,omitempty"`
	Attempt     int      `dynamodbav:"attempt"`
	Token       string   `dynamodbav:"token,omitempty"`
	Lease       int64    `dynamodbav:"lease_ms,omitempty"`
	ReqHash     string   `dynamodbav:"req_hash,omitempty"`
	SweepShard  string   `dynamodbav:"sweep_shard,omitempty"`
	SweepAt     int64    `dynamodbav:"sweep_at,omitempty"`
	Dispatches  int      `dynamodbav:"dispatches,omitempty"`
	Created     int64    `dynamodbav:"created_ms"`
	Updated     int64    `dynamodbav:"updated_ms"`
	Started     int64    `dynamodbav:"started_ms,omitempty"`
	Finished    int64    `dynamodbav:"finished_ms,omitempty"`
	Expires     int64    `dynamodbav:"expires,omitempty"`
	RunAt       int64    `dynamodbav:"run_at_ms,omitempty"`
	LastError   string   `dynamodbav:"last_error,omitempty"`
	Cancel      bool     `dynamodbav:"cancel_requested,omitempty"`
	BatchID     string   `dynamodbav:"batch_id,omitempty"`
	BatchIdx    int      `dynamodbav:"bi,omitempty"`
	BatchSize   int      `dynamodbav:"bn,omitempty"`
	BatchShard  int      `dynamodbav:"bs,omitempty"`
	BatchCount  string   `dynamodbav:"batch_counts,omitempty"`
	After       []string `dynamodbav:"af,stringset,omitempty"`
	AttemptBase int      `dynamodbav:"ab,omitempty"`
	Lane        string   `dynamodbav:"ln,omitempty"`
	Tenant      string   `dynamodbav:"tn,omitempty"`
	WaitingOn   string   `dynamodbav:"wo,omitempty"`
	UniqueKey   string   `dynamodbav:"uk,omitempty"`
	UniqueUntil string   `dynamodbav:"uu,omitempty"`
	StartBy     int64    `dynamodbav:"sb,omitempty"`
	StepMarks   string   `dynamodbav:"sm,omitempty"`
	Checkpoint  []byte   `dynamodbav:"cp,omitempty"`
	CheckpointR string   `dynamodbav:"cr,omitempty"`
	Continued   int      `dynamodbav:"cn,omitempty"`
	FirstStart  int64    `dynamodbav:"fs,omitempty"`
	Events      bool     `dynamodbav:"ev,omitempty"`
	OnFailure   string   `dynamodbav:"of,omitempty"`
	Outcomes    int      `dynamodbav:"oc,omitempty"`
	Parents     []string `dynamodbav:"pa,omitempty"`
	ParentsDone []int    `dynamodbav:"pd,numberset,omitempty"`
	CancelledBy string   `dynamodbav:"cb,omitempty"`
	Dependents  []string `dynamodbav:"dp,stringset,omitempty"`
	ReplayOf    string   `dynamodbav:"rp,omitempty"`
	ManualRunOf string   `dynamodbav:"mr,omitempty"`
	ChildOf     string   `dynamodbav:"co,omitempty"`
	AwaitedAs   string   `dynamodbav:"aw,omitempty"`
	// The job's tags, shown in its view (the indexes have their hashes).
	Tags map[string]string `dynamodbav:"tg,omitempty"`
	// The tag indexes' keys (see TagIndexes).
	Tag1 string `dynamodbav:"t1,omitempty"`
	Tag2 string `dynamodbav:"t2,omitempty"`
	Tag3 string `dynamodbav:"t3,omitempty"`
	// The listing indexes' keys (see OwnerIndex, QueuedIndex).
	ListOwner   string `dynamodbav:"lo,omitempty"`
	ListCreated string `dynamodbav:"lc,omitempty"`
	Queued      string `dynamodbav:"uq,omitempty"`
	Running     string `dynamodbav:"ur,omitempty"`
	// The capped kinds' index key (see KindQueuedIndex).
	KindCap string `dynamodbav:"kc,omitempty"`
}

// listCreated is a job's OwnerIndex sort key: its creation time in
// milliseconds, 13 digits (until the year 2286) so the strings sort as the
// times. Index sort keys need not be unique; a page's position also holds
// the job's id. Short on purpose: every byte is in every write of the job.
func listCreated(created time.Time) string {
	return fmt.Sprintf("%013d", ms(created))
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// ShardOf returns the sweep index shard of a job id.
func ShardOf(id string) string { return strconv.Itoa(int(hashOf(id) % Shards)) }

// ListKey returns the OwnerIndex partition key of a job of the owner whose
// key is ownerKey (wire.OwnerKey): the owner's key and the job's list
// shard.
func ListKey(ownerKey, id string) string {
	return ownerKey + "#" + strconv.Itoa(int(hashOf(id)%ListShards))
}

// TagKey returns the tag index partition key of job id of the owner whose
// key is ownerKey, for its tag ("key=value"): a hash of the owner's key and
// the tag (short: it is in every write of the job), and the job's list
// shard.
func TagKey(ownerKey, tag, id string) string {
	return tagHash(ownerKey, tag) + "#" + strconv.Itoa(int(hashOf(id)%ListShards))
}

func tagHash(ownerKey, tag string) string {
	h := sha256.Sum256([]byte("lambdajobs-tag\x00" + ownerKey + "\x00" + tag))
	return hex.EncodeToString(h[:12])
}

// tagPartitions are the partition key values of an owner's tag in a tag
// index: one per list shard.
func tagPartitions(ownerKey, tag string) []string {
	pks := make([]string, 0, ListShards)
	for i := range ListShards {
		pks = append(pks, tagHash(ownerKey, tag)+"#"+strconv.Itoa(i))
	}
	return pks
}

// KindCapKey returns the KindQueuedIndex partition key of job id of a
// capped kind: the kind and the job's shard.
func KindCapKey(kind, id string) string {
	return kind + "#" + strconv.Itoa(int(hashOf(id)%KindShards))
}

// tagList is tags as "key=value", sorted: the order of their indexes.
func tagList(tags map[string]string) []string {
	out := make([]string, 0, len(tags))
	for k, v := range tags {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

func hashOf(id string) uint32 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return h.Sum32()
}

func toItem(r *driver.Record) item {
	it := item{
		ID: r.ID, Kind: r.Kind, Owner: r.Owner, Status: string(r.Status),
		Payload: string(r.Payload), ErrorCode: r.ErrorCode, Attempt: r.Attempt,
		Token: r.ClaimToken, Lease: ms(r.LeaseUntil), ReqHash: r.RequestHash,
		SweepAt: ms(r.SweepAt), Dispatches: r.Dispatches,
		Created: ms(r.CreatedAt), Updated: ms(r.UpdatedAt), Started: ms(r.StartedAt), Finished: ms(r.FinishedAt),
		RunAt: ms(r.RunAt), LastError: r.LastError, Cancel: r.CancelRequested, BatchID: r.BatchID,
		BatchIdx: r.BatchIndex, BatchSize: r.BatchSize, BatchShard: r.BatchShards, After: r.After, AttemptBase: r.AttemptBase,
		Lane: r.Lane, Tenant: r.Tenant, WaitingOn: r.WaitingOn, UniqueKey: r.UniqueKey, UniqueUntil: r.UniqueUntil, StartBy: ms(r.StartBy),
		Checkpoint: r.Checkpoint, Continued: r.Continuations, FirstStart: ms(r.FirstStartedAt),
		Events: r.Events, OnFailure: r.OnFailure, Outcomes: r.Outcomes,
		Parents: r.Parents, ParentsDone: r.ParentsDone, CancelledBy: r.CancelledBy, Dependents: dependentsOf(r.Dependents), ReplayOf: r.ReplayOf, ManualRunOf: r.ManualRunOf, ChildOf: r.ChildOf, AwaitedAs: r.AwaitedAs,
	}
	if r.Owner != "" {
		key := wire.OwnerKey(r.Owner)
		it.ListOwner, it.ListCreated = ListKey(key, r.ID), listCreated(r.CreatedAt)
		switch r.Status {
		case jobs.StatusQueued:
			it.Queued = it.ListOwner
		case jobs.StatusRunning:
			it.Running = it.ListOwner
		}
		if len(r.Tags) > 0 {
			it.Tags = r.Tags
			slots := []*string{&it.Tag1, &it.Tag2, &it.Tag3}
			for i, tag := range tagList(r.Tags) {
				if i < len(slots) {
					*slots[i] = TagKey(key, tag, r.ID)
				}
			}
		}
	}
	if r.QueueCapped {
		it.KindCap = KindCapKey(r.Kind, r.ID)
	}
	if r.BatchCounts != nil {
		b, _ := json.Marshal(r.BatchCounts)
		it.BatchCount = string(b)
	}
	if r.Result != nil {
		s := string(r.Result)
		it.Result = &s
	}
	if !r.SweepAt.IsZero() {
		it.SweepShard = ShardOf(r.ID)
	}
	if !r.ExpiresAt.IsZero() {
		it.Expires = r.ExpiresAt.Unix()
	}
	return it
}

func fromItem(av map[string]types.AttributeValue) (*driver.Record, error) {
	var it item
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return nil, fmt.Errorf("dynamostore: decode item: %w", err)
	}
	r := &driver.Record{
		ID: it.ID, Kind: it.Kind, Owner: it.Owner, Status: jobs.Status(it.Status),
		Payload: []byte(it.Payload), PayloadRef: it.PayloadRef, ErrorCode: it.ErrorCode, Attempt: it.Attempt,
		ClaimToken: it.Token, LeaseUntil: fromMS(it.Lease), RequestHash: it.ReqHash,
		SweepAt: fromMS(it.SweepAt), Dispatches: it.Dispatches,
		CreatedAt: fromMS(it.Created), UpdatedAt: fromMS(it.Updated),
		StartedAt: fromMS(it.Started), FinishedAt: fromMS(it.Finished),
		RunAt: fromMS(it.RunAt), LastError: it.LastError, CancelRequested: it.Cancel, BatchID: it.BatchID,
		BatchIndex: it.BatchIdx, BatchSize: it.BatchSize, BatchShards: it.BatchShard, After: it.After, AttemptBase: it.AttemptBase,
		Lane: it.Lane, Tenant: it.Tenant, WaitingOn: it.WaitingOn, UniqueKey: it.UniqueKey, UniqueUntil: it.UniqueUntil, StartBy: fromMS(it.StartBy),
		Checkpoint: it.Checkpoint, CheckpointRef: it.CheckpointR, Continuations: it.Continued, FirstStartedAt: fromMS(it.FirstStart),
		Events: it.Events, OnFailure: it.OnFailure, Outcomes: it.Outcomes, QueueCapped: it.KindCap != "",
		Parents: it.Parents, ParentsDone: it.ParentsDone, CancelledBy: it.CancelledBy, Dependents: parseDependents(it.Dependents), ReplayOf: it.ReplayOf, ManualRunOf: it.ManualRunOf, ChildOf: it.ChildOf, AwaitedAs: it.AwaitedAs,
		Tags: it.Tags, StepMarks: it.StepMarks,
	}
	if it.BatchCount != "" {
		var bc jobs.BatchCounts
		if err := json.Unmarshal([]byte(it.BatchCount), &bc); err == nil {
			r.BatchCounts = &bc
		}
	}
	if it.Result != nil {
		r.Result = []byte(*it.Result)
	}
	r.ResultRef = it.ResultRef
	r.PayloadBytes, r.ResultBytes = it.PayloadSize, it.ResultSize
	if it.Expires != 0 {
		r.ExpiresAt = time.Unix(it.Expires, 0).UTC()
	}
	for k, v := range av {
		name, ok := strings.CutPrefix(k, attrSignal)
		if !ok {
			continue
		}
		switch v := v.(type) {
		case *types.AttributeValueMemberB: // the signal, sealed
			if r.Signals == nil {
				r.Signals = map[string][]byte{}
			}
			r.Signals[name] = v.Value
		case *types.AttributeValueMemberS: // the name of its item
			if r.Signals == nil {
				r.Signals = map[string][]byte{}
			}
			if r.SignalRefs == nil {
				r.SignalRefs = map[string]string{}
			}
			r.Signals[name], r.SignalRefs[name] = []byte{}, v.Value
		}
	}
	return r, nil
}

func key(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{AttrID: &types.AttributeValueMemberS{Value: id}}
}

func (s *Store) capacity() types.ReturnConsumedCapacity {
	if s.opts.OnCapacity != nil {
		return types.ReturnConsumedCapacityIndexes
	}
	return types.ReturnConsumedCapacityNone
}

func (s *Store) report(op string, cc *types.ConsumedCapacity) {
	if s.opts.OnCapacity != nil && cc != nil {
		s.opts.OnCapacity(op, cc)
	}
}

// conditionFailed returns the item DynamoDB returned with a failed
// condition, and whether the error was a failed condition at all.
func conditionFailed(err error) (map[string]types.AttributeValue, bool) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ccf.Item, true
	}
	return nil, false
}

// conflict is the error of a job's write whose condition failed on old,
// the item as DynamoDB returned it: ErrNotFound when there is no job (or
// it expired), else a *driver.ConflictError with the job.
func (s *Store) conflict(old map[string]types.AttributeValue) error {
	if len(old) == 0 {
		return jobs.ErrNotFound
	}
	cur, err := fromItem(old)
	if err != nil {
		return err
	}
	if cur.Expired(s.clock.Now()) {
		return jobs.ErrNotFound
	}
	return &driver.ConflictError{Current: cur}
}

// Create puts rec unless a live job with its id exists.
//
// A payload that would take the job's item past one write unit (apart)
// goes first into an item of its own (driver.PartPayload).
func (s *Store) Create(ctx context.Context, rec *driver.Record) error {
	in, at, err := s.putInput(rec)
	if err != nil {
		return err
	}
	switch {
	case at.staged:
		if err := s.keepStaged(ctx, rec); err != nil {
			return err
		}
	case at.object:
		if _, err := s.putObject(ctx, rec.ID, driver.PartPayload, rec.Payload, rec.PayloadUntil); err != nil {
			return err
		}
	case at.ref != "":
		if err := s.putPayload(ctx, rec, at.ref); err != nil {
			return err
		}
	}
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	in.ReturnConsumedCapacity = s.capacity()
	out, err := s.putItem(ctx, in)
	if old, ok := conditionFailed(err); ok {
		if len(old) == 0 {
			return &driver.ConflictError{}
		}
		cur, err := fromItem(old)
		if err != nil {
			return err
		}
		return &driver.ConflictError{Current: cur}
	}
	if err != nil {
		return fmt.Errorf("dynamostore: create %s: %w", rec.ID, err)
	}
	s.report("create", out.ConsumedCapacity)
	return nil
}

// payloadAt is where putInput puts a payload: in the job's item (no
// ref), in an item of its own, or an object.
type payloadAt struct {
	ref    string
	object bool
	// staged: the payload is an object written before (StagePayload).
	staged bool
}

// putInput is the conditional put that creates rec, and where its payload
// goes.
func (s *Store) putInput(rec *driver.Record) (*dynamodb.PutItemInput, payloadAt, error) {
	var at payloadAt
	if rec.Status != jobs.StatusQueued {
		return nil, at, fmt.Errorf("dynamostore: create: status %q, want queued", rec.Status)
	}
	split, err := apart(rec)
	if err != nil {
		return nil, at, err
	}
	split = split && !s.inline
	it := toItem(rec)
	if at.staged = staged(rec); at.staged {
		if s.opts.Objects == nil {
			return nil, at, fmt.Errorf("dynamostore: payload of %s: %w", rec.ID, ErrNeedsObject)
		}
		at.object, at.ref = true, rec.PayloadRef
		it.Payload, it.PayloadRef, it.PayloadSize = "", rec.PayloadRef, rec.PayloadBytes
	} else if split {
		if at.object, err = s.asObject(s.storedSize(rec.Payload)); err != nil {
			return nil, at, fmt.Errorf("dynamostore: payload of %s: %w", rec.ID, err)
		}
		at.ref = payloadRef(rec.Payload)
		it.Payload, it.PayloadRef = "", at.ref
		if at.object {
			it.PayloadSize = len(rec.Payload)
		}
	}
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return nil, at, fmt.Errorf("dynamostore: encode item: %w", err)
	}
	cond := expression.AttributeNotExists(expression.Name(AttrID)).
		Or(expression.Name(AttrExpires).LessThanEqual(expression.Value(s.clock.Now().Unix())))
	expr, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return nil, at, err
	}
	return &dynamodb.PutItemInput{
		TableName:                 s.table,
		Item:                      av,
		ConditionExpression:       expr.Condition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
	}, at, nil
}

// marshalItem is rec's item as Create writes it, its payload inline.
func marshalItem(rec *driver.Record) (map[string]types.AttributeValue, error) {
	return attributevalue.MarshalMap(toItem(rec))
}

// TransactPut returns the writes that create rec inside a caller's own
// TransactWriteItems, beside the caller's items and conditions: the job
// exists exactly when the rest of the transaction commits. rec comes from
// jobs.Service.Prepare; after the commit, call Service.Dispatch. The
// first write is the job's, conditional like Create: if a live job
// already has the id (a retried transaction with the same idempotency
// key), the transaction is cancelled and JobExists reports it at that
// write's index. A payload that would take the job's item past one write
// unit adds a second write, its own item (unconditional: a retried
// transaction writes the same payload under the same key). A payload that
// would be an object (Config.Objects) is refused: ErrNeedsObject.
//
// Mind DynamoDB's limits: at most 100 items and 4 MB per transaction, and
// each item in a transaction costs twice the write units of a plain write
// (docs/evidence/CAPACITY.md counts a job's).
func (s *Store) TransactPut(rec *driver.Record) ([]types.TransactWriteItem, error) {
	in, at, err := s.putInput(rec)
	if err != nil {
		return nil, err
	}
	if at.object {
		return nil, fmt.Errorf("%w: the payload of %s is kept as an object, which a transaction cannot write; enqueue it without one (Service.Enqueue)", ErrNeedsObject, rec.ID)
	}
	ref := at.ref
	writes := []types.TransactWriteItem{{Put: &types.Put{
		TableName:                           in.TableName,
		Item:                                in.Item,
		ConditionExpression:                 in.ConditionExpression,
		ExpressionAttributeNames:            in.ExpressionAttributeNames,
		ExpressionAttributeValues:           in.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureNone,
	}}}
	if ref != "" {
		if !utf8.Valid(rec.Payload) {
			return nil, fmt.Errorf("dynamostore: payload of %s is not UTF-8", rec.ID)
		}
		p := s.payloadPut(rec, ref)
		writes = append(writes, types.TransactWriteItem{Put: &types.Put{TableName: p.TableName, Item: p.Item}})
	}
	return writes, nil
}

// JobExists reports whether err is a TransactWriteItems cancellation caused
// by the job's put at index i: the job was already stored (a retry).
func JobExists(err error, i int) bool {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) || i < 0 || i >= len(tce.CancellationReasons) {
		return false
	}
	return aws.ToString(tce.CancellationReasons[i].Code) == "ConditionalCheckFailed"
}

// Get reads the job with a strongly consistent read.
func (s *Store) Get(ctx context.Context, id string) (*driver.Record, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:              s.table,
		Key:                    key(id),
		ConsistentRead:         aws.Bool(true),
		ReturnConsumedCapacity: s.capacity(),
	})
	if err != nil {
		return nil, fmt.Errorf("dynamostore: get %s: %w", id, err)
	}
	s.report("get", out.ConsumedCapacity)
	if _, isJob := out.Item[attrKind]; !isJob {
		return nil, jobs.ErrNotFound // no item, or a batch's or a schedule's
	}
	rec, err := fromItem(out.Item)
	if err != nil {
		return nil, err
	}
	if rec.Expired(s.clock.Now()) {
		return nil, jobs.ErrNotFound
	}
	return rec, nil
}

// change is one conditional UpdateItem of a job: op names it (in errors
// and capacity reports), upd is the update and cond its condition. A
// failed condition gives a *driver.ConflictError with the job as it is.
type change struct {
	op   string
	upd  expression.UpdateBuilder
	cond expression.ConditionBuilder
	raw  *expr // instead of upd and cond: a job's own writes (see expr)
}

// update runs the change c of job id and returns the new item (for a
// claim; nothing for the others).
func (s *Store) update(ctx context.Context, id string, c change) (map[string]types.AttributeValue, error) {
	op := c.op
	in := &dynamodb.UpdateItemInput{
		TableName:                           s.table,
		Key:                                 key(id),
		ReturnValues:                        returnValues(op),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ReturnConsumedCapacity:              s.capacity(),
	}
	if c.raw != nil {
		in.UpdateExpression, in.ConditionExpression = c.raw.update(), c.raw.condition()
		in.ExpressionAttributeNames, in.ExpressionAttributeValues = c.raw.names, c.raw.values
	} else {
		built, err := expression.NewBuilder().WithUpdate(c.upd).WithCondition(c.cond).Build()
		if err != nil {
			return nil, err
		}
		in.UpdateExpression, in.ConditionExpression = built.Update(), built.Condition()
		in.ExpressionAttributeNames, in.ExpressionAttributeValues = built.Names(), built.Values()
	}
	out, err := s.updateItem(ctx, in)
	if old, ok := conditionFailed(err); ok {
		return nil, s.conflict(old)
	}
	if err != nil {
		return nil, fmt.Errorf("dynamostore: %s %s: %w", op, id, err)
	}
	s.report(op, out.ConsumedCapacity)
	return out.Attributes, nil
}

func returnValues(op string) types.ReturnValue {
	switch op {
	case "claim":
		return types.ReturnValueAllOld
	case "count_parents", "add_dependent", "heartbeat":
		return types.ReturnValueAllNew
	}
	return types.ReturnValueNone
}

func statusIs(st jobs.Status) expression.ConditionBuilder {
	return expression.Name(attrStatus).Equal(expression.Value(string(st)))
}

// Claim moves a queued job to running under c, and out of WaitingIndex
// (what it waited on is removed with its queued key, so no later write
// of the job touches that index's keys while it is in neither). It asks
// for the item as it was (ALL_OLD, no read unit) and returns it as the
// claim made it, saying what it waited on.
func (s *Store) Claim(ctx context.Context, id string, c driver.Claim) (*driver.Record, error) {
	e := newExpr()
	at := e.vn(ms(c.At))
	e.setTo(attrStatus, e.vs(string(jobs.StatusRunning)))
	e.moveUnfinished(AttrRunning, AttrQueued)
	e.setTo(attrToken, e.vs(c.Token))
	e.setTo(attrLease, e.vn(ms(c.LeaseUntil)))
	e.setTo(attrStarted, at)
	e.setTo(attrFirstStarted, e.ifNotExists(attrFirstStarted, at))
	e.setTo(attrUpdated, at)
	e.del(attrWaitingOn)
	e.addTo(attrAttempt, 1)
	e.when(e.statusIs(jobs.StatusQueued))
	e.when(e.notExists(attrRunAt) + " OR " + e.n(attrRunAt) + " <= " + at)
	// A job that waits on its parents is not claimed (a message of it
	// that came anyway finds it so).
	e.when(e.notExists(attrWaitingOn) + " OR " + e.n(attrWaitingOn) + " <> " + e.vs(driver.WaitParents))
	if len(c.SkipKinds) > 0 {
		kinds := make([]string, len(c.SkipKinds))
		for i, k := range c.SkipKinds {
			kinds[i] = e.vs(k)
		}
		e.when("NOT (" + e.n(attrKind) + " IN (" + strings.Join(kinds, ", ") + "))")
	}
	av, err := s.update(ctx, id, change{op: "claim", raw: e})
	if err != nil {
		return nil, err
	}
	rec, err := fromItem(av)
	if err != nil {
		return nil, err
	}
	// The update above, applied to the job as it was.
	rec.Status, rec.ClaimToken = jobs.StatusRunning, c.Token
	rec.LeaseUntil, rec.StartedAt, rec.UpdatedAt = fromMS(ms(c.LeaseUntil)), fromMS(ms(c.At)), fromMS(ms(c.At))
	if rec.FirstStartedAt.IsZero() {
		rec.FirstStartedAt = rec.StartedAt
	}
	rec.Attempt++
	return rec, nil
}

// Publish stores a partial result of the run named by token.
func (s *Store) Publish(ctx context.Context, id, token string, result []byte, at time.Time) error {
	e := newExpr()
	e.setTo(attrResult, e.vs(string(result)))
	e.del(attrResultRef, attrResultBytes)
	e.setTo(attrUpdated, e.vn(ms(at)))
	e.runningUnder(token)
	e.notCancelled()
	_, err := s.update(ctx, id, change{op: "publish", raw: e})
	return err
}

// Heartbeat extends the lease of the run named by token.
func (s *Store) Heartbeat(ctx context.Context, id, token string, hb driver.Heartbeat) error {
	build := func(lease bool) *expr {
		e := newExpr()
		switch {
		case lease && !hb.SweepAt.IsZero():
			// A run's first heartbeat shrinks the claim's lease to one
			// heartbeat: unless a later write of the run landed first.
			e.setTo(attrLease, e.vn(ms(hb.LeaseUntil)))
			e.when(e.n(attrUpdated) + " <= " + e.vn(ms(hb.At)))
		case lease:
			e.leaseForward(ms(hb.LeaseUntil))
		}
		e.setTo(attrUpdated, e.vn(ms(hb.At)))
		if !hb.SweepAt.IsZero() {
			// Into the sweep index if the job was not in it (sent message
			// first): its shard as its key.
			e.setTo(AttrSweepShard, e.ifNotExists(AttrSweepShard, e.vs(ShardOf(id))))
			e.setTo(AttrSweepAt, e.vn(ms(hb.SweepAt)))
		}
		// Renewed after a cancel request too (the handler may take a while
		// to stop, and no retry may start beside it); the new item says
		// whether one came.
		e.runningUnder(token)
		return e
	}
	item, err := s.leaseWrite(ctx, id, leaseOp{op: "heartbeat", token: token, lease: hb.LeaseUntil, at: hb.At, build: build})
	if err != nil {
		return err
	}
	if _, ok := item[attrCancel]; ok {
		cur, err := fromItem(item)
		if err != nil {
			return err
		}
		return &driver.ConflictError{Current: cur} // as written: the run must stop
	}
	return nil
}

// Checkpoint stores the run's checkpoint and extends its lease.
func (s *Store) Checkpoint(ctx context.Context, id, token string, c driver.Checkpoint) error {
	if len(c.Data) > driver.MaxCheckpointBytes {
		return fmt.Errorf("dynamostore: checkpoint of %d bytes, over %d", len(c.Data), driver.MaxCheckpointBytes)
	}
	// The checkpoint's own item, if it needs one, is put once: a write
	// that goes again without its lease names the same.
	ref, err := s.putCheckpoint(ctx, id, c.Data, c.Until)
	if err != nil {
		return err
	}
	build := func(lease bool) *expr {
		e := newExpr()
		e.checkpoint(c.Data, ref)
		e.marks(c.Marks)
		if lease {
			e.leaseForward(ms(c.LeaseUntil))
		}
		e.setTo(attrUpdated, e.vn(ms(c.At)))
		e.runningUnder(token)
		e.notCancelled()
		return e
	}
	_, err = s.leaseWrite(ctx, id, leaseOp{op: "checkpoint", token: token, lease: c.LeaseUntil, at: c.At, build: build})
	return err
}

// leaseWrite runs the write of job id, stamped w.at, that w.build(true)
// makes, which moves the lease of the run named by w.token to w.lease. A
// lease never moves back: a write the network held, landing after a later
// one of the same run, finds the later lease (or, the first heartbeat, a
// later write) and goes again without its own (build(false)); else a
// duplicate delivery hidden until the earlier end would find the run's
// lease over while it runs.
func (s *Store) leaseWrite(ctx context.Context, id string, w leaseOp) (map[string]types.AttributeValue, error) {
	item, err := s.update(ctx, id, change{op: w.op, raw: w.build(true)})
	var ce *driver.ConflictError
	if errors.As(err, &ce) && ce.Current != nil && ce.Current.Status == jobs.StatusRunning && ce.Current.ClaimToken == w.token &&
		(ce.Current.LeaseUntil.After(fromMS(ms(w.lease))) || ce.Current.UpdatedAt.After(fromMS(ms(w.at)))) {
		return s.update(ctx, id, change{op: w.op, raw: w.build(false)})
	}
	return item, err
}

// leaseOp is a write of a run's lease (see leaseWrite): its operation's
// name, the run's token, the lease and the write's time, and how to build
// it with or without the lease.
type leaseOp struct {
	op, token string
	lease, at time.Time
	build     func(lease bool) *expr
}

// Finish records the final outcome of the run named by token.
func (s *Store) Finish(ctx context.Context, id, token string, o driver.Outcome) error {
	if !o.Status.Final() {
		return fmt.Errorf("dynamostore: finish: status %q is not final", o.Status)
	}
	e := newExpr()
	at := e.vn(ms(o.At))
	e.setTo(attrStatus, e.vs(string(o.Status)))
	e.setTo(attrUpdated, at)
	e.setTo(attrFinished, at)
	e.finished()
	e.del(attrToken)
	if !o.KeepLease {
		e.del(attrLease)
	}
	e.afterOutcome(id, at, o.After)
	e.marks(o.Marks)
	if !o.ExpiresAt.IsZero() {
		e.setTo(AttrExpires, e.vn(o.ExpiresAt.Unix()))
	}
	if o.Result != nil {
		ref, size := o.Staged.Ref, o.Staged.Bytes
		if ref == "" {
			var err error
			if ref, size, err = s.putResult(ctx, id, o.Result, o.ResultUntil); err != nil {
				return err
			}
		}
		switch {
		case size > 0:
			e.setTo(attrResultRef, e.vs(ref))
			e.setTo(attrResultBytes, e.vn(int64(size)))
			e.del(attrResult)
		case ref != "":
			e.setTo(attrResultRef, e.vs(ref))
			e.del(attrResult, attrResultBytes)
		default:
			e.setTo(attrResult, e.vs(string(o.Result)))
			e.del(attrResultRef, attrResultBytes)
		}
	}
	if o.Code != "" {
		e.setTo(attrErrorCode, e.vs(o.Code))
	}
	if o.Status == jobs.StatusFailed || o.Status == jobs.StatusCancelled {
		e.needsAttention()
	}
	e.runningUnder(token)
	if o.Status != jobs.StatusCancelled {
		e.notCancelled()
	}
	if !o.LeaseExpiredBy.IsZero() {
		e.leaseEndedBy(ms(o.LeaseExpiredBy))
	}
	e.countOutcome(o.Seq)
	e.hasDependents(o.Dependents)
	_, err := s.update(ctx, id, change{op: "finish", raw: e})
	return err
}

// DoneAfter clears a final job's post-outcome steps and its sweep
// schedule.
func (s *Store) DoneAfter(ctx context.Context, id string, of driver.AfterOf) error {
	e := newExpr()
	e.del(attrAfter, AttrSweepShard, AttrSweepAt)
	e.when("attribute_exists(" + e.n(attrAfter) + ")")
	e.when(e.n(attrAttempt) + " = " + e.vn(int64(of.Attempt)))
	e.when(e.n(attrFinished) + " = " + e.vn(ms(of.FinishedAt)))
	if of.Outcomes > 0 {
		e.when(e.n(attrOutcomes) + " = " + e.vn(int64(of.Outcomes)))
	} else {
		e.when(e.notExists(attrOutcomes))
	}
	_, err := s.update(ctx, id, change{op: "done_after", raw: e})
	var ce *driver.ConflictError
	if errors.As(err, &ce) || errors.Is(err, jobs.ErrNotFound) {
		return nil // done by another caller (or expired)
	}
	return err
}

// Requeue sends the run named by token back to the queue for a retry.
func (s *Store) Requeue(ctx context.Context, id, token string, r driver.Requeue) error {
	e := newExpr()
	e.setTo(attrStatus, e.vs(string(jobs.StatusQueued)))
	e.moveUnfinished(AttrQueued, AttrRunning)
	e.setTo(attrUpdated, e.vn(ms(r.At)))
	e.setTo(attrRunAt, e.vn(ms(r.RunAt)))
	if r.SweepAt.IsZero() {
		// Its new message is its safety net: out of the sweep index (no
		// index write for a job that was not in it).
		e.del(AttrSweepShard, AttrSweepAt)
	} else {
		e.setTo(AttrSweepShard, e.vs(ShardOf(id)))
		e.setTo(AttrSweepAt, e.vn(ms(r.SweepAt)))
	}
	e.del(attrToken, attrLease, attrDispatches)
	if r.LastError != "" {
		e.setTo(attrLastError, e.vs(r.LastError))
	}
	// A continuation or a park does not spend the attempt its claim
	// counted.
	attempt := int64(0)
	if r.Continue {
		attempt--
		e.addTo(attrContinuations, 1)
	}
	if r.Checkpoint != nil {
		ref, err := s.putCheckpoint(ctx, id, r.Checkpoint, r.CheckpointUntil)
		if err != nil {
			return err
		}
		e.checkpoint(r.Checkpoint, ref)
	}
	e.marks(r.Marks)
	if r.WaitingOn != "" {
		attempt--
		e.setTo(attrWaitingOn, e.vs(r.WaitingOn))
		if name, ok := driver.SignalWaitedOn(r.WaitingOn); ok {
			// A signal delivered while this run ran: the park does not
			// land, and the engine makes the job due instead.
			e.when(e.notExists(attrSignal + name))
		}
	} else {
		e.del(attrWaitingOn)
	}
	if attempt != 0 {
		e.addTo(attrAttempt, attempt)
	}
	if r.Unstart {
		e.del(attrFirstStarted, attrStarted)
	}
	e.runningUnder(token)
	e.notCancelled()
	if !r.LeaseExpiredBy.IsZero() {
		e.leaseEndedBy(ms(r.LeaseExpiredBy))
	}
	_, err := s.update(ctx, id, change{op: "requeue", raw: e})
	return err
}

// Signal stores a signal on a job that is queued or running, as an
// attribute of its own (driver.Signaller): one conditional write, which
// with sg.Wake also makes the job that waits for it due, and without it
// is refused on a job that waits for it.
//
// A signal over signalInline bytes goes into an item of its own first
// (driver.SignalPart), until sg.Until, and the job's attribute names it.
func (s *Store) Signal(ctx context.Context, id string, sg driver.Signal) error {
	ref, err := s.putSignal(ctx, id, sg)
	if err != nil {
		return err
	}
	e := newExpr()
	// Not updated_ms: a run's first heartbeat is conditional on it.
	if ref != "" {
		e.setTo(attrSignal+sg.Name, e.vs(ref))
	} else {
		e.setTo(attrSignal+sg.Name, e.v(&types.AttributeValueMemberB{Value: sg.Data}))
	}
	e.when(e.notExists(attrSignal + sg.Name))
	if !driver.IsChildSignal(sg.Name) {
		e.addTo(attrSignals, 1)
		e.when(e.notExists(attrSignals) + " OR " + e.n(attrSignals) + " < " + e.vn(int64(sg.Max)))
	}
	if sg.Wake {
		e.when(e.statusIs(jobs.StatusQueued))
		e.when(e.n(attrWaitingOn) + " = " + e.vs(driver.WaitSignalOn(sg.Name)))
		e.setTo(attrRunAt, e.vn(ms(sg.RunAt)))
		if sg.SweepAt.IsZero() {
			e.del(AttrSweepShard, AttrSweepAt)
		} else {
			e.setTo(AttrSweepShard, e.vs(ShardOf(id)))
			e.setTo(AttrSweepAt, e.vn(ms(sg.SweepAt)))
		}
	} else {
		e.when(e.statusIs(jobs.StatusQueued) + " OR " + e.statusIs(jobs.StatusRunning))
		// A job parked for this signal since it was read is woken, not
		// left waiting: the caller reads it again and wakes it.
		e.when(e.notExists(attrWaitingOn) + " OR " + e.n(attrWaitingOn) + " <> " + e.vs(driver.WaitSignalOn(sg.Name)))
	}
	_, err = s.update(ctx, id, change{op: "signal", raw: e})
	var ce *driver.ConflictError
	if errors.As(err, &ce) && ce.Current != nil && driver.SignalLanded(ce.Current, sg, ref) {
		return nil
	}
	return err
}

// CancelQueued moves a queued job to cancelled and out of the sweep index
// (or, with post-outcome steps, keeps it there until DoneAfter).
func (s *Store) CancelQueued(ctx context.Context, id string, c driver.CancelQueued) error {
	e := newExpr()
	at := e.vn(ms(c.At))
	e.setTo(attrStatus, e.vs(string(jobs.StatusCancelled)))
	e.finished()
	e.setTo(attrUpdated, at)
	e.setTo(attrFinished, at)
	e.setTo(AttrExpires, e.vn(c.ExpiresAt.Unix()))
	// Its sweep time may be a park's, far ahead: the steps are due now.
	e.afterOutcomeDue(id, at, c.After)
	e.needsAttention()
	if c.Code != "" {
		e.setTo(attrErrorCode, e.vs(c.Code))
	}
	if c.CancelledBy != "" {
		e.setTo(attrCancelledBy, e.vs(c.CancelledBy))
	}
	e.when(e.statusIs(jobs.StatusQueued))
	e.countOutcome(c.Seq)
	e.hasDependents(c.Dependents)
	_, err := s.update(ctx, id, change{op: "cancel", raw: e})
	return err
}

// RequestCancel marks a running job's run as cancelled.
func (s *Store) RequestCancel(ctx context.Context, id string, at time.Time) error {
	upd := expression.Set(expression.Name(attrCancel), expression.Value(true)).
		Set(expression.Name(attrUpdated), expression.Value(ms(at)))
	_, err := s.update(ctx, id, change{op: "request_cancel", upd: upd, cond: statusIs(jobs.StatusRunning)})
	return err
}

// Reschedule moves the sweep time of a job still as expected.
func (s *Store) Reschedule(ctx context.Context, id string, expect driver.Expect, at time.Time) error {
	e := newExpr()
	e.setTo(AttrSweepAt, e.vn(ms(at)))
	switch expect.Status {
	case jobs.StatusQueued:
		e.addTo(attrDispatches, 1)
		e.when(e.statusIs(jobs.StatusQueued))
	case jobs.StatusRunning:
		e.runningUnder(expect.Token)
	case jobs.StatusSucceeded, jobs.StatusFailed, jobs.StatusCancelled:
		// A final job whose post-outcome steps failed: looked at later.
		e.when(e.statusIs(expect.Status))
		e.when("attribute_exists(" + e.n(attrAfter) + ")")
	default:
		return fmt.Errorf("dynamostore: reschedule: status %q has no sweep", expect.Status)
	}
	e.when("attribute_exists(" + e.n(AttrSweepShard) + ")")
	_, err := s.update(ctx, id, change{op: "reschedule", raw: e})
	return err
}

// Due queries the shards of the sweep index for jobs due by now. The index
// holds only queued and running jobs, so the work is proportional to them,
// never to the table. Each shard gets its share of limit first, starting
// from a shard that rotates from one call to the next, so that one shard
// with many due items (a burst of jobs that keep failing to dispatch) does
// not starve the others; what is left of limit is then filled from any.
func (s *Store) Due(ctx context.Context, now time.Time, limit int) ([]string, error) {
	var ids []string
	seen := map[string]bool{}
	full := map[int]bool{} // shards that may hold more
	first := int(s.dueCalls.Add(1) % Shards)
	share := max(1, limit/Shards)
	for pass := 0; pass < 2 && len(ids) < limit; pass++ {
		for i := 0; i < Shards && len(ids) < limit; i++ {
			shard := (first + i) % Shards
			if pass == 1 && !full[shard] {
				continue
			}
			want := min(share, limit-len(ids))
			if pass == 1 {
				want = limit - len(ids)
			}
			got, more, err := s.dueShard(ctx, shard, now, want, seen)
			if err != nil {
				return nil, err
			}
			ids = append(ids, got...)
			full[shard] = more
		}
	}
	return ids, nil
}

// dueShard reads up to want due ids of one shard that are not in seen, and
// reports whether the shard may hold more.
func (s *Store) dueShard(ctx context.Context, shard int, now time.Time, want int, seen map[string]bool) ([]string, bool, error) {
	kc := expression.Key(AttrSweepShard).Equal(expression.Value(strconv.Itoa(shard))).
		And(expression.Key(AttrSweepAt).LessThanEqual(expression.Value(ms(now))))
	expr, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		return nil, false, err
	}
	in := &dynamodb.QueryInput{
		TableName:                 s.table,
		IndexName:                 aws.String(SweepIndex),
		KeyConditionExpression:    expr.KeyCondition(),
		ExpressionAttributeNames:  expr.Names(),
		ExpressionAttributeValues: expr.Values(),
		ReturnConsumedCapacity:    s.capacity(),
	}
	var ids []string
	for len(ids) < want {
		in.Limit = aws.Int32(int32(want - len(ids) + len(seen)))
		out, err := s.api.Query(ctx, in)
		if err != nil {
			return nil, false, fmt.Errorf("dynamostore: due (shard %d): %w", shard, err)
		}
		s.report("due", out.ConsumedCapacity)
		for _, av := range out.Items {
			if v, ok := av[AttrID].(*types.AttributeValueMemberS); ok && !seen[v.Value] && len(ids) < want {
				seen[v.Value] = true
				ids = append(ids, v.Value)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return ids, false, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	return ids, true, nil
}
