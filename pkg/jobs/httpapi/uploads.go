package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
)

// maxUploadBody bounds the bodies of the upload routes: a kind and a
// size, or the ETags of at most 13 parts (100 MiB in 8 MiB parts).
const maxUploadBody = 4 << 10

// startUpload serves POST /v1/uploads {"kind", "bytes"}: 201 with the
// upload (a URL per part) and its Location; 413 too_large past the kind's
// MaxPayloadBytes, 422 unknown_kind, 400 otherwise. Nothing is stored
// for a refusal.
func (a *API) startUpload(ctx context.Context, req events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	var in struct {
		Kind  *string `json:"kind"`
		Bytes *int    `json:"bytes"`
	}
	if err := strictBody(req, &in, `the body must be {"kind": string, "bytes": the payload's size}`); err != nil {
		return problem(ctx, a.log, err)
	}
	if in.Kind == nil || *in.Kind == "" || in.Bytes == nil {
		return problem(ctx, a.log, &requestError{code: "invalid_request", detail: `"kind" and "bytes" are required`})
	}
	up, err := a.svc.StartUpload(ctx, rq.caller, *in.Kind, *in.Bytes)
	if err != nil {
		return problem(ctx, a.log, err)
	}
	resp := jsonResponse(http.StatusCreated, up)
	resp.Headers["Location"] = pathOf(deploy.RouteGetUpload, "id", up.ID)
	return resp
}

// completeUpload serves POST /v1/uploads/{id}/complete {"etags": [...]}:
// 202 with the upload, now validating (or as it is, when it was completed
// before); 422 unknown_upload for another caller's or an unknown id.
func (a *API) completeUpload(ctx context.Context, req events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	var in struct {
		ETags []string `json:"etags"`
	}
	if err := strictBody(req, &in, `the body must be {"etags": [the ETag header of each part's PUT, in order]}`); err != nil {
		return problem(ctx, a.log, err)
	}
	v, err := a.svc.CompleteUpload(ctx, rq.caller, rq.params["id"], in.ETags)
	if err != nil {
		return problem(ctx, a.log, err)
	}
	return jsonResponse(http.StatusAccepted, v)
}

// getUpload serves GET /v1/uploads/{id}: 200 with the upload; 422
// unknown_upload as completeUpload.
func (a *API) getUpload(ctx context.Context, _ events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	v, err := a.svc.GetUpload(ctx, rq.caller, rq.params["id"])
	if err != nil {
		return problem(ctx, a.log, err)
	}
	return jsonResponse(http.StatusOK, v)
}

// strictBody decodes the request's JSON body into v, refusing unknown
// fields: invalid_request says shape and why.
func strictBody(req events.APIGatewayV2HTTPRequest, v any, shape string) error {
	body, err := jsonBody(req, maxUploadBody)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &requestError{code: "invalid_request", detail: shape + "; " + decodeReason(err)}
	}
	return nil
}
