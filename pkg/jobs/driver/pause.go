package driver

import (
	"context"
	"time"
)

// Pause holds back the jobs it covers from starting: every job of Kind
// (Lane and OwnerKey empty), every job of the lane Lane (Kind empty), or
// the jobs of Kind whose owner's key (wire.OwnerKey) is OwnerKey. Running
// jobs run on; a worker hands a covered job's message back unclaimed until
// the pause ends (see docs/operations/OPERATIONS.md, "Pausing"). A pause of Schedule
// instead (a declared schedule, or with OwnerKey that owner's runtime
// schedule) covers no job: its fires are acknowledged without one.
type Pause struct {
	Schedule string `json:"schedule,omitempty"`
	Kind     string `json:"kind,omitempty"`
	// Lane is DefaultLaneName for the default lane, which has no other
	// name here.
	Lane     string `json:"lane,omitempty"`
	OwnerKey string `json:"owner_key,omitempty"`
	// Since is when it was written; Until, when it ends by itself (a
	// resume ends it sooner).
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// By says who wrote it: "operator" or "owner".
	By string `json:"by"`
}

// ID names the pause among the others: "kind:<kind>", "lane:<lane>",
// "kind:<kind>:owner:<owner key>", "schedule:<name>" or
// "schedule:<name>:owner:<owner key>"; an operator's pause of one owner's
// jobs or schedule ends in ":operator", so that it and the owner's own
// are rows apart, neither able to overwrite the other. Lane, kind and
// schedule names hold no ':'.
func (p Pause) ID() string {
	var id string
	switch {
	case p.Schedule != "":
		id = "schedule:" + p.Schedule
	case p.Kind == "":
		return "lane:" + p.Lane
	default:
		id = "kind:" + p.Kind
	}
	if p.OwnerKey == "" {
		return id
	}
	id += ":owner:" + p.OwnerKey
	if p.By == "operator" {
		id += ":operator"
	}
	return id
}

// Covers reports whether p, in force at now, holds back a job of kind in
// lane ("" the default lane) owned by ownerKey. A job whose kind is not
// known ("") is covered only by its lane's pause.
func (p Pause) Covers(kind, lane, ownerKey string, now time.Time) bool {
	if !now.Before(p.Until) || p.Schedule != "" {
		return false
	}
	switch {
	case p.Kind == "" && p.Lane == "":
		return false
	case p.Kind == "":
		return p.Lane == lane || (p.Lane == DefaultLaneName && lane == "")
	case kind == "" || p.Kind != kind:
		return false
	default:
		return p.OwnerKey == "" || p.OwnerKey == ownerKey
	}
}

// HoldsFire reports whether p, in force at now, holds back the fires of
// schedule: a declared one (ownerKey ""), or that owner's runtime one.
func (p Pause) HoldsFire(schedule, ownerKey string, now time.Time) bool {
	return now.Before(p.Until) && p.Schedule == schedule && p.OwnerKey == ownerKey
}

// PauseStore is implemented by a Store that keeps the pause set: every
// pause in one item, read whole (so a worker learns every pause in one
// read) and written one pause at a time. jobs.NewClient's Pause routes
// answer that pauses are not kept without it; jobstest.RunStoreTests checks
// it when a store has it.
type PauseStore interface {
	// Pauses returns the pauses written, ended ones included until they
	// are removed, in one strongly consistent read.
	Pauses(ctx context.Context) ([]Pause, error)
	// SetPause writes p, replacing the pause of its ID, unless the set
	// holds max pauses of other IDs already (a *ConflictError).
	SetPause(ctx context.Context, p Pause, max int) error
	// RemovePause removes the pause named id (ErrNotFound when there is
	// none).
	RemovePause(ctx context.Context, id string) error
}
