// Package jobstest helps test code built on package jobs.
//
//   - [RunStoreTests] is the conformance suite every [driver.Store] must pass;
//     the DynamoDB store runs it against DynamoDB Local, [MemStore] against
//     memory.
//   - [Runner] is the whole system in memory for a team's tests: enqueue
//     through its Service, run what was enqueued with Work, read the jobs.
//   - [MemStore] and [MemQueue] are in-memory fakes of the store and the
//     queue, for tests of one part.
//   - [Clock] is a fake clock that moves only when told.
package jobstest
