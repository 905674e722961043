package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
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
	call("/v1/pauses/resume", post("me", "/v1/pauses/resume", `{"kind":"echo"}`), http.StatusNoContent) // my own row
	if got := view("me", mine.ID); got != "paused" {
		t.Fatalf("after my resume, under the operator's pause, my job waits on %q, want paused", got)
	}
	call("/v1/pauses/resume", post("me", "/v1/pauses/resume", `{"kind":"echo"}`), http.StatusConflict) // only the operator's
	call("/v1/pauses", post("me", "/v1/pauses", `{"lane":"default"}`), http.StatusBadRequest)
	call("/v1/pauses", post("me", "/v1/pauses", `{"kind":"echo","for":99999999}`), http.StatusBadRequest)
	call("/v1/pauses", post("me", "/v1/pauses", `{"kind":"nope"}`), http.StatusUnprocessableEntity)
	call("/v1/pauses", post("me", "/v1/pauses", `{"kind":"echo","extra":1}`), http.StatusBadRequest)
	call("/v1/admin/pauses", post("other", "/v1/admin/pauses", `{"lane":"default","for":60}`), http.StatusCreated)
	resp = call("/v1/admin/pauses", caller(t, "other", "GET", "/v1/admin/pauses", nil, ""), http.StatusOK)
	if err := json.Unmarshal([]byte(resp.Body), &list); err != nil || len(list.Pauses) != 2 || !strings.HasSuffix(list.Pauses[0].ID, ":operator") {
		t.Fatalf("every pause (the operator's of my jobs, the lane's): %s", resp.Body)
	}
	call("/v1/admin/pauses/resume", post("other", "/v1/admin/pauses/resume", `{"kind":"echo","owner":"`+me+`"}`), http.StatusNoContent)
	call("/v1/admin/pauses/resume", post("other", "/v1/admin/pauses/resume", `{"kind":"echo","owner":"`+me+`"}`), http.StatusNotFound)
	call("/v1/admin/pauses/resume", post("other", "/v1/admin/pauses/resume", `{"lane":"default"}`), http.StatusNoContent)
	call("/v1/pauses/resume", post("me", "/v1/pauses/resume", `{"kind":"echo"}`), http.StatusNotFound)
	if got := view("me", mine.ID); got != "" {
		t.Fatalf("my job waits on %q after the resumes, want nothing", got)
	}
}

// The schedule actions answer as the spec says: a caller runs its runtime
// schedule (a repeat with the Idempotency-Key returns the same job),
// pauses and resumes it; the operators' route refuses anyone else.
func TestScheduleActionRoutes(t *testing.T) {
	s := loadSpec(t)
	e := newEnv(t)
	op, _ := httpapi.Owner(caller(t, "other", "GET", "/", nil, ""))
	me, _ := httpapi.Owner(caller(t, "me", "GET", "/", nil, ""))
	e.reconfigure(func(c *httpapi.Config) { c.Operators = []string{op} })
	if err := e.store.AddOwnerSchedule(context.Background(), wire.OwnerKey(me), jobs.Schedule{Name: "mine", Expression: "rate(1 day)", TimeZone: "UTC",
		Kind: "echo", Payload: []byte(`{"text":"hi"}`), Overlap: jobs.OverlapAllow, Owner: me}, 20); err != nil {
		t.Fatal(err)
	}
	call := func(who, path, key, body string, want int) events.APIGatewayV2HTTPResponse {
		t.Helper()
		req := caller(t, who, "POST", path, nil, body)
		if body != "" {
			req.Headers["content-type"] = "application/json"
		}
		if key != "" {
			req.Headers["idempotency-key"] = key
		}
		resp := e.route(t, req)
		specPath := "/v1/schedules/{name}/{action}"
		if strings.HasPrefix(path, "/v1/admin/") {
			specPath = "/v1/admin/schedules/{name}/{action}"
		}
		s.check(t, specPath, "POST", resp)
		if resp.StatusCode != want {
			t.Fatalf("POST %s as %s: %d %s, want %d", path, who, resp.StatusCode, resp.Body, want)
		}
		return resp
	}
	first := decodeView(t, call("me", "/v1/schedules/mine/run", "k1", "", http.StatusAccepted))
	again := call("me", "/v1/schedules/mine/run", "k1", "", http.StatusAccepted)
	if v := decodeView(t, again); v.ID != first.ID || first.ManualRunOf != "mine" || again.Headers["Idempotent-Replayed"] != "true" {
		t.Fatalf("run again with the key: %s (headers %v); the first %+v", again.Body, again.Headers, first)
	}
	call("me", "/v1/schedules/mine/pause", "", `{"for":3600}`, http.StatusCreated)
	call("me", "/v1/schedules/mine/resume", "", "", http.StatusNoContent)
	call("me", "/v1/schedules/mine/resume", "", "", http.StatusNotFound)
	call("me", "/v1/schedules/nope/run", "", "", http.StatusNotFound)
	call("me", "/v1/schedules/mine/explode", "", "", http.StatusNotFound)
	call("me", "/v1/schedules/mine/pause", "", `{"for":-1}`, http.StatusBadRequest)
	call("me", "/v1/schedules/mine/run", "", `{"owner":"someone"}`, http.StatusBadRequest)
	call("me", "/v1/admin/schedules/mine/run", "", `{"owner":"`+me+`"}`, http.StatusForbidden)
	call("other", "/v1/admin/schedules/mine/run", "", `{"owner":"`+me+`"}`, http.StatusAccepted)
}
