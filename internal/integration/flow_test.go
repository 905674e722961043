package integration_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// Uniqueness against DynamoDB Local: the unique key's conditional write
// is what makes concurrent enqueues one job, so it is shown on the real
// store, through the HTTP API.

// postBody posts body to /v1/jobs and returns the status, the job's id
// and the Duplicate header.
func (s *stack) postBody(body string) (int, string, string) {
	s.t.Helper()
	req := events.APIGatewayV2HTTPRequest{
		RawPath: "/v1/jobs", Body: body,
		Headers:        map[string]string{"content-type": "application/json"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{Authorizer: iamAuth, HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/v1/jobs"}},
	}
	resp, err := s.api.Enqueue(context.Background(), req)
	if err != nil {
		s.t.Fatal(err)
	}
	var v struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal([]byte(resp.Body), &v)
	return resp.StatusCode, v.ID, resp.Headers["Duplicate"]
}

// 100 concurrent POSTs with one unique key make exactly one job; the 99
// others answer with it, saying why.
func TestConcurrentUniquePostsMakeOneJobOnDynamoDB(t *testing.T) {
	s := newStack(t, options{})
	type answer struct {
		status  int
		id, dup string
	}
	answers := make([]answer, 100)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Go(func() {
			st, id, dup := s.postBody(fmt.Sprintf(`{"kind":"test.count","payload":{"n":%d},"unique_key":"nightly"}`, i))
			answers[i] = answer{st, id, dup}
		})
	}
	wg.Wait()
	made := 0
	for _, a := range answers {
		if a.status != 202 || a.id != answers[0].id {
			t.Fatalf("answers %+v and %+v: want 202 naming one job", answers[0], a)
		}
		switch a.dup {
		case "":
			made++
		case "unique":
		default:
			t.Fatalf("Duplicate %q", a.dup)
		}
	}
	if made != 1 {
		t.Fatalf("%d POSTs made a job, want 1", made)
	}
	if n := s.queueDepth(); n != 1 {
		t.Fatalf("%d messages on the queue, want the one job's", n)
	}
}

// A debounce of 10 POSTs leaves one job, with the last payload.
func TestDebouncedPostsKeepTheLastPayloadOnDynamoDB(t *testing.T) {
	s := newStack(t, options{})
	var first string
	for i := range 10 {
		st, id, dup := s.postBody(fmt.Sprintf(`{"kind":"test.count","payload":{"n":%d},"unique_key":"reindex","unique":"debounce","unique_for":60}`, i))
		switch {
		case st != 202:
			t.Fatalf("POST %d: %d", i, st)
		case i == 0:
			first = id
		case id != first || dup != "debounced":
			t.Fatalf("POST %d answered %s (%q), want the first job, debounced", i, id, dup)
		}
	}
	_, v := s.get(first)
	if string(v.Payload) != `{"n":9}` || v.RunAt == nil {
		t.Fatalf("debounced job %+v payload %s, want the last payload and a run time", v, v.Payload)
	}
}
