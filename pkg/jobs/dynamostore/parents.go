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

// AddDependent adds d to the parent's dependents while it is unfinished.
func (s *Store) AddDependent(ctx context.Context, parentID string, d driver.DependentOf) error {
	upd := expression.Add(expression.Name(attrDependents),
		expression.Value(&types.AttributeValueMemberSS{Value: dependentsOf([]driver.Dependent{d.Dependent})}))
	cond := expression.Name(attrOwner).Equal(expression.Value(d.Owner)).
		And(expression.Or(statusIs(jobs.StatusQueued), statusIs(jobs.StatusRunning)))
	_, err := s.update(ctx, parentID, change{op: "add_dependent", upd: upd, cond: cond, sentinel: driver.ErrFinished})
	var ce *driver.ConflictError
	if errors.As(err, &ce) && (ce.Current == nil || ce.Current.Owner != d.Owner || ce.Current.Kind == "") {
		return jobs.ErrNotFound // another owner's, or not a job: as if absent
	}
	return err
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
	if c.Await {
		// Out of the sweep schedule while it waits: its parents' own
		// schedules (kept until their post-outcome steps ran) wake it.
		upd = upd.Remove(expression.Name(AttrSweepShard)).Remove(expression.Name(AttrSweepAt))
	}
	if len(c.Done) == 0 && !c.Await {
		return s.Get(ctx, id)
	}
	av, err := s.update(ctx, id, change{op: "count_parents", upd: upd, cond: waitsOnParents(), sentinel: driver.ErrNotQueued})
	if err != nil {
		return nil, err
	}
	return fromItem(av)
}

// ReleaseParents ends a job's wait on its parents.
func (s *Store) ReleaseParents(ctx context.Context, id string, r driver.ReleaseParents) error {
	upd := expression.Remove(expression.Name(attrWaitingOn)).
		Set(expression.Name(AttrSweepShard), expression.Value(ShardOf(id))).
		Set(expression.Name(AttrSweepAt), expression.Value(ms(r.SweepAt))).
		Set(expression.Name(attrUpdated), expression.Value(ms(r.At)))
	_, err := s.update(ctx, id, change{op: "release_parents", upd: upd, cond: waitsOnParents(), sentinel: driver.ErrNotQueued})
	return err
}
