// Package jobstest helps test code built on package jobs.
//
//   - [RunStoreTests] is the conformance suite every [jobs.Store] must pass;
//     the DynamoDB store runs it against DynamoDB Local, [MemStore] against
//     memory.
//   - [MemStore] and [MemQueue] are in-memory fakes for users' unit tests.
//   - [Clock] is a fake clock that moves only when told.
package jobstest
