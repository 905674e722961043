package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
)

// caller builds a request by the fixture's IAM caller ("me") or another
// role ("other").
func caller(t *testing.T, who, method, path string, query map[string]string, body string) events.APIGatewayV2HTTPRequest {
	req := schedRequest(t, who, method, path, body)
	req.QueryStringParameters = query
	return req
}

func (e *env) route(t *testing.T, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	t.Helper()
	resp, err := e.api.Route(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func (e *env) enqueueAs(t *testing.T, who, text string) jobs.View {
	t.Helper()
	resp := e.route(t, caller(t, who, http.MethodPost, "/v1/jobs", nil, `{"kind":"echo","payload":{"text":"`+text+`"}}`))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("enqueue: %d %s", resp.StatusCode, resp.Body)
	}
	return decodeView(t, resp)
}

// fail makes a queued job fail, as a worker would.
func (e *env) fail(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	if _, err := e.store.Claim(ctx, id, driver.Claim{Token: "t-" + id, At: now, LeaseUntil: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Finish(ctx, id, "t-"+id, driver.Outcome{Status: jobs.StatusFailed, Code: "boom", At: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
}

func decodeList(t *testing.T, resp events.APIGatewayV2HTTPResponse) httpapi.JobList {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("list: %d %s", resp.StatusCode, resp.Body)
	}
	var l httpapi.JobList
	if err := json.Unmarshal([]byte(resp.Body), &l); err != nil {
		t.Fatal(err)
	}
	return l
}

// GET /v1/jobs: the caller's jobs only, newest first, in pages whose
// tokens work only for their caller and filter; every bad parameter is a
// 400.
func TestListJobs(t *testing.T) {
	e := newEnv(t)
	var mine []string
	for i := range 5 {
		mine = append(mine, e.enqueueAs(t, "me", string(rune('a'+i))).ID)
		time.Sleep(2 * time.Millisecond)
	}
	theirs := e.enqueueAs(t, "other", "x").ID
	e.fail(t, mine[1])
	var got []string
	var firstToken string
	q := map[string]string{"limit": "2"}
	for {
		l := decodeList(t, e.route(t, caller(t, "me", http.MethodGet, "/v1/jobs", q, "")))
		for _, v := range l.Jobs {
			got = append(got, v.ID)
		}
		if l.NextPageToken == nil {
			break
		}
		if firstToken == "" {
			firstToken = *l.NextPageToken
		}
		q = map[string]string{"limit": "2", "page_token": *l.NextPageToken}
	}
	want := []string{mine[4], mine[3], mine[2], mine[1], mine[0]}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("listed %v, want newest first %v", got, want)
	}
	if l := decodeList(t, e.route(t, caller(t, "other", http.MethodGet, "/v1/jobs", nil, ""))); len(l.Jobs) != 1 || l.Jobs[0].ID != theirs {
		t.Fatalf("the other caller's list: %+v", l)
	}
	if l := decodeList(t, e.route(t, caller(t, "me", http.MethodGet, "/v1/jobs", map[string]string{"status": "failed"}, ""))); len(l.Jobs) != 1 || l.Jobs[0].ID != mine[1] || l.Jobs[0].Error == nil {
		t.Fatalf("failed jobs: %+v", l)
	}
	if l := decodeList(t, e.route(t, caller(t, "me", http.MethodGet, "/v1/jobs", map[string]string{"kind": "echo", "status": "queued", "limit": "200"}, ""))); len(l.Jobs) != 4 {
		t.Fatalf("queued echo jobs: %d", len(l.Jobs))
	}
	for name, c := range map[string]struct {
		who string
		q   map[string]string
	}{
		"unknown status":          {"me", map[string]string{"status": "done"}},
		"unregistered kind":       {"me", map[string]string{"kind": "nope"}},
		"limit 0":                 {"me", map[string]string{"limit": "0"}},
		"limit 201":               {"me", map[string]string{"limit": "201"}},
		"limit not a number":      {"me", map[string]string{"limit": "ten"}},
		"created_before not time": {"me", map[string]string{"created_before": "yesterday"}},
		"malformed token":         {"me", map[string]string{"page_token": "garbage"}},
		"forged token":            {"me", map[string]string{"page_token": strings.Replace(firstToken, firstToken[:4], "eyJ2", 1) + "x"}},
		"another caller's token":  {"other", map[string]string{"limit": "2", "page_token": firstToken}},
		"another filter's token":  {"me", map[string]string{"limit": "2", "status": "queued", "page_token": firstToken}},
	} {
		p := decodeProblem(t, e.route(t, caller(t, c.who, http.MethodGet, "/v1/jobs", c.q, "")))
		if p.Status != http.StatusBadRequest || p.Code != "invalid_request" {
			t.Errorf("%s: %+v, want 400 invalid_request", name, p)
		}
	}
	anon := caller(t, "me", http.MethodGet, "/v1/jobs", nil, "")
	anon.RequestContext.Authorizer = nil
	if p := decodeProblem(t, e.route(t, anon)); p.Status != http.StatusUnauthorized {
		t.Fatalf("no caller: %+v", p)
	}
}

// A listing whose last page holds exactly its limit answers
// "next_page_token": null there, as the README promises, not a token that
// leads to an empty page.
func TestListJobsExactlyFullLastPageHasNullToken(t *testing.T) {
	e := newEnv(t)
	for i := range 4 {
		e.enqueueAs(t, "me", string(rune('a'+i)))
	}
	for _, q := range []map[string]string{{"limit": "2"}, {"limit": "2", "status": "queued"}} {
		pages := 0
		for {
			resp := e.route(t, caller(t, "me", http.MethodGet, "/v1/jobs", q, ""))
			l := decodeList(t, resp)
			pages++
			if len(l.Jobs) != 2 {
				t.Fatalf("%v: page %d holds %d jobs, want 2", q, pages, len(l.Jobs))
			}
			if l.NextPageToken == nil {
				if !strings.Contains(resp.Body, `"next_page_token":null`) {
					t.Errorf("%v: last page %s, want \"next_page_token\":null", q, resp.Body)
				}
				break
			}
			if pages == 2 {
				t.Fatalf("%v: the exactly full last page carries a token %q", q, *l.NextPageToken)
			}
			q = map[string]string{"limit": "2", "status": q["status"], "page_token": *l.NextPageToken}
			if q["status"] == "" {
				delete(q, "status")
			}
		}
		if pages != 2 {
			t.Errorf("%v: %d pages, want 2", q, pages)
		}
	}
}

// POST /v1/jobs/{id}/retry: a failed or cancelled job is queued again
// (200), any other status is a 409, another caller's job a 404.
func TestRetryJob(t *testing.T) {
	e := newEnv(t)
	failed := e.enqueueAs(t, "me", "f").ID
	e.fail(t, failed)
	before := len(e.queue.Sent())
	resp := e.route(t, caller(t, "me", http.MethodPost, "/v1/jobs/"+failed+"/retry", nil, ""))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("retry: %d %s", resp.StatusCode, resp.Body)
	}
	v := decodeView(t, resp)
	if v.Status != jobs.StatusQueued || v.Error != nil || v.LastError == nil || *v.LastError != "boom" {
		t.Fatalf("retried: %+v", v)
	}
	if sent := e.queue.Sent(); len(sent) != before+1 || sent[len(sent)-1] != failed {
		t.Fatalf("the retried job was not sent: %v", sent)
	}
	// (A retry within the same millisecond reads as the first one's lost
	// answer, and answers the same job: the store's clock is in ms.)
	time.Sleep(2 * time.Millisecond)
	if p := decodeProblem(t, e.route(t, caller(t, "me", http.MethodPost, "/v1/jobs/"+failed+"/retry", nil, ""))); p.Status != http.StatusConflict || p.Code != "not_retryable" {
		t.Fatalf("retry a queued job: %+v", p)
	}
	if p := decodeProblem(t, e.route(t, caller(t, "other", http.MethodPost, "/v1/jobs/"+failed+"/retry", nil, ""))); p.Status != http.StatusNotFound {
		t.Fatalf("retry another caller's job: %+v", p)
	}
	if p := decodeProblem(t, e.route(t, caller(t, "me", http.MethodPost, "/v1/jobs/"+wire.NewID()+"/retry", nil, ""))); p.Status != http.StatusNotFound {
		t.Fatalf("retry an unknown job: %+v", p)
	}
	cancelled := e.enqueueAs(t, "me", "c").ID
	if r := e.route(t, caller(t, "me", http.MethodPost, "/v1/jobs/"+cancelled+"/cancel", nil, "")); r.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d", r.StatusCode)
	}
	if r := e.route(t, caller(t, "me", http.MethodPost, "/v1/jobs/"+cancelled+"/retry", nil, "")); r.StatusCode != http.StatusOK {
		t.Fatalf("retry a cancelled job: %d %s", r.StatusCode, r.Body)
	}
}

// POST /v1/bulk/{cancel,retry}: the caller's jobs the filter selects,
// counted, resumable; another caller's jobs are never touched.
func TestBulk(t *testing.T) {
	e := newEnv(t)
	for range 3 {
		e.enqueueAs(t, "me", "b")
	}
	theirs := e.enqueueAs(t, "other", "x").ID
	do := func(who, action, body string) httpapi.BulkResult {
		t.Helper()
		resp := e.route(t, caller(t, who, http.MethodPost, "/v1/bulk/"+action, nil, body))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("bulk %s %s: %d %s", action, body, resp.StatusCode, resp.Body)
		}
		var r httpapi.BulkResult
		_ = json.Unmarshal([]byte(resp.Body), &r)
		return r
	}
	if r := do("me", "cancel", `{"status":"queued"}`); r.Matched != 3 || r.Changed != 3 || r.CancelRequested == nil || *r.CancelRequested != 0 || r.ContinuationToken != nil {
		t.Fatalf("bulk cancel: %+v", r)
	}
	if r := do("me", "cancel", `{"status":"queued"}`); r.Matched != 0 {
		t.Fatalf("bulk cancel again: %+v", r)
	}
	if v, _ := e.svcGet(t, "other", theirs); v.Status != jobs.StatusQueued {
		t.Fatalf("another caller's job: %s", v.Status)
	}
	if r := do("me", "retry", `{"kind":"echo"}`); r.Matched != 3 || r.Changed != 3 || r.CancelRequested != nil {
		t.Fatalf("bulk retry: %+v", r)
	}
	for name, c := range map[string]struct{ action, body string }{
		"no filter":      {"cancel", `{}`},
		"unknown status": {"cancel", `{"status":"done"}`},
		"unknown kind":   {"retry", `{"kind":"nope"}`},
		"unknown field":  {"retry", `{"kind":"echo","owner":"x"}`},
		"bad token":      {"retry", `{"kind":"echo","continuation_token":"x.y"}`},
		"unknown action": {"delete", `{"kind":"echo"}`},
	} {
		resp := e.route(t, caller(t, "me", http.MethodPost, "/v1/bulk/"+c.action, nil, c.body))
		if p := decodeProblem(t, resp); p.Status != http.StatusBadRequest && !(c.action == "delete" && p.Status == http.StatusMethodNotAllowed) {
			t.Errorf("%s: %+v", name, p)
		}
	}
}

func (e *env) svcGet(t *testing.T, who, id string) (jobs.View, int) {
	t.Helper()
	resp := e.route(t, caller(t, who, http.MethodGet, "/v1/jobs/"+id, nil, ""))
	if resp.StatusCode != http.StatusOK {
		return jobs.View{}, resp.StatusCode
	}
	return decodeView(t, resp), resp.StatusCode
}

// GET /v1/counts: the caller's queued and running jobs by kind, never
// another owner's; operators read an owner's at /v1/admin/counts.
func TestCounts(t *testing.T) {
	e := newEnv(t)
	e.enqueueAs(t, "me", "a")
	e.enqueueAs(t, "me", "b")
	e.enqueueAs(t, "other", "c")
	resp := e.route(t, caller(t, "me", http.MethodGet, "/v1/counts", nil, ""))
	if resp.StatusCode != http.StatusOK || resp.Body != `{"kinds":{"echo":{"queued":2,"running":0,"waiting":0}},"truncated":false}` {
		t.Fatalf("counts: %d %s", resp.StatusCode, resp.Body)
	}
	me, _ := httpapi.Owner(caller(t, "me", http.MethodGet, "/", nil, ""))
	if r := e.route(t, caller(t, "me", http.MethodGet, "/v1/admin/counts", map[string]string{"owner": me}, "")); r.StatusCode != http.StatusForbidden {
		t.Fatalf("admin counts by a non-operator: %d", r.StatusCode)
	}
	op, _ := httpapi.Owner(caller(t, "other", http.MethodGet, "/", nil, ""))
	e.reconfigure(func(c *httpapi.Config) { c.Operators = []string{op} })
	if r := e.route(t, caller(t, "other", http.MethodGet, "/v1/admin/counts", map[string]string{"owner": me}, "")); r.StatusCode != http.StatusOK || r.Body != resp.Body {
		t.Fatalf("an operator's counts of me: %d %s", r.StatusCode, r.Body)
	}
}
