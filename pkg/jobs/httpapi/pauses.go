package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// The pause routes (see docs/operations/OPERATIONS.md, "Pausing"): a caller pauses
// and resumes its own jobs of a kind at /v1/pauses; an operator pauses a
// kind, a lane or an owner's jobs of a kind at /v1/admin/pauses. Both list
// the pauses in force (a caller, those that hold its jobs).

// pauseBody is the body of a pause or a resume.
type pauseBody struct {
	Kind string `json:"kind"`
	Lane string `json:"lane"`
	// Owner: an operator's, naming whose jobs of Kind.
	Owner string `json:"owner"`
	// For is how long, in whole seconds (absent: the longest, 13 days).
	For int64 `json:"for"`
}

// PauseList is what GET /v1/pauses and GET /v1/admin/pauses answer.
type PauseList struct {
	Pauses []jobs.PauseInfo `json:"pauses"`
}

var errPauseNotFound = &requestError{code: "not_found", detail: "no such pause in force"}

// pauseRequest decodes a pause or resume body strictly.
func pauseRequest(req events.APIGatewayV2HTTPRequest) (jobs.PauseRequest, error) {
	body, err := jsonBody(req, MaxBodyBytes)
	if err != nil {
		return jobs.PauseRequest{}, err
	}
	var in pauseBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return jobs.PauseRequest{}, &requestError{code: "invalid_request", detail: `the body must be {"kind": string} or {"lane": string}, with "owner" (operators) and "for" (seconds); ` + decodeReason(err)}
	}
	if in.For < 0 || in.For > int64(jobs.MaxPause/time.Second) {
		return jobs.PauseRequest{}, &requestError{code: "invalid_request", detail: `"for" is whole seconds from 1 to 1123200 (13 days)`}
	}
	return jobs.PauseRequest{Kind: in.Kind, Lane: in.Lane, Owner: in.Owner, For: time.Duration(in.For) * time.Second}, nil
}

// pause serves POST /v1/pauses (by the caller, of its own jobs of a kind)
// and POST /v1/admin/pauses (by an operator): 201 with the pause.
func (a *API) pause(by func(routed) string) endpoint {
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
		pr, err := pauseRequest(req)
		if err != nil {
			return problem(ctx, a.log, err)
		}
		p, err := a.svc.Pause(ctx, by(rq), pr)
		if err != nil {
			return problem(ctx, a.log, err)
		}
		return jsonResponse(http.StatusCreated, p)
	}
}

// resume serves POST /v1/pauses/resume and POST /v1/admin/pauses/resume:
// 204, or 404 when no such pause is in force.
func (a *API) resume(by func(routed) string) endpoint {
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
		pr, err := pauseRequest(req)
		if err != nil {
			return problem(ctx, a.log, err)
		}
		if err := a.svc.Resume(ctx, by(rq), pr); err != nil {
			if errors.Is(err, jobs.ErrNotFound) {
				err = errPauseNotFound
			}
			return problem(ctx, a.log, err)
		}
		return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusNoContent, Headers: map[string]string{"Cache-Control": "no-store"}}
	}
}

// listPauses serves GET /v1/pauses and GET /v1/admin/pauses: 200.
func (a *API) listPauses(by func(routed) string) endpoint {
	return func(ctx context.Context, _ events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
		list, err := a.svc.Pauses(ctx, by(rq))
		if err != nil {
			return problem(ctx, a.log, err)
		}
		return jsonResponse(http.StatusOK, PauseList{Pauses: list})
	}
}

// asCaller and asOperator say who a pause route acts for: the caller, or
// an operator ("").
func asCaller(rq routed) string { return rq.caller }
func asOperator(routed) string  { return "" }

// scheduleActionBody is the body of POST /v1/schedules/{name}/{action}
// (optional) and of its operators' route.
type scheduleActionBody struct {
	// Owner: an operator's, naming whose runtime schedule (absent: a
	// declared schedule).
	Owner string `json:"owner"`
	// For: a pause's length in whole seconds (absent: 365 days).
	For int64 `json:"for"`
}

// scheduleAction serves POST /v1/schedules/{name}/{action} (the caller's
// runtime schedule) and POST /v1/admin/schedules/{name}/{action} (an
// operator's: a declared schedule, or an owner's): pause (201 with the
// pause), resume (204) or run (202 with the job, as an enqueue answers;
// Idempotency-Key makes a repeat return it).
func (a *API) scheduleAction(by func(routed) string) endpoint {
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
		var in scheduleActionBody
		if req.Body != "" {
			body, err := jsonBody(req, MaxBodyBytes)
			if err != nil {
				return problem(ctx, a.log, err)
			}
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&in); err != nil {
				return problem(ctx, a.log, &requestError{code: "invalid_request", detail: `the body, when given, is {"owner": string (operators), "for": seconds (pause)}; ` + decodeReason(err)})
			}
		}
		if in.For < 0 || in.For > int64(jobs.MaxDelay/time.Second) {
			return problem(ctx, a.log, &requestError{code: "invalid_request", detail: `"for" is whole seconds from 1 to 31536000 (365 days)`})
		}
		name := rq.params["name"]
		switch rq.params["action"] {
		case "pause":
			p, err := a.svc.Pause(ctx, by(rq), jobs.PauseRequest{Schedule: name, Owner: in.Owner, For: time.Duration(in.For) * time.Second})
			if err != nil {
				return problem(ctx, a.log, err)
			}
			return jsonResponse(http.StatusCreated, p)
		case "resume":
			if err := a.svc.Resume(ctx, by(rq), jobs.PauseRequest{Schedule: name, Owner: in.Owner}); err != nil {
				if errors.Is(err, jobs.ErrNotFound) {
					err = errPauseNotFound
				}
				return problem(ctx, a.log, err)
			}
			return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusNoContent, Headers: map[string]string{"Cache-Control": "no-store"}}
		case "run":
			res, err := a.svc.RunNow(ctx, by(rq), jobs.RunNowRequest{Schedule: name, Owner: in.Owner, IdempotencyKey: header(req, "idempotency-key")})
			if err != nil {
				return problem(ctx, a.log, err)
			}
			return accepted(res.Job, pathOf(deploy.RouteGetJob, "id", res.Job.ID), !res.Replayed)
		}
		return problem(ctx, a.log, &requestError{code: "not_found", detail: "the action is pause, resume or run"})
	}
}
