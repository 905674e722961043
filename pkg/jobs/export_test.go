package jobs

import (
	"github.com/lambdajobs/lambdajobs/internal/jsonin"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// For the external tests: the decoder every path uses, and its depth limit.

func DecodePayload[P any](raw []byte) (P, error) { return decodePayload[P](raw, MaxPayloadBytes) }

const MaxJSONDepth = jsonin.MaxDepth

// The descriptive errors, so tests can tell which check refused.
var (
	ErrInvalidKind     = errInvalidKind
	ErrNilHandler      = errNilHandler
	ErrDuplicateKind   = errDuplicateKind
	ErrInvalidCode     = errInvalidCode
	ErrRegistryFrozen  = errRegistryFrozen
	ErrSecretTag       = errSecretTag
	ErrNoSealer        = errNoSealer
	ErrUnseal          = errUnseal
	ErrPayloadType     = errPayloadType
	ErrUnroutedSource  = errUnroutedSource
	ErrUnknownKind     = errUnknownKind
	ErrInvalidSchedule = errInvalidSchedule
)

// ReservedCodes are the runner's own failure codes.
func ReservedCodes() map[string]bool { return reservedCodes }

// DriverOf is the service's store, for tests that look at what it holds.
func DriverOf(s *Service) driver.Store { return s.store }

// SlotKeys are the store's slot items a run of rec holds.
func SlotKeys(reg *Registry, rec *driver.Record) []string {
	k, _ := reg.lookup(rec.Kind)
	var out []string
	for _, s := range k.slotKeys(rec) {
		out = append(out, s.key)
	}
	return out
}

// AddSchedule declares a schedule from raw JSON, as a stale declaration
// would (Kind.Every marshals a typed payload).
func AddSchedule(reg *Registry, s Schedule) error { return reg.addSchedule(s) }

// ResultPath is the path an event's result_url starts with.
const ResultPath = resultPath

// The engine's reading of a store's conflicts (store.go).
func ReadConflicts(s driver.Store) driver.Store { return readConflicts(s) }

var (
	ErrNotQueuedConflict  = errNotQueued
	ErrCancelRequested    = errCancelRequested
	ErrNotRunningConflict = errNotRunning
	ErrFinishedParent     = errFinished
	ErrDependentsFull     = errDependentsFull
	ErrScheduleLimit      = errScheduleLimit
	ErrFireRaced          = errFireRaced
)
