package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

type decision struct {
	Approved bool `json:"approved"`
}

// signalEnv is an env whose "echo" kind declares the signal "approval",
// with a sealer (signals are stored sealed).
func signalEnv(t *testing.T) *env {
	t.Helper()
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "echo", func(_ context.Context, j *jobs.Job[echoPayload]) (jobs.JSON[echoPayload], error) {
		return jobs.JSON[echoPayload]{V: j.Payload}, nil
	}, &jobs.KindOpts{Signals: map[string]any{"approval": decision{}}})
	sealer, err := jobs.NewAESSealer([]byte(strings.Repeat("s", 32)))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{store: jobstest.NewMemStore(nil), queue: &jobstest.MemQueue{}}
	e.svc, err = testroles.Service(jobs.Config{Registry: reg, Store: e.store, Queue: e.queue, Sealer: sealer, PageTokenKey: []byte(strings.Repeat("k", 32))})
	if err != nil {
		t.Fatal(err)
	}
	e.api = httpapi.New(e.svc, e.cfg)
	return e
}

// POST /v1/jobs/{id}/signals/{name}: 202 when stored, 200 for a
// duplicate, and each refusal with its status and code, storing nothing;
// an operator signals any owner's job, anyone else gets 403.
func TestSignalRoutes(t *testing.T) {
	e := signalEnv(t)
	opOwner, _ := httpapi.Owner(caller(t, "other", http.MethodGet, "/", nil, ""))
	e.cfg.Operators = []string{opOwner}
	e.api = httpapi.New(e.svc, e.cfg)
	id := e.enqueueAs(t, "me", "a").ID
	path := "/v1/jobs/" + id + "/signals/"
	for _, c := range []struct {
		who, path, body string
		status          int
		code            string
	}{
		{"me", path + "approvals", `{"approved":true}`, http.StatusUnprocessableEntity, "unknown_signal"},
		{"me", path + "approval", `{"approved":"yes"}`, http.StatusUnprocessableEntity, "invalid_payload"},
		{"me", path + "approval", `{"approved":true,"by":"x"}`, http.StatusUnprocessableEntity, "invalid_payload"},
		{"me", path + "approval", `{"approved":`, http.StatusBadRequest, "malformed_json"},
		{"me", path + "approval", `{"pad":"` + strings.Repeat("x", 4<<10) + `"}`, http.StatusRequestEntityTooLarge, "too_large"},
		{"other", path + "approval", `{"approved":true}`, http.StatusNotFound, "not_found"},
		{"me", "/v1/admin/jobs/" + id + "/signals/approval", `{"approved":true}`, http.StatusForbidden, "forbidden"},
	} {
		if p := decodeProblem(t, e.route(t, caller(t, c.who, http.MethodPost, c.path, nil, c.body))); p.Status != c.status || p.Code != c.code {
			t.Errorf("POST %s %.40s by %s: %d %s, want %d %s", c.path, c.body, c.who, p.Status, p.Code, c.status, c.code)
		}
	}
	resp := e.route(t, caller(t, "other", http.MethodPost, "/v1/admin/jobs/"+id+"/signals/approval", nil, `{"approved":true}`))
	if resp.StatusCode != http.StatusAccepted || resp.Body != `{"duplicate":false,"woke":false}` {
		t.Fatalf("the operator's signal: %d %s", resp.StatusCode, resp.Body)
	}
	resp = e.route(t, caller(t, "me", http.MethodPost, path+"approval", nil, `{"approved":false}`))
	if resp.StatusCode != http.StatusOK || resp.Body != `{"duplicate":true,"woke":false}` {
		t.Fatalf("the owner's signal after the operator's: %d %s", resp.StatusCode, resp.Body)
	}
}

// POST /v1/callbacks/{token} needs no caller identity (its token is its
// authority): a bad token is a 401, nothing read; the routes with a caller
// still refuse a request without one.
func TestCallbackRouteNeedsNoCaller(t *testing.T) {
	e := signalEnv(t)
	anonymous := func(path, body string) events.APIGatewayV2HTTPRequest {
		req := caller(t, "me", http.MethodPost, path, nil, body)
		req.RequestContext.Authorizer = nil
		return req
	}
	if p := decodeProblem(t, e.route(t, anonymous("/v1/callbacks/cb1.bm90LWEtdG9rZW4", `{"approved":true}`))); p.Status != http.StatusUnauthorized || p.Code != "invalid_token" {
		t.Fatalf("a forged token: %+v", p)
	}
	id := e.enqueueAs(t, "me", "a").ID
	if p := decodeProblem(t, e.route(t, anonymous("/v1/jobs/"+id+"/signals/approval", `{"approved":true}`))); p.Status != http.StatusUnauthorized || p.Code != "unauthenticated" {
		t.Fatalf("a signal without a caller: %+v", p)
	}
}
