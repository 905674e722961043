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
	resp, err := s.api.Route(context.Background(), req)
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

// A kind's cap on its queued jobs, on DynamoDB Local through the HTTP
// API: example.hold_capped holds at most 10 queued (counted from the
// kind's sparse index of queued jobs); the 11th POST is a 429 queue_full
// with Retry-After, and neither a job nor a message is stored for it.
func TestQueueCapOnDynamoDB(t *testing.T) {
	s := newStack(t, options{})
	for i := range 10 {
		if st, _, _ := s.postBody(fmt.Sprintf(`{"kind":"example.hold_capped","payload":{"ms":%d}}`, i)); st != 202 {
			t.Fatalf("job %d under the cap: %d", i, st)
		}
	}
	req := events.APIGatewayV2HTTPRequest{
		RawPath: "/v1/jobs", Body: `{"kind":"example.hold_capped","payload":{"ms":10}}`,
		Headers:        map[string]string{"content-type": "application/json"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{Authorizer: iamAuth, HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/v1/jobs"}},
	}
	resp, err := s.api.Route(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal([]byte(resp.Body), &p)
	if resp.StatusCode != 429 || p.Code != "queue_full" || resp.Headers["Retry-After"] == "" {
		t.Fatalf("the 11th job: %d %v %s, want 429 queue_full with Retry-After", resp.StatusCode, resp.Headers, resp.Body)
	}
	if n := s.queueDepth(); n != 10 {
		t.Fatalf("%d messages on the queue, want the 10 accepted jobs'", n)
	}
	counts, err := s.svc.CountUnfinished(context.Background(), alice)
	if err != nil {
		t.Fatal(err)
	}
	if got := counts.Kinds["example.hold_capped"]; got.Queued != 10 {
		t.Fatalf("%+v queued, want 10: the refused job was stored", got)
	}
}
