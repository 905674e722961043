package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

type chargePayload struct {
	Customer string `json:"customer"`
	Card     string `json:"card" jobs:"secret"`
}

// GET /v1/jobs/{id} shows the payload with its secret fields masked: the
// sealed value is neither shown nor opened, and nothing else carries it.
func TestGetShowsThePayloadWithSecretsMasked(t *testing.T) {
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "charge", func(context.Context, *jobs.Job[chargePayload]) (jobs.NoResult, error) {
		return jobs.NoResult{}, nil
	}, nil)
	sealer, err := jobs.NewAESSealer([]byte(strings.Repeat("s", 32)))
	if err != nil {
		t.Fatal(err)
	}
	store := jobstest.NewMemStore(nil)
	svc, err := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: &jobstest.MemQueue{}, Sealer: sealer, PageTokenKey: []byte(strings.Repeat("k", 32))})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{api: httpapi.New(svc, httpapi.Config{}), svc: svc, store: store}
	resp := e.route(t, caller(t, "me", http.MethodPost, "/v1/jobs", nil, `{"kind":"charge","payload":{"customer":"c-42","card":"4242424242424242"}}`))
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("enqueue: %d %s", resp.StatusCode, resp.Body)
	}
	id := decodeView(t, resp).ID
	if strings.Contains(resp.Body, "payload") {
		t.Fatalf("the enqueue answer carries the payload: %s", resp.Body)
	}
	got := e.route(t, caller(t, "me", http.MethodGet, "/v1/jobs/"+id, nil, ""))
	var v struct {
		Payload map[string]string `json:"payload"`
	}
	if err := json.Unmarshal([]byte(got.Body), &v); err != nil || v.Payload["customer"] != "c-42" || v.Payload["card"] != "[secret]" {
		t.Fatalf("GET: %s (%v)", got.Body, err)
	}
	list := e.route(t, caller(t, "me", http.MethodGet, "/v1/jobs", nil, ""))
	for name, body := range map[string]string{"get": got.Body, "list": list.Body} {
		if strings.Contains(body, "4242") {
			t.Fatalf("%s shows the secret: %s", name, body)
		}
	}
	if strings.Contains(list.Body, `"payload"`) {
		t.Fatalf("the list carries payloads: %s", list.Body)
	}
}
