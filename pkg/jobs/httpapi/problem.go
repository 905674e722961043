package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/errtypes"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// Problem is an RFC 9457 problem details body, with a stable Code.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
	// Index names the refused job of a batch request (-1: the completion job).
	Index *int `json:"index,omitempty"`
}

// ProblemTypeBase prefixes every problem type URI; the code follows.
const ProblemTypeBase = "urn:lambdajobs:problem:"

// requestError is a 4xx caused by the request itself; detail describes the
// caller's own input only.
type requestError struct {
	code   string
	detail string
}

func (e *requestError) Error() string { return e.code + ": " + e.detail }

var (
	errUnauthenticated  = &requestError{code: "unauthenticated", detail: "the request carries no caller identity"}
	errMediaType        = &requestError{code: "unsupported_media_type", detail: "send Content-Type: application/json"}
	errTooLarge         = &requestError{code: "too_large", detail: "the body is larger than the limit"}
	errMethodNotAllowed = &requestError{code: "method_not_allowed", detail: "use GET or POST /v1/jobs, GET /v1/jobs/{id}, POST /v1/jobs/{id}/cancel or /retry, POST /v1/bulk/cancel or /retry"}
	errInternal         = errors.New("internal")
)

// statuses maps each problem code to its status and title: the one table
// from errors to HTTP.
var statuses = map[string]struct {
	status int
	title  string
}{
	"malformed_json":          {http.StatusBadRequest, "Malformed JSON"},
	"malformed_body":          {http.StatusBadRequest, "Malformed body"},
	"invalid_request":         {http.StatusBadRequest, "Invalid request"},
	"invalid_idempotency_key": {http.StatusBadRequest, "Invalid idempotency key"},
	"unauthenticated":         {http.StatusUnauthorized, "Unauthenticated"},
	"invalid_token":           {http.StatusUnauthorized, "Invalid callback token"},
	"token_used":              {http.StatusConflict, "Callback token used"},
	"token_expired":           {http.StatusGone, "Callback token expired"},
	"forbidden":               {http.StatusForbidden, "Forbidden"},
	"not_found":               {http.StatusNotFound, "Not found"},
	"method_not_allowed":      {http.StatusMethodNotAllowed, "Method not allowed"},
	"idempotency_conflict":    {http.StatusConflict, "Idempotency key reused"},
	"already_finished":        {http.StatusConflict, "Job already finished"},
	"schedule_exists":         {http.StatusConflict, "Schedule exists"},
	"not_retryable":           {http.StatusConflict, "Job not retryable"},
	"not_redrivable":          {http.StatusConflict, "Dead letter not redriven"},
	"schedule_limit":          {http.StatusConflict, "Schedule limit reached"},
	"dependency_failed":       {http.StatusConflict, "A job it runs after failed"},
	"unique_key_held":         {http.StatusConflict, "Unique key held by another job"},
	"too_many_dependents":     {http.StatusConflict, "Too many jobs run after that job"},
	"pause_limit":             {http.StatusConflict, "Too many pauses"},
	"signal_limit":            {http.StatusConflict, "Too many signals"},
	"unknown_signal":          {http.StatusUnprocessableEntity, "Unknown signal"},
	"paused_by_operator":      {http.StatusConflict, "Paused by an operator"},
	"schedule_overlap":        {http.StatusConflict, "The schedule's last run is unfinished"},
	"unknown_parent":          {http.StatusUnprocessableEntity, "Unknown job to run after"},
	"too_large":               {http.StatusRequestEntityTooLarge, "Request too large"},
	"unsupported_media_type":  {http.StatusUnsupportedMediaType, "Unsupported media type"},
	"unknown_kind":            {http.StatusUnprocessableEntity, "Unknown job kind"},
	"invalid_payload":         {http.StatusUnprocessableEntity, "Invalid payload"},
	"queue_full":              {http.StatusTooManyRequests, "Queue full"},
	"rate_limited":            {http.StatusTooManyRequests, "Rate limited"},
	"too_many_waits":          {http.StatusTooManyRequests, "Too many open waits"},
	"unknown_upload":          {http.StatusUnprocessableEntity, "Unknown upload"},
	"upload_not_ready":        {http.StatusConflict, "Upload not validated yet"},
	"upload_failed":           {http.StatusUnprocessableEntity, "Upload failed"},
	"upload_expired":          {http.StatusGone, "Upload expired"},
	"unavailable":             {http.StatusServiceUnavailable, "Service unavailable"},
	"internal":                {http.StatusInternalServerError, "Internal error"},
}

// classify turns an error into a problem code and a detail safe to return.
func classify(err error) (code, detail string) {
	var re *requestError
	var je *jobs.RequestError
	var pe *jobs.PayloadError
	var qe *jobs.QueueFullError
	var refused *sqsqueue.RefusedError
	switch {
	case errors.As(err, &re):
		return re.code, re.detail
	case errors.As(err, &je):
		return je.Code, je.Detail
	case errors.Is(err, jobs.ErrNotFound):
		return "not_found", "no such job"
	case errors.Is(err, sqsqueue.ErrNoSuchDeadLetter):
		return "not_found", "no such message in the dead-letter queue (redriven, or expired)"
	case errors.As(err, &refused):
		return "not_redrivable", "left in the dead-letter queue: " + sqsqueue.Refusal(refused.Sort)
	case errors.As(err, &pe) && pe.Limit > 0:
		return "too_large", fmt.Sprintf("the payload is larger than the kind's %d bytes", pe.Limit)
	case errors.As(err, &pe):
		return "invalid_payload", "the payload does not fit the kind: " + pe.Reason
	case errors.As(err, &qe):
		if qe.PerOwner {
			return "queue_full", fmt.Sprintf("you have %d queued jobs of kind %q, its cap per owner; retry after the Retry-After seconds", qe.Cap, qe.Kind)
		}
		return "queue_full", fmt.Sprintf("the queued jobs of kind %q are at the kind's cap; retry after the Retry-After seconds", qe.Kind)
	case errors.Is(err, jobs.ErrIdempotencyConflict):
		return "idempotency_conflict", "this Idempotency-Key was used with a different kind or payload"
	case errors.Is(err, jobs.ErrNotResubmittable):
		return "not_retryable", "only a failed or cancelled job outside a batch can be retried"
	case errors.Is(err, jobs.ErrScheduleExists):
		return "schedule_exists", "you have a schedule of that name with another definition; delete it first"
	case errors.Is(err, jobs.ErrScheduleUnconfirmed):
		return "unavailable", "Scheduler did not confirm the schedule; it is kept and listed: repeat the request to complete it, or delete it"
	case errors.Is(err, jobs.ErrUnavailable):
		return "unavailable", "a dependency is unavailable; retry with the same Idempotency-Key"
	}
	return "internal", ""
}

func problem(ctx context.Context, log *slog.Logger, err error) events.APIGatewayV2HTTPResponse {
	code, detail := classify(err)
	st := statuses[code]
	if st.status >= 500 {
		// Log the failing call's type chain, never the text.
		log.LogAttrs(ctx, slog.LevelError, "request failed", slog.String("code", code), slog.String("err_types", errtypes.Of(err)))
	}
	p := Problem{Type: ProblemTypeBase + code, Title: st.title, Status: st.status, Detail: detail, Code: code}
	var be *jobs.BatchJobError
	if errors.As(err, &be) {
		i := be.Index
		p.Index = &i
		if i < 0 {
			p.Detail = "the completion job: " + detail
		} else {
			p.Detail = fmt.Sprintf("jobs[%d]: %s", i, detail)
		}
	}
	resp := jsonResponse(st.status, p)
	resp.Headers["Content-Type"] = "application/problem+json"
	var qe *jobs.QueueFullError
	switch {
	case st.status == http.StatusServiceUnavailable:
		resp.Headers["Retry-After"] = "1"
	case errors.As(err, &qe):
		resp.Headers["Retry-After"] = retryAfter(qe.RetryAfter)
	case st.status == http.StatusTooManyRequests:
		var je *jobs.RequestError
		if errors.As(err, &je) {
			resp.Headers["Retry-After"] = retryAfter(je.RetryAfter())
		}
	}
	return resp
}

func jsonResponse(status int, v any) events.APIGatewayV2HTTPResponse {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"type":"`+ProblemTypeBase+`internal","title":"Internal error","status":500,"code":"internal"}`)
	}
	return events.APIGatewayV2HTTPResponse{
		StatusCode: status,
		Headers:    map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store"},
		Body:       string(body),
	}
}

// ProblemCodes returns every problem code the API can answer with, sorted.
func ProblemCodes() []string {
	codes := make([]string, 0, len(statuses))
	for c := range statuses {
		codes = append(codes, c)
	}
	sort.Strings(codes)
	return codes
}

// retryAfter is a Retry-After header's whole seconds for d: at least 1,
// rounded up (a client retrying on time is then never early).
func retryAfter(d time.Duration) string {
	return strconv.Itoa(int(max(time.Second, d+time.Second-1) / time.Second))
}
