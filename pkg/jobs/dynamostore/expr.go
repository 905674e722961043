package dynamostore

import (
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// expr writes one UpdateItem's update and condition expressions for a
// job's own writes (its claim, partial results, heartbeats, checkpoints,
// final write, requeue, the cancel of a queued job, a reschedule, a
// resubmit). The SDK's expression.Builder, which the store's other writes
// use, builds a tree and marshals each value by reflection: on the
// worker's path that was a fifth of its CPU per job, as much as the rest of
// the worker's own bookkeeping (BenchmarkOverhead's profile;
// BenchmarkClaimExpression compares the two on the claim, and
// docs/evidence/BENCHMARKS.md states it). Here every
// attribute name is a placeholder (#n0, #n1, ...) and every value an
// AttributeValue given as it is sent (:v0, :v1, ...), so no name can
// collide with a reserved word and nothing is reflected. Conditions are
// joined with AND, each in parentheses.
type expr struct {
	set, remove, add, cond []string
	names                  map[string]string
	values                 map[string]types.AttributeValue
	aliases                map[string]string
}

func newExpr() *expr {
	return &expr{names: map[string]string{}, values: map[string]types.AttributeValue{}, aliases: map[string]string{}}
}

// n is the placeholder of attribute name.
func (e *expr) n(name string) string {
	if p, ok := e.aliases[name]; ok {
		return p
	}
	p := "#n" + strconv.Itoa(len(e.aliases))
	e.aliases[name] = p
	e.names[p] = name
	return p
}

// v is the placeholder of value v.
func (e *expr) v(v types.AttributeValue) string {
	p := ":v" + strconv.Itoa(len(e.values))
	e.values[p] = v
	return p
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
func (e *expr) vs(s string) string       { return e.v(str(s)) }
func (e *expr) vn(n int64) string        { return e.v(num(n)) }
func (e *expr) setTo(name, value string) { e.set = append(e.set, e.n(name)+" = "+value) }
func (e *expr) del(names ...string) {
	for _, name := range names {
		e.remove = append(e.remove, e.n(name))
	}
}
func (e *expr) when(c string) { e.cond = append(e.cond, c) }

// addTo adds n to the number attribute name (ADD).
func (e *expr) addTo(name string, n int64) { e.add = append(e.add, e.n(name)+" "+e.vn(n)) }

// notExists is attribute_not_exists(name).
func (e *expr) notExists(name string) string { return "attribute_not_exists(" + e.n(name) + ")" }

// statusIs is the condition that the job's status is st.
func (e *expr) statusIs(st jobs.Status) string { return e.n(attrStatus) + " = " + e.vs(string(st)) }

// leaseEndedBy adds the condition that the run's lease ended by t (ms).
func (e *expr) leaseEndedBy(t int64) { e.when(e.n(attrLease) + " <= " + e.vn(t)) }

// leaseForward sets the run's lease to t (ms), on the condition that it
// holds none later (see Store.leaseWrite).
func (e *expr) leaseForward(t int64) {
	l := e.vn(t)
	e.setTo(attrLease, l)
	e.when(e.notExists(attrLease) + " OR " + e.n(attrLease) + " <= " + l)
}

// ifNotExists is if_not_exists(name, value).
func (e *expr) ifNotExists(name, value string) string {
	return "if_not_exists(" + e.n(name) + ", " + value + ")"
}

// runningUnder is the condition runningUnder builds for the SDK's builder.
func (e *expr) runningUnder(token string) {
	e.when(e.statusIs(jobs.StatusRunning))
	e.when(e.n(attrToken) + " = " + e.vs(token))
}

// update and condition are the expressions written.
func (e *expr) update() *string {
	var b strings.Builder
	for _, part := range []struct {
		verb  string
		items []string
	}{{"SET ", e.set}, {"REMOVE ", e.remove}, {"ADD ", e.add}} {
		if len(part.items) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(part.verb)
		b.WriteString(strings.Join(part.items, ", "))
	}
	s := b.String()
	return &s
}

func (e *expr) condition() *string {
	if len(e.cond) == 0 {
		return nil
	}
	s := "(" + strings.Join(e.cond, ") AND (") + ")"
	return &s
}

// notCancelled adds "and no cancel was requested".
func (e *expr) notCancelled() { e.when(e.notExists(attrCancel)) }

// moveUnfinished puts the job in the unfinished index keyed by to (its
// key copied from AttrListOwner; "-", never listed, for a job stored
// without an owner) and out of the one keyed by from.
func (e *expr) moveUnfinished(to, from string) {
	e.setTo(to, e.ifNotExists(AttrListOwner, e.vs("-")))
	e.del(from)
}

// finished takes a job out of both unfinished indexes.
func (e *expr) finished() { e.del(AttrQueued, AttrRunning, attrWaitingOn) }

// needsAttention puts a failed or cancelled job in the AttentionIndex: its
// key is the owner's key the job was created with (a job stored without
// one goes under "-", which nobody lists).
func (e *expr) needsAttention() { e.setTo(AttrAttention, e.ifNotExists(AttrListOwner, e.vs("-"))) }

// afterOutcome ends a job's sweep schedule at its final write (at, the
// placeholder of its time), or, when steps follow the outcome, keeps it
// (the sweeper runs them if their runner dies) and records them: no index
// write either way beyond the entry's removal a plain job pays too (now
// or at DoneAfter).
func (e *expr) afterOutcome(id, at string, steps []string) {
	if len(steps) == 0 {
		e.del(AttrSweepShard, AttrSweepAt)
		return
	}
	// A job out of the sweep schedule (one that waited on its parents)
	// goes back in it while its steps are pending: one index write, only
	// for such a job.
	e.setTo(attrAfter, e.v(&types.AttributeValueMemberSS{Value: steps}))
	e.setTo(AttrSweepShard, e.ifNotExists(AttrSweepShard, e.vs(ShardOf(id))))
	e.setTo(AttrSweepAt, e.ifNotExists(AttrSweepAt, at))
}

// afterOutcomeDue is afterOutcome for a job whose sweep time may be far
// ahead (a queued job's, parked): with steps, it is due at at.
func (e *expr) afterOutcomeDue(id, at string, steps []string) {
	if len(steps) == 0 {
		e.del(AttrSweepShard, AttrSweepAt)
		return
	}
	e.setTo(attrAfter, e.v(&types.AttributeValueMemberSS{Value: steps}))
	e.setTo(AttrSweepShard, e.ifNotExists(AttrSweepShard, e.vs(ShardOf(id))))
	e.setTo(AttrSweepAt, at)
}

// countOutcome makes a final write count outcome seq (0: none, and no
// byte written): it sets the count, conditional on the previous one.
func (e *expr) countOutcome(seq int) {
	if seq <= 0 {
		return
	}
	e.setTo(attrOutcomes, e.vn(int64(seq)))
	if seq > 1 {
		e.when(e.n(attrOutcomes) + " = " + e.vn(int64(seq-1)))
	} else {
		e.when(e.notExists(attrOutcomes))
	}
}

// hasDependents is the condition that the job has n dependents: a final
// write is conditional on the dependents its writer knows (no byte is
// written for it, and a plain job's condition is one attribute_not_exists).
func (e *expr) hasDependents(n int) {
	if n == 0 {
		e.when(e.notExists(attrDependents))
		return
	}
	e.when("size(" + e.n(attrDependents) + ") = " + e.vn(int64(n)))
}

// marks sets the job's step marks (driver.Record.StepMarks) when given.
func (e *expr) marks(m string) {
	if m != "" {
		e.setTo(attrStepMarks, e.vs(m))
	}
}
