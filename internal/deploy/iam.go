package deploy

import (
	"maps"
	"slices"
	"strings"
)

// Resource names a resource of the deployment a role acts on, as
// internal/dev/iamcalls records calls ("table", "table/index/NAME", "queue",
// "dlq/LANE", ...) where it names one resource; the construct (jobsinfra's
// grants.go) maps each to the ARNs it stands for, and leaves out a grant
// whose resource the deployment does not have (the key without
// Config.CustomerManagedKey, X-Ray without tracing).
type Resource string

// The deployment's resources.
const (
	// Table is the jobs table.
	Table Resource = "table"
	// Queues are every lane's queue (a job goes to its lane's, whoever
	// sends it).
	Queues Resource = "queues"
	// DefaultQueue is the default lane's queue: Scheduler's fires.
	DefaultQueue Resource = "queue"
	// OwnQueue is the queue of a worker's own lane, its event source.
	OwnQueue Resource = "queue/own"
	// DLQs are every lane's dead-letter queue.
	DLQs Resource = "dlqs"
	// ScheduleDLQ is the dead-letter queue of the schedules' fires.
	ScheduleDLQ Resource = "scheduledlq"
	// Bus is the job events' bus.
	Bus Resource = "bus"
	// RuntimeSchedules are the schedules of the runtime group (the
	// callers'), whatever their names.
	RuntimeSchedules Resource = "schedule/runtime/*"
	// SchedulerRole is the role Scheduler sends fires with.
	SchedulerRole Resource = "role/scheduler"
	// PayloadSecret and PageSecret are the secrets of the payload key ring
	// and of the page token key.
	PayloadSecret Resource = "secret/payload"
	PageSecret    Resource = "secret/page"
	// Key is the customer-managed key (Config.CustomerManagedKey).
	Key Resource = "key"
	// Parts are the objects of the payloads and results kept in the
	// bucket (parts/*), in a deployment that has it (jobsinfra's
	// JobsProps.LargeParts).
	Parts Resource = "bucket/parts"
	// Uploads are the objects and multipart uploads of the callers'
	// uploads in that bucket (uploads/*), until a worker validates them.
	Uploads Resource = "bucket/uploads"
	// Bucket is that bucket itself (s3:ListBucket).
	Bucket Resource = "bucket"
	// OwnLogs are the log streams of the function's own log group.
	OwnLogs Resource = "logs/own"
	// Anything is "*", for actions that take no resource (X-Ray's).
	Anything Resource = "*"
)

// The table's indexes a role queries, as dynamostore names them (a test
// there holds them to dynamostore's definitions).
const (
	SweepIndex      Resource = "table/index/sweep"
	OwnerIndex      Resource = "table/index/owner"
	AttentionIndex  Resource = "table/index/owner_attention"
	QueuedIndex     Resource = "table/index/owner_queued"
	RunningIndex    Resource = "table/index/owner_running"
	WaitingIndex    Resource = "table/index/owner_waiting"
	KindQueuedIndex Resource = "table/index/kind_queued"
	TagIndex1       Resource = "table/index/owner_tag1"
	TagIndex2       Resource = "table/index/owner_tag2"
	TagIndex3       Resource = "table/index/owner_tag3"
)

// IndexName is the index a resource names, if it is one of the table's.
func (r Resource) IndexName() (string, bool) {
	return strings.CutPrefix(string(r), "table/index/")
}

// Condition narrows a grant (each key a StringEquals). Zero: none.
type Condition struct {
	// Via is the AWS service that calls KMS with the role's identity for
	// it (kms:ViaService: "dynamodb", "sqs" or "secretsmanager", in the
	// stack's region), for this account's calls only (kms:CallerAccount).
	Via string
	// PassedTo is the service a role may be passed to (iam:PassedToService).
	PassedTo string
}

// Who adds a grant's statement when it is not the construct: the
// construct checks such statements against the descriptor and adds none.
const (
	// ByEventSource: CDK's SQS event source, which grants the worker's
	// role what Lambda's pollers do with it.
	ByEventSource = "the SQS event source"
	// ByTracing: Lambda's active tracing (Config.Tracing).
	ByTracing = "active tracing"
)

// Grant is some actions a role needs on one resource, under a condition.
type Grant struct {
	Actions   []string
	Resource  Resource
	Condition Condition
	// By is who adds it, when not the construct (ByEventSource,
	// ByTracing).
	By string
	// Why names the calls that need it.
	Why string
}

// Triple is one action on one resource under a condition.
type Triple struct {
	Action    string
	Resource  Resource
	Condition Condition
}

// The roles besides the functions' (whose names are the functions').
const (
	// Scheduler is the role EventBridge Scheduler sends fires with.
	Scheduler = "scheduler"
	// Reader is a role given jobsinfra's GrantReadJobs.
	Reader = "reader"
)

// The grants several roles share.
var (
	// logs: every function writes its own log group, and with tracing on,
	// to X-Ray (whose actions take no resource).
	logs = []Grant{
		{Actions: []string{"logs:CreateLogStream", "logs:PutLogEvents"}, Resource: OwnLogs, Why: "its own logs (not the managed AWSLambdaBasicExecutionRole)"},
		{Actions: []string{"xray:PutTraceSegments", "xray:PutTelemetryRecords"}, Resource: Anything, By: ByTracing, Why: "traces"},
	}
	// The key's uses through each service, with Config.CustomerManagedKey.
	keyTableWrite = Grant{Actions: []string{"kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"}, Resource: Key, Condition: Condition{Via: "dynamodb"}, Why: "table items, written and read"}
	keyTableRead  = Grant{Actions: []string{"kms:Decrypt"}, Resource: Key, Condition: Condition{Via: "dynamodb"}, Why: "table items, read"}
	keySend       = Grant{Actions: []string{"kms:Decrypt", "kms:GenerateDataKey"}, Resource: Key, Condition: Condition{Via: "sqs"}, Why: "messages sent to (and received from) an encrypted queue"}
	keySecret     = Grant{Actions: []string{"kms:Decrypt"}, Resource: Key, Condition: Condition{Via: "secretsmanager"}, Why: "a secret's value"}
	// send: a job goes to its lane's queue, whoever sends it.
	send = Grant{Actions: []string{"sqs:SendMessage"}, Resource: Queues, Why: "jobs sent to their lane's queue (each sender is among the queues' known senders)"}
	// listing: the listing indexes (the jobs they name are read from the
	// table), and the page token key that signs their pages.
	listing = []Grant{
		{Actions: []string{"dynamodb:Query"}, Resource: OwnerIndex, Why: "the caller's jobs, listed"},
		{Actions: []string{"dynamodb:Query"}, Resource: AttentionIndex, Why: "the caller's jobs that need attention"},
		{Actions: []string{"dynamodb:Query"}, Resource: QueuedIndex, Why: "the caller's queued jobs"},
		{Actions: []string{"dynamodb:Query"}, Resource: RunningIndex, Why: "the caller's running jobs"},
		{Actions: []string{"dynamodb:Query"}, Resource: WaitingIndex, Why: "the caller's waiting jobs"},
		{Actions: []string{"dynamodb:Query"}, Resource: TagIndex1, Why: "the caller's jobs of a tag (a job's first)"},
		{Actions: []string{"dynamodb:Query"}, Resource: TagIndex2, Why: "the caller's jobs of a tag (a job's second)"},
		{Actions: []string{"dynamodb:Query"}, Resource: TagIndex3, Why: "the caller's jobs of a tag (a job's third)"},
		{Actions: []string{"secretsmanager:GetSecretValue"}, Resource: PageSecret, Why: "the page token key, at cold start"},
	}
	// The parts kept as objects: written (a PUT, in parts past 8 MiB,
	// tagged with how long it lasts: s3:PutObjectTagging; a copy onto
	// itself to last longer: both, and s3:GetObject), read, and with a
	// customer-managed key, its data keys through S3.
	partsWrite = Grant{Actions: []string{"s3:PutObject", "s3:PutObjectTagging", "s3:AbortMultipartUpload"}, Resource: Parts, Why: "payloads and results kept as objects, written or kept longer (each writer is among the bucket's known users)"}
	partsRead  = Grant{Actions: []string{"s3:GetObject"}, Resource: Parts, Why: "payloads and results kept as objects, read (and a result's presigned link, which acts as this role)"}
	// Without s3:ListBucket, S3 answers a read of a missing object with
	// 403 AccessDenied instead of 404 NoSuchKey, and a job whose object
	// is gone would wait for it for ever instead of failing
	// payload_unreadable.
	partsList    = Grant{Actions: []string{"s3:ListBucket"}, Resource: Bucket, Why: "a missing object answered as missing (404), not as refused (403)"}
	keyParts     = Grant{Actions: []string{"kms:Decrypt", "kms:GenerateDataKey"}, Resource: Key, Condition: Condition{Via: "s3"}, Why: "objects written and read in the encrypted bucket"}
	keyPartsRead = Grant{Actions: []string{"kms:Decrypt"}, Resource: Key, Condition: Condition{Via: "s3"}, Why: "objects read in the encrypted bucket"}
	// Uploads: begun by the enqueue function (CreateMultipartUpload is
	// s3:PutObject, and each part's presigned PUT acts as its role), and
	// aborted when the upload's job was not stored; completed, read and
	// deleted by the worker that validates them.
	uploadsBegin    = Grant{Actions: []string{"s3:PutObject", "s3:AbortMultipartUpload"}, Resource: Uploads, Why: "uploads begun, and their parts' presigned PUTs (which act as this role)"}
	uploadsValidate = Grant{Actions: []string{"s3:PutObject", "s3:GetObject", "s3:DeleteObject", "s3:AbortMultipartUpload"}, Resource: Uploads, Why: "uploads completed, read, validated and deleted"}
	// putEvents: the functions that write outcomes announce them.
	putEvents = Grant{Actions: []string{"events:PutEvents"}, Resource: Bus, Why: "job events (each is among the bus's publishers)"}
)

// roleGrants are the actions each role of the deployment needs: every
// function's (a lane's worker has the worker's, on its own lane's queue),
// Scheduler's role's, and GrantReadJobs'. jobsinfra derives every one of
// these roles' policies from here, and jobsinfra's GrantEnqueue gives a
// team's function the enqueue function's.
var roleGrants = map[string][]Grant{
	Enqueue: {
		// A job is one conditional put; a batch is created (a put), opened
		// (an update), and on an idempotent retry read (the batch, then its
		// shards' counts at once).
		{Actions: []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:GetItem", "dynamodb:BatchGetItem"}, Resource: Table, Why: "jobs and batches, created"},
		{Actions: []string{"dynamodb:Query"}, Resource: KindQueuedIndex, Why: "a kind's queued jobs, counted (KindOpts.MaxQueued)"},
		{Actions: []string{"dynamodb:Query"}, Resource: QueuedIndex, Why: "an owner's queued jobs, counted (KindOpts.MaxQueuedPerOwner)"},
		send,
		{Actions: []string{"secretsmanager:GetSecretValue"}, Resource: PayloadSecret, Why: "the payload key ring, at cold start"},
		keyTableWrite, keySend, keySecret,
		partsWrite, partsRead, partsList, keyParts, uploadsBegin,
	},
	GetJob: join(listing, []Grant{
		{Actions: []string{"dynamodb:GetItem", "dynamodb:BatchGetItem"}, Resource: Table, Why: "a job, a batch, the jobs a listing names"},
		keyTableRead, keySecret,
		partsRead, partsList, keyPartsRead,
	}),
	WaitJob: {
		// Reads the job every poll; takes and frees a slot of its owner's
		// open waits (an update of that owner's slot item).
		{Actions: []string{"dynamodb:GetItem", "dynamodb:UpdateItem"}, Resource: Table, Why: "a job, read while it is waited on; the owner's open waits, leased"},
		keyTableWrite,
		partsRead, partsList, keyPartsRead,
	},
	Cancel: join(listing, []Grant{
		// Cancel, retry, and a batch's completion job, created when the
		// cancel of its last job ends it.
		{Actions: []string{"dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:PutItem", "dynamodb:BatchGetItem"}, Resource: Table, Why: "cancel, retry, bulk actions, a batch's end"},
		// Retries and redriven dead letters go back to the queues: no
		// person needs to send to a queue.
		send,
		{Actions: []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes"}, Resource: DLQs, Why: "the operators' dead-letter routes: peek, redrive, delete"},
		{Actions: []string{"sqs:GetQueueAttributes"}, Resource: Queues, Why: "each queue's depth"},
		putEvents,
		keyTableWrite, keySend, keySecret,
		partsWrite, partsRead, partsList, keyParts,
	}),
	Worker: {
		// Claims, publishes and finishes (UpdateItem), reads a job it may
		// interrupt, creates jobs from foreign messages and handlers'
		// children (PutItem), and
		// sums a batch's shards' counts (BatchGetItem).
		{Actions: []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:BatchGetItem"}, Resource: Table, Why: "claims, results, outcomes, routed jobs, a batch's end"},
		// Retries, early deliveries and jobs of another lane (a foreign
		// message's, a fire's, a handler's child), with a delay.
		send,
		// A handler's children (Kind.EnqueueChild) obey their kinds' caps.
		{Actions: []string{"dynamodb:Query"}, Resource: KindQueuedIndex, Why: "a kind's queued jobs, counted for a handler's child (KindOpts.MaxQueued)"},
		{Actions: []string{"dynamodb:Query"}, Resource: QueuedIndex, Why: "an owner's queued jobs, counted for a handler's child (KindOpts.MaxQueuedPerOwner)"},
		{Actions: []string{"secretsmanager:GetSecretValue"}, Resource: PayloadSecret, Why: "the payload key ring, at cold start"},
		putEvents,
		keyTableWrite, keySend, keySecret,
		partsWrite, partsRead, partsList, keyParts, uploadsValidate,
		{Actions: []string{"sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueUrl", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}, Resource: OwnQueue, By: ByEventSource, Why: "its lane's messages, received and deleted by Lambda's pollers"},
		{Actions: []string{"kms:Decrypt"}, Resource: Key, By: ByEventSource, Why: "its lane's messages, with a customer-managed key (bounded by the key policy's OnlyThroughItsServices)"},
	},
	Sweeper: {
		{Actions: []string{"dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:PutItem", "dynamodb:BatchGetItem"}, Resource: Table, Why: "jobs settled, a batch's end and its completion job"},
		{Actions: []string{"dynamodb:Query"}, Resource: SweepIndex, Why: "the jobs due for a look"},
		send,
		// No GetQueueAttributes: it reads the messages, not the depths.
		{Actions: []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility"}, Resource: DLQs, Why: "each lane's dead letters: job references settled and deleted, the rest released at once"},
		putEvents,
		keyTableWrite, keySend,
		partsWrite, partsRead, partsList, keyParts,
	},
	Schedules: {
		// Changes runtime schedules only, in their own group; reads one to
		// learn what a call whose answer was lost did, and updates one
		// that holds another definition than the stored one.
		{Actions: []string{"scheduler:CreateSchedule", "scheduler:GetSchedule", "scheduler:UpdateSchedule", "scheduler:DeleteSchedule"}, Resource: RuntimeSchedules, Why: "the callers' schedules"},
		{Actions: []string{"iam:PassRole"}, Resource: SchedulerRole, Condition: Condition{PassedTo: "scheduler.amazonaws.com"}, Why: "schedules send with Scheduler's role, and no other"},
		{Actions: []string{"dynamodb:GetItem", "dynamodb:UpdateItem"}, Resource: Table, Why: "each owner's schedules, recorded"},
		keyTableWrite,
	},
	Scheduler: {
		// Fires go to the default lane's queue; the worker sends each job
		// to its own lane.
		{Actions: []string{"sqs:SendMessage"}, Resource: DefaultQueue, Why: "fires (Scheduler's role is among the queue's known senders)"},
		{Actions: []string{"sqs:SendMessage"}, Resource: ScheduleDLQ, Why: "the fires it could not deliver"},
		keySend,
	},
	Reader: {
		// Not the table's indexes.
		{Actions: []string{"dynamodb:GetItem"}, Resource: Table, Why: "jobs and batches, read straight from the table"},
		keyTableRead,
	},
}

func join(lists ...[]Grant) []Grant { return slices.Concat(lists...) }

// Grants returns the grants of role: a function's name, Scheduler or
// Reader; nil for another name.
func Grants(role string) []Grant {
	list := roleGrants[role]
	if slices.Contains(FunctionNames(), role) {
		list = append(slices.Clone(list), logs...)
	}
	return list
}

// Roles are the roles Grants knows, sorted.
func Roles() []string { return slices.Sorted(maps.Keys(roleGrants)) }

// Triples are role's grants, one action each.
func Triples(role string) []Triple {
	var out []Triple
	for _, g := range Grants(role) {
		for _, a := range g.Actions {
			out = append(out, Triple{Action: a, Resource: g.Resource, Condition: g.Condition})
		}
	}
	return out
}

// Covers reports whether the grant's resource stands for the resource a
// call names (as internal/dev/iamcalls records it) when made by a role of
// lane ("" for the default lane, and for every role but a lane's worker).
func (r Resource) Covers(lane, resource string) bool {
	switch r {
	case Queues:
		return resource == "queue" || strings.HasPrefix(resource, "queue/")
	case DLQs:
		return resource == "dlq" || strings.HasPrefix(resource, "dlq/")
	case OwnQueue:
		if lane == "" {
			return resource == "queue"
		}
		return resource == "queue/"+lane
	}
	return string(r) == resource
}

// Allows reports whether the grant allows action on resource (as
// internal/dev/iamcalls records it) for a role of lane, with the request's
// context keys: each of its condition's keys must hold.
func (g Grant) Allows(lane, action, resource string, context map[string]string) bool {
	if !slices.Contains(g.Actions, action) || !g.Resource.Covers(lane, resource) {
		return false
	}
	if g.Condition.PassedTo != "" && context["iam:PassedToService"] != g.Condition.PassedTo {
		return false
	}
	if g.Condition.Via != "" && !strings.HasPrefix(context["kms:ViaService"], g.Condition.Via+".") {
		return false
	}
	return true
}
