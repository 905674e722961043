package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// The contract test: every answer the handlers give in the cases below must
// be documented in docs/reference/openapi.yaml (status code, media type) and its body
// must validate against the documented schema.
//
// The tests read the spec as JSON, from testdata/openapi.json: that is
// docs/reference/openapi.yaml converted, which internal/devtools/openapi's
// TestHTTPAPISpecIsTheYAML keeps exact (so this module needs no YAML
// parser, and a team that requires it inherits none). After editing
// docs/reference/openapi.yaml, run make openapi-json.

type spec struct {
	Paths      map[string]map[string]operation `json:"paths"`
	Components struct {
		Schemas   map[string]map[string]any `json:"schemas"`
		Responses map[string]response       `json:"responses"`
	} `json:"components"`
}

type operation struct {
	Responses map[string]response `json:"responses"`
}

type response struct {
	Ref     string                    `json:"$ref"`
	Content map[string]map[string]any `json:"content"`
}

// specJSON is docs/reference/openapi.yaml as JSON (see above).
const specJSON = "testdata/openapi.json"

func loadSpec(t *testing.T) *spec {
	t.Helper()
	raw, err := os.ReadFile(specJSON)
	if err != nil {
		t.Fatal(err)
	}
	var s spec
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s (docs/reference/openapi.yaml as JSON: make openapi-json writes it): %v", specJSON, err)
	}
	return &s
}

func (s *spec) resolve(r response) response {
	if strings.HasPrefix(r.Ref, "#/components/responses/") {
		return s.Components.Responses[strings.TrimPrefix(r.Ref, "#/components/responses/")]
	}
	return r
}

// check validates one answer against the operation at path and method.
func (s *spec) check(t *testing.T, path, method string, resp events.APIGatewayV2HTTPResponse) {
	t.Helper()
	op, ok := s.Paths[path][strings.ToLower(method)]
	if !ok {
		t.Fatalf("%s %s is not in the spec", method, path)
	}
	r, ok := op.Responses[fmt.Sprint(resp.StatusCode)]
	if !ok {
		t.Errorf("%s %s answered %d, which the spec does not document (body %s)", method, path, resp.StatusCode, resp.Body)
		return
	}
	r = s.resolve(r)
	if len(r.Content) == 0 {
		if resp.Body != "" {
			t.Errorf("%s %s %d: a body where the spec documents none: %s", method, path, resp.StatusCode, resp.Body)
		}
		return
	}
	ct := resp.Headers["Content-Type"]
	media, ok := r.Content[ct]
	if !ok {
		t.Errorf("%s %s %d: content type %q not documented", method, path, resp.StatusCode, ct)
		return
	}
	var body any
	if err := json.Unmarshal([]byte(resp.Body), &body); err != nil {
		t.Fatalf("%s %s %d: body %q: %v", method, path, resp.StatusCode, resp.Body, err)
	}
	if err := s.validate(media["schema"], body, "body"); err != nil {
		t.Errorf("%s %s %d: %v (body %s)", method, path, resp.StatusCode, err, resp.Body)
	}
}

// validate checks v against the subset of JSON Schema the spec uses.
func (s *spec) validate(schemaAny, v any, at string) error {
	schema, _ := schemaAny.(map[string]any)
	if ref, ok := schema["$ref"].(string); ok {
		return s.validate(s.Components.Schemas[strings.TrimPrefix(ref, "#/components/schemas/")], v, at)
	}
	if alts, ok := schema["oneOf"].([]any); ok {
		n := 0
		for _, alt := range alts {
			if s.validate(alt, v, at) == nil {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%s: %v matches %d of its oneOf schemas, want 1", at, v, n)
		}
	}
	if types, ok := schema["type"]; ok {
		var allowed []string
		switch tt := types.(type) {
		case string:
			allowed = []string{tt}
		case []any:
			for _, x := range tt {
				allowed = append(allowed, x.(string))
			}
		}
		if !typeIn(v, allowed) {
			return fmt.Errorf("%s: %v is not %v", at, v, allowed)
		}
	}
	if enum, ok := schema["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if fmt.Sprint(e) == fmt.Sprint(v) {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("%s: %v is not one of %v", at, v, enum)
		}
	}
	if schema["format"] == "date-time" {
		if _, err := time.Parse(time.RFC3339Nano, v.(string)); err != nil {
			return fmt.Errorf("%s: %q is not a date-time", at, v)
		}
	}
	if arr, ok := v.([]any); ok {
		for i, item := range arr {
			if err := s.validate(schema["items"], item, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
		return nil
	}
	obj, isObj := v.(map[string]any)
	if !isObj {
		return nil
	}
	props, _ := schema["properties"].(map[string]any)
	for _, r := range asList(schema["required"]) {
		if _, ok := obj[r]; !ok {
			return fmt.Errorf("%s: required field %q missing", at, r)
		}
	}
	for k, fv := range obj {
		ps, ok := props[k]
		if !ok {
			if schema["additionalProperties"] == false {
				return fmt.Errorf("%s: field %q is not in the spec", at, k)
			}
			continue
		}
		if err := s.validate(ps, fv, at+"."+k); err != nil {
			return err
		}
	}
	return nil
}

func asList(v any) []string {
	var out []string
	list, _ := v.([]any) // none: a schema without "required"
	for _, x := range list {
		out = append(out, x.(string))
	}
	return out
}

func typeIn(v any, allowed []string) bool {
	for _, a := range allowed {
		switch a {
		case "object":
			if _, ok := v.(map[string]any); ok {
				return true
			}
		case "string":
			if _, ok := v.(string); ok {
				return true
			}
		case "integer":
			if f, ok := v.(float64); ok && f == float64(int64(f)) {
				return true
			}
		case "number":
			if _, ok := v.(float64); ok {
				return true
			}
		case "boolean":
			if _, ok := v.(bool); ok {
				return true
			}
		case "null":
			if v == nil {
				return true
			}
		case "array":
			if _, ok := v.([]any); ok {
				return true
			}
		}
	}
	return false
}

func TestAnswersMatchOpenAPI(t *testing.T) {
	s := loadSpec(t)
	e := newEnv(t)
	ctx := context.Background()
	post := fixture(t, "post-iam.json")
	withBody := func(b string) events.APIGatewayV2HTTPRequest {
		r := post
		r.Headers = map[string]string{"content-type": "application/json"}
		r.Body = b
		return r
	}
	enq := func(r events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
		resp, _ := e.api.Route(ctx, r)
		s.check(t, "/v1/jobs", "POST", resp)
		return resp
	}
	ok := enq(post)
	var job jobs.View
	_ = json.Unmarshal([]byte(ok.Body), &job)
	enq(withBody(`{"kind":"echo","payload":{"text":"later"},"delay":3600}`))
	enq(withBody(`{"kind":"echo","payload":{"text":"at"},"run_at":"2099-01-01T00:00:00Z"}`))
	for _, b := range []string{`{`, `{"kind":"nope","payload":{}}`, `{"kind":"echo","payload":{"x":1}}`, `{"payload":{}}`, `{"kind":"echo","payload":{},"delay":-1}`} {
		enq(withBody(b))
	}
	big := withBody(`{"kind":"echo","payload":{"text":"` + strings.Repeat("a", httpapi.MaxBodyBytes) + `"}}`)
	enq(big)
	plain := withBody(`{}`)
	plain.Headers = map[string]string{"content-type": "text/plain"}
	enq(plain)
	keyed := withBody(`{"kind":"echo","payload":{"text":"k"}}`)
	keyed.Headers["idempotency-key"] = "k1"
	enq(keyed)
	enq(keyed)
	keyed.Body = `{"kind":"echo","payload":{"text":"other"}}`
	enq(keyed)
	anon := post
	anon.RequestContext.Authorizer = nil
	enq(anon)

	get := func(id string) {
		resp, _ := e.api.Route(ctx, getRequest(t, post, id))
		s.check(t, "/v1/jobs/{id}", "GET", resp)
	}
	get(job.ID)
	get(wire.NewID())
	get("not-a-uuid")

	cancel := func(id string) events.APIGatewayV2HTTPResponse {
		r := getRequest(t, post, id)
		r.RawPath += "/cancel"
		r.RequestContext.HTTP.Method = http.MethodPost
		resp, _ := e.api.Route(ctx, r)
		s.check(t, "/v1/jobs/{id}/cancel", "POST", resp)
		return resp
	}
	if r := cancel(job.ID); r.StatusCode != http.StatusOK {
		t.Fatalf("cancel queued: %d", r.StatusCode)
	}
	if r := cancel(job.ID); r.StatusCode != http.StatusConflict {
		t.Fatalf("cancel cancelled: %d", r.StatusCode)
	}
	cancel(wire.NewID())
	// A running job: 202 with cancel_requested.
	running := jobstest.NewRecord(wire.NewID(), time.Now())
	running.Owner = "arn:aws:sts::123456789012:assumed-role/orders-service"
	_ = e.store.Create(ctx, running)
	_, _ = e.store.Claim(ctx, running.ID, driver.Claim{Token: "t", At: time.Now(), LeaseUntil: time.Now().Add(time.Minute)})
	if r := cancel(running.ID); r.StatusCode != http.StatusAccepted || !strings.Contains(r.Body, `"cancel_requested":true`) {
		t.Fatalf("cancel running: %d %s", r.StatusCode, r.Body)
	}

	batch := func(b string) events.APIGatewayV2HTTPResponse {
		r := withBody(b)
		r.RawPath = "/v1/batches"
		resp, _ := e.api.Route(ctx, r)
		s.check(t, "/v1/batches", "POST", resp)
		return resp
	}
	ok = batch(`{"jobs":[{"kind":"echo","payload":{"text":"a"}},{"kind":"echo","payload":{"text":"b"}}],"completion":{"kind":"echo","payload":{"text":"done"}}}`)
	if ok.StatusCode != http.StatusAccepted {
		t.Fatalf("batch: %d %s", ok.StatusCode, ok.Body)
	}
	bad := batch(`{"jobs":[{"kind":"echo","payload":{"text":"a"}},{"kind":"echo","payload":{"nope":1}}]}`)
	if bad.StatusCode != 422 || !strings.Contains(bad.Body, `"index":1`) {
		t.Fatalf("batch with a bad job: %d %s", bad.StatusCode, bad.Body)
	}
	batch(`{"jobs":[]}`)
	batch(`{"jobs":[{"kind":"nope","payload":{}}]}`)
	var view jobs.Batch
	_ = json.Unmarshal([]byte(ok.Body), &view)
	getBatch := func(id, query string) events.APIGatewayV2HTTPResponse {
		r := getRequest(t, post, id)
		r.RawPath = "/v1/batches" + "/" + id
		if query != "" {
			r.QueryStringParameters = map[string]string{"limit": query}
		}
		resp, _ := e.api.Route(ctx, r)
		s.check(t, "/v1/batches/{id}", "GET", resp)
		return resp
	}
	if r := getBatch(view.ID, "1"); r.StatusCode != 200 || !strings.Contains(r.Body, `"next_page_token":"`) {
		t.Fatalf("get batch: %d %s", r.StatusCode, r.Body)
	}
	getBatch(wire.NewID(), "")
	getBatch(view.ID, "5000")
}

func TestListAnswersMatchOpenAPI(t *testing.T) {
	s := loadSpec(t)
	e := newEnv(t)
	a := e.enqueueAs(t, "me", "a").ID
	e.enqueueAs(t, "me", "b")
	e.fail(t, a)
	check := func(specPath string, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
		resp := e.route(t, req)
		s.check(t, specPath, req.RequestContext.HTTP.Method, resp)
		return resp
	}
	l := decodeList(t, check("/v1/jobs", caller(t, "me", "GET", "/v1/jobs", map[string]string{"limit": "1"}, "")))
	check("/v1/jobs", caller(t, "me", "GET", "/v1/jobs", map[string]string{"limit": "1", "page_token": *l.NextPageToken}, ""))
	check("/v1/jobs", caller(t, "me", "GET", "/v1/jobs", map[string]string{"status": "nope"}, ""))
	check("/v1/jobs/{id}/retry", caller(t, "me", "POST", "/v1/jobs/"+a+"/retry", nil, ""))
	time.Sleep(2 * time.Millisecond)
	check("/v1/jobs/{id}/retry", caller(t, "me", "POST", "/v1/jobs/"+a+"/retry", nil, ""))
	check("/v1/jobs/{id}/retry", caller(t, "other", "POST", "/v1/jobs/"+a+"/retry", nil, ""))
	check("/v1/bulk/{action}", caller(t, "me", "POST", "/v1/bulk/cancel", nil, `{"status":"queued"}`))
	check("/v1/bulk/{action}", caller(t, "me", "POST", "/v1/bulk/retry", nil, `{}`))
}

func TestAdminAnswersMatchOpenAPI(t *testing.T) {
	s := loadSpec(t)
	e := newEnv(t)
	op, _ := httpapi.Owner(caller(t, "other", "GET", "/", nil, ""))
	me, _ := httpapi.Owner(caller(t, "me", "GET", "/", nil, ""))
	e.reconfigure(func(c *httpapi.Config) { c.Operators = []string{op} })
	a := e.enqueueAs(t, "me", "a").ID
	check := func(specPath string, req events.APIGatewayV2HTTPRequest) {
		s.check(t, specPath, req.RequestContext.HTTP.Method, e.route(t, req))
	}
	check("/v1/admin/jobs", caller(t, "other", "GET", "/v1/admin/jobs", map[string]string{"owner": me}, ""))
	check("/v1/admin/jobs", caller(t, "other", "GET", "/v1/admin/jobs", nil, ""))
	check("/v1/admin/jobs", caller(t, "me", "GET", "/v1/admin/jobs", map[string]string{"owner": me}, ""))
	check("/v1/admin/jobs/{id}", caller(t, "other", "GET", "/v1/admin/jobs/"+a, nil, ""))
	check("/v1/admin/jobs/{id}", caller(t, "other", "GET", "/v1/admin/jobs/"+wire.NewID(), nil, ""))
	check("/v1/admin/jobs/{id}/{action}", caller(t, "other", "POST", "/v1/admin/jobs/"+a+"/cancel", nil, ""))
	check("/v1/admin/jobs/{id}/{action}", caller(t, "other", "POST", "/v1/admin/jobs/"+a+"/retry", nil, ""))

	check("/v1/admin/counts", caller(t, "other", "GET", "/v1/admin/counts", map[string]string{"owner": me}, ""))
	check("/v1/admin/counts", caller(t, "other", "GET", "/v1/admin/counts", nil, ""))
	check("/v1/admin/counts", caller(t, "me", "GET", "/v1/admin/counts", map[string]string{"owner": me}, ""))
	check("/v1/counts", caller(t, "me", "GET", "/v1/counts", nil, ""))
	check("/v1/admin/dead-letters", caller(t, "other", "GET", "/v1/admin/dead-letters", nil, ""))
	e.reconfigure(func(c *httpapi.Config) {
		c.DeadLetters = &fakeDeadLetters{letters: []sqsqueue.DeadLetter{{ID: "m1", Shape: "JSON object of 2 bytes with keys []", Why: "w", Sort: "job", Redrive: sqsqueue.RedriveMoves}}}
	})
	post := func(path, body string) events.APIGatewayV2HTTPRequest {
		req := caller(t, "other", "POST", path, nil, body)
		req.Headers["content-type"] = "application/json"
		return req
	}
	check("/v1/admin/dead-letters", caller(t, "other", "GET", "/v1/admin/dead-letters", nil, ""))
	check("/v1/admin/dead-letters", caller(t, "me", "GET", "/v1/admin/dead-letters", nil, ""))
	check("/v1/admin/dead-letters/{action}", post("/v1/admin/dead-letters/peek", `{"max":5}`))
	check("/v1/admin/dead-letters/{action}", post("/v1/admin/dead-letters/peek", `{"max":500}`))
	check("/v1/admin/dead-letters/{action}", post("/v1/admin/dead-letters/redrive", `{"id":"nope"}`))
	check("/v1/admin/dead-letters/{action}", post("/v1/admin/dead-letters/redrive", `{"all":true}`))
	check("/v1/admin/dead-letters/{action}", post("/v1/admin/dead-letters/forget", `{}`))
	// Over SQS (in memory), with a bulk lane and a planted envelope.
	dl, _, env := deadLettersOnFakeSQS()
	e.reconfigure(func(c *httpapi.Config) { c.DeadLetters = dl })
	check("/v1/admin/dead-letters", caller(t, "other", "GET", "/v1/admin/dead-letters", nil, ""))
	check("/v1/admin/dead-letters/{action}", post("/v1/admin/dead-letters/peek", `{"max":5}`))
	check("/v1/admin/dead-letters/{action}", post("/v1/admin/dead-letters/peek", `{"lane":"bulk"}`))
	check("/v1/admin/dead-letters/{action}", post("/v1/admin/dead-letters/peek", `{"lane":"urgent"}`))
	check("/v1/admin/dead-letters/{action}", post("/v1/admin/dead-letters/redrive", `{"all":true}`))
	check("/v1/admin/dead-letters/{action}", post("/v1/admin/dead-letters/redrive", `{"id":"`+env+`"}`))
	check("/v1/admin/dead-letters/{action}", post("/v1/admin/dead-letters/redrive", `{"all":true,"lane":"bulk"}`))
	check("/v1/admin/dead-letters/{action}", post("/v1/admin/dead-letters/redrive", `{"all":true,"shapes":"any"}`))
}

func TestScheduleAnswersMatchOpenAPI(t *testing.T) {
	s := loadSpec(t)
	e := newSchedEnv(t, 2)
	do := func(method, path, specPath, body string) events.APIGatewayV2HTTPResponse {
		resp := e.do(t, "me", method, path, body)
		s.check(t, specPath, method, resp)
		return resp
	}
	if r := do("POST", "/v1/schedules", "/v1/schedules", hourly); r.StatusCode != 201 {
		t.Fatalf("create: %d %s", r.StatusCode, r.Body)
	}
	do("POST", "/v1/schedules", "/v1/schedules", strings.Replace(hourly, `{"text":"hi"}`, `{"text":"x"}`, 1))
	do("POST", "/v1/schedules", "/v1/schedules", strings.Replace(hourly, "cron(0 * * * ? *)", "every hour", 1))
	do("POST", "/v1/schedules", "/v1/schedules", strings.Replace(hourly, `"kind":"echo"`, `"kind":"nope"`, 1))
	do("POST", "/v1/schedules", "/v1/schedules", `{`)
	do("POST", "/v1/schedules", "/v1/schedules", strings.Replace(hourly, `"hourly.echo"`, `"b"`, 1))
	if r := do("POST", "/v1/schedules", "/v1/schedules", strings.Replace(hourly, `"hourly.echo"`, `"c"`, 1)); r.StatusCode != 409 {
		t.Fatalf("limit: %d", r.StatusCode)
	}
	do("GET", "/v1/schedules", "/v1/schedules", "")
	do("GET", "/v1/schedules/hourly.echo", "/v1/schedules/{name}", "")
	do("GET", "/v1/schedules/none", "/v1/schedules/{name}", "")
	if r := do("DELETE", "/v1/schedules/hourly.echo", "/v1/schedules/{name}", ""); r.StatusCode != 204 {
		t.Fatalf("delete: %d", r.StatusCode)
	}
	do("DELETE", "/v1/schedules/hourly.echo", "/v1/schedules/{name}", "")
	e.sched.down = true
	do("POST", "/v1/schedules", "/v1/schedules", hourly)
}

// TestProblemCodesMatchTheSpec keeps the spec's code list and the
// handlers' in step, both ways.
func TestProblemCodesMatchTheSpec(t *testing.T) {
	s := loadSpec(t)
	var documented []string
	for _, c := range s.Components.Schemas["Problem"]["properties"].(map[string]any)["code"].(map[string]any)["enum"].([]any) {
		documented = append(documented, c.(string))
	}
	sort.Strings(documented)
	if got := strings.Join(httpapi.ProblemCodes(), " "); got != strings.Join(documented, " ") {
		t.Fatalf("handlers' problem codes\n  %s\nspec's (%s, from docs/reference/openapi.yaml by make openapi-json)\n  %s", got, specJSON, strings.Join(documented, " "))
	}
}

// docs/reference/openapi.yaml documents exactly the descriptor's routes.
func TestOpenAPIHasTheDescriptorsRoutes(t *testing.T) {
	s := loadSpec(t)
	want := map[string]bool{}
	for _, rt := range deploy.Routes {
		want[rt.Key()] = true
	}
	got := map[string]bool{}
	for path, ops := range s.Paths {
		for method := range ops {
			if method == "parameters" {
				continue
			}
			got[strings.ToUpper(method)+" "+path] = true
		}
	}
	for k := range want {
		if !got[k] {
			t.Errorf("%s: in the descriptor, not in docs/reference/openapi.yaml", k)
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("%s: in docs/reference/openapi.yaml, not in the descriptor", k)
		}
	}
}
