package httpapi_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
)

// The admin routes: an operator reads and acts on any owner's jobs; anyone
// else gets 403 before anything is read, for known and unknown ids alike.
func TestAdminRoutes(t *testing.T) {
	e := newEnv(t)
	opOwner, _ := httpapi.Owner(caller(t, "other", http.MethodGet, "/", nil, ""))
	meOwner, _ := httpapi.Owner(caller(t, "me", http.MethodGet, "/", nil, ""))
	e.api = e.api.WithOperators([]string{opOwner})
	mine := e.enqueueAs(t, "me", "a").ID
	e.fail(t, mine)
	// A caller who is not an operator.
	for _, path := range []string{"/v1/admin/jobs", "/v1/admin/jobs/" + mine, "/v1/admin/jobs/00000000-0000-0000-0000-000000000000"} {
		if p := decodeProblem(t, e.route(t, caller(t, "me", http.MethodGet, path, map[string]string{"owner": "x"}, ""))); p.Status != http.StatusForbidden || p.Code != "forbidden" {
			t.Errorf("GET %s by a non-operator: %+v", path, p)
		}
	}
	if p := decodeProblem(t, e.route(t, caller(t, "me", http.MethodPost, "/v1/admin/jobs/"+mine+"/retry", nil, ""))); p.Status != http.StatusForbidden {
		t.Errorf("retry by a non-operator: %+v", p)
	}
	// The operator.
	l := decodeList(t, e.route(t, caller(t, "other", http.MethodGet, "/v1/admin/jobs", map[string]string{"owner": meOwner, "status": "failed"}, "")))
	if len(l.Jobs) != 1 || l.Jobs[0].ID != mine {
		t.Fatalf("the operator's listing of another owner's failed jobs: %+v", l)
	}
	if p := decodeProblem(t, e.route(t, caller(t, "other", http.MethodGet, "/v1/admin/jobs", nil, ""))); p.Status != http.StatusBadRequest {
		t.Fatalf("an admin listing without owner: %+v", p)
	}
	resp := e.route(t, caller(t, "other", http.MethodGet, "/v1/admin/jobs/"+mine, nil, ""))
	var v struct {
		Job struct {
			ID      string
			Payload map[string]string
		}
		Owner string
	}
	if err := json.Unmarshal([]byte(resp.Body), &v); resp.StatusCode != http.StatusOK || err != nil || v.Job.ID != mine || v.Owner != meOwner || v.Job.Payload["text"] != "a" {
		t.Fatalf("the operator's read: %d %s", resp.StatusCode, resp.Body)
	}
	if r := e.route(t, caller(t, "other", http.MethodPost, "/v1/admin/jobs/"+mine+"/retry", nil, "")); r.StatusCode != http.StatusOK {
		t.Fatalf("the operator's retry: %d %s", r.StatusCode, r.Body)
	}
	if r := e.route(t, caller(t, "other", http.MethodPost, "/v1/admin/jobs/"+mine+"/cancel", nil, "")); r.StatusCode != http.StatusOK {
		t.Fatalf("the operator's cancel: %d %s", r.StatusCode, r.Body)
	}
	if v, _ := e.svcGet(t, "me", mine); v.Status != "cancelled" {
		t.Fatalf("the owner sees %s", v.Status)
	}
	if p := decodeProblem(t, e.route(t, caller(t, "other", http.MethodGet, "/v1/admin/jobs/00000000-0000-0000-0000-000000000000", nil, ""))); p.Status != http.StatusNotFound {
		t.Fatalf("an unknown id for the operator: %+v", p)
	}
	// Without operators, nobody.
	e.api = e.api.WithOperators(nil)
	if p := decodeProblem(t, e.route(t, caller(t, "other", http.MethodGet, "/v1/admin/jobs/"+mine, nil, ""))); p.Status != http.StatusForbidden {
		t.Fatalf("with no operators: %+v", p)
	}
}
