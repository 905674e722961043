package httpapi

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws/arn"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// AdminPath prefixes the operators' routes: GET AdminPath+"/jobs?owner=..."
// (an owner's jobs, as GET /v1/jobs filters them), GET AdminPath+"/jobs/{id}"
// (any owner's job), POST AdminPath+"/jobs/{id}/cancel" and "/retry", and
// the dead-letter queue (DeadLettersPath).
// Only the callers named in the operators list may use them (on top of
// whatever the API's authorizer asks of these routes); anyone else gets 403
// before anything is read, whatever the id.
const AdminPath = "/v1/admin"

var errForbidden = &requestError{code: "forbidden", detail: "only an operator may use the admin routes"}

// WithOperators names the callers who may use the admin routes. Each is an
// identity as Owner derives it, or an IAM role's ARN
// (arn:aws:iam::ACCOUNT:role/[PATH/]NAME), which stands for every session
// of that role (callers arrive as arn:aws:sts::ACCOUNT:assumed-role/NAME/
// SESSION, which Owner makes arn:aws:sts::ACCOUNT:assumed-role/NAME; a
// role's path is not in it). Without operators, nobody may.
func (a *API) WithOperators(operators []string) *API {
	a.operators = nil
	for _, op := range operators {
		if op = strings.TrimSpace(op); op != "" {
			a.operators = append(a.operators, operatorIdentity(op))
		}
	}
	return a
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

// admin serves the admin routes.
func (a *API) admin(ctx context.Context, req events.APIGatewayV2HTTPRequest, method, path string) (resp events.APIGatewayV2HTTPResponse, _ error) {
	defer a.recover(ctx, &resp)
	caller, ok := Owner(req)
	if !ok {
		return problem(ctx, a.log, errUnauthenticated), nil
	}
	if !slices.Contains(a.operators, caller) {
		return problem(ctx, a.log, errForbidden), nil
	}
	if path == DeadLettersPath || strings.HasPrefix(path, DeadLettersPath+"/") {
		return a.deadLetterRoute(ctx, req, method, path), nil
	}
	if path == AdminPath+"/counts" && method == http.MethodGet {
		owner := req.QueryStringParameters["owner"]
		if owner == "" {
			return problem(ctx, a.log, &requestError{code: "invalid_request", detail: "owner is required: the admin counts read one owner's jobs at a time"}), nil
		}
		return a.countsAs(ctx, owner), nil
	}
	rest := strings.TrimPrefix(path, AdminPath+"/jobs")
	switch {
	case rest == "" && method == http.MethodGet:
		owner := req.QueryStringParameters["owner"]
		if owner == "" {
			return problem(ctx, a.log, &requestError{code: "invalid_request", detail: "owner is required: the admin listing reads one owner's jobs at a time"}), nil
		}
		// The owner's own listing, as that owner.
		return a.listAs(ctx, owner, req), nil
	case strings.HasPrefix(rest, "/"):
		id, action, _ := strings.Cut(rest[1:], "/")
		rec, err := a.svc.GetAny(ctx, id)
		if err != nil {
			return problem(ctx, a.log, err), nil
		}
		switch {
		case action == "" && method == http.MethodGet:
			return jsonResponse(http.StatusOK, AdminJob{Job: *rec, Owner: rec.Owner}), nil
		case action == "cancel" && method == http.MethodPost:
			return a.cancelAs(ctx, rec.Owner, id), nil
		case action == "retry" && method == http.MethodPost:
			r, err := a.svc.Resubmit(ctx, rec.Owner, id)
			if err != nil {
				return problem(ctx, a.log, err), nil
			}
			return jsonResponse(http.StatusOK, r), nil
		}
	}
	return problem(ctx, a.log, &requestError{code: "method_not_allowed", detail: "use GET /v1/admin/jobs?owner=, GET /v1/admin/jobs/{id}, POST /v1/admin/jobs/{id}/cancel or /retry"}), nil
}

// AdminJob is a job as an operator reads it: with its owner.
type AdminJob struct {
	Job   jobs.View `json:"job"`
	Owner string    `json:"owner"`
}
