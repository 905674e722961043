// Package simulation is a deterministic simulator of the whole job system:
// the real jobs.Service, jobs.Worker and jobs.Sweeper over the in-memory
// store, a simulated SQS with its event source mapping, and a simulated
// EventBridge, driven by clients and faults drawn from one seed.
//
// Each seed runs inside a testing/synctest bubble. Every Store, Queue and
// Bus call of every actor (a function instance, a poller of the event
// source, a client) waits in the scheduler until every goroutine of the
// bubble is blocked; then the seed picks exactly one call to proceed, and
// the fault it gets. Ids, claim tokens and jitter come from seeded
// jobs.Rand values, so a seed replays byte for byte.
//
// The invariants (run.go, tracker.go, world.go) are checked as runs start,
// as final writes land, after each sweep, and when the world is quiet.
// docs/evidence/SIMULATION.md says what is modelled, what is not, how to replay a
// seed, and what the simulator finds.
package simulation
