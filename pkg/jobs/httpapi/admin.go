package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws/arn"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

var errForbidden = &requestError{code: "forbidden", detail: "only an operator may use the admin routes"}

// identities are the caller identities entries stand for (see
// Config.Operators): blanks dropped, a role's ARN made its sessions'.
func identities(entries []string) []string {
	var out []string
	for _, e := range entries {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, operatorIdentity(e))
		}
	}
	return out
}

// operatorIdentity is the caller identity an operators entry stands for:
// a role's ARN becomes its sessions' identity; anything else is itself.
func operatorIdentity(s string) string {
	a, err := arn.Parse(s)
	if err != nil || a.Service != "iam" {
		return s
	}
	rest, ok := strings.CutPrefix(a.Resource, "role/")
	if !ok {
		return s
	}
	name := rest[strings.LastIndexByte(rest, '/')+1:]
	if name == "" {
		return s
	}
	a.Service, a.Resource = "sts", "assumed-role/"+name
	return a.String()
}

// The admin routes (deploy.AuthOperator: the router has admitted only an
// operator): GET /v1/admin/jobs?owner=... (an owner's jobs, as GET
// /v1/jobs filters them), GET /v1/admin/jobs/{id} (any owner's job), POST
// /v1/admin/jobs/{id}/cancel and /retry, GET /v1/admin/counts?owner=, and
// the dead-letter queues (deadletters.go).

// adminListJobs serves GET /v1/admin/jobs?owner=: the owner's own
// listing, as that owner.
func (a *API) adminListJobs(ctx context.Context, req events.APIGatewayV2HTTPRequest, _ routed) events.APIGatewayV2HTTPResponse {
	owner := req.QueryStringParameters["owner"]
	if owner == "" {
		return problem(ctx, a.log, &requestError{code: "invalid_request", detail: "owner is required: the admin listing reads one owner's jobs at a time"})
	}
	return a.listAs(ctx, owner, req)
}

// adminCounts serves GET /v1/admin/counts?owner=.
func (a *API) adminCounts(ctx context.Context, req events.APIGatewayV2HTTPRequest, _ routed) events.APIGatewayV2HTTPResponse {
	owner := req.QueryStringParameters["owner"]
	if owner == "" {
		return problem(ctx, a.log, &requestError{code: "invalid_request", detail: "owner is required: the admin counts read one owner's jobs at a time"})
	}
	return a.countsAs(ctx, owner)
}

// adminGetJob serves GET /v1/admin/jobs/{id}: any owner's job, with its
// owner.
func (a *API) adminGetJob(ctx context.Context, _ events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	rec, err := a.svc.GetAny(ctx, rq.params["id"])
	if err != nil {
		return problem(ctx, a.log, err)
	}
	return jsonResponse(http.StatusOK, AdminJob{Job: *rec, Owner: rec.Owner})
}

// adminJobAction serves POST /v1/admin/jobs/{id}/cancel and /retry, as the
// job's owner would (a 404 for an unknown id comes first).
func (a *API) adminJobAction(ctx context.Context, _ events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	id := rq.params["id"]
	rec, err := a.svc.GetAny(ctx, id)
	if err != nil {
		return problem(ctx, a.log, err)
	}
	switch rq.params["action"] {
	case "cancel":
		return a.cancelAs(ctx, rec.Owner, id)
	case "retry":
		r, err := a.svc.Resubmit(ctx, rec.Owner, id)
		if err != nil {
			return problem(ctx, a.log, err)
		}
		return jsonResponse(http.StatusOK, r)
	}
	return problem(ctx, a.log, &requestError{code: "method_not_allowed", detail: "use GET /v1/admin/jobs?owner=, GET /v1/admin/jobs/{id}, POST /v1/admin/jobs/{id}/cancel or /retry"})
}

// adminSignalJob serves POST /v1/admin/jobs/{id}/signals/{name}: an
// operator delivers a signal to any owner's job, as its owner would
// (signalJob).
func (a *API) adminSignalJob(ctx context.Context, req events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	rec, err := a.svc.GetAny(ctx, rq.params["id"])
	if err != nil {
		return problem(ctx, a.log, err)
	}
	return a.signalAs(ctx, req, rec.Owner, rq.params)
}

// AdminJob is a job as an operator reads it: with its owner.
type AdminJob struct {
	Job   jobs.View `json:"job"`
	Owner string    `json:"owner"`
}
