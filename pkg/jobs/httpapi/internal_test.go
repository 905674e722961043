package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// Internal kinds (an S3 record's, a FailedJob's, an on-failure target's,
// one marked Internal) are answered on every API path exactly as a kind
// nobody registered: POST /v1/jobs, POST /v1/batches (a job and the
// completion), POST /v1/jobs/{id}/replay, POST /v1/schedules; GET
// /v1/kinds omits them; nothing is stored. A Go producer's service still
// enqueues them.
func TestInternalKindsAreUnknownToCallers(t *testing.T) {
	ok := func(context.Context, *jobs.Job[echoPayload]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "echo", ok, &jobs.KindOpts{OnFailure: "echo.failed"})
	// An on-failure target that takes any object: internal because echo
	// names it.
	jobs.MustRegister(reg, "echo.failed", func(context.Context, *jobs.Job[map[string]any]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
	jobs.MustRegister(reg, "audit", ok, &jobs.KindOpts{Internal: true})
	jobs.MustRegister(reg, "upload", func(context.Context, *jobs.Job[events.S3EventRecord]) (jobs.NoResult, error) {
		return jobs.NoResult{}, nil
	}, nil)
	jobs.MustRegister(reg, "bridge", func(context.Context, *jobs.Job[events.EventBridgeEvent]) (jobs.NoResult, error) {
		return jobs.NoResult{}, nil
	}, nil)
	jobs.MustRegister(reg, "failed", func(context.Context, *jobs.Job[jobs.FailedJob]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
	internal := []string{"echo.failed", "audit", "upload", "bridge", "failed"}

	store, queue := jobstest.NewMemStore(nil), &jobstest.MemQueue{}
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(svc, httpapi.Config{})
	sched := &fakeScheduler{made: map[string]driver.HeldSchedule{}}
	ss, err := testroles.Schedules(jobs.Config{Registry: reg, Store: store, Scheduler: sched})
	if err != nil {
		t.Fatal(err)
	}
	schedules := httpapi.NewSchedules(ss, nil)
	ctx := context.Background()
	post := fixture(t, "post-iam.json")
	owner, _ := httpapi.Owner(post)
	request := func(method, path, body string) events.APIGatewayV2HTTPRequest {
		r := post
		r.RequestContext.HTTP.Method = method
		r.RawPath, r.RequestContext.HTTP.Path = path, path
		r.Headers = map[string]string{"content-type": "application/json"}
		r.Body, r.IsBase64Encoded, r.PathParameters = body, false, nil
		return r
	}
	do := func(method, path, body string) events.APIGatewayV2HTTPResponse {
		t.Helper()
		var resp events.APIGatewayV2HTTPResponse
		var err error
		if strings.HasPrefix(path, "/v1/schedules") {
			resp, err = schedules.Route(ctx, request(method, path, body))
		} else {
			resp, err = api.Route(ctx, request(method, path, body))
		}
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	// Each internal kind's job, made by a Go producer (so the replay has
	// something to replay).
	payloads := map[string]string{
		"echo.failed": `{"text":"x"}`, "audit": `{"text":"x"}`,
		"upload": `{"eventSource":"aws:s3","s3":{"bucket":{"name":"b"},"object":{"key":"k"}}}`,
		"bridge": `{"source":"shop.orders","detail-type":"x","detail":{}}`,
		"failed": `{"job_id":"x","kind":"echo","code":"internal","attempt":1}`,
	}
	made := map[string]string{}
	for _, kind := range internal {
		res, err := svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: owner, Kind: kind, Payload: []byte(payloads[kind])})
		if err != nil {
			t.Fatalf("a Go producer enqueues internal kind %s: %v", kind, err)
		}
		made[kind] = res.Job.ID
	}
	before, sends := store.Len(), len(queue.Messages())

	paths := func(kind, payload string) map[string][2]string {
		return map[string][2]string{
			"enqueue":    {"/v1/jobs", `{"kind":"` + kind + `","payload":` + payload + `}`},
			"batch job":  {"/v1/batches", `{"jobs":[{"kind":"echo","payload":{"text":"a"}},{"kind":"` + kind + `","payload":` + payload + `}]}`},
			"completion": {"/v1/batches", `{"jobs":[{"kind":"echo","payload":{"text":"a"}}],"completion":{"kind":"` + kind + `","payload":` + payload + `}}`},
			"schedule":   {"/v1/schedules", `{"name":"s1","expression":"rate(1 hour)","kind":"` + kind + `","payload":` + payload + `}`},
		}
	}
	unknown := map[string]events.APIGatewayV2HTTPResponse{}
	for name, p := range paths("nobody.registered", `{"text":"x"}`) {
		unknown[name] = do(http.MethodPost, p[0], p[1])
		if unknown[name].StatusCode != http.StatusUnprocessableEntity || decodeProblem(t, unknown[name]).Code != "unknown_kind" {
			t.Fatalf("%s of an unregistered kind: %d %s", name, unknown[name].StatusCode, unknown[name].Body)
		}
	}
	for _, kind := range internal {
		for name, p := range paths(kind, payloads[kind]) {
			resp := do(http.MethodPost, p[0], p[1])
			if resp.StatusCode != unknown[name].StatusCode || resp.Body != unknown[name].Body {
				t.Errorf("%s of internal kind %s: %d %s, want the unregistered kind's %d %s", name, kind, resp.StatusCode, resp.Body, unknown[name].StatusCode, unknown[name].Body)
			}
		}
		for _, body := range []string{"", `{"payload":` + payloads[kind] + `}`} {
			resp := do(http.MethodPost, "/v1/jobs"+"/"+made[kind]+"/replay", body)
			if resp.StatusCode != http.StatusUnprocessableEntity || resp.Body != unknown["enqueue"].Body {
				t.Errorf("replay of internal kind %s (body %q): %d %s", kind, body, resp.StatusCode, resp.Body)
			}
		}
	}
	if store.Len() != before || len(queue.Messages()) != sends || len(sched.made) != 0 {
		t.Errorf("refused requests stored %d jobs, sent %d messages, made %d schedules", store.Len()-before, len(queue.Messages())-sends, len(sched.made))
	}

	resp := do(http.MethodGet, "/v1/kinds", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, `"name":"echo"`) {
		t.Fatalf("kinds: %d %s", resp.StatusCode, resp.Body)
	}
	for _, kind := range internal {
		if strings.Contains(resp.Body, `"`+kind+`"`) {
			t.Errorf("GET /v1/kinds lists internal kind %s: %s", kind, resp.Body)
		}
	}
	// The Go producer's service still lists every kind, and the API's
	// refusal did not change what the Go service accepts.
	if n := len(svc.Kinds()); n != 1+len(internal) {
		t.Errorf("a Go producer's Kinds: %d kinds, want %d", n, 1+len(internal))
	}
	if _, err := svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: owner, Kind: "audit", Payload: []byte(`{"text":"again"}`)}); err != nil {
		t.Errorf("a Go producer after the API's refusals: %v", err)
	}
	if _, err := ss.Create(ctx, jobs.ScheduleRequest{Owner: owner, Name: "audit", Expression: "rate(1 hour)", Kind: "audit", Payload: []byte(`{"text":"x"}`)}); err != nil {
		t.Errorf("a Go producer's runtime schedule of an internal kind: %v", err)
	}
}
