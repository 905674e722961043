package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// replayBody is the optional POST /v1/jobs/{id}/replay body: a payload to
// replace the job's, and the new job's enqueue options.
type replayBody struct {
	Payload json.RawMessage `json:"payload"`
	optsBody
}

// replayJob serves POST /v1/jobs/{id}/replay: 202 with a new job of the
// job's kind, its payload (or the body's "payload", where "[secret]" keeps
// a secret field's value) and the body's enqueue options, and its
// Location; 404 as GetJob. The body is optional.
func (a *API) replayJob(ctx context.Context, req events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	owner := rq.caller
	var in replayBody
	if strings.TrimSpace(req.Body) != "" {
		body, err := jsonBody(req, a.enqueueBody)
		if err != nil {
			return problem(ctx, a.log, err)
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			return problem(ctx, a.log, &requestError{code: "invalid_request", detail: `the body must be {"payload": JSON value, ...enqueue options}; ` + decodeReason(err)})
		}
	}
	opts, err := in.opts(req)
	if err == nil {
		err = a.checkChoices(owner, opts)
	}
	if err != nil {
		return problem(ctx, a.log, err)
	}
	res, err := a.svc.Replay(ctx, jobs.ReplayRequest{Owner: owner, ID: rq.params["id"], Payload: in.Payload, EnqueueOpts: opts})
	if err != nil {
		return problem(ctx, a.log, err)
	}
	return accepted(res.Job, pathOf(deploy.RouteGetJob, "id", res.Job.ID), !res.Replayed)
}
