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

// SchedulesPath is the runtime schedules' collection; a schedule is at
// SchedulesPath + "/" + name.
const SchedulesPath = "/v1/schedules"

// Schedules serves the caller's own recurring schedules: the schedules
// function.
type Schedules struct {
	svc   *jobs.ScheduleService
	log   *slog.Logger
	clock func() time.Time
}

// NewSchedules returns the schedules API over svc as its callers reach it
// (svc.ForCallers: a schedule of an internal kind is refused). logger may
// be nil.
func NewSchedules(svc *jobs.ScheduleService, logger *slog.Logger) *Schedules {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Schedules{svc: svc.ForCallers(), log: logger, clock: time.Now}
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

// scheduleRoutes are the routes Route serves (by id in deploy.Routes).
var scheduleRoutes = map[string]bool{"CreateSchedule": true, "ListSchedules": true, "GetSchedule": true, "DeleteSchedule": true}

var errScheduleNotFound = &requestError{code: "not_found", detail: "no such schedule"}

// Route dispatches POST and GET /v1/schedules and GET and DELETE
// /v1/schedules/{name}.
func (a *Schedules) Route(ctx context.Context, req events.APIGatewayV2HTTPRequest) (resp events.APIGatewayV2HTTPResponse, _ error) {
	defer recoverTo(ctx, a.log, &resp)
	owner, ok := Owner(req)
	if !ok {
		return problem(ctx, a.log, errUnauthenticated), nil
	}
	rt, params, _ := deploy.RouteFor(req.RequestContext.HTTP.Method, requestPath(req))
	name := params["name"]
	switch rt.ID {
	case "CreateSchedule":
		return a.create(ctx, owner, req), nil
	case "ListSchedules":
		list, err := a.svc.List(ctx, owner)
		if err != nil {
			return problem(ctx, a.log, err), nil
		}
		views := make([]ScheduleView, 0, len(list))
		for _, s := range list {
			views = append(views, a.view(s))
		}
		return jsonResponse(http.StatusOK, map[string]any{"schedules": views}), nil
	case "GetSchedule":
		s, err := a.svc.Get(ctx, owner, name)
		if err != nil {
			return problem(ctx, a.log, notFoundAsSchedule(err)), nil
		}
		return jsonResponse(http.StatusOK, a.view(*s)), nil
	case "DeleteSchedule":
		if err := a.svc.Delete(ctx, owner, name); err != nil {
			return problem(ctx, a.log, notFoundAsSchedule(err)), nil
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusNoContent, Headers: map[string]string{"Cache-Control": "no-store"}}, nil
	}
	if path := requestPath(req); path == SchedulesPath || strings.HasPrefix(path, SchedulesPath+"/") {
		return problem(ctx, a.log, &requestError{code: "method_not_allowed", detail: "use POST or GET /v1/schedules, GET or DELETE /v1/schedules/{name}"}), nil
	}
	return problem(ctx, a.log, errScheduleNotFound), nil
}

func notFoundAsSchedule(err error) error {
	if errors.Is(err, jobs.ErrNotFound) {
		return errScheduleNotFound
	}
	return err
}

func (a *Schedules) create(ctx context.Context, owner string, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
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
	resp.Headers["Location"] = SchedulesPath + "/" + s.Name
	return resp
}
