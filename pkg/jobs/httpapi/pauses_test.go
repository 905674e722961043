package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
)

// The pause routes answer as the spec says; a caller pauses its own jobs
// of a kind (its job's view then shows waiting_on paused, another
// owner's does not), only operators reach /v1/admin/pauses, and an owner
// cannot end an operator's pause of its jobs.
func TestPauseRoutes(t *testing.T) {
	s := loadSpec(t)
	e := newEnv(t)
	op, _ := httpapi.Owner(caller(t, "other", "GET", "/", nil, ""))
	me, _ := httpapi.Owner(caller(t, "me", "GET", "/", nil, ""))
	e.reconfigure(func(c *httpapi.Config) { c.Operators = []string{op} })
	post := func(who, path, body string) events.APIGatewayV2HTTPRequest {
		req := caller(t, who, "POST", path, nil, body)
		req.Headers["content-type"] = "application/json"
		return req
	}
	call := func(specPath string, req events.APIGatewayV2HTTPRequest, want int) events.APIGatewayV2HTTPResponse {
		t.Helper()
		resp := e.route(t, req)
		s.check(t, specPath, req.RequestContext.HTTP.Method, resp)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", req.RequestContext.HTTP.Method, req.RawPath, resp.StatusCode, resp.Body, want)
		}
		return resp
	}
	call("/v1/pauses", post("me", "/v1/pauses", `{"kind":"echo","for":3600}`), http.StatusCreated)
	mine := e.enqueueAs(t, "me", "a")
	theirs := e.enqueueAs(t, "other", "b")
	view := func(who, id string) string {
		resp := e.route(t, caller(t, who, "GET", "/v1/jobs/"+id, nil, ""))
		s.check(t, "/v1/jobs/{id}", "GET", resp)
		return decodeView(t, resp).WaitingOn
	}
	if got := view("me", mine.ID); got != "paused" {
		t.Fatalf("my job waits on %q, want paused", got)
	}
	if got := view("other", theirs.ID); got != "" {
		t.Fatalf("another owner's job waits on %q, want nothing: my pause is mine", got)
	}
	var list httpapi.PauseList
	resp := call("/v1/pauses", caller(t, "other", "GET", "/v1/pauses", nil, ""), http.StatusOK)
	if err := json.Unmarshal([]byte(resp.Body), &list); err != nil || len(list.Pauses) != 0 {
		t.Fatalf("another owner's pauses: %s", resp.Body)
	}
	call("/v1/admin/pauses", post("me", "/v1/admin/pauses", `{"lane":"default"}`), http.StatusForbidden)
	call("/v1/admin/pauses", post("other", "/v1/admin/pauses", `{"kind":"echo","owner":"`+me+`"}`), http.StatusCreated)
	call("/v1/pauses/resume", post("me", "/v1/pauses/resume", `{"kind":"echo"}`), http.StatusConflict)
	call("/v1/pauses", post("me", "/v1/pauses", `{"lane":"default"}`), http.StatusBadRequest)
	call("/v1/pauses", post("me", "/v1/pauses", `{"kind":"echo","for":99999999}`), http.StatusBadRequest)
	call("/v1/pauses", post("me", "/v1/pauses", `{"kind":"nope"}`), http.StatusUnprocessableEntity)
	call("/v1/pauses", post("me", "/v1/pauses", `{"kind":"echo","extra":1}`), http.StatusBadRequest)
	call("/v1/admin/pauses", post("other", "/v1/admin/pauses", `{"lane":"default","for":60}`), http.StatusCreated)
	resp = call("/v1/admin/pauses", caller(t, "other", "GET", "/v1/admin/pauses", nil, ""), http.StatusOK)
	if err := json.Unmarshal([]byte(resp.Body), &list); err != nil || len(list.Pauses) != 2 {
		t.Fatalf("every pause: %s", resp.Body)
	}
	call("/v1/admin/pauses/resume", post("other", "/v1/admin/pauses/resume", `{"kind":"echo","owner":"`+me+`"}`), http.StatusNoContent)
	call("/v1/admin/pauses/resume", post("other", "/v1/admin/pauses/resume", `{"kind":"echo","owner":"`+me+`"}`), http.StatusNotFound)
	call("/v1/admin/pauses/resume", post("other", "/v1/admin/pauses/resume", `{"lane":"default"}`), http.StatusNoContent)
	call("/v1/pauses/resume", post("me", "/v1/pauses/resume", `{"kind":"echo"}`), http.StatusNotFound)
	if got := view("me", mine.ID); got != "" {
		t.Fatalf("my job waits on %q after the resumes, want nothing", got)
	}
}
