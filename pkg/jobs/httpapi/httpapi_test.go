package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

type echoPayload struct {
	Text  string `json:"text"`
	Count int    `json:"count,omitempty"`
}

type env struct {
	api   *httpapi.API
	svc   *jobs.Service
	cfg   httpapi.Config
	store *jobstest.MemStore
	queue *jobstest.MemQueue
}

// reconfigure rebuilds e's API with change applied to its Config.
func (e *env) reconfigure(change func(*httpapi.Config)) {
	change(&e.cfg)
	e.api = httpapi.New(e.svc, e.cfg)
}

func newEnv(t testing.TB) *env {
	t.Helper()
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "echo",
		func(_ context.Context, j *jobs.Job[echoPayload]) (jobs.JSON[echoPayload], error) {
			return jobs.JSON[echoPayload]{V: j.Payload}, nil
		}, nil)
	e := &env{store: jobstest.NewMemStore(nil), queue: &jobstest.MemQueue{}}
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: e.store, Queue: e.queue, PageTokenKey: []byte(strings.Repeat("k", 32))})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	e.api = httpapi.New(svc, e.cfg)
	return e
}

func fixture(t testing.TB, name string) events.APIGatewayV2HTTPRequest {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var req events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(raw, &req); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return req
}

func getRequest(t testing.TB, base events.APIGatewayV2HTTPRequest, id string) events.APIGatewayV2HTTPRequest {
	req := fixture(t, "get-jwt.json")
	req.RequestContext.Authorizer = base.RequestContext.Authorizer
	req.RawPath = "/v1/jobs" + "/" + id
	req.RequestContext.HTTP.Path = req.RawPath
	req.PathParameters = map[string]string{"id": id}
	return req
}

func decodeView(t testing.TB, resp events.APIGatewayV2HTTPResponse) jobs.View {
	t.Helper()
	var v jobs.View
	if err := json.Unmarshal([]byte(resp.Body), &v); err != nil {
		t.Fatalf("body %q: %v", resp.Body, err)
	}
	return v
}

func decodeProblem(t testing.TB, resp events.APIGatewayV2HTTPResponse) httpapi.Problem {
	t.Helper()
	if ct := resp.Headers["Content-Type"]; ct != "application/problem+json" {
		t.Fatalf("content type %q, want application/problem+json (body %s)", ct, resp.Body)
	}
	var p httpapi.Problem
	dec := json.NewDecoder(strings.NewReader(resp.Body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("problem body %q: %v", resp.Body, err)
	}
	if p.Status != resp.StatusCode || p.Code == "" || p.Title == "" || !strings.HasPrefix(p.Type, httpapi.ProblemTypeBase+p.Code) {
		t.Fatalf("incomplete problem %+v for status %d", p, resp.StatusCode)
	}
	return p
}

func TestEnqueueIAMFixtureThenGet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	post := fixture(t, "post-iam.json")
	resp, err := e.api.Route(ctx, post)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST: %d %s %v", resp.StatusCode, resp.Body, err)
	}
	v := decodeView(t, resp)
	if resp.Headers["Location"] != "/v1/jobs/"+v.ID || v.Status != jobs.StatusQueued || v.Kind != "echo" || string(v.Result) != "null" || v.Error != nil {
		t.Fatalf("202 response %+v headers %v", v, resp.Headers)
	}
	// The owner is the role, whatever the session.
	if rec, _ := e.store.Get(ctx, v.ID); rec.Owner != "arn:aws:sts::123456789012:assumed-role/orders-service" {
		t.Fatalf("owner %q", rec.Owner)
	}
	if sent := e.queue.Sent(); len(sent) != 1 || sent[0] != v.ID {
		t.Fatalf("sent %v", sent)
	}
	other := post
	other.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
		UserARN: "arn:aws:sts::123456789012:assumed-role/orders-service/another-session"}}
	got, _ := e.api.Route(ctx, getRequest(t, other, v.ID))
	if got.StatusCode != http.StatusOK || decodeView(t, got).ID != v.ID {
		t.Fatalf("GET by another session of the same role: %d %s", got.StatusCode, got.Body)
	}
	// The owner sees the payload (secret fields masked: see
	// TestGetShowsThePayloadWithSecretsMasked), never the internals.
	if strings.Contains(got.Body, "owner") || strings.Contains(got.Body, "token") || strings.Contains(got.Body, "req_hash") {
		t.Fatalf("GET exposes internal fields: %s", got.Body)
	}
}

func TestOwnerIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	resp, _ := e.api.Route(ctx, fixture(t, "post-iam.json"))
	id := decodeView(t, resp).ID

	jwt := fixture(t, "get-jwt.json")
	theirs, _ := e.api.Route(ctx, getRequest(t, jwt, id))
	unknown, _ := e.api.Route(ctx, getRequest(t, jwt, wire.NewID()))
	malformed, _ := e.api.Route(ctx, getRequest(t, jwt, "../../etc/passwd"))
	for name, r := range map[string]events.APIGatewayV2HTTPResponse{"another owner's": theirs, "unknown": unknown, "malformed": malformed} {
		if r.StatusCode != http.StatusNotFound {
			t.Fatalf("%s id: %d, want 404", name, r.StatusCode)
		}
		decodeProblem(t, r)
	}
	if theirs.Body != unknown.Body || theirs.Body != malformed.Body {
		t.Fatalf("404 bodies differ:\n%s\n%s\n%s", theirs.Body, unknown.Body, malformed.Body)
	}
}

func TestEnqueueJWTBase64WithIdempotencyKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	req := fixture(t, "post-jwt-base64.json")
	first, _ := e.api.Route(ctx, req)
	if first.StatusCode != http.StatusAccepted {
		t.Fatalf("POST: %d %s", first.StatusCode, first.Body)
	}
	again, _ := e.api.Route(ctx, req)
	if again.StatusCode != http.StatusAccepted || decodeView(t, again).ID != decodeView(t, first).ID || again.Headers["Idempotent-Replayed"] != "true" {
		t.Fatalf("replay: %d %s %v", again.StatusCode, again.Body, again.Headers)
	}
	req.IsBase64Encoded = false
	req.Body = `{"kind":"echo","payload":{"text":"something else"}}`
	conflict, _ := e.api.Route(ctx, req)
	if conflict.StatusCode != http.StatusConflict || decodeProblem(t, conflict).Code != "idempotency_conflict" {
		t.Fatalf("conflict: %d %s", conflict.StatusCode, conflict.Body)
	}
	rec, _ := e.store.Get(ctx, decodeView(t, first).ID)
	if rec.Owner != "jwt:https://cognito-idp.us-east-1.amazonaws.com/us-east-1_EXAMPLE#8f3c2a1e-5b6d-4e7f-9a0b-1c2d3e4f5a6b" {
		t.Fatalf("owner %q", rec.Owner)
	}
	if e.store.Len() != 1 {
		t.Fatalf("%d jobs stored, want 1", e.store.Len())
	}
}

// TestBadRequests: each is a 4xx problem, never a 5xx, and stores nothing.
func TestBadRequests(t *testing.T) {
	t.Parallel()
	deep := `{"kind":"echo","payload":` + strings.Repeat(`[`, 10000) + strings.Repeat(`]`, 10000) + `}`
	tests := []struct {
		name   string
		mutate func(*events.APIGatewayV2HTTPRequest)
		status int
		code   string
	}{
		{"invalid UTF-8", body("{\"kind\":\"echo\",\"payload\":{\"text\":\"\xff\xfe\"}}"), 400, "malformed_json"},
		{"10 MB body", body(`{"kind":"echo","payload":{"text":"` + strings.Repeat("a", 10<<20) + `"}}`), 413, "too_large"},
		{"10 MB base64 body", func(r *events.APIGatewayV2HTTPRequest) {
			r.IsBase64Encoded = true
			r.Body = strings.Repeat("QUFB", (10<<20)/4)
		}, 413, "too_large"},
		{"bad base64", func(r *events.APIGatewayV2HTTPRequest) { r.IsBase64Encoded = true; r.Body = "!!!" }, 400, "malformed_body"},
		{"deep nesting", body(deep), 400, "malformed_json"},
		{"duplicate keys", body(`{"kind":"echo","kind":"other","payload":{}}`), 400, "malformed_json"},
		{"duplicate payload keys", body(`{"kind":"echo","payload":{"text":"a","text":"b"}}`), 400, "malformed_json"},
		{"huge number", body(`{"kind":"echo","payload":{"text":"a","count":1e400}}`), 422, "invalid_payload"},
		{"number overflow", body(`{"kind":"echo","payload":{"text":"a","count":123456789012345678901234567890}}`), 422, "invalid_payload"},
		{"null payload", body(`{"kind":"echo","payload":null}`), 422, "invalid_payload"},
		{"missing payload", body(`{"kind":"echo"}`), 400, "invalid_request"},
		{"missing kind", body(`{"payload":{}}`), 400, "invalid_request"},
		{"kind not a string", body(`{"kind":5,"payload":{}}`), 400, "invalid_request"},
		{"unknown envelope field", body(`{"kind":"echo","payload":{},"owner":"root"}`), 400, "invalid_request"},
		{"unknown payload field", body(`{"kind":"echo","payload":{"text":"a","admin":true}}`), 422, "invalid_payload"},
		{"unknown kind", body(`{"kind":"nope","payload":{}}`), 422, "unknown_kind"},
		{"not JSON", body(`kind=echo`), 400, "malformed_json"},
		{"empty body", body(``), 400, "malformed_json"},
		{"array body", body(`[]`), 400, "invalid_request"},
		{"two values", body(`{"kind":"echo","payload":{}}{}`), 400, "malformed_json"},
		{"wrong content type", header("content-type", "text/plain"), 415, "unsupported_media_type"},
		{"form content type", header("content-type", "application/x-www-form-urlencoded"), 415, "unsupported_media_type"},
		{"missing content type", func(r *events.APIGatewayV2HTTPRequest) { delete(r.Headers, "content-type") }, 415, "unsupported_media_type"},
		{"latin-1 charset", header("content-type", "application/json; charset=latin1"), 415, "unsupported_media_type"},
		{"over-long idempotency key", header("idempotency-key", strings.Repeat("k", 256)), 400, "invalid_idempotency_key"},
		{"control character in idempotency key", header("idempotency-key", "a\x00b"), 400, "invalid_idempotency_key"},
		{"no caller identity", func(r *events.APIGatewayV2HTTPRequest) { r.RequestContext.Authorizer = nil }, 401, "unauthenticated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			req := fixture(t, "post-iam.json")
			tt.mutate(&req)
			resp, err := e.api.Route(context.Background(), req)
			if err != nil {
				t.Fatalf("error %v; handlers answer every request", err)
			}
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d (body %s)", resp.StatusCode, tt.status, truncate(resp.Body))
			}
			if p := decodeProblem(t, resp); p.Code != tt.code {
				t.Fatalf("code %q, want %q", p.Code, tt.code)
			}
			if e.store.Len() != 0 || len(e.queue.Sent()) != 0 {
				t.Fatal("a refused request stored or sent something")
			}
		})
	}
}

func TestRoute(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	req := fixture(t, "post-iam.json")
	resp, _ := e.api.Route(ctx, req)
	id := decodeView(t, resp).ID
	get := getRequest(t, req, id)
	get.PathParameters = nil
	if r, _ := e.api.Route(ctx, get); r.StatusCode != 200 {
		t.Fatalf("GET via Route: %d", r.StatusCode)
	}
	del := get
	del.RequestContext.HTTP.Method = http.MethodDelete
	if r, _ := e.api.Route(ctx, del); r.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE: %d", r.StatusCode)
	}
	other := get
	other.RawPath = "/v2/other"
	if r, _ := e.api.Route(ctx, other); r.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown path: %d", r.StatusCode)
	}
}

func TestDependencyDownIs503(t *testing.T) {
	t.Parallel()
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "echo",
		func(context.Context, *jobs.Job[echoPayload]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
	svc, _ := testroles.Service(jobs.Config{Registry: reg, Store: downStore{jobstest.NewMemStore(nil)}, Queue: &jobstest.MemQueue{}})
	api := httpapi.New(svc, httpapi.Config{})
	resp, _ := api.Route(context.Background(), fixture(t, "post-iam.json"))
	if resp.StatusCode != http.StatusServiceUnavailable || decodeProblem(t, resp).Code != "unavailable" || resp.Headers["Retry-After"] == "" {
		t.Fatalf("store down: %d %s", resp.StatusCode, resp.Body)
	}
	if strings.Contains(resp.Body, "dial tcp") {
		t.Fatalf("error text leaked: %s", resp.Body)
	}
}

type downStore struct{ *jobstest.MemStore }

func (downStore) Create(context.Context, *driver.Record) error {
	return &netError{"dial tcp 10.0.0.1:443: connect: connection refused"}
}

type netError struct{ s string }

func (e *netError) Error() string { return e.s }

func body(b string) func(*events.APIGatewayV2HTTPRequest) {
	return func(r *events.APIGatewayV2HTTPRequest) { r.Body = b; r.IsBase64Encoded = false }
}

func header(k, v string) func(*events.APIGatewayV2HTTPRequest) {
	return func(r *events.APIGatewayV2HTTPRequest) { r.Headers[k] = v }
}

func truncate(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

func FuzzEnqueue(f *testing.F) {
	for _, seed := range []string{`{"kind":"echo","payload":{"text":"hi"}}`, `{"kind":"echo","payload":null}`, `{"kind":"nope","payload":{}}`, `[[[`, "\xff", `{"kind":"echo","payload":{"text":"a","TEXT":"b"}}`} {
		f.Add(seed, "application/json", "")
	}
	e := newEnv(f)
	base := fixture(f, "post-iam.json")
	f.Fuzz(func(t *testing.T, b, contentType, key string) {
		req := base
		req.Headers = map[string]string{"content-type": contentType, "idempotency-key": key}
		req.Body = b
		resp, err := e.api.Route(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case resp.StatusCode == http.StatusAccepted:
		case resp.StatusCode >= 400 && resp.StatusCode < 500:
			decodeProblem(t, resp)
		default:
			t.Fatalf("status %d for body %q", resp.StatusCode, b)
		}
	})
}

// Owners come from the SDK's ARN parser, so IAM paths holding ':' or '/'
// cannot make two principals one owner, and Cognito identity-pool callers
// are each their own owner.
func TestOwnerFromTrickyPrincipals(t *testing.T) {
	t.Parallel()
	iam := func(arn string, cognito events.APIGatewayV2HTTPRequestContextAuthorizerCognitoIdentity) events.APIGatewayV2HTTPRequest {
		return events.APIGatewayV2HTTPRequest{RequestContext: events.APIGatewayV2HTTPRequestContext{
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{UserARN: arn, CognitoIdentity: cognito}}}}
	}
	none := events.APIGatewayV2HTTPRequestContextAuthorizerCognitoIdentity{}
	tests := []struct {
		name, arn string
		cognito   events.APIGatewayV2HTTPRequestContextAuthorizerCognitoIdentity
		want      string
		ok        bool
	}{
		{"assumed role session", "arn:aws:sts::123456789012:assumed-role/Deployer/alice", none, "arn:aws:sts::123456789012:assumed-role/Deployer", true},
		{"another session, same role", "arn:aws:sts::123456789012:assumed-role/Deployer/bob", none, "arn:aws:sts::123456789012:assumed-role/Deployer", true},
		{"user whose path looks like a role", "arn:aws:iam::123456789012:user/x:assumed-role/Deployer/alice", none, "arn:aws:iam::123456789012:user/x:assumed-role/Deployer/alice", true},
		{"user with a deep path", "arn:aws:iam::123456789012:user/team/a/alice", none, "arn:aws:iam::123456789012:user/team/a/alice", true},
		{"federated user", "arn:aws:sts::123456789012:federated-user/alice", none, "arn:aws:sts::123456789012:federated-user/alice", true},
		{"root", "arn:aws:iam::123456789012:root", none, "arn:aws:iam::123456789012:root", true},
		{"other partition", "arn:aws-cn:sts::123456789012:assumed-role/R/s", none, "arn:aws-cn:sts::123456789012:assumed-role/R", true},
		{"cognito identity", "arn:aws:sts::123456789012:assumed-role/Cognito_Unauth/CognitoIdentityCredentials",
			events.APIGatewayV2HTTPRequestContextAuthorizerCognitoIdentity{IdentityID: "us-east-1:abc", IdentityPoolID: "us-east-1:pool"}, "cognito:us-east-1:pool#us-east-1:abc", true},
		{"not an ARN", "alice", none, "", false},
		{"assumed role without a session", "arn:aws:sts::123456789012:assumed-role/R", none, "", false},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		got, ok := httpapi.Owner(iam(tt.arn, tt.cognito))
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: Owner = %q, %v; want %q, %v", tt.name, got, ok, tt.want, tt.ok)
		}
		if prev, dup := seen[got]; ok && dup && !strings.HasPrefix(tt.name, "another session") {
			t.Errorf("%s and %s share the owner %q", prev, tt.name, got)
		}
		seen[got] = tt.name
	}
}
