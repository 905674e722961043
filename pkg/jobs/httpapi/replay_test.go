package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// POST /v1/jobs with "after", and POST /v1/jobs/{id}/replay: what they
// answer, each checked against docs/reference/openapi.yaml.
func TestAfterAndReplayAnswersMatchOpenAPI(t *testing.T) {
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
	enq := func(b string) (events.APIGatewayV2HTTPResponse, jobs.View) {
		t.Helper()
		resp, _ := e.api.Route(ctx, withBody(b))
		s.check(t, "/v1/jobs", "POST", resp)
		var v jobs.View
		if resp.StatusCode == http.StatusAccepted {
			v = decodeView(t, resp)
		}
		return resp, v
	}
	_, parent := enq(`{"kind":"echo","payload":{"text":"first"}}`)
	resp, child := enq(`{"kind":"echo","payload":{"text":"second"},"after":["` + parent.ID + `"]}`)
	if resp.StatusCode != http.StatusAccepted || child.WaitingOn != "parents" || child.ParentsLeft != 1 || len(child.After) != 1 {
		t.Fatalf("enqueue after a job: %d %s", resp.StatusCode, resp.Body)
	}
	before := e.store.Len()
	for _, tt := range []struct {
		body string
		want int
		code string
	}{
		{`{"kind":"echo","payload":{"text":"x"},"after":["` + wire.NewID() + `"]}`, http.StatusUnprocessableEntity, "unknown_parent"},
		{`{"kind":"echo","payload":{"text":"x"},"after":["nope"]}`, http.StatusBadRequest, "invalid_request"},
		{`{"kind":"echo","payload":{"text":"x"},"after":"` + parent.ID + `"}`, http.StatusBadRequest, "invalid_request"},
		{`{"kind":"echo","payload":{"text":"x"},"after":["` + parent.ID + `"],"unique_key":"k"}`, http.StatusBadRequest, "invalid_request"},
	} {
		resp, _ := enq(tt.body)
		if resp.StatusCode != tt.want || !strings.Contains(resp.Body, `"code":"`+tt.code+`"`) {
			t.Errorf("%s: %d %s, want %d %s", tt.body, resp.StatusCode, resp.Body, tt.want, tt.code)
		}
	}
	if e.store.Len() != before {
		t.Fatal("a refused enqueue stored a job")
	}

	replay := func(id, body string) events.APIGatewayV2HTTPResponse {
		t.Helper()
		r := getRequest(t, post, id)
		r.RequestContext.HTTP.Method = "POST"
		r.RawPath += "/replay"
		r.RequestContext.HTTP.Path = r.RawPath
		if body != "" {
			r.Headers = map[string]string{"content-type": "application/json"}
			r.Body = body
		}
		resp, _ := e.api.Route(ctx, r)
		s.check(t, "/v1/jobs/{id}/replay", "POST", resp)
		return resp
	}
	r := replay(parent.ID, "")
	if r.StatusCode != http.StatusAccepted || !strings.Contains(r.Body, `"replay_of":"`+parent.ID+`"`) || r.Headers["Location"] == "" {
		t.Fatalf("replay: %d %v %s", r.StatusCode, r.Headers, r.Body)
	}
	if r := replay(parent.ID, `{"payload":{"text":"edited"},"delay":60}`); r.StatusCode != http.StatusAccepted || !strings.Contains(r.Body, `"run_at"`) {
		t.Fatalf("replay edited: %d %s", r.StatusCode, r.Body)
	}
	for _, tt := range []struct {
		id, body string
		want     int
	}{
		{wire.NewID(), "", http.StatusNotFound},
		{parent.ID, `{"payload":{"nope":1}}`, http.StatusUnprocessableEntity},
		{parent.ID, `{"kind":"echo"}`, http.StatusBadRequest},
		{parent.ID, `{`, http.StatusBadRequest},
	} {
		if r := replay(tt.id, tt.body); r.StatusCode != tt.want {
			t.Errorf("replay %s %s: %d %s, want %d", tt.id, tt.body, r.StatusCode, r.Body, tt.want)
		}
	}
}
