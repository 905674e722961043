// Package dynamostore is the driver.Store on one DynamoDB table, and the
// table's one definition (CreateTableInput, TimeToLiveInput and the
// attribute names), which the tests, the local stack and the CDK app share.
//
// Every state change is a single conditional PutItem or UpdateItem; claims
// return the claimed item (ReturnValues ALL_NEW) and failed conditions
// return the current item (ReturnValuesOnConditionCheckFailure ALL_OLD), so
// no transition costs an extra read. Expressions are built with the SDK's
// feature/dynamodb/expression package and items mapped with
// feature/dynamodb/attributevalue.
//
// A job item is about 300 to 600 bytes (its owner's ARN is in it twice)
// plus its payload and result. A payload that would add a write unit to
// the item as its claim writes it goes into an item of its own
// (payload.go), and so do a checkpoint and a final result over 400 bytes:
// with the longest owner and a 32-character kind, a job keeps up to 423
// bytes of payload in its own item. docs/evidence/CAPACITY.md lists the units per
// job and what each pays for. With an object tier (Config.Objects, package
// s3objects), a payload or final result whose stored form passes 8 KiB is
// an S3 object instead (objects.go), and the job's item holds its name and
// size.
package dynamostore

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The table's one definition. The local stack, the tests and the CDK app in
// infra/ all build the table from these names, so they cannot drift.
const (
	// AttrID is the partition key: the job id (a string).
	AttrID = "id"
	// SweepIndex is the sparse, keys-only index the sweeper queries. Only
	// jobs that are queued or running carry its key attributes; the final
	// write removes them, so the index holds exactly the jobs the sweeper may
	// need and a sweep never reads finished jobs.
	SweepIndex = "sweep"
	// AttrSweepShard is the index's partition key (a string "0".."N-1"):
	// the index is spread over Shards keys so one hot key cannot throttle it.
	// A job's entry is written twice (in at creation, out at its end), so
	// at 10,000 jobs per second each of 32 shards takes 625 write units a
	// second (docs/evidence/CAPACITY.md). Earlier versions had 8: their entries stay
	// on shards 0 to 7, which every sweep reads too.
	AttrSweepShard = "sweep_shard"
	// AttrSweepAt is the index's sort key (a number, Unix milliseconds):
	// when the sweeper should look at the job if it is still not final.
	AttrSweepAt = "sweep_at"
	// AttrExpires is the TTL attribute (a number, Unix seconds), set on
	// final jobs to their finish time plus the retention.
	AttrExpires = "expires"
	// Shards is the number of sweep index partitions.
	Shards = 32
	// ListShards is the number of partitions each owner's entries of
	// OwnerIndex, AttentionIndex, QueuedIndex and RunningIndex are spread
	// over (AttrListOwner is the owner's key, '#', and the job's shard): at
	// 10,000 jobs per second from one owner, each of 32 takes 312 write
	// units a second of OwnerIndex, and 625 of each unfinished index (an
	// entry in and out). A listing reads them all and merges them, newest
	// first.
	ListShards = 32

	// OwnerIndex lists an owner's jobs, newest first: its partition key
	// AttrListOwner is the owner's key (wire.OwnerKey) and the job's list
	// shard (ListKey), its sort key AttrListCreated the creation time. Both
	// are set when the job is created and never change, and the index
	// projects only the kind (which never changes either), so the index is
	// written once per job: one write unit, at creation. (Jobs created
	// before the shards have the owner's key alone; listings read that
	// partition too.)
	OwnerIndex = "owner"
	// AttentionIndex lists an owner's failed and cancelled jobs: a sparse
	// index whose partition key AttrAttention is set (to the job's
	// AttrListOwner, so sharded alike) by the final write of a failed or
	// cancelled job, and removed when the job is retried. It projects the kind and the status. A failed or
	// cancelled job pays one more write unit; a succeeded one none.
	AttentionIndex = "owner_attention"
	// AttrListOwner, AttrListCreated and AttrAttention are those keys.
	AttrListOwner   = "lo"
	AttrListCreated = "lc"
	AttrAttention   = "ls"

	// QueuedIndex and RunningIndex list an owner's unfinished jobs, newest
	// first, each status its own sparse index: a job is in QueuedIndex
	// (its AttrQueued set) while queued, in RunningIndex (AttrRunning)
	// while running, in neither once finished. "What is running now?"
	// reads only the owner's running jobs, however long its history and
	// however many jobs are queued. Both keys hold the job's
	// AttrListOwner (the owner's key and its list shard), copied from it
	// by the writes that move the job (a claim moves it from one index to
	// the other); the sort key is AttrListCreated. Each projects the kind.
	// A job's life writes them 4 times: in QueuedIndex at creation, out of
	// it and into RunningIndex at the claim, out at the end
	// (docs/evidence/CAPACITY.md).
	QueuedIndex  = "owner_queued"
	RunningIndex = "owner_running"
	AttrQueued   = "uq"
	AttrRunning  = "ur"

	// WaitingIndex lists an owner's queued jobs that wait on something
	// (a concurrency slot, a rate: driver.Record.WaitingOn): its partition
	// key is AttrQueued, its sort key AttrWaitingOn, so a job is in it
	// exactly while it is queued and says what it waits on, with no write
	// of its own to get in or out: the park that sets AttrWaitingOn puts
	// the job in QueuedIndex in the same write, and the claim that takes it
	// out of QueuedIndex takes it out of this one. A job that never waits
	// is never in it (a kind without limits pays nothing); one that waits
	// pays 2 write units a wait (in, out). It projects the kind, for the
	// counts (GET /v1/counts: waiting). Its partitions are QueuedIndex's,
	// with at most their heat.
	WaitingIndex  = "owner_waiting"
	AttrWaitingOn = "wo"

	// KindQueuedIndex holds the queued jobs of kinds that cap their
	// queued jobs (KindOpts.MaxQueued), across owners: its partition key
	// AttrKindCap, set at creation only on such a kind's jobs, is the kind
	// and the job's shard (KindShards), its sort key AttrQueued, so a job
	// is in it exactly while queued (both keys needed), moved in and out
	// by the writes that move it in and out of QueuedIndex. Keys only: a
	// count reads about 110 bytes an entry. A capped kind's job pays 2
	// write units a run (in at creation or a requeue, out at its claim or
	// cancel); at 10,000 such jobs a second each of the 32 partitions takes
	// 625 write units a second. Any other job is never in it.
	KindQueuedIndex = "kind_queued"
	AttrKindCap     = "kc"
	// KindShards is the number of KindQueuedIndex partitions of a kind.
	KindShards = 32

	// TagSlots is how many tags a job may carry (driver.Record.Tags), and
	// TagIndexes the sparse index of each: a job's tags, in the order of
	// their "key=value", go one to each index it needs, as the key
	// attribute TagAttrs names: TagKey of the owner, the tag and the job's
	// list shard (so one tag on 10,000 jobs a second puts 312 write units
	// a second on each of its 32 partitions). The sort key is
	// AttrListCreated and the kind is projected, as in OwnerIndex. Set at
	// creation and never changed, an entry costs one write unit, once; a
	// job without tags is in none. A listing by tag reads the tag's
	// partitions of every index: the tagged jobs, never the others.
	TagSlots = 3
)

// TagIndexes and TagAttrs are the tag indexes and their key attributes,
// one per tag a job may carry.
var (
	TagIndexes = [TagSlots]string{"owner_tag1", "owner_tag2", "owner_tag3"}
	TagAttrs   = [TagSlots]string{"t1", "t2", "t3"}
)

// Other attributes of a job item.
const (
	attrKind       = "kind"
	attrOwner      = "owner"
	attrStatus     = "status"
	attrPayload    = "payload"
	attrResult     = "result"
	attrErrorCode  = "error_code"
	attrAttempt    = "attempt"
	attrToken      = "token"
	attrLease      = "lease_ms"
	attrReqHash    = "req_hash"
	attrDispatches = "dispatches"
	attrCreated    = "created_ms"
	attrUpdated    = "updated_ms"
	attrStarted    = "started_ms"
	attrFinished   = "finished_ms"
	attrRunAt      = "run_at_ms"
	attrLastError  = "last_error"
	attrCancel     = "cancel_requested"
	// attrAfter is the post-outcome steps still pending (a string set).
	attrAfter = "af"
	// attrOutcomes counts the final writes of a job with events or an
	// on-failure follow-up (driver.Outcome.Seq).
	attrOutcomes = "oc"
	// attrAttemptBase is the attempt count at the last resubmit.
	attrAttemptBase = "ab"
	// The last checkpoint (sealed), the continuations, the first start.
	attrCheckpoint    = "cp"
	attrContinuations = "cn"
	attrFirstStarted  = "fs"
	// What a parked job waits on (see driver.Requeue.WaitingOn): also
	// WaitingIndex's sort key.
	attrWaitingOn = AttrWaitingOn
	// A job's parents (a list of ids), the indexes of those counted (a
	// number set), the parent whose failure cancelled it, its dependents
	// (a string set of "id/index"), the job it replays, the schedule it was
	// run by hand of.
	attrParents     = "pa"
	attrParentsDone = "pd"
	attrCancelledBy = "cb"
	attrDependents  = "dp"
	attrReplayOf    = "rp"
	attrManualRunOf = "mr"
	// A job's signals (driver.Signaller): each an attribute of its own,
	// attrSignal and its name (binary, sealed), so the first needs no map
	// to exist; attrSignals counts them, for the bound.
	attrSignal  = "g_"
	attrSignals = "gn"
	// What the job's views show of its durable steps (a JSON string).
	attrStepMarks = "sm"
)

// CreateTableInput returns the table definition for CreateTable: on-demand
// billing, the id key, and the sweep index. TTL is enabled separately (see
// TimeToLiveInput) because CreateTable cannot set it.
func CreateTableInput(table string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(AttrID), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttrSweepShard), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttrSweepAt), AttributeType: types.ScalarAttributeTypeN},
			{AttributeName: aws.String(AttrListOwner), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttrListCreated), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttrAttention), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttrQueued), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttrRunning), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttrWaitingOn), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(AttrKindCap), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(TagAttrs[0]), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(TagAttrs[1]), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(TagAttrs[2]), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(AttrID), KeyType: types.KeyTypeHash},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(SweepIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(AttrSweepShard), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(AttrSweepAt), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}, {
			IndexName: aws.String(OwnerIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(AttrListOwner), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(AttrListCreated), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: OwnerIndexProjection},
		}, {
			IndexName: aws.String(AttentionIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(AttrAttention), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(AttrListCreated), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: AttentionIndexProjection},
		}, unfinishedIndex(QueuedIndex, AttrQueued), unfinishedIndex(RunningIndex, AttrRunning), {
			IndexName: aws.String(WaitingIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(AttrQueued), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(AttrWaitingOn), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: UnfinishedIndexProjection},
		}, {
			IndexName: aws.String(KindQueuedIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(AttrKindCap), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(AttrQueued), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}, tagIndex(0), tagIndex(1), tagIndex(2)},
	}
}

// tagIndex is the index of a job's i-th tag (TagIndexes).
func tagIndex(i int) types.GlobalSecondaryIndex {
	return types.GlobalSecondaryIndex{
		IndexName: aws.String(TagIndexes[i]),
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(TagAttrs[i]), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(AttrListCreated), KeyType: types.KeyTypeRange},
		},
		Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: OwnerIndexProjection},
	}
}

func unfinishedIndex(name, pk string) types.GlobalSecondaryIndex {
	return types.GlobalSecondaryIndex{
		IndexName: aws.String(name),
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(pk), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(AttrListCreated), KeyType: types.KeyTypeRange},
		},
		Projection: &types.Projection{ProjectionType: types.ProjectionTypeInclude, NonKeyAttributes: UnfinishedIndexProjection},
	}
}

// The attributes the listing indexes project besides their keys: only
// what never changes while the entry exists.
var (
	OwnerIndexProjection      = []string{attrKind}
	AttentionIndexProjection  = []string{attrKind, attrStatus}
	UnfinishedIndexProjection = []string{attrKind}
)

// TimeToLiveInput returns the UpdateTimeToLive call that enables TTL on
// AttrExpires.
func TimeToLiveInput(table string) *dynamodb.UpdateTimeToLiveInput {
	return &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(AttrExpires),
			Enabled:       aws.Bool(true),
		},
	}
}
