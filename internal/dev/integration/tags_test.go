package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
)

// TestTagsOnDynamoDB: 1,000 jobs tagged import=42 (a batch of them, as an
// import makes them) among 2,000 of the same caller's others (untagged, or
// tagged import=43) and another caller's import=42: GET /v1/jobs?tag=
// lists exactly the 1,000, newest first in pages; POST /v1/bulk/cancel
// {"tag"} cancels exactly them, and the others stay queued. Against
// DynamoDB Local, so the tag indexes themselves answer.
func TestTagsOnDynamoDB(t *testing.T) {
	s := newStack(t, options{})
	ctx := context.Background()
	batch := func(owner string, n int, tags map[string]string) {
		t.Helper()
		spec := specs(n, "test.count", func(int) string { return `{"n":1}` })
		for i := range spec {
			spec[i].Tags = tags
		}
		if _, err := s.svc.EnqueueBatch(ctx, jobs.BatchRequest{Owner: owner, Jobs: spec}); err != nil {
			t.Fatal(err)
		}
	}
	batch(alice, 1000, map[string]string{"import": "42"})
	batch(alice, 1000, nil)
	batch(alice, 1000, map[string]string{"import": "43", "customer": "acme"})
	bob := "arn:aws:iam::000000000000:user/bob"
	batch(bob, 10, map[string]string{"import": "42"})

	call := func(method, path string, query map[string]string, body string) events.APIGatewayV2HTTPResponse {
		t.Helper()
		req := events.APIGatewayV2HTTPRequest{
			RawPath: path, QueryStringParameters: query, Body: body,
			Headers:        map[string]string{"content-type": "application/json"},
			RequestContext: events.APIGatewayV2HTTPRequestContext{Authorizer: iamAuth, HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: method, Path: path}},
		}
		resp, err := s.api.Route(ctx, req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s %s %v: %d %s %v", method, path, query, resp.StatusCode, resp.Body, err)
		}
		return resp
	}
	listed := map[string]bool{}
	q := map[string]string{"tag": "import=42", "limit": "200"}
	pages := 0
	for {
		var l httpapi.JobList
		if err := json.Unmarshal([]byte(call("GET", "/v1/jobs", q, "").Body), &l); err != nil {
			t.Fatal(err)
		}
		pages++
		for i, v := range l.Jobs {
			if v.Tags["import"] != "42" || listed[v.ID] {
				t.Fatalf("page %d listed %s tagged %v (again: %v)", pages, v.ID, v.Tags, listed[v.ID])
			}
			if i > 0 && v.CreatedAt.After(l.Jobs[i-1].CreatedAt) {
				t.Fatalf("page %d: not newest first", pages)
			}
			listed[v.ID] = true
		}
		if l.NextPageToken == nil {
			break
		}
		q = map[string]string{"tag": "import=42", "limit": "200", "page_token": *l.NextPageToken}
	}
	if len(listed) != 1000 {
		t.Fatalf("listed %d jobs tagged import=42 in %d pages, want 1000", len(listed), pages)
	}

	cancelled, token := 0, ""
	for range 50 {
		body := `{"tag":"import=42"}`
		if token != "" {
			body = fmt.Sprintf(`{"tag":"import=42","continuation_token":%q}`, token)
		}
		var r httpapi.BulkResult
		if err := json.Unmarshal([]byte(call("POST", "/v1/bulk/cancel", nil, body).Body), &r); err != nil {
			t.Fatal(err)
		}
		cancelled += r.Changed
		if r.ContinuationToken == nil {
			break
		}
		token = *r.ContinuationToken
	}
	if cancelled != 1000 {
		t.Fatalf("bulk cancel by tag cancelled %d, want 1000", cancelled)
	}
	for owner, want := range map[string]jobs.KindCounts{alice: {Queued: 2000}, bob: {Queued: 10}} {
		got, err := s.svc.CountUnfinished(ctx, owner)
		if err != nil || got.Kinds["test.count"] != want {
			t.Errorf("%s's unfinished after the cancel: %+v %v, want %+v", owner, got.Kinds, err, want)
		}
	}
	for id := range listed {
		if _, v := s.get(id); v.Status != jobs.StatusCancelled {
			t.Fatalf("tagged job %s is %s", id, v.Status)
		}
	}
}
