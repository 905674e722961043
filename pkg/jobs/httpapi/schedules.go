package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Schedules serves the caller's own recurring schedules: the schedules
// function.
type Schedules struct {
	svc   *jobs.ScheduleService
	log   *slog.Logger
	clock func() time.Time
	// routes is the route table (deploy.Routes; tests give others).
	routes []deploy.Route
}

// NewSchedules returns the schedules API over svc as its callers reach it
// (svc.ForCallers: a schedule of an internal kind is refused). logger may
// be nil.
func NewSchedules(svc *jobs.ScheduleService, logger *slog.Logger) *Schedules {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Schedules{svc: svc.ForCallers(), log: logger, clock: time.Now, routes: deploy.Routes}
}

// ScheduleView is a runtime schedule as the API shows it.
type ScheduleView struct {
	Name       string          `json:"name"`
	Expression string          `json:"expression"`
	TimeZone   string          `json:"time_zone"`
	Kind       string          `json:"kind"`
	Payload    json.RawMessage `json:"payload"`
	Overlap    jobs.Overlap    `json:"overlap"`
	CreatedAt  time.Time       `json:"created_at"`
	// NextFire is when EventBridge Scheduler fires it next (computed
	// from the expression; absent when it never fires again).
	NextFire *time.Time `json:"next_fire,omitempty"`
}

func (a *Schedules) view(s jobs.Schedule) ScheduleView {
	v := ScheduleView{Name: s.Name, Expression: s.Expression, TimeZone: s.TimeZone, Kind: s.Kind, Payload: s.Payload, Overlap: s.Overlap, CreatedAt: s.CreatedAt}
	if next := s.NextFire(a.clock(), s.CreatedAt); !next.IsZero() {
		n := next.UTC()
		v.NextFire = &n
	}
	return v
}

type scheduleBody struct {
	Name       *string         `json:"name"`
	Expression *string         `json:"expression"`
	TimeZone   string          `json:"time_zone"`
	Kind       *string         `json:"kind"`
	Payload    json.RawMessage `json:"payload"`
	Overlap    jobs.Overlap    `json:"overlap"`
}

var errScheduleNotFound = &requestError{code: "not_found", detail: "no such schedule"}

// endpoints are what serves each schedules route (by its id in
// deploy.Routes).
func (a *Schedules) endpoints() map[string]endpoint {
	return map[string]endpoint{
		deploy.RouteCreateSchedule: a.create, deploy.RouteListSchedules: a.list,
		deploy.RouteGetSchedule: a.get, deploy.RouteDeleteSchedule: a.delete,
	}
}

// Route serves POST and GET /v1/schedules and GET and DELETE
// /v1/schedules/{name} by the route table, as API.Route serves its
// routes: 405 for another method on the schedules' paths, a 404 for any
// other path.
func (a *Schedules) Route(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	r := &router{routes: a.routes, endpoints: a.endpoints(), log: a.log}
	r.unmatched = func(path string) error {
		collection, _ := deploy.PathOf(deploy.RouteListSchedules, nil)
		if path == collection || strings.HasPrefix(path, collection+"/") {
			return &requestError{code: "method_not_allowed", detail: "use POST or GET /v1/schedules, GET or DELETE /v1/schedules/{name}"}
		}
		return errScheduleNotFound
	}
	return r.serve(ctx, req), nil
}

func (a *Schedules) list(ctx context.Context, _ events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	list, err := a.svc.List(ctx, rq.caller)
	if err != nil {
		return problem(ctx, a.log, err)
	}
	views := make([]ScheduleView, 0, len(list))
	for _, s := range list {
		views = append(views, a.view(s))
	}
	return jsonResponse(http.StatusOK, map[string]any{"schedules": views})
}

func (a *Schedules) get(ctx context.Context, _ events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	s, err := a.svc.Get(ctx, rq.caller, rq.params["name"])
	if err != nil {
		return problem(ctx, a.log, notFoundAsSchedule(err))
	}
	return jsonResponse(http.StatusOK, a.view(*s))
}

func (a *Schedules) delete(ctx context.Context, _ events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	if err := a.svc.Delete(ctx, rq.caller, rq.params["name"]); err != nil {
		return problem(ctx, a.log, notFoundAsSchedule(err))
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusNoContent, Headers: map[string]string{"Cache-Control": "no-store"}}
}

func notFoundAsSchedule(err error) error {
	if errors.Is(err, jobs.ErrNotFound) {
		return errScheduleNotFound
	}
	return err
}

func (a *Schedules) create(ctx context.Context, req events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	owner := rq.caller
	body, err := jsonBody(req, MaxBodyBytes)
	if err != nil {
		return problem(ctx, a.log, err)
	}
	var in scheduleBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return problem(ctx, a.log, &requestError{code: "invalid_request", detail: `the body must be {"name", "expression", "kind", "payload"} and optionally "time_zone", "overlap"; ` + decodeReason(err)})
	}
	switch {
	case in.Name == nil || *in.Name == "":
		return problem(ctx, a.log, &requestError{code: "invalid_request", detail: `"name" is required`})
	case in.Expression == nil || *in.Expression == "":
		return problem(ctx, a.log, &requestError{code: "invalid_request", detail: `"expression" is required: cron(...) or rate(...)`})
	case in.Kind == nil || *in.Kind == "":
		return problem(ctx, a.log, &requestError{code: "invalid_request", detail: `"kind" is required`})
	case len(in.Payload) == 0:
		return problem(ctx, a.log, &requestError{code: "invalid_request", detail: `"payload" is required (use {} for none)`})
	}
	s, err := a.svc.Create(ctx, jobs.ScheduleRequest{
		Owner: owner, Name: *in.Name, Expression: *in.Expression, TimeZone: in.TimeZone, Kind: *in.Kind, Payload: in.Payload, Overlap: in.Overlap,
	})
	if err != nil {
		return problem(ctx, a.log, err)
	}
	resp := jsonResponse(http.StatusCreated, a.view(*s))
	resp.Headers["Location"] = pathOf(deploy.RouteGetSchedule, "name", s.Name)
	return resp
}
