// Package integration holds the tests that run the service, the worker and
// the sweeper together against DynamoDB Local and fauxqs: the lifecycle of a
// job through the HTTP handlers, duplicates, dead workers, a stalled
// DynamoDB, and a failed send after the put.
package integration
