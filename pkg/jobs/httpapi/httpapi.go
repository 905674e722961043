// Package httpapi maps API Gateway HTTP API requests (payload format 2.0) to
// the jobs service and its answers back to HTTP: each function behind the
// API serves API.Route (the schedules function Schedules.Route), which
// dispatches by the deployment's route table and enforces each route's
// auth (route.go).
//
// It is the one place where errors become HTTP statuses (see problem.go),
// where the caller's identity becomes a job owner (see Owner), and where
// request bodies are decoded.
package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws/arn"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/jsonin"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// MaxBodyBytes is the largest request body accepted (but POST /v1/jobs's
// for a kind that allows larger payloads: MaxDirectPayloadBytes): the
// largest payload of an item plus room for the envelope.
const MaxBodyBytes = jobs.MaxPayloadBytes + 4<<10

// MaxBatchBodyBytes is the largest POST /v1/batches body (Lambda's 6 MB
// request limit).
const MaxBatchBodyBytes = 6 << 20

// maxSignalBody is the largest signal (jobs.Service.Signal's bound).
const maxSignalBody = 4 << 10

// API serves the job endpoints.
type API struct {
	svc         *jobs.Service
	log         *slog.Logger
	operators   []string
	trusted     []string // Config.TrustedCallers
	deadLetters DeadLetters
	// routes is the route table (deploy.Routes; tests give others), eps
	// what serves its routes.
	routes []deploy.Route
	eps    map[string]endpoint
	// enqueueBody bounds a POST /v1/jobs body (and a replay's, which may
	// carry a payload): the largest payload a kind allows, up to
	// MaxDirectPayloadBytes, and room for the rest.
	enqueueBody int
}

// Config is what an API serves beside its Service; the zero Config serves
// the callers' routes only, logging nothing.
type Config struct {
	// Logger may be nil (nothing logged).
	Logger *slog.Logger
	// Operators names the callers who may use the admin routes. Each is an
	// identity as Owner derives it, or an IAM role's ARN
	// (arn:aws:iam::ACCOUNT:role/[PATH/]NAME), which stands for every
	// session of that role (callers arrive as
	// arn:aws:sts::ACCOUNT:assumed-role/NAME/SESSION, which Owner makes
	// arn:aws:sts::ACCOUNT:assumed-role/NAME; a role's path is not in it).
	// Without operators, nobody may.
	Operators []string
	// TrustedCallers names the callers who may choose a job's "tenant" and
	// "lane" (on POST /v1/jobs and replays): services that enqueue for
	// their own customers, and name each. Each entry is as for Operators.
	// Any other caller that gives either gets 403 forbidden and nothing is
	// stored: a tenant is a share of the queue's fairness and of
	// per-tenant limits, and a lane is a queue with workers of its own (the
	// urgent lane runs ahead of every owner's jobs; a long lane bills by
	// the vCPU), so neither is the caller's to pick. Go producers (a
	// Service of their own, given GrantEnqueue) set both freely.
	TrustedCallers []string
	// DeadLetters serves the operators' dead-letter routes (404 without
	// it).
	DeadLetters DeadLetters
}

// New returns an API over svc as its callers reach it (svc.ForCallers: an
// internal kind is unknown to them), configured by cfg.
func New(svc *jobs.Service, cfg Config) *API {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	a := &API{svc: svc.ForCallers(), log: logger, routes: deploy.Routes, operators: identities(cfg.Operators),
		trusted: identities(cfg.TrustedCallers), deadLetters: cfg.DeadLetters}
	a.eps = a.endpoints()
	a.enqueueBody = min(a.svc.MaxPayloadBytes(), MaxDirectPayloadBytes) + 4<<10
	return a
}

// MaxDirectPayloadBytes is the largest payload POST /v1/jobs takes, when
// a kind allows it (jobs.KindOpts.MaxPayloadBytes): API Gateway hands a
// body to Lambda inside the invocation's JSON, escaped, and an invocation
// takes 6 MB; escaping at most doubles a body's quotes and backslashes.
const MaxDirectPayloadBytes = 2 << 20

// enqueueBody is the POST /v1/jobs body.
type enqueueBody struct {
	Kind    *string         `json:"kind"`
	Payload json.RawMessage `json:"payload"`
	// Upload names a ready upload whose payload the job takes
	// (POST /v1/uploads), in place of Payload.
	Upload string `json:"upload"`
	optsBody
}

// optsBody are the enqueue options of a POST /v1/jobs body, and of a
// replay's.
type optsBody struct {
	// RunAt (RFC 3339) or Delay (whole seconds) delays the job.
	RunAt *time.Time `json:"run_at"`
	Delay *int64     `json:"delay"`
	Lane  string     `json:"lane"`
	// Tenant: EnqueueOpts.Tenant.
	Tenant string `json:"tenant"`
	// UniqueKey, Unique and UniqueFor (whole seconds): EnqueueOpts's;
	// StartBy (RFC 3339) too.
	UniqueKey string      `json:"unique_key"`
	Unique    jobs.Unique `json:"unique"`
	UniqueFor int64       `json:"unique_for"`
	StartBy   *time.Time  `json:"start_by"`
	// After: EnqueueOpts.After.
	After []string `json:"after"`
	// Tags: EnqueueOpts.Tags.
	Tags map[string]string `json:"tags"`
}

// enqueue serves POST /v1/jobs: 202 with the job and its Location, or a
// problem. It never returns an error; a panic becomes a 500 problem.
func (a *API) enqueue(ctx context.Context, req events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	owner := rq.caller
	body, err := jsonBody(req, a.enqueueBody)
	if err != nil {
		return problem(ctx, a.log, err)
	}
	var in enqueueBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return problem(ctx, a.log, &requestError{code: "invalid_request", detail: `the body must be {"kind": string, "payload": object or other JSON value}; ` + decodeReason(err)})
	}
	if in.Kind == nil || *in.Kind == "" {
		return problem(ctx, a.log, &requestError{code: "invalid_request", detail: `"kind" is required`})
	}
	if len(in.Payload) == 0 && in.Upload == "" {
		return problem(ctx, a.log, &requestError{code: "invalid_request", detail: `"payload" is required (use {} for none), or "upload"`})
	}
	if len(in.Payload) > MaxDirectPayloadBytes {
		return problem(ctx, a.log, &requestError{code: "too_large", detail: fmt.Sprintf("the payload is larger than the %d bytes POST /v1/jobs takes", MaxDirectPayloadBytes)})
	}
	opts, err := in.opts(req)
	if err == nil {
		err = a.checkChoices(owner, opts)
	}
	if err != nil {
		return problem(ctx, a.log, err)
	}
	res, err := a.svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: owner, Kind: *in.Kind, Payload: in.Payload, Upload: in.Upload, EnqueueOpts: opts})
	if err != nil {
		return problem(ctx, a.log, err)
	}
	resp := accepted(res.Job, pathOf(deploy.RouteGetJob, "id", res.Job.ID), !res.Replayed)
	if res.Duplicate != "" {
		// The job holding the unique key answers, as a replay does.
		resp.Headers["Duplicate"] = res.Duplicate
	}
	return resp
}

// opts are the enqueue options the body and the request's headers give.
func (in optsBody) opts(req events.APIGatewayV2HTTPRequest) (jobs.EnqueueOpts, error) {
	var runAt time.Time
	var delay time.Duration
	switch {
	case in.RunAt != nil && in.Delay != nil:
		return jobs.EnqueueOpts{}, &requestError{code: "invalid_request", detail: `give "run_at" or "delay", not both`}
	case in.RunAt != nil:
		runAt = *in.RunAt
	case in.Delay != nil:
		if *in.Delay < 0 || *in.Delay > int64(jobs.MaxDelay/time.Second) {
			return jobs.EnqueueOpts{}, &requestError{code: "invalid_request", detail: `"delay" is whole seconds from 0 to 31536000 (365 days)`}
		}
		delay = time.Duration(*in.Delay) * time.Second
	}
	if in.UniqueFor < 0 || in.UniqueFor > int64(jobs.MaxDelay/time.Second) {
		return jobs.EnqueueOpts{}, &requestError{code: "invalid_request", detail: `"unique_for" is whole seconds from 1 to 31536000 (365 days)`}
	}
	opts := jobs.EnqueueOpts{RunAt: runAt, Delay: delay, Lane: in.Lane, Tenant: in.Tenant, IdempotencyKey: header(req, "idempotency-key"),
		UniqueKey: in.UniqueKey, Unique: in.Unique, UniqueFor: time.Duration(in.UniqueFor) * time.Second, After: in.After, Tags: in.Tags}
	if in.StartBy != nil {
		opts.StartBy = *in.StartBy
	}
	return opts, nil
}

// getJob serves GET /v1/jobs/{id}: 200 with the job and its payload (its
// jobs:"secret" fields masked), or 404 for an unknown id, a malformed id and
// another owner's job alike.
func (a *API) getJob(ctx context.Context, req events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	owner := rq.caller
	if _, ok := req.QueryStringParameters["wait"]; ok {
		// API Gateway routes by path: a wait has a route and a function
		// of its own, so it cannot hold this one's instances.
		return problem(ctx, a.log, &requestError{code: "invalid_request", detail: "to wait for a change, GET " + pathOf(deploy.RouteWaitJob, "id", rq.params["id"]) + "?timeout=N"})
	}
	v, err := a.svc.Get(ctx, owner, rq.params["id"])
	if err != nil {
		return problem(ctx, a.log, err)
	}
	return versioned(jsonResponse(http.StatusOK, v), v)
}

// waitJob serves GET /v1/jobs/{id}/wait?timeout=N: the job as GetJob
// answers it, as soon as its version (its ETag) differs from the
// If-None-Match header's (the job as first read, without one), or after
// N seconds (1 to 20) as it then is. 429 too_many_waits (Retry-After)
// when the caller has its most waits open; 404 as GetJob.
func (a *API) waitJob(ctx context.Context, req events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	max := int(jobs.MaxWait / time.Second)
	n, err := strconv.Atoi(req.QueryStringParameters["timeout"])
	if err != nil || n < 1 || n > max {
		return problem(ctx, a.log, &requestError{code: "invalid_request", detail: fmt.Sprintf("timeout is 1 to %d (seconds)", max)})
	}
	seen := strings.Trim(strings.TrimPrefix(header(req, "if-none-match"), "W/"), `"`)
	v, _, err := a.svc.Wait(ctx, rq.caller, rq.params["id"], seen, time.Duration(n)*time.Second)
	if err != nil {
		return problem(ctx, a.log, err)
	}
	return versioned(jsonResponse(http.StatusOK, v), v)
}

// versioned sets resp's ETag to v's version (View.Version), what a wait
// sends back as If-None-Match.
func versioned(resp events.APIGatewayV2HTTPResponse, v *jobs.View) events.APIGatewayV2HTTPResponse {
	resp.Headers["ETag"] = `"` + v.Version() + `"`
	return resp
}

// cancelJob serves POST /v1/jobs/{id}/cancel: 200 with the cancelled job
// when it was queued, 202 with the job (cancel_requested true) when it was
// running and its run is being stopped, 409 when it had already finished,
// 404 as GetJob.
func (a *API) cancelJob(ctx context.Context, req events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	owner := rq.caller
	return a.cancelAs(ctx, owner, rq.params["id"])
}

// cancelAs cancels owner's job id and answers as CancelJob does.
func (a *API) cancelAs(ctx context.Context, owner, id string) events.APIGatewayV2HTTPResponse {
	rec, err := a.svc.Cancel(ctx, owner, id)
	switch {
	case errors.Is(err, jobs.ErrAlreadyFinal):
		return problem(ctx, a.log, &requestError{code: "already_finished", detail: "the job already ended " + string(rec.Status)})
	case err != nil:
		return problem(ctx, a.log, err)
	case rec.Status == jobs.StatusRunning:
		return jsonResponse(http.StatusAccepted, rec)
	}
	return jsonResponse(http.StatusOK, rec)
}

// signalJob serves POST /v1/jobs/{id}/signals/{name}: the body is the
// signal's payload. 202 with {"woke", "duplicate": false} when it was
// stored (woke: the job was waiting for it), 200 with "duplicate": true
// when the job had a signal of that name (nothing changed), 404 as
// GetJob, 409 already_finished or signal_limit, 422 unknown_signal or
// invalid_payload.
func (a *API) signalJob(ctx context.Context, req events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	return a.signalAs(ctx, req, rq.caller, rq.params)
}

// signalAs delivers the request's signal to owner's job, answering as
// signalJob does.
func (a *API) signalAs(ctx context.Context, req events.APIGatewayV2HTTPRequest, owner string, params map[string]string) events.APIGatewayV2HTTPResponse {
	body, err := jsonBody(req, maxSignalBody)
	if err != nil {
		return problem(ctx, a.log, err)
	}
	res, err := a.svc.Signal(ctx, owner, params["id"], params["name"], body)
	switch {
	case errors.Is(err, jobs.ErrAlreadyFinal):
		return problem(ctx, a.log, &requestError{code: "already_finished", detail: "the job already ended: a signal changes nothing"})
	case err != nil:
		return problem(ctx, a.log, err)
	case res.Duplicate:
		return jsonResponse(http.StatusOK, res)
	}
	return jsonResponse(http.StatusAccepted, res)
}

// callback serves POST /v1/callbacks/{token}, the one route without a
// caller identity: the body is the signal's payload, the token its
// authority. 202 as signalJob; 401 invalid_token, 410 token_expired,
// 409 token_used or already_finished, 404 for a job that is gone, 422 as
// signalJob. The token is never logged: problems log codes, not paths.
func (a *API) callback(ctx context.Context, req events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	body, err := jsonBody(req, maxSignalBody)
	if err != nil {
		return problem(ctx, a.log, err)
	}
	res, err := a.svc.Callback(ctx, rq.params["token"], body)
	switch {
	case errors.Is(err, jobs.ErrAlreadyFinal):
		return problem(ctx, a.log, &requestError{code: "already_finished", detail: "the job already ended: a signal changes nothing"})
	case err != nil:
		return problem(ctx, a.log, err)
	}
	return jsonResponse(http.StatusAccepted, res)
}

// batchBody is the POST /v1/batches body.
type batchBody struct {
	Jobs       []jobs.JobSpec `json:"jobs"`
	Completion *jobs.JobSpec  `json:"completion"`
}

// enqueueBatch serves POST /v1/batches: 202 with the batch and its
// Location. Every job is validated first; one bad job refuses the whole
// request (the problem names its index) and stores nothing.
func (a *API) enqueueBatch(ctx context.Context, req events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	owner := rq.caller
	body, err := jsonBody(req, MaxBatchBodyBytes)
	if err != nil {
		return problem(ctx, a.log, err)
	}
	var in batchBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return problem(ctx, a.log, &requestError{code: "invalid_request", detail: `the body must be {"jobs": [{"kind", "payload"}...], "completion": {"kind", "payload"}}; ` + decodeReason(err)})
	}
	if len(in.Jobs) == 0 || len(in.Jobs) > maxBatchJobsPerRequest {
		return problem(ctx, a.log, &requestError{code: "invalid_request", detail: fmt.Sprintf(`"jobs" holds 1 to %d jobs`, maxBatchJobsPerRequest)})
	}
	res, err := a.svc.EnqueueBatch(ctx, jobs.BatchRequest{Owner: owner, Jobs: in.Jobs, Completion: in.Completion, IdempotencyKey: header(req, "idempotency-key")})
	if err != nil {
		return problem(ctx, a.log, err)
	}
	return accepted(res.Batch, pathOf(deploy.RouteGetBatch, "id", res.Batch.ID), !res.Replayed)
}

// getBatch serves GET /v1/batches/{id}?page_token=&limit=: the batch, its
// counts, and a page of its job ids (limit 1 to 1000, default 100). Page
// tokens are signed and bound to the caller and the batch: another's, or
// an altered one, is a 400.
func (a *API) getBatch(ctx context.Context, req events.APIGatewayV2HTTPRequest, rq routed) events.APIGatewayV2HTTPResponse {
	owner := rq.caller
	id := rq.params["id"]
	limit := 0
	if v := req.QueryStringParameters["limit"]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return problem(ctx, a.log, &requestError{code: "invalid_request", detail: "limit is 1 to 1000"})
		}
		limit = n
	}
	b, err := a.svc.GetBatch(ctx, owner, id, req.QueryStringParameters["page_token"], limit)
	if err != nil {
		return problem(ctx, a.log, err)
	}
	return jsonResponse(http.StatusOK, b)
}

// endpoints are what serves each route of the table (by its id in
// deploy.Routes) but the schedules', which Schedules serves.
func (a *API) endpoints() map[string]endpoint {
	return map[string]endpoint{
		deploy.RouteEnqueue: a.enqueue, deploy.RouteEnqueueBatch: a.enqueueBatch,
		deploy.RouteGetJob: a.getJob, deploy.RouteWaitJob: a.waitJob, deploy.RouteListJobs: a.listJobs, deploy.RouteCounts: a.counts,
		deploy.RouteListKinds: a.listKinds, deploy.RouteGetBatch: a.getBatch,
		deploy.RouteCancelJob: a.cancelJob, deploy.RouteRetryJob: a.retryJob, deploy.RouteBulkAction: a.bulk,
		deploy.RouteReplayJob:     a.replayJob,
		deploy.RouteAdminListJobs: a.adminListJobs, deploy.RouteAdminGetJob: a.adminGetJob,
		deploy.RouteAdminCounts: a.adminCounts, deploy.RouteAdminJobAction: a.adminJobAction,
		deploy.RouteAdminDeadLetters: a.deadLetterDepths, deploy.RouteAdminDeadLetterAction: a.deadLetterAction,
		deploy.RoutePause: a.pause(asCaller), deploy.RouteResume: a.resume(asCaller), deploy.RouteListPauses: a.listPauses(asCaller),
		deploy.RouteAdminPause: a.pause(asOperator), deploy.RouteAdminResume: a.resume(asOperator), deploy.RouteAdminListPauses: a.listPauses(asOperator),
		deploy.RouteScheduleAction: a.scheduleAction(asCaller), deploy.RouteAdminScheduleAction: a.scheduleAction(asOperator),
		deploy.RouteSignalJob: a.signalJob, deploy.RouteAdminSignalJob: a.adminSignalJob, deploy.RouteCallback: a.callback,
		deploy.RouteStartUpload: a.startUpload, deploy.RouteCompleteUpload: a.completeUpload, deploy.RouteGetUpload: a.getUpload,
	}
}

// router is the API's router over the table.
func (a *API) router() *router {
	r := &router{routes: a.routes, endpoints: a.eps, operators: a.operators, log: a.log}
	r.unmatched = func(path string) error {
		if r.servesPath(path) {
			return errMethodNotAllowed
		}
		return jobs.ErrNotFound
	}
	return r
}

// Route serves a request by the route table (deploy.Routes, which the
// construct and the local gateway also read), for a function or gateway
// serving several routes: the route's method and path choose what serves
// it, and its auth who may call it (401 without a caller identity, 403
// for a caller the route does not admit, before anything is read); 405
// for a path served with another method, 404 for any other. It never
// returns an error; a panic becomes a 500 problem.
func (a *API) Route(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return a.router().serve(ctx, req), nil
}

// requestPath is the request's path as the client sent it.
func requestPath(req events.APIGatewayV2HTTPRequest) string {
	if req.RawPath != "" {
		return req.RawPath
	}
	return req.RequestContext.HTTP.Path
}

// recoverTo turns a handler's panic into a 500 problem (deferred).
func recoverTo(ctx context.Context, log *slog.Logger, resp *events.APIGatewayV2HTTPResponse) {
	if p := recover(); p != nil {
		log.LogAttrs(ctx, slog.LevelError, "request handler panicked")
		*resp = problem(ctx, log, errInternal)
	}
}

// Owner returns the caller's identity from the request context: the IAM
// principal's ARN (an assumed role's session name dropped, so every session
// of a role is one owner), or "jwt:" plus the token's issuer and subject.
func Owner(req events.APIGatewayV2HTTPRequest) (string, bool) {
	auth := req.RequestContext.Authorizer
	if auth == nil {
		return "", false
	}
	if iam := auth.IAM; iam != nil {
		// A Cognito identity pool's callers all assume the pool's role:
		// each is its own identity, not the role.
		if c := iam.CognitoIdentity; c.IdentityID != "" && c.IdentityPoolID != "" {
			return "cognito:" + c.IdentityPoolID + "#" + c.IdentityID, true
		}
		if iam.UserARN != "" {
			return principalOwner(iam.UserARN)
		}
	}
	if auth.JWT != nil {
		if sub := auth.JWT.Claims["sub"]; sub != "" {
			if iss := auth.JWT.Claims["iss"]; iss != "" {
				return "jwt:" + iss + "#" + sub, true
			}
			return "jwt:" + sub, true
		}
	}
	return "", false
}

// principalOwner is the owner of an IAM principal's ARN, parsed with the
// SDK's ARN parser (never matched by substring: IAM paths may hold ':' and
// '/'). Only an STS assumed-role session is normalised, to its role, so all
// sessions of a role own the same jobs:
// arn:aws:sts::123:assumed-role/Role/session -> arn:aws:sts::123:assumed-role/Role.
// Users (any path), roles, federated users and the root are their own ARN.
// A string that is not an ARN is no owner.
func principalOwner(s string) (string, bool) {
	a, err := arn.Parse(s)
	if err != nil || a.Resource == "" {
		return "", false
	}
	if a.Service == "sts" {
		if rest, ok := strings.CutPrefix(a.Resource, "assumed-role/"); ok {
			role, _, found := strings.Cut(rest, "/")
			if !found || role == "" {
				return "", false
			}
			a.Resource = "assumed-role/" + role
		}
	}
	return a.String(), true
}

func header(req events.APIGatewayV2HTTPRequest, name string) string {
	if v, ok := req.Headers[name]; ok {
		return v
	}
	for k, v := range req.Headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

func checkContentType(ct string) error {
	if ct == "" {
		return errMediaType
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return errMediaType
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return errMediaType
	}
	return nil
}

// jsonBody checks the media type and reads a JSON body of at most limit
// bytes that passes the checks of outside JSON (jsonin.Check).
func jsonBody(req events.APIGatewayV2HTTPRequest, limit int) ([]byte, error) {
	if err := checkContentType(header(req, "content-type")); err != nil {
		return nil, err
	}
	body, err := readBody(req, limit)
	if err != nil {
		return nil, err
	}
	if err := jsonin.Check(body, limit); err != nil {
		return nil, &requestError{code: "malformed_json", detail: reason(err)}
	}
	return body, nil
}

// accepted is a 202 with the created resource, its Location, and whether an
// idempotent retry returned it.
func accepted(view any, location string, created bool) events.APIGatewayV2HTTPResponse {
	resp := jsonResponse(http.StatusAccepted, view)
	resp.Headers["Location"] = location
	if !created {
		resp.Headers["Idempotent-Replayed"] = "true"
	}
	return resp
}

func readBody(req events.APIGatewayV2HTTPRequest, limit int) ([]byte, error) {
	if !req.IsBase64Encoded {
		if len(req.Body) > limit {
			return nil, errTooLarge
		}
		return []byte(req.Body), nil
	}
	if base64.StdEncoding.DecodedLen(len(req.Body)) > limit+3 {
		return nil, errTooLarge
	}
	b, err := base64.StdEncoding.DecodeString(req.Body)
	if err != nil {
		return nil, &requestError{code: "malformed_body", detail: "the body is not valid base64"}
	}
	if len(b) > limit {
		return nil, errTooLarge
	}
	return b, nil
}

func reason(err error) string {
	var je *jsonin.Error
	if errors.As(err, &je) {
		return je.Reason
	}
	return "malformed"
}

func decodeReason(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "field " + te.Field + " has the wrong type"
	}
	if msg, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if len(msg) > 70 {
			msg = msg[:70]
		}
		return "unknown field " + msg
	}
	return "it does not decode"
}

// maxBatchJobsPerRequest bounds the jobs of one POST /v1/batches (a batch
// holds up to jobs.MaxBatchJobs: the rest come from a Go caller).
const maxBatchJobsPerRequest = 1000
