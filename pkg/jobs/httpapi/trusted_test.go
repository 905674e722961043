package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// A job's tenant and lane are the deployment's trusted callers' to give
// (a role's ARN standing for its sessions): anyone else giving either, on
// POST /v1/jobs or a replay, gets 403 forbidden and nothing is stored or
// sent; leaving both out works for everyone.
func TestTenantAndLaneAreForTrustedCallers(t *testing.T) {
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "echo", func(context.Context, *jobs.Job[echoPayload]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
	jobs.MustRegister(reg, "bulk.echo", func(context.Context, *jobs.Job[echoPayload]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, &jobs.KindOpts{Lane: "bulk"})
	store, queue := jobstest.NewMemStore(nil), &jobstest.MemQueue{}
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	// The fixture's caller is a session of role orders-service.
	api := httpapi.New(svc, httpapi.Config{TrustedCallers: []string{"arn:aws:iam::123456789012:role/billing", "arn:aws:iam::123456789012:role/ops/orders-service"}})
	ctx := context.Background()
	spec := loadSpec(t)
	trusted := fixture(t, "post-iam.json")
	other := fixture(t, "post-iam.json")
	other.RequestContext.Authorizer.IAM.UserARN = "arn:aws:sts::123456789012:assumed-role/someone-else/s1"
	post := func(who string, path, body string) int {
		t.Helper()
		r := trusted
		if who == "other" {
			r = other
		}
		r.RawPath, r.RequestContext.HTTP.Path = path, path
		r.Headers = map[string]string{"content-type": "application/json"}
		r.Body, r.IsBase64Encoded = body, false
		resp, err := api.Route(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if path == "/v1/jobs" {
			spec.check(t, "/v1/jobs", "POST", resp)
		} else {
			spec.check(t, "/v1/jobs/{id}/replay", "POST", resp)
		}
		if resp.StatusCode == http.StatusForbidden && decodeProblem(t, resp).Code != "forbidden" {
			t.Errorf("403 with code %s", decodeProblem(t, resp).Code)
		}
		return resp.StatusCode
	}
	// A job of the other caller's own, to replay.
	otherOwner, _ := httpapi.Owner(other)
	own, err := svc.Enqueue(ctx, jobs.EnqueueRequest{Owner: otherOwner, Kind: "echo", Payload: []byte(`{"text":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	before, sends := store.Len(), len(queue.Messages())
	for _, body := range []string{
		`{"kind":"echo","payload":{"text":"x"},"tenant":"arn:aws:sts::123456789012:assumed-role/orders-service"}`,
		`{"kind":"echo","payload":{"text":"x"},"tenant":"random-1"}`,
		`{"kind":"echo","payload":{"text":"x"},"lane":"bulk"}`,
		`{"kind":"bulk.echo","payload":{"text":"x"},"lane":"bulk"}`,
	} {
		if code := post("other", "/v1/jobs", body); code != http.StatusForbidden {
			t.Errorf("untrusted caller: %s: %d, want 403", body, code)
		}
	}
	for _, body := range []string{`{"tenant":"random-2"}`, `{"lane":"bulk"}`} {
		if code := post("other", "/v1/jobs"+"/"+own.Job.ID+"/replay", body); code != http.StatusForbidden {
			t.Errorf("untrusted caller's replay: %s: %d, want 403", body, code)
		}
	}
	if store.Len() != before || len(queue.Messages()) != sends {
		t.Fatalf("refused requests stored %d jobs and sent %d messages", store.Len()-before, len(queue.Messages())-sends)
	}
	for who, body := range map[string]string{
		"other":   `{"kind":"bulk.echo","payload":{"text":"x"}}`, // its kind's lane, by the kind
		"trusted": `{"kind":"echo","payload":{"text":"x"},"tenant":"customer-7","lane":"bulk"}`,
	} {
		if code := post(who, "/v1/jobs", body); code != http.StatusAccepted {
			t.Errorf("%s: %s: %d, want 202", who, body, code)
		}
	}
	if code := post("other", "/v1/jobs"+"/"+own.Job.ID+"/replay", ""); code != http.StatusAccepted {
		t.Errorf("untrusted caller's plain replay: %d, want 202", code)
	}
}

// A caller over the deployment's enqueue rate gets 429 rate_limited with a
// Retry-After of whole seconds, as the spec says.
func TestOverTheEnqueueRateIs429(t *testing.T) {
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "echo", func(context.Context, *jobs.Job[echoPayload]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
	store := jobstest.NewMemStore(nil)
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: &jobstest.MemQueue{}, EnqueueRatePerOwner: 2})
	if err != nil {
		t.Fatal(err)
	}
	api, spec := httpapi.New(svc, httpapi.Config{}), loadSpec(t)
	r := fixture(t, "post-iam.json")
	r.Headers = map[string]string{"content-type": "application/json"}
	r.Body, r.IsBase64Encoded = `{"kind":"echo","payload":{"text":"x"}}`, false
	var codes []int
	for range 4 {
		resp, err := api.Route(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		spec.check(t, "/v1/jobs", "POST", resp)
		codes = append(codes, resp.StatusCode)
		if resp.StatusCode == http.StatusTooManyRequests {
			if p := decodeProblem(t, resp); p.Code != "rate_limited" || resp.Headers["Retry-After"] != "1" {
				t.Errorf("429: code %s, Retry-After %q", p.Code, resp.Headers["Retry-After"])
			}
		}
	}
	if codes[0] != 202 || codes[1] != 202 || codes[2] != 429 || codes[3] != 429 || store.Len() != 2 {
		t.Fatalf("4 requests at 2 a second: %v, %d stored", codes, store.Len())
	}
}
