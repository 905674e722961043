// Package reliability holds the scenarios behind docs/RELIABILITY.md: the
// whole local stack under injected DynamoDB and SQS faults, a worker killed
// with SIGKILL mid-job, and what the system promises about each. `make test`
// runs them at a modest size; `make reliability` runs them at full size and
// rewrites docs/RELIABILITY.md.
package reliability
