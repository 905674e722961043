// Package driver is the contract between package jobs and the parts it
// drives: the [Store] that keeps jobs, the [Queue] that carries their
// references to the workers and the [Scheduler] that fires runtime
// schedules. A team codes against package jobs; this package is for whoever
// implements or wraps one of these parts (dynamostore, sqsqueue and
// schedulerapi are the AWS ones; jobstest has an in-memory store and the
// conformance suite every Store must pass).
//
// The types a team also sees (Status, Schedule, BatchCounts, the unfinished
// counts) are defined here and named by package jobs as aliases.
package driver
