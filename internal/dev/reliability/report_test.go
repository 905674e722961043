package reliability_test

const reportHeader = `# Reliability

What the system promises when AWS misbehaves, a worker dies, or callers send
garbage, and what was measured. The table is written by

` + "```sh\nmake reliability   # about 6 minutes; rewrites this file and KEY_HEAT.md\n```" + `

which runs ` + "`internal/dev/reliability`" + ` at full size against the whole local stack (the
functions' bootstraps under the Lambda Runtime Interface Emulator, DynamoDB
Local and fauxqs behind fault-injecting proxies, the local SQS event source and
the sweeper on a schedule). ` + "`make test`" + ` runs the same scenarios at a smaller
size. "Lost" is a job that was accepted (202) and cannot be read; "stuck" is a
job not final when the bound had passed.

`

const reportFooter = `
## The bounds

A job is settled by whichever comes first: its worker's final write; the
redelivery of its message after the visibility timeout, which interrupts a
run whose lease ended; or the sweeper, which looks at every unfinished job
once its sweep time (creation + dispatch grace, or its lease end) has passed
and then every sweep interval. With injected faults a message can be lost at
each step, so the bound above allows two such rounds. Retries add their
backoff.

The dead-worker bound is the queue's visibility timeout: worker timeout x2 +
the event source's batching window (` + "`sqsqueue.SpecFor`" + `, the one
definition the construct and the local stack build their queues from). A
worker that dies mid-run leaves its message in flight; SQS makes it visible
again after that timeout, and the redelivery finds the run's lease ended (a
lease ends at the worker's deadline) and settles the job, with or without the
sweeper. With the presets' timeouts that is about 2 minutes in dev (a 60 s
worker, no batching window: the descriptor in ` + "`internal/deploy`" + `) and 4 in
prod (` + "`jobsinfra.ProdConfig`" + `'s 120 s worker, no window); a lane's follows
its own worker's timeout and window. A message is received at most 10 times
before it moves to the dead-letter queue, and a queue keeps a message 14
days (SQS's maximum).

## Dead letters

A message SQS moved to its lane's dead-letter queue (after ` + "`" + `maxReceiveCount` + "`" + `
receives) may be the last thing naming its job: a job whose message is its
safety net holds no sweep entry. So each sweep drains every lane's
dead-letter queue, up to ` + "`" + `Config.DeadLettersPerLane` + "`" + ` (100) messages per
lane, and gives each job reference the sweeper's own decision for its job:
a running job whose lease ended is retried, failed ` + "`" + `interrupted` + "`" + ` or
cancelled (as its owner asked); one whose lease is live gets a fresh message
delayed to the lease's end (at most 15 minutes); a queued job is sent again
as the delivery rule says (one waiting on its parents is theirs to send); a
final job's pending post-outcome steps run; a reference to a final job, or
to none, is dropped. The dead letter is deleted once that decision landed; a
dependency that fails leaves it for the next sweep. Any other message (a
foreign message no route accepted, a schedule's fire, an envelope) stays,
visible again at once, for the operators' redrive routes
([OPERATIONS.md](../operations/OPERATIONS.md#redriving-dead-letters)); such messages count
against the per-lane bound, so a lane whose dead-letter queue holds more
than 100 of them may keep job references behind them until they are
cleared. Each settled dead letter counts ` + "`" + `DeadLettersSettled` + "`" + ` by kind and
lane, and the sweep's report says how many it settled and left (tests:
` + "`" + `jobs` + "`" + ` ` + "`" + `TestSweeperSettlesEveryLanesDeadLetters` + "`" + `,
` + "`" + `TestSweeperLeavesADeadLetterOnATransientError` + "`" + `,
` + "`" + `TestNeverClaimedDeadLetterIsResentAndRuns` + "`" + `; ` + "`" + `sqsqueue` + "`" + `
` + "`" + `TestSweepDrainsTheDeadLettersOfSQS` + "`" + ` on fauxqs; the simulator drains its
dead-letter queues at every sweep).

## Payload items

A payload, a checkpoint or a final result too large for its job's item at
one write unit ([CAPACITY.md](CAPACITY.md#payloads-of-any-size)) goes into
an item of its own, keyed by the job's id and its hash, with a TTL, written
before the job's write that names it (` + "`" + `driver.Part` + "`" + `; ` + "`" + `Store.ReadPart` + "`" + ` and
` + "`" + `KeepPart` + "`" + ` read and extend it, so a store wrapper that embeds
` + "`" + `driver.Store` + "`" + ` forwards them). A payload item is never written again but by
the rule below, and a create that loses to a live job with the same id
never shortens its TTL (its put is conditional on that). The rule
(` + "`" + `payloadKeep` + "`" + `, one place in package jobs): an item lasts 16 days (the
queues' 14-day message retention, and two days of slack) and the job's retention past
the job's run time; a job that waits on its parents adds a year
(` + "`" + `MaxDelay` + "`" + `, the furthest a parent can be due). Each claim reads the
payload's and the checkpoint's items and extends one that falls more than a
day short of that; so does a retry or a wait due more than a day ahead
(for a run the sweeper settles, whose claim it did not see, with a
conditional write). So a queued, delayed, parked, retried or continuing job
always finds its payload and its checkpoint, and a finished job's payload
outlasts it (its GET and its replay read it). A final result's item lasts
exactly as long as its job (a stale run's put of the same result never
shortens it); a retry from the API removes the job's name of it; every
view of the job (GET, a listing, the answer to a repeated enqueue, a
cancel) reads it. An item orphaned by a write that failed after it expires by its TTL.

A claim that cannot read an item (a throttle, or an item not there yet, as
on a table replica that has the job first) puts the job back to wait
(` + "`" + `waiting_on` + "`" + ` "store", no attempt spent); an item still missing 30
minutes after the job's creation fails the job with ` + "`" + `payload_unreadable` + "`" + `
(a dependent released more than a year after it was enqueued; never
silently, and never as a run that starts over without its checkpoint).
DynamoDB deletes expired items within days, not at once: reads treat an
item past its TTL as gone. The simulator keeps payloads, checkpoints and
results apart in two seeds of three, makes one in three or ten of their
payload reads in a job's first minute find nothing, and checks at
quiescence that no job lost an item, that each outlasts its job, and that
no job failed for one; the conformance suite (` + "`" + `jobstest.RunStoreTests` + "`" + `)
holds DynamoDB Local and the in-memory store to the same. The simulator
runs minutes, not the 16-day horizon: the extensions themselves are shown
by ` + "`" + `jobs` + "`" + ` tests on a fake clock (` + "`" + `TestPayloadOutlivesALongWait` + "`" + `,
` + "`" + `TestAnInterruptedRunRetriedFarAheadKeepsItsPayload` + "`" + `).

## Hot keys

DynamoDB Local has no partitions, so the scale scenario puts the partition
model (` + "`internal/dev/partitions`" + `) between the stack and it: each partition key
value of the table and of its indexes gets its share of a partition (1,000
write and 3,000 read units per second, scaled by k = the machine's rate /
10,000 jobs per second), a throttled index refuses the table write, and
transactions touching one item at the same time cancel each other. A
throttled request in that run is a key that one owner at 10,000 jobs per
second would overload. [KEY_HEAT.md](KEY_HEAT.md) ranks the keys and classes
of keys by heat, scaled to 10,000 jobs per second, with the highest rate one
owner sustains before each class's hottest key reaches its partition's limit.

## Other scenarios (tests in ` + "`make test`" + `)

| scenario | test | shown |
|---|---|---|
| the same message k times, in one batch and concurrently | ` + "`TestWorkerDuplicatesRunOnce`" + ` (5 copies in one batch + a redelivery), ` + "`TestDuplicateDeliveryRunsHandlerOnce`" + ` (fauxqs), ` + "`TestForeignMessagesBecomeJobs`" + ` | the handler runs once; duplicates are acknowledged, none reach the DLQ |
| DynamoDB stalls during the final write | ` + "`TestFinalWriteAgainstStalledDynamoDB`" + ` (a TCP proxy that stops forwarding) | the worker returns 2.4 s before its Lambda deadline with the message listed; the job stays running with its token, nothing half-written; redelivery or the sweeper settles it |
| a handler ignoring its deadline | ` + "`TestHandlerIgnoringContextTimesOut`" + `, ` + "`TestWorkerAbandonsHandlerAtDeadline`" + ` | ` + "`timed_out`" + ` before the deadline |
| a worker killed between a job's final write and its event's send | ` + "`TestEventSentAfterWorkerKilledBeforeTheSend`" + ` (local stack, ` + "`" + `JOBS_EVENTS=all` + "`" + `: the local bus holds the worker's ` + "`" + `PutEvents` + "`" + `, the worker gets SIGKILL, the request is dropped unanswered) | the job is final with its event step pending; the next delivery of its message (its net) sends it once, as ` + "`" + `<job_id>/1` + "`" + `; another delivery and a sweep send nothing more |
| two sweepers overlapping a late worker | ` + "`TestOverlappingSweepersAndLateWorker`" + ` (memory), ` + "`OverlappingInterruptsOneWinner`" + ` (conformance suite, DynamoDB Local) | each job ends in exactly one final state |
| bad input | ` + "`TestBadRequests`" + ` (invalid UTF-8, 10 MB body, deep nesting, duplicate keys, huge numbers, null payload, wrong or missing content type, over-long idempotency keys), ` + "`TestOwnerIsolation`" + ` (bad ids) | 4xx problem+json, never 5xx, never a panic, nothing stored |
| fuzzing | ` + "`FuzzDecodePayload`, `FuzzEnqueue`, `FuzzRouteForeignMessage`" + ` (` + "`make fuzz`" + `; CI runs each for 30,000 executions) | no panic, no 5xx, nothing accepted that the strict decoder refuses |
| secrets | ` + "`TestFailuresAreCodesAndSecretsLeakNowhere`" + ` (local stack), ` + "`TestWorkerFailureCodes`" + ` | an ` + "`example.fail`" + ` secret appears in no log line, API answer or stored item |
| owner isolation | ` + "`TestOwnerIsolation`" + ` | another owner's job is the same 404 body as an unknown or malformed id, after the same single read |
| dependencies | ` + "`make vulncheck`" + ` (CI) | govulncheck against an offline copy of the Go vulnerability database |
`
