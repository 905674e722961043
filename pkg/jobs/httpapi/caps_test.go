package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// newFlowEnv is an API whose "limited" kind has limits and caps: at most
// 5 at once, 20 starts a second per account, 2 queued (1 per owner), in
// the bulk lane.
func newFlowEnv(t *testing.T) *env {
	t.Helper()
	reg := jobs.NewRegistry()
	echo := func(_ context.Context, j *jobs.Job[echoPayload]) (jobs.JSON[echoPayload], error) {
		return jobs.JSON[echoPayload]{V: j.Payload}, nil
	}
	jobs.MustRegister(reg, "echo", echo, nil)
	jobs.MustRegister(reg, "limited", echo, &jobs.KindOpts{Lane: "bulk", Concurrency: 5, RateLimitPerKey: 20, LimitKey: "owner",
		MaxQueued: 2, MaxQueuedPerOwner: 1})
	e := &env{store: jobstest.NewMemStore(nil), queue: &jobstest.MemQueue{}}
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: e.store, Queue: e.queue, PageTokenKey: []byte(strings.Repeat("k", 32))})
	if err != nil {
		t.Fatal(err)
	}
	e.svc, e.api = svc, httpapi.New(svc, httpapi.Config{})
	return e
}

// An enqueue past a kind's cap on queued jobs answers 429 queue_full
// with Retry-After and a problem that says which cap, and stores nothing;
// the answers are those docs/reference/openapi.yaml documents.
func TestQueueFullIs429WithRetryAfter(t *testing.T) {
	s := loadSpec(t)
	e := newFlowEnv(t)
	post := func(who string) events.APIGatewayV2HTTPResponse {
		req := caller(t, who, http.MethodPost, "/v1/jobs", nil, `{"kind":"limited","payload":{"text":"x"}}`)
		resp := e.route(t, req)
		s.check(t, "/v1/jobs", "POST", resp)
		return resp
	}
	if resp := post("me"); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("first job: %d %s", resp.StatusCode, resp.Body)
	}
	stored := len(e.queue.Sent())
	for _, tc := range []struct {
		who, detail string
	}{
		{"me", "its cap per owner"}, // me has 1, its cap per owner
	} {
		resp := post(tc.who)
		var p httpapi.Problem
		_ = json.Unmarshal([]byte(resp.Body), &p)
		if resp.StatusCode != http.StatusTooManyRequests || p.Code != "queue_full" || resp.Headers["Retry-After"] != "1" ||
			resp.Headers["Content-Type"] != "application/problem+json" || !strings.Contains(p.Detail, tc.detail) {
			t.Fatalf("%s past the cap: %d %v %s, want 429 queue_full with Retry-After 1 and %q", tc.who, resp.StatusCode, resp.Headers, resp.Body, tc.detail)
		}
	}
	if resp := post("other"); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("another owner's first job (the kind's second): %d %s", resp.StatusCode, resp.Body)
	}
	// The kind holds 2 now: a third owner is refused on the kind's cap.
	req := caller(t, "me", http.MethodPost, "/v1/jobs", nil, `{"kind":"limited","payload":{"text":"x"}}`)
	req.RequestContext.Authorizer.IAM.UserARN = "arn:aws:iam::123456789012:user/third"
	resp := e.route(t, req)
	s.check(t, "/v1/jobs", "POST", resp)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(resp.Body, "at the kind's cap") {
		t.Fatalf("a third owner past the kind's cap: %d %s", resp.StatusCode, resp.Body)
	}
	if got := len(e.queue.Sent()); got != stored+1 {
		t.Fatalf("%d messages sent, want %d: a refused enqueue sent one", got, stored+1)
	}
	n, _ := e.store.CountQueued(context.Background(), driver.QueueCount{Kind: "limited"})
	if n != 2 {
		t.Fatalf("%d jobs queued, want the 2 accepted", n)
	}
	batch := caller(t, "third", http.MethodPost, "/v1/batches", nil, `{"jobs":[{"kind":"limited","payload":{"text":"a"}}]}`)
	batch.Headers["content-type"] = "application/json"
	batch.RequestContext.Authorizer.IAM.UserARN = "arn:aws:iam::123456789012:user/third"
	resp = e.route(t, batch)
	s.check(t, "/v1/batches", "POST", resp)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a batch past the cap: %d %s", resp.StatusCode, resp.Body)
	}
}

// GET /v1/kinds lists the registered kinds with their lane and flow
// control, for any caller; GET /v1/counts says how many of the caller's
// queued jobs wait on a limit.
func TestKindsAndWaitingCounts(t *testing.T) {
	s := loadSpec(t)
	e := newFlowEnv(t)
	resp := e.route(t, caller(t, "me", http.MethodGet, "/v1/kinds", nil, ""))
	s.check(t, "/v1/kinds", "GET", resp)
	var kinds httpapi.KindList
	if err := json.Unmarshal([]byte(resp.Body), &kinds); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("kinds: %d %s", resp.StatusCode, resp.Body)
	}
	const item = jobs.MaxPayloadBytes
	want := []jobs.KindInfo{{Name: "echo", MaxPayloadBytes: item, MaxResultBytes: item}, {Name: "limited", Lane: "bulk", Concurrency: 5, RateLimitPerKey: 20, RatePeriod: 1, LimitKey: "owner", MaxQueued: 2, MaxQueuedPerOwner: 1, MaxPayloadBytes: item, MaxResultBytes: item}}
	// (Their schemas: TestKindsDescribeThemselves.)
	for i := range kinds.Kinds {
		kinds.Kinds[i].PayloadSchema, kinds.Kinds[i].ResultSchema = nil, nil
	}
	if !reflect.DeepEqual(kinds.Kinds, want) {
		t.Fatalf("kinds %+v, want %+v", kinds.Kinds, want)
	}
	if !strings.Contains(resp.Body, `"rate_limit_per_key":20`) || strings.Contains(resp.Body, `"concurrency_per_key"`) {
		t.Fatalf("kinds body %s: want the limits set, and none unset", resp.Body)
	}
	anon := caller(t, "me", http.MethodGet, "/v1/kinds", nil, "")
	anon.RequestContext.Authorizer = nil
	if resp := e.route(t, anon); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("kinds without a caller: %d", resp.StatusCode)
	}

	me, _ := httpapi.Owner(caller(t, "me", http.MethodGet, "/", nil, ""))
	now := time.Now()
	parked := jobstest.NewRecord(wire.NewID(), now)
	parked.Owner, parked.Kind = me, "limited"
	_ = e.store.Create(context.Background(), parked)
	_, _ = e.store.Claim(context.Background(), parked.ID, driver.Claim{Token: "t", At: now, LeaseUntil: now.Add(time.Minute)})
	if err := e.store.Requeue(context.Background(), parked.ID, "t", driver.Requeue{At: now, RunAt: now, SweepAt: now.Add(time.Minute), WaitingOn: "concurrency"}); err != nil {
		t.Fatal(err)
	}
	e.enqueueAs(t, "me", "plain")
	resp = e.route(t, caller(t, "me", http.MethodGet, "/v1/counts", nil, ""))
	s.check(t, "/v1/counts", "GET", resp)
	var counts jobs.UnfinishedCounts
	_ = json.Unmarshal([]byte(resp.Body), &counts)
	if got := counts.Kinds["limited"]; got != (jobs.KindCounts{Queued: 1, Waiting: 1}) {
		t.Fatalf("counts of the limited kind %+v (%s), want 1 queued, waiting", got, resp.Body)
	}
	if got := counts.Kinds["echo"]; got != (jobs.KindCounts{Queued: 1}) {
		t.Fatalf("counts of echo %+v, want 1 queued, none waiting", got)
	}
}
