package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/errtypes"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// A payload kept apart (driver.PayloadStore: an item of its own, when the
// job's item would pass one write unit with it) is written once with a
// TTL and, but for jobs that outlive their horizon, never again: every
// later write of the job rewrites only its small item. The one rule for
// how long it lasts is payloadKeep; the engine applies it at creation, at
// each claim and when a run goes back to the queue to run later.

// payloadHorizon is how long a queued job may wait for a worker beyond its
// run time, and how long a payload kept apart lasts beyond the job's next
// run time (plus its retention): the queues keep a message 14 days, and a
// wait longer than that ends in the sweeper's re-send, whose claim finds
// the payload with more than half of it left, or extends it.
const payloadHorizon = 15 * 24 * time.Hour

// parentsHorizon is added for a job that waits on its parents, whose
// wait is theirs: each is due within MaxDelay of its creation, before the
// dependent's. A dependent released later than that finds its payload
// gone and fails payload_unreadable (docs/RELIABILITY.md).
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

// loadPayload reads the payload and the checkpoint of claimed rec when
// its store keeps them apart, and makes each last as payloadKeep says when
// less than half the horizon is left: a job that waited long, or runs on
// in continuations. It returns driver.ErrPayloadMissing or
// driver.ErrCheckpointMissing when an item is gone (missingPart), a
// store's error when one could not be read.
func (e *engine) loadPayload(ctx context.Context, rec *driver.Record, now time.Time) error {
	if rec.PayloadRef != "" && e.payloads != nil {
		p, until, err := e.payloads.Payload(ctx, rec)
		if err != nil {
			return err
		}
		rec.Payload, rec.PayloadUntil = p, until
		if err := e.keepPayload(ctx, rec, now, time.Time{}); err != nil {
			return err
		}
	}
	if rec.CheckpointRef != "" && e.checkpoints != nil {
		cp, until, err := e.checkpoints.ReadCheckpoint(ctx, rec)
		if err != nil {
			return err
		}
		rec.Checkpoint = cp
		if keep := e.payloadKeep(rec.Kind, now, time.Time{}); until.Before(keep.Add(-payloadHorizon / 2)) {
			return e.checkpoints.KeepCheckpoint(ctx, rec, keep)
		}
	}
	return nil
}

// missingPart reports whether err says a payload's or checkpoint's own
// item is not there.
func missingPart(err error) bool {
	return errors.Is(err, driver.ErrPayloadMissing) || errors.Is(err, driver.ErrCheckpointMissing)
}

// keepPayload extends rec's payload item (read by loadPayload, which
// set PayloadUntil) to payloadKeep when less than half the horizon would
// be left after runAt.
func (e *engine) keepPayload(ctx context.Context, rec *driver.Record, now, runAt time.Time) error {
	if rec.PayloadRef == "" || e.payloads == nil || rec.PayloadUntil.IsZero() {
		return nil
	}
	keep := e.payloadKeep(rec.Kind, now, runAt)
	if !rec.PayloadUntil.Before(keep.Add(-payloadHorizon / 2)) {
		return nil
	}
	if err := e.payloads.KeepPayload(ctx, rec, keep); err != nil {
		return err
	}
	rec.PayloadUntil = keep
	return nil
}

// keepPayloadUntil is keepPayload for a run that goes back to the queue
// to run at runAt (a retry's backoff, a wait): a failure is logged, and
// the next claim extends the item if it is still there.
func (e *engine) keepPayloadUntil(ctx context.Context, rec *driver.Record, now, runAt time.Time) {
	err := e.keepPayload(ctx, rec, now, runAt)
	// A checkpoint item lasts the horizon past its write (or the last
	// claim): a run due beyond half of it extends the job's, which the
	// run may have replaced since its claim (a read, for such runs only).
	if far := runAt.Sub(now) > payloadHorizon/2; err == nil && far && e.checkpoints != nil {
		var cur *driver.Record
		if cur, err = e.store.Get(ctx, rec.ID); err == nil && cur.CheckpointRef != "" {
			err = e.checkpoints.KeepCheckpoint(ctx, cur, e.payloadKeep(rec.Kind, now, runAt))
		}
	}
	if err != nil {
		e.log.LogAttrs(ctx, slog.LevelWarn, "payload or checkpoint item not extended; the next claim tries again",
			slog.String("job_id", rec.ID), slog.String("err_types", errtypes.Of(err)))
	}
}

// payloadOf returns rec's payload, read from its own item when its store
// keeps it apart: for a caller who asked for it (a GET, a replay). A
// missing item gives nil and driver.ErrPayloadMissing.
func (e *engine) payloadOf(ctx context.Context, rec *driver.Record) (json.RawMessage, error) {
	if rec.PayloadRef == "" || e.payloads == nil {
		return rec.Payload, nil
	}
	p, _, err := e.payloads.Payload(ctx, rec)
	if errors.Is(err, driver.ErrPayloadMissing) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%w: store: %w", ErrUnavailable, err)
	}
	return p, nil
}

// withPayload fills rec.Payload for a reader who asked for the job with
// its payload (a GET): a missing item leaves it empty, shown as null.
func (e *engine) withPayload(ctx context.Context, rec *driver.Record) error {
	p, err := e.payloadOf(ctx, rec)
	if errors.Is(err, driver.ErrPayloadMissing) {
		return nil
	}
	if err != nil {
		return err
	}
	rec.Payload = p
	return nil
}
