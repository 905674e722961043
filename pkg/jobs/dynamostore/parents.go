package dynamostore

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Jobs that run after other jobs. A dependent's registration and its
// parent's final write are both writes of the parent's item, so DynamoDB
// orders them: either the registration comes first, and the final write's
// post-outcome step reads it among the parent's dependents, or the parent
// has finished, and the registration's failed condition returns the
// parent as it ended. No wake-up can fall between the two.

// dependentsOf encodes dependents as the parent's string set: "id/index".
func dependentsOf(ds []driver.Dependent) []string {
	if len(ds) == 0 {
		return nil
	}
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.JobID + "/" + strconv.Itoa(d.Index)
	}
	return out
}

// parseDependents decodes the parent's string set; an entry that does not
// parse is skipped (no writer makes one).
func parseDependents(ss []string) []driver.Dependent {
	var out []driver.Dependent
	for _, s := range ss {
		id, idx, ok := strings.Cut(s, "/")
		n, err := strconv.Atoi(idx)
		if !ok || err != nil {
			continue
		}
		out = append(out, driver.Dependent{JobID: id, Index: n})
	}
	return out
}

// AddDependent adds d to the parent's dependents unless it succeeded or
// has d.Max of them, and returns the parent.
func (s *Store) AddDependent(ctx context.Context, parentID string, d driver.DependentOf) (*driver.Record, error) {
	entry := dependentsOf([]driver.Dependent{d.Dependent})
	upd := expression.Add(expression.Name(attrDependents), expression.Value(&types.AttributeValueMemberSS{Value: entry}))
	room := expression.AttributeNotExists(expression.Name(attrDependents)).
		Or(expression.Name(attrDependents).Size().LessThan(expression.Value(d.Max))).
		Or(expression.Contains(expression.Name(attrDependents), entry[0])) // recorded before: a repeat
	cond := expression.Name(attrOwner).Equal(expression.Value(d.Owner)).
		And(expression.AttributeExists(expression.Name(attrKind))).
		And(expression.Not(statusIs(jobs.StatusSucceeded))).
		And(room)
	av, err := s.update(ctx, parentID, change{op: "add_dependent", upd: upd, cond: cond})
	var ce *driver.ConflictError
	switch {
	case errors.As(err, &ce) && (ce.Current == nil || ce.Current.Owner != d.Owner || ce.Current.Kind == ""):
		return nil, jobs.ErrNotFound // another owner's, or not a job: as if absent
	case err != nil:
		return nil, err
	}
	return fromItem(av)
}

// waitsOnParents is the condition of the writes that count and release a
// job's parents.
func waitsOnParents() expression.ConditionBuilder {
	return statusIs(jobs.StatusQueued).And(expression.Name(attrWaitingOn).Equal(expression.Value(driver.WaitParents)))
}

// CountParents adds counted parents to a waiting job, and returns it.
func (s *Store) CountParents(ctx context.Context, id string, c driver.ParentCount) (*driver.Record, error) {
	var upd expression.UpdateBuilder
	if len(c.Done) > 0 {
		ns := make([]string, len(c.Done))
		for i, n := range c.Done {
			ns[i] = strconv.Itoa(n)
		}
		upd = upd.Add(expression.Name(attrParentsDone), expression.Value(&types.AttributeValueMemberNS{Value: ns}))
	}
	cond := waitsOnParents()
	switch {
	case c.Await && c.Release != nil:
		// Every parent counted: released in this very write.
		upd = release(upd, id, *c.Release)
	case c.Await:
		// Out of the sweep schedule while it waits: its parents' own
		// schedules (kept until their post-outcome steps ran) wake it.
		upd = upd.Remove(expression.Name(AttrSweepShard)).Remove(expression.Name(AttrSweepAt))
	}
	if c.Await {
		// As its writer read it: a parent counted since may have been the
		// last, and then this write must not take the job out of the
		// sweep schedule.
		known := expression.AttributeNotExists(expression.Name(attrParentsDone))
		if c.Known > 0 {
			known = expression.Name(attrParentsDone).Size().Equal(expression.Value(c.Known))
		}
		cond = cond.And(known)
	}
	if len(c.Done) == 0 && !c.Await {
		return s.Get(ctx, id)
	}
	av, err := s.update(ctx, id, change{op: "count_parents", upd: upd, cond: cond})
	if err != nil {
		return nil, err
	}
	return fromItem(av)
}

// ReleaseParents ends a job's wait on its parents.
func (s *Store) ReleaseParents(ctx context.Context, id string, r driver.ReleaseParents) error {
	_, err := s.update(ctx, id, change{op: "release_parents", upd: release(expression.UpdateBuilder{}, id, r), cond: waitsOnParents()})
	return err
}

// release ends a job's wait on its parents: it waits no more, and is back
// in the sweep schedule at r.SweepAt.
func release(upd expression.UpdateBuilder, id string, r driver.ReleaseParents) expression.UpdateBuilder {
	return upd.Remove(expression.Name(attrWaitingOn)).
		Set(expression.Name(AttrSweepShard), expression.Value(ShardOf(id))).
		Set(expression.Name(AttrSweepAt), expression.Value(ms(r.SweepAt))).
		Set(expression.Name(attrUpdated), expression.Value(ms(r.At)))
}
