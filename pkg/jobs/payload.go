package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/errtypes"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// A part kept apart (driver.Part: the payload, a checkpoint or a final
// result in an item of its own, when the job's item would pass one write
// unit with it) is written once with a TTL and, but for jobs that outlive
// their horizon, never again: every later write of the job rewrites only
// its small item. The one rule for how long a payload or a checkpoint
// lasts is payloadKeep; the engine applies it at creation, at each claim
// and when a run goes back to the queue to run later. A final result's
// lasts as long as its job (Outcome.ResultUntil).

// payloadHorizon is how long a queued job may wait for a worker beyond its
// run time, and how long a part kept apart lasts beyond the job's next
// run time (plus its retention): the queues keep a message 14 days, and
// two days more leave room for the day an item may fall short before it
// is extended (payloadSlack), whatever the kind's retention.
const payloadHorizon = 14*24*time.Hour + 2*payloadSlack

// parentsHorizon is added for a job that waits on its parents, whose
// wait is theirs: each is due within MaxDelay of its creation, before the
// dependent's. A dependent released later than that finds its payload
// gone and fails payload_unreadable (docs/evidence/RELIABILITY.md).
const parentsHorizon = MaxDelay

// payloadKeep is how long a payload kept apart must last, decided at at
// for a job of kind that may run next at runAt (zero: now): the horizon
// and the kind's retention after the later of the two.
func (e *engine) payloadKeep(kind string, at, runAt time.Time) time.Time {
	from := at
	if runAt.After(from) {
		from = runAt
	}
	return from.Add(payloadHorizon + e.retentionOf(kind))
}

// payloadUntil is payloadKeep for rec, which waits on its parents when it
// says so: their wait is added.
func (e *engine) payloadUntil(rec *driver.Record, at, runAt time.Time) time.Time {
	keep := e.payloadKeep(rec.Kind, at, runAt)
	if rec.WaitingOn == driver.WaitParents {
		keep = keep.Add(parentsHorizon)
	}
	return keep
}

// payloadSlack is how far short of payloadKeep an item may fall before
// the engine extends it: a job's items are extended at most about once a
// day of its life, and never for a job that lives less than a day.
const payloadSlack = 24 * time.Hour

// loadPayload reads the payload, the checkpoint and the signals of claimed
// rec when its store keeps them apart, and makes each last as payloadKeep says when it
// falls more than payloadSlack short: a job that waited long, or runs on
// in continuations. It returns driver.ErrPartMissing when an item is gone,
// a store's error when one could not be read.
func (e *engine) loadPayload(ctx context.Context, rec *driver.Record, now time.Time) error {
	if rec.PayloadRef != "" {
		p, until, err := e.store.ReadPart(ctx, rec, driver.PartPayload)
		if err != nil {
			return err
		}
		rec.Payload, rec.PayloadUntil = p, until
		if err := e.keepPayload(ctx, rec, now, time.Time{}); err != nil {
			return err
		}
	}
	if rec.CheckpointRef != "" {
		cp, until, err := e.store.ReadPart(ctx, rec, driver.PartCheckpoint)
		if err != nil {
			return err
		}
		rec.Checkpoint = cp
		if keep := e.payloadKeep(rec.Kind, now, time.Time{}); until.Before(keep.Add(-payloadSlack)) {
			if err := e.store.KeepPart(ctx, rec, driver.PartCheckpoint, keep); err != nil {
				return err
			}
		}
	}
	// Signals kept apart, read in the order of their names (the
	// simulator replays a seed's store calls).
	for _, name := range slices.Sorted(maps.Keys(rec.SignalRefs)) {
		p := driver.SignalPart(name)
		sg, until, err := e.store.ReadPart(ctx, rec, p)
		if err != nil {
			return err
		}
		rec.Signals[name] = sg
		if keep := e.payloadKeep(rec.Kind, now, time.Time{}); until.Before(keep.Add(-payloadSlack)) {
			if err := e.store.KeepPart(ctx, rec, p, keep); err != nil {
				return err
			}
		}
	}
	return nil
}

// keepPayload extends rec's payload item to payloadKeep (from runAt) when
// it falls more than payloadSlack short of it. When rec does not say how
// long the item lasts (a record read back, not claimed here: the
// sweeper's), only a run due more than payloadSlack ahead extends it (a
// conditional write: a longer TTL stays).
func (e *engine) keepPayload(ctx context.Context, rec *driver.Record, now, runAt time.Time) error {
	if rec.PayloadRef == "" {
		return nil
	}
	keep := e.payloadKeep(rec.Kind, now, runAt)
	switch known := !rec.PayloadUntil.IsZero(); {
	case known && !rec.PayloadUntil.Before(keep.Add(-payloadSlack)):
		return nil
	case !known && runAt.Sub(now) <= payloadSlack:
		return nil
	}
	if err := e.store.KeepPart(ctx, rec, driver.PartPayload, keep); err != nil {
		return err
	}
	rec.PayloadUntil = keep
	return nil
}

// keepPayloadUntil is keepPayload for a run that goes back to the queue
// to run at runAt (a retry's backoff, a wait): a failure is logged, and
// the next claim extends the item if it is still there.
//
// It takes at most half of what ctx leaves (the final write's budget): a
// payload of tens of MB extended by a copy onto itself must not leave the
// write that puts the job back too little time to land.
func (e *engine) keepPayloadUntil(ctx context.Context, rec *driver.Record, now, runAt time.Time) {
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Until(dl)/2)
		defer cancel()
	}
	err := e.keepPayload(ctx, rec, now, runAt)
	// A checkpoint item lasts the horizon past its write (or the last
	// claim): a run due more than payloadSlack ahead extends the job's,
	// which the run may have replaced since its claim (a read, for such
	// runs only).
	if err == nil && runAt.Sub(now) > payloadSlack {
		var cur *driver.Record
		if cur, err = e.store.Get(ctx, rec.ID); err == nil && cur.CheckpointRef != "" {
			err = e.store.KeepPart(ctx, cur, driver.PartCheckpoint, e.payloadKeep(rec.Kind, now, runAt))
		}
	}
	if err != nil {
		e.log.LogAttrs(ctx, slog.LevelWarn, "payload or checkpoint item not extended; the next claim tries again",
			slog.String("job_id", rec.ID), slog.String("err_types", errtypes.Of(err)))
	}
}

// payloadOf returns rec's payload, read from its own item when its store
// keeps it apart: for a caller who asked for it (a GET, a replay). A
// missing item gives nil and driver.ErrPartMissing.
func (e *engine) payloadOf(ctx context.Context, rec *driver.Record) (json.RawMessage, error) {
	if rec.PayloadRef == "" {
		return rec.Payload, nil
	}
	p, _, err := e.store.ReadPart(ctx, rec, driver.PartPayload)
	if errors.Is(err, driver.ErrPartMissing) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	return p, nil
}

// withPayload fills rec.Payload and rec.Result for a reader who asked for
// the job with them (a GET): a missing item leaves one empty, shown as
// null.
func (e *engine) withPayload(ctx context.Context, rec *driver.Record) error {
	if rec.PayloadBytes > 0 { // an object: the view shows its size
		return e.withResult(ctx, rec)
	}
	p, err := e.payloadOf(ctx, rec)
	switch {
	case errors.Is(err, driver.ErrPartMissing):
	case err != nil:
		return err
	default:
		rec.Payload = p
	}
	if err := e.withResult(ctx, rec); err != nil {
		return fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	return nil
}

// withResult fills rec.Result from its own item when its store keeps it
// apart (rec.ResultRef) and it is not filled yet; a missing item leaves
// it empty. A result kept as an object is not read: views show its size
// and GET a link to it (resultURL).
func (e *engine) withResult(ctx context.Context, rec *driver.Record) error {
	if rec.ResultRef == "" || rec.Result != nil || rec.ResultBytes > 0 {
		return nil
	}
	r, _, err := e.store.ReadPart(ctx, rec, driver.PartResult)
	if err != nil && !errors.Is(err, driver.ErrPartMissing) {
		return err
	}
	rec.Result = r
	return nil
}

// resultLink is how long the link to a result kept as an object lasts.
const resultLink = 5 * time.Minute

// resultURL links rec's final result when its store keeps it as an
// object: for the job's owner (a GET), never logged. "" otherwise, or when
// the store cannot link it (the view still shows its size).
func (e *engine) resultURL(ctx context.Context, rec *driver.Record) string {
	if e.links == nil || rec.ResultBytes == 0 || rec.Status != StatusSucceeded {
		return ""
	}
	u, err := e.links.PartURL(ctx, rec, driver.PartResult, resultLink)
	if err != nil {
		e.log.LogAttrs(ctx, slog.LevelWarn, "no link to a result kept as an object", slog.String("job_id", rec.ID), slog.String("err_types", errtypes.Of(err)))
		return ""
	}
	return u
}

// stagerOf is store's ResultStager, if it is one.
func stagerOf(store driver.Store) driver.ResultStager {
	s, _ := store.(driver.ResultStager)
	return s
}

// stageResult writes a succeeded run's result ahead of its final write
// when its store keeps it as an object (tens of MB, written from the
// run's time: the final write's budget is a few seconds, too short to
// write it again). A result that could not be written in the run's time
// makes the run interrupted (cause result_unstored), as a worker that
// died before its outcome would: the final write then lands in its
// budget, and the kind's retry policy gives it another attempt.
//
// The object lasts as long as the job will: the job's expiry is its final
// write's time plus its retention, and the final write lands by by (a
// wall-clock time, the invocation's: taken onto the engine's clock).
func (e *engine) stageResult(ctx context.Context, rec *driver.Record, ex *execution, by time.Time) {
	if e.stager == nil || ex.Status != StatusSucceeded || len(ex.Result) == 0 {
		return
	}
	staged, err := e.stager.StageResult(ctx, rec.ID, ex.Result, e.now().Add(time.Until(by)+e.retentionOf(rec.Kind)))
	if err != nil {
		e.log.LogAttrs(ctx, slog.LevelWarn, "result not written in the run's time; the run counts as interrupted", slog.String("job_id", rec.ID),
			slog.Int("result_bytes", len(ex.Result)), slog.String("err_types", errtypes.Of(err)))
		*ex = execution{Status: StatusFailed, Code: CodeInterrupted, Cause: "result_unstored", ErrTypes: errtypes.Of(err)}
		return
	}
	ex.Staged = staged
}

// linkerOf is store's PartLinker, if it is one.
func linkerOf(store driver.Store) driver.PartLinker {
	l, _ := store.(driver.PartLinker)
	return l
}

// viewRead is viewOf for a record read back from the store: a final
// result kept in an item of its own is read first (one read, only for
// such a job), so that every view shows what GET shows.
func (e *engine) viewRead(ctx context.Context, rec *driver.Record) (View, error) {
	if err := e.withResult(ctx, rec); err != nil {
		return View{}, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	return viewOf(rec), nil
}
