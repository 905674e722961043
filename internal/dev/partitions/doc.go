// Package partitions is a "partition model": an HTTP proxy in front of
// DynamoDB Local that enforces what DynamoDB Local does not, DynamoDB's
// per-partition limits and its transaction conflicts, so tests can prove a
// design free of hot keys (DESIGN.md, guarantee 18).
//
// DynamoDB Local has no partitions: it never throttles a hot key and runs
// transactions one at a time. Real DynamoDB gives each partition key value
// at most about 1,000 write units and 3,000 read units per second, whatever
// the table's capacity mode; a global secondary index's partition key
// values too, and a throttled index throttles the table's writes (the
// table write is refused). Splitting a partition for heat cannot help a key
// whose sort key only grows. Transactions that touch one item at the same
// time cancel each other.
//
// # What the model does
//
// It sits where DynamoDB would (the SDK's BaseEndpoint, or the local
// stack's Config.DynamoDBEndpoint: the Lambda functions are processes of
// their own, so it works at the HTTP level, JSON protocol) and, for the
// table it is given (Config.Table, the CreateTableInput the store
// defines, so it follows the schema as it changes):
//
//   - Writes (PutItem, UpdateItem, DeleteItem, each request of
//     BatchWriteItem, each item of TransactWriteItems) are charged before
//     they are forwarded: the table's partition (1 unit per KB of the
//     larger of the item's old and new sizes) and every index partition
//     whose entry appears, disappears, moves (the old partition and the new
//     one) or changes in place because a projected attribute changed
//     (1 unit per KB of the entry; a KEYS_ONLY index only when its keys
//     change); twice that in a transaction. A key whose bucket lacks the
//     units refuses the whole write, as DynamoDB does: 400
//     ProvisionedThroughputExceededException (with ThrottlingReasons), which
//     the SDK retries; inside a transaction a TransactionCanceledException
//     with reason ThrottlingError on the item that was throttled and None
//     on the others; a BatchWriteItem returns the refused requests in
//     UnprocessedItems. A failed condition keeps the table's units and gives
//     back the index units (nothing moved).
//   - Reads (GetItem, each key of BatchGetItem, Query on the table or an
//     index) are refused before they are forwarded when the key's bucket is
//     empty, and paid after the answer by what they read (1 unit per 4 KB
//     strongly consistent, half eventually; a Query at least half a unit).
//     BatchGetItem returns refused keys in UnprocessedKeys.
//   - TransactWriteItems are held in flight for DynamoDB Local's time plus
//     Config.TransactionHold (DefaultTransactionHold, 10 ms: what AWS takes
//     more than DynamoDB Local); another transaction touching one of their
//     items meanwhile is cancelled with reason TransactionConflict, and a
//     plain write of such an item gets TransactionConflictException, as
//     DynamoDB answers.
//
// Each key's budget is a token bucket of Config.Limits (Scaled(k) for a run
// at k x 10,000 jobs per second) holding at most one window of units. A
// window is one second of the service: at scale k the run does in 1/k
// seconds what the service does in one at full scale, so the window is 1/k
// seconds of the model's clock and a bucket holds a partition's whole
// second, 1,000 write or 3,000 read units, refilled at k times that. (With
// a one-second window instead, a key that a 32-way shard spreads evenly
// would be throttled by the noise of small numbers: a shard that averages
// one write a second sees eight in some second.) The model records, per
// key, the units it accepted in each window (the peak matters: it is the
// key's units per second at full scale), the total, and the requests it
// refused; Report ranks the keys and classes (Config.Classify);
// Report.Markdown renders it.
//
// # How it knows an item's index keys
//
// To charge an index before the write, the model must know the item's old
// index keys and its new ones. It keeps a shadow of every item of the table
// it has seen: from PutItem and BatchWriteItem items, from the items
// UpdateItem returns (it asks ReturnValues ALL_NEW of a caller that asked
// NONE, and removes them from the answer), from the ALL_OLD items of failed
// conditions, and from the whole items reads return. An item it has not
// seen is read once with a GetItem of its own, charged to nobody, unless
// the table was created through the model (then an unseen item does not
// exist). The new item is the old one with the update expression applied,
// evaluated as DynamoDB does (see the grammar in expr.go: SET with =, +,
// -, if_not_exists and list_append, REMOVE, ADD, DELETE); UpdateItem's
// answer then checks the prediction, and a difference is an error in the
// report. Nested paths, AttributeUpdates, key conditions without the
// partition key's equality and anything else the model cannot charge
// exactly are refused with a ValidationException and listed as errors
// (ErrUnsupported): the model fails loudly, it never guesses. The units it
// charges are compared with DynamoDB Local's own ConsumedCapacity on every
// plain and batch write (Report.Mismatches); not on transactions, whose
// ConsumedCapacity DynamoDB Local 3.3.1 does not add up over the items.
//
// # What it does not model
//
// Scan, TransactGetItems and PartiQL are forwarded uncharged (counted in
// Report.Unmodelled); local secondary indexes, item collections, the
// table-level and account-level limits, adaptive capacity and the time a
// new partition takes to split are not modelled. Writes that bypass the
// model (another endpoint) leave its shadow stale: give every writer the
// model's endpoint.
package partitions
