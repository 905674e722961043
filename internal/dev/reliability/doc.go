// Package reliability holds the scenarios behind docs/evidence/RELIABILITY.md: the
// whole local stack under injected DynamoDB and SQS faults, a worker killed
// with SIGKILL mid-job or between a job's final write and its event's
// send, one owner at a scaled 10,000 jobs a second behind
// the partition model (package partitions: DynamoDB's per-key limits and
// transaction conflicts, which DynamoDB Local lacks), and what the system
// promises about each. `make test` runs them at a modest size; `make
// reliability` runs them at full size and rewrites docs/evidence/RELIABILITY.md and
// docs/evidence/KEY_HEAT.md.
package reliability
