package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// waitRequest is GET /v1/jobs/{id}/wait as the caller of base, with query
// and If-None-Match (none when empty).
func waitRequest(t *testing.T, base events.APIGatewayV2HTTPRequest, id string, query map[string]string, etag string) events.APIGatewayV2HTTPRequest {
	req := getRequest(t, base, id)
	req.RawPath += "/wait"
	req.RequestContext.HTTP.Path = req.RawPath
	req.RouteKey, req.RequestContext.RouteKey = "GET /v1/jobs/{id}/wait", "GET /v1/jobs/{id}/wait"
	req.QueryStringParameters = query
	req.Headers = map[string]string{}
	if etag != "" {
		req.Headers["if-none-match"] = etag
	}
	return req
}

// The wait route: GET's ETag is the version a wait compares, quoted or
// weak; a wait from another version answers at once with GET's ETag; a
// wait from the current one answers at its timeout, unchanged; bad
// timeouts are 400s, a wait query on GET a 400 naming the route, another
// caller's job a 404, and a wait past the caller's open waits a 429 with
// Retry-After. Every answer is the spec's.
func TestTheWaitRoute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		reg := jobs.NewRegistry()
		jobs.MustRegister(reg, "echo", func(_ context.Context, j *jobs.Job[echoPayload]) (jobs.JSON[echoPayload], error) {
			return jobs.JSON[echoPayload]{V: j.Payload}, nil
		}, nil)
		svc, err := testroles.Service(jobs.Config{Registry: reg, Store: jobstest.NewMemStore(nil), Queue: &jobstest.MemQueue{}, WaitsPerOwner: 1})
		if err != nil {
			t.Fatal(err)
		}
		api, spec := httpapi.New(svc, httpapi.Config{}), loadSpec(t)
		post := fixture(t, "post-iam.json")
		resp, _ := api.Route(ctx, post)
		id := decodeView(t, resp).ID
		call := func(req events.APIGatewayV2HTTPRequest, path string) events.APIGatewayV2HTTPResponse {
			t.Helper()
			resp, err := api.Route(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			spec.check(t, path, "GET", resp)
			return resp
		}
		got := call(getRequest(t, post, id), "/v1/jobs/{id}")
		etag := got.Headers["ETag"]
		if got.StatusCode != http.StatusOK || len(etag) < 3 || etag[0] != '"' {
			t.Fatalf("GET: %d, ETag %q", got.StatusCode, etag)
		}
		for _, seen := range []string{etag, "W/" + etag, etag[1 : len(etag)-1]} {
			start := time.Now()
			w := call(waitRequest(t, post, id, map[string]string{"timeout": "2"}, seen), "/v1/jobs/{id}/wait")
			if w.StatusCode != http.StatusOK || w.Headers["ETag"] != etag || time.Since(start) != 2*time.Second {
				t.Fatalf("a wait from %s: %d, ETag %q after %v; want GET's, at its timeout", seen, w.StatusCode, w.Headers["ETag"], time.Since(start))
			}
		}
		start := time.Now()
		if w := call(waitRequest(t, post, id, map[string]string{"timeout": "5"}, `"another"`), "/v1/jobs/{id}/wait"); w.StatusCode != http.StatusOK || w.Headers["ETag"] != etag || time.Since(start) != 0 {
			t.Fatalf("a wait from another version: %d, ETag %q after %v; want GET's at once", w.StatusCode, w.Headers["ETag"], time.Since(start))
		}
		for _, timeout := range []string{"", "0", "21", "x", "-1"} {
			if w := call(waitRequest(t, post, id, map[string]string{"timeout": timeout}, ""), "/v1/jobs/{id}/wait"); w.StatusCode != http.StatusBadRequest || decodeProblem(t, w).Code != "invalid_request" {
				t.Fatalf("timeout %q: %d %s", timeout, w.StatusCode, w.Body)
			}
		}
		onGet := getRequest(t, post, id)
		onGet.QueryStringParameters = map[string]string{"wait": "5"}
		if w := call(onGet, "/v1/jobs/{id}"); w.StatusCode != http.StatusBadRequest || !strings.Contains(decodeProblem(t, w).Detail, "/v1/jobs/"+id+"/wait") {
			t.Fatalf("GET with wait: %d %s", w.StatusCode, w.Body)
		}
		if w := call(waitRequest(t, fixture(t, "get-jwt.json"), id, map[string]string{"timeout": "1"}, ""), "/v1/jobs/{id}/wait"); w.StatusCode != http.StatusNotFound {
			t.Fatalf("another caller's wait: %d %s", w.StatusCode, w.Body)
		}
		// One wait open (the caller's most): the next is refused.
		done := make(chan struct{})
		go func() {
			defer close(done)
			call(waitRequest(t, post, id, map[string]string{"timeout": "3"}, etag), "/v1/jobs/{id}/wait")
		}()
		synctest.Wait()
		w := call(waitRequest(t, post, id, map[string]string{"timeout": "3"}, etag), "/v1/jobs/{id}/wait")
		if w.StatusCode != http.StatusTooManyRequests || decodeProblem(t, w).Code != "too_many_waits" || w.Headers["Retry-After"] != "1" {
			t.Fatalf("a second wait: %d %s %v", w.StatusCode, w.Body, w.Headers)
		}
		<-done
	})
}
