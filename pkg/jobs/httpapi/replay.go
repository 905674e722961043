package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// replayBody is the optional POST /v1/jobs/{id}/replay body: a payload to
// replace the job's, and the new job's enqueue options.
type replayBody struct {
	Payload json.RawMessage `json:"payload"`
	optsBody
}

// ReplayJob serves POST /v1/jobs/{id}/replay: 202 with a new job of the
// job's kind, its payload (or the body's "payload", where "[secret]" keeps
// a secret field's value) and the body's enqueue options, and its
// Location; 404 as GetJob. The body is optional.
func (a *API) ReplayJob(ctx context.Context, req events.APIGatewayV2HTTPRequest) (resp events.APIGatewayV2HTTPResponse, _ error) {
	defer a.recover(ctx, &resp)
	owner, ok := Owner(req)
	if !ok {
		return problem(ctx, a.log, errUnauthenticated), nil
	}
	var in replayBody
	if strings.TrimSpace(req.Body) != "" {
		body, err := jsonBody(req, MaxBodyBytes)
		if err != nil {
			return problem(ctx, a.log, err), nil
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&in); err != nil {
			return problem(ctx, a.log, &requestError{code: "invalid_request", detail: `the body must be {"payload": JSON value, ...enqueue options}; ` + decodeReason(err)}), nil
		}
	}
	opts, err := in.opts(req)
	if err == nil {
		err = a.checkChoices(owner, opts)
	}
	if err != nil {
		return problem(ctx, a.log, err), nil
	}
	res, err := a.svc.Replay(ctx, jobs.ReplayRequest{Owner: owner, ID: pathID(req, JobsPath+"/", "/replay"), Payload: in.Payload, EnqueueOpts: opts})
	if err != nil {
		return problem(ctx, a.log, err), nil
	}
	return accepted(res.Job, JobsPath+"/"+res.Job.ID, !res.Replayed), nil
}
