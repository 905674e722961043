package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// JobList is a page of GET /v1/jobs.
type JobList struct {
	Jobs          []jobs.View `json:"jobs"`
	NextPageToken *string     `json:"next_page_token"`
}

// listJobs serves GET /v1/jobs?status=&kind=&tag=&limit=&page_token=&created_before=:
// the caller's jobs, newest first (tag: key=value). An unknown status, an unregistered kind,
// a bad limit, or a page token that is malformed or was issued for another
// caller or another filter: 400.
func (a *API) listJobs(ctx context.Context, req events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	owner := rq.caller
	return a.listAs(ctx, owner, req)
}

// listAs lists owner's jobs as ListJobs does.
func (a *API) listAs(ctx context.Context, owner string, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	q := req.QueryStringParameters
	lr := jobs.ListRequest{Status: jobs.Status(q["status"]), Kind: q["kind"], Tag: q["tag"], PageToken: q["page_token"]}
	if v, ok := q["limit"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > jobs.MaxListLimit {
			return problem(ctx, a.log, &requestError{code: "invalid_request", detail: "limit is 1 to 200"})
		}
		lr.Limit = n
	}
	if v := q["created_before"]; v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return problem(ctx, a.log, &requestError{code: "invalid_request", detail: "created_before is an RFC 3339 time"})
		}
		lr.CreatedBefore = t
	}
	page, err := a.svc.List(ctx, owner, lr)
	if err != nil {
		return problem(ctx, a.log, err)
	}
	out := JobList{Jobs: page.Jobs}
	if page.NextPageToken != "" {
		out.NextPageToken = &page.NextPageToken
	}
	return jsonResponse(http.StatusOK, out)
}

// retryJob serves POST /v1/jobs/{id}/retry: 200 with the job queued again
// (a new attempt, same id) when it had failed or been cancelled; 409
// not_retryable for any other status or a job of a batch; 404 as GetJob.
func (a *API) retryJob(ctx context.Context, req events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	owner := rq.caller
	v, err := a.svc.Resubmit(ctx, owner, rq.params["id"])
	if err != nil {
		return problem(ctx, a.log, err)
	}
	return jsonResponse(http.StatusOK, v)
}

type bulkBody struct {
	Status            jobs.Status `json:"status"`
	Kind              string      `json:"kind"`
	Tag               string      `json:"tag"`
	CreatedBefore     *time.Time  `json:"created_before"`
	ContinuationToken string      `json:"continuation_token"`
}

// BulkResult is the answer of a bulk action.
type BulkResult struct {
	Matched int `json:"matched"`
	Changed int `json:"changed"`
	// CancelRequested (a cancel's only) is how many of the changed jobs
	// were running: each is asked to stop, as POST /v1/jobs/{id}/cancel
	// does, and ends cancelled when its worker notices.
	CancelRequested   *int    `json:"cancel_requested,omitempty"`
	ContinuationToken *string `json:"continuation_token"`
}

// bulk serves POST /v1/bulk/cancel and POST /v1/bulk/retry with
// {"status", "kind", "tag", "created_before", "continuation_token"}: it acts on
// up to 100 of the caller's jobs that the filter selects and says how many
// matched and changed (and, for a cancel, how many of those were running
// and asked to stop); continuation_token continues (null when done).
func (a *API) bulk(ctx context.Context, req events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	owner := rq.caller
	action := jobs.BulkAction(rq.params["action"])
	body, err := jsonBody(req, MaxBodyBytes)
	if err != nil {
		return problem(ctx, a.log, err)
	}
	var in bulkBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return problem(ctx, a.log, &requestError{code: "invalid_request", detail: `the body is {"status", "kind", "tag", "created_before", "continuation_token"}; ` + decodeReason(err)})
	}
	br := jobs.BulkRequest{Action: action, Status: in.Status, Kind: in.Kind, Tag: in.Tag, ContinuationToken: in.ContinuationToken}
	if in.CreatedBefore != nil {
		br.CreatedBefore = *in.CreatedBefore
	}
	res, err := a.svc.Bulk(ctx, owner, br)
	if err != nil {
		return problem(ctx, a.log, err)
	}
	out := BulkResult{Matched: res.Matched, Changed: res.Changed}
	if action == jobs.BulkCancel {
		out.CancelRequested = &res.CancelRequested
	}
	if res.ContinuationToken != "" {
		out.ContinuationToken = &res.ContinuationToken
	}
	return jsonResponse(http.StatusOK, out)
}

// counts serves GET /v1/counts: the caller's queued and running jobs now,
// by kind (jobs.UnfinishedCounts), read from the indexes that hold only
// unfinished jobs; operators read an owner's at GET
// /v1/admin/counts?owner=.
func (a *API) counts(ctx context.Context, req events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	owner := rq.caller
	return a.countsAs(ctx, owner)
}

func (a *API) countsAs(ctx context.Context, owner string) events.APIGatewayV2HTTPResponse {
	c, err := a.svc.CountUnfinished(ctx, owner)
	if err != nil {
		return problem(ctx, a.log, err)
	}
	return jsonResponse(http.StatusOK, c)
}

// KindList is GET /v1/kinds's answer.
type KindList struct {
	Kinds []jobs.KindInfo `json:"kinds"`
}

// listKinds serves GET /v1/kinds: the registered kinds with their lanes
// and flow control (jobs.KindInfo), the same for every caller. It reads
// nothing: the kinds are the deployment's code.
func (a *API) listKinds(ctx context.Context, req events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	return jsonResponse(http.StatusOK, KindList{Kinds: a.svc.Kinds()})
}
