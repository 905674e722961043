package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/errtypes"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// Event is the detail of the event that announces a job's outcome on the
// event bus, with the detail type EventDetailType: sent for the jobs of a
// kind with KindOpts.Events (or of every kind, when the deployment says
// so), once per outcome, delivered at least once. docs/reference/EVENTS.md has the
// rules; docs/reference/event.schema.json its JSON Schema.
//
// It never holds the job's payload or any handler text: a failure is its
// code.
type Event struct {
	// ID is the outcome's stable id, the job's id and its outcome
	// sequence ("<job_id>/<sequence>"): the same for every delivery of the
	// outcome, different for each outcome (a job cancelled, retried and
	// cancelled again has two). Consumers deduplicate on it.
	ID       string `json:"id"`
	JobID    string `json:"job_id"`
	Sequence int    `json:"sequence"`
	Kind     string `json:"kind"`
	Owner    string `json:"owner"`
	// Status is succeeded, failed or cancelled; Code the failure code of
	// a failed job (timed_out and interrupted included), or for a
	// cancelled one expired (it could not start in time) or
	// dependency_failed (a job it ran after failed or was cancelled).
	Status  Status `json:"status"`
	Code    string `json:"code,omitempty"`
	Attempt int    `json:"attempt"`
	BatchID string `json:"batch_id,omitempty"`
	// Result is a succeeded job's public result when it is at most 8 KiB;
	// a larger one is left out and ResultURL names where to read it
	// (GET /v1/jobs/{id}).
	Result     json.RawMessage `json:"result,omitempty"`
	ResultURL  string          `json:"result_url,omitempty"`
	FinishedAt time.Time       `json:"finished_at"`
}

// EventDetailType is the detail type of every job event (EventBridge's
// detail-type), beside the source the deployment configures.
const EventDetailType = "Job Finished"

// maxEventResult bounds the result an event carries.
const maxEventResult = 8 << 10

// FailedJob is the payload of an on-failure follow-up job (see
// KindOpts.OnFailure): which job failed, and how.
type FailedJob struct {
	JobID   string `json:"job_id"`
	Kind    string `json:"kind"`
	Code    string `json:"code"`
	Attempt int    `json:"attempt"`
}

// The post-outcome steps of this file (see afterBatch).
const (
	// afterEvent announces the outcome on the event bus.
	afterEvent = "event"
	// afterFollowUp creates the on-failure follow-up job of a failed
	// outcome.
	afterFollowUp = "on_failure"
)

// counted reports whether rec's final writes count its outcomes: only a
// job that announces them or follows them up pays for the count.
func counted(rec *driver.Record) bool { return rec.Events || rec.OnFailure != "" }

// outcomeSeq is the sequence the next final write of rec records (0: none).
func outcomeSeq(rec *driver.Record) int {
	if !counted(rec) {
		return 0
	}
	return rec.Outcomes + 1
}

// eventOf is the event of the final job rec's last outcome.
// resultPath is the path of GET /v1/jobs/{id} without its id: the route
// table (internal/deploy) imports this package, so it cannot be asked
// here; TestEventsResultPathIsTheGetJobRoute ties the two.
const resultPath = "/v1/jobs/"

func eventOf(rec *driver.Record) Event {
	ev := Event{ID: rec.ID + "/" + strconv.Itoa(rec.Outcomes), JobID: rec.ID, Sequence: rec.Outcomes, Kind: rec.Kind, Owner: rec.Owner,
		Status: rec.Status, Code: rec.ErrorCode, Attempt: rec.Attempt, BatchID: rec.BatchID, FinishedAt: rec.FinishedAt.UTC()}
	if rec.Status == StatusSucceeded && (rec.Result != nil || rec.ResultRef != "") {
		if rec.Result != nil && len(rec.Result) <= maxEventResult {
			ev.Result = rec.Result
		} else {
			ev.ResultURL = resultPath + rec.ID // ids are URL-safe (wire.ValidID)
		}
	}
	return ev
}

// outbox collects the events of one worker invocation or sweep page, so
// they go out in as few requests as the bus takes (flushEvents).
type outbox struct {
	mu   sync.Mutex
	recs []*driver.Record
}

type outboxKey struct{}

// withOutbox returns ctx carrying a new outbox.
func withOutbox(ctx context.Context) (context.Context, *outbox) {
	ob := &outbox{}
	return context.WithValue(ctx, outboxKey{}, ob), ob
}

// empty reports whether the outbox holds no event.
func (ob *outbox) empty() bool {
	ob.mu.Lock()
	defer ob.mu.Unlock()
	return len(ob.recs) == 0
}

func (ob *outbox) add(rec *driver.Record) {
	ob.mu.Lock()
	ob.recs = append(ob.recs, rec)
	ob.mu.Unlock()
}

// announce publishes the events of the final jobs recs, whose other
// post-outcome steps have run, and clears the steps of those the bus
// accepted. It returns the others, whose steps stay pending, for the
// sweeper.
func (e *engine) announce(ctx context.Context, recs []*driver.Record) (left []*driver.Record) {
	if len(recs) == 0 || e.bus == nil {
		// A role without a bus leaves the event to one with (the sweeper).
		return recs
	}
	evs := make([]driver.Event, len(recs))
	for i, rec := range recs {
		detail, _ := json.Marshal(eventOf(rec)) // plain fields: cannot fail
		evs[i] = driver.Event{DetailType: EventDetailType, Detail: detail}
	}
	accepted, err := e.bus.Put(ctx, evs)
	if err != nil {
		e.log.LogAttrs(ctx, slog.LevelWarn, "job events not sent; the sweeper sends them", slog.Int("events", len(evs)), slog.String("err_types", errtypes.Of(err)))
	}
	for i, rec := range recs {
		if i >= len(accepted) || !accepted[i] {
			left = append(left, rec)
			continue
		}
		if err := e.store.DoneAfter(ctx, rec.ID, driver.AfterOfRecord(rec)); err != nil {
			e.log.LogAttrs(ctx, slog.LevelWarn, "post-outcome steps not cleared; the sweeper will", slog.String("job_id", rec.ID), slog.String("err_types", errtypes.Of(err)))
			left = append(left, rec)
		}
	}
	if len(left) > 0 && err == nil {
		e.log.LogAttrs(ctx, slog.LevelWarn, "job events left pending; the sweeper sends them", slog.Int("events", len(left)))
	}
	return left
}

// flushEvents announces the outbox's events, and returns the jobs whose
// events stay pending.
func (e *engine) flushEvents(ctx context.Context, ob *outbox) (left []*driver.Record) {
	ob.mu.Lock()
	recs := ob.recs
	ob.recs = nil
	ob.mu.Unlock()
	return e.announce(ctx, recs)
}

// followUp creates the on-failure follow-up job of the failed job rec's
// last outcome, once: its id derives from the job's id and outcome
// sequence, so a second run of the step finds it created. A follow-up
// whose message is lost is sent by the sweeper, like any queued job.
func (e *engine) followUp(ctx context.Context, rec *driver.Record) error {
	payload, _ := json.Marshal(FailedJob{JobID: rec.ID, Kind: rec.Kind, Code: rec.ErrorCode, Attempt: rec.Attempt})
	if e.reg != nil {
		if k, ok := e.reg.lookup(rec.OnFailure); ok {
			if c, err := k.canonical(payload); err == nil {
				payload = c
			}
		}
	}
	id := wire.DerivedID("on-failure", rec.ID, strconv.Itoa(rec.Outcomes))
	now := e.now()
	j, err := e.create(ctx, newJob{id: id, kind: rec.OnFailure, owner: rec.Owner, tenant: rec.Tenant, payload: payload,
		requestHash: "on-failure-" + rec.ID, at: now})
	switch {
	case errors.Is(err, driver.ErrExists):
		return nil // created by an earlier run of the step
	case err != nil:
		return err
	}
	if serr := e.deliver(ctx, j, e.deliveryAt(now, time.Time{}, j.Lane)); serr != nil {
		e.log.LogAttrs(ctx, slog.LevelWarn, "on-failure job not sent; the sweeper will send it", slog.String("job_id", j.ID), slog.String("err_types", errtypes.Of(serr)))
	}
	return nil
}
