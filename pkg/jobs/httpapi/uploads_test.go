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

// uploadEnv is an env whose store keeps objects, and so takes uploads.
func uploadEnv(t *testing.T) (*env, *jobstest.MemUploads) {
	t.Helper()
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "echo", func(_ context.Context, j *jobs.Job[echoPayload]) (jobs.JSON[echoPayload], error) {
		return jobs.JSON[echoPayload]{V: j.Payload}, nil
	}, &jobs.KindOpts{MaxPayloadBytes: 1 << 20})
	sealer, err := jobs.NewAESSealer([]byte(strings.Repeat("s", 32)))
	if err != nil {
		t.Fatal(err)
	}
	store := jobstest.NewMemStore(nil)
	store.KeepPayloadsApart(1 << 10)
	store.KeepObjectsOver(1 << 10)
	e := &env{store: store, queue: &jobstest.MemQueue{}}
	cfg := jobs.Config{Registry: reg, Store: e.store, Queue: e.queue, Sealer: sealer, PageTokenKey: []byte(strings.Repeat("k", 32))}
	e.svc, err = testroles.Service(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.api = httpapi.New(e.svc, e.cfg)
	return e, store.Uploads().(*jobstest.MemUploads)
}

// The upload routes: 201 with a link per part and a Location, 202 once
// completed, 200 to read; each bad request its problem, storing nothing;
// another caller's upload is unknown to it; POST /v1/jobs takes "upload"
// in place of "payload", not both.
func TestUploadRoutes(t *testing.T) {
	e, mem := uploadEnv(t)
	for _, c := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"kind":"echo"}`, http.StatusBadRequest, "invalid_request"},
		{`{"kind":"echo","bytes":0}`, http.StatusBadRequest, "invalid_request"},
		{`{"kind":"echo","bytes":"10"}`, http.StatusBadRequest, "invalid_request"},
		{`{"kind":"echo","bytes":10,"parts":2}`, http.StatusBadRequest, "invalid_request"},
		{`{"kind":"nope","bytes":10}`, http.StatusUnprocessableEntity, "unknown_kind"},
		{`{"kind":"echo","bytes":1048577}`, http.StatusRequestEntityTooLarge, "too_large"},
		{`{"kind":"echo",`, http.StatusBadRequest, "malformed_json"},
	} {
		if p := decodeProblem(t, e.route(t, caller(t, "me", http.MethodPost, "/v1/uploads", nil, c.body))); p.Status != c.status || p.Code != c.code {
			t.Errorf("POST /v1/uploads %s: %d %s, want %d %s", c.body, p.Status, p.Code, c.status, c.code)
		}
	}
	if n := mem.Left(); n != 0 {
		t.Fatalf("refused starts left %d uploads", n)
	}
	resp := e.route(t, caller(t, "me", http.MethodPost, "/v1/uploads", nil, `{"kind":"echo","bytes":13}`))
	var up jobs.Upload
	if resp.StatusCode != http.StatusCreated || json.Unmarshal([]byte(resp.Body), &up) != nil || resp.Headers["Location"] != "/v1/uploads/"+up.ID || len(up.Parts) != 1 {
		t.Fatalf("POST /v1/uploads: %d %s %v", resp.StatusCode, resp.Body, resp.Headers)
	}
	etag, err := mem.PutPart(up.Parts[0].URL, []byte(`{"msg":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		who, path, body string
		status          int
		code            string
	}{
		{"other", "/v1/uploads/" + up.ID + "/complete", `{"etags":["` + strings.Trim(etag, `"`) + `"]}`, http.StatusUnprocessableEntity, "unknown_upload"},
		{"me", "/v1/uploads/" + up.ID + "/complete", `{"etags":[]}`, http.StatusBadRequest, "invalid_request"},
		{"me", "/v1/uploads/" + up.ID + "/complete", `{"parts":[]}`, http.StatusBadRequest, "invalid_request"},
		{"me", "/v1/jobs", `{"kind":"echo","upload":"` + up.ID + `"}`, http.StatusConflict, "upload_not_ready"},
		{"me", "/v1/jobs", `{"kind":"echo","upload":"` + up.ID + `","payload":{"msg":"x"}}`, http.StatusBadRequest, "invalid_request"},
		{"other", "/v1/jobs", `{"kind":"echo","upload":"` + up.ID + `"}`, http.StatusUnprocessableEntity, "unknown_upload"},
	} {
		if p := decodeProblem(t, e.route(t, caller(t, c.who, http.MethodPost, c.path, nil, c.body))); p.Status != c.status || p.Code != c.code {
			t.Errorf("POST %s %s by %s: %d %s, want %d %s", c.path, c.body, c.who, p.Status, p.Code, c.status, c.code)
		}
	}
	if p := decodeProblem(t, e.route(t, caller(t, "other", http.MethodGet, "/v1/uploads/"+up.ID, nil, ""))); p.Code != "unknown_upload" {
		t.Errorf("another caller reads the upload: %+v", p)
	}
	body, _ := json.Marshal(map[string][]string{"etags": {etag}})
	resp = e.route(t, caller(t, "me", http.MethodPost, "/v1/uploads/"+up.ID+"/complete", nil, string(body)))
	var v jobs.UploadView
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal([]byte(resp.Body), &v) != nil || v.Status != "validating" || v.JobID == "" {
		t.Fatalf("complete: %d %s", resp.StatusCode, resp.Body)
	}
	resp = e.route(t, caller(t, "me", http.MethodGet, "/v1/uploads/"+up.ID, nil, ""))
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, `"status":"validating"`) {
		t.Fatalf("GET the upload: %d %s", resp.StatusCode, resp.Body)
	}
}

// The job routes do not act on an upload's job: a cancel would leave its
// parts in the bucket, a retry or a signal would pass what the upload's
// own routes check; a bulk cancel passes it by.
func TestTheJobRoutesLeaveUploadsAlone(t *testing.T) {
	e, _ := uploadEnv(t)
	resp := e.route(t, caller(t, "me", http.MethodPost, "/v1/uploads", nil, `{"kind":"echo","bytes":13}`))
	var up jobs.Upload
	if resp.StatusCode != http.StatusCreated || json.Unmarshal([]byte(resp.Body), &up) != nil {
		t.Fatalf("POST /v1/uploads: %d %s", resp.StatusCode, resp.Body)
	}
	for _, path := range []string{"/v1/jobs/" + up.ID + "/cancel", "/v1/jobs/" + up.ID + "/retry", "/v1/jobs/" + up.ID + "/signals/complete"} {
		if p := decodeProblem(t, e.route(t, caller(t, "me", http.MethodPost, path, nil, `{"etags":["x"]}`))); p.Status != http.StatusBadRequest || p.Code != "invalid_request" {
			t.Errorf("POST %s: %d %s, want 400 invalid_request", path, p.Status, p.Code)
		}
	}
	resp = e.route(t, caller(t, "me", http.MethodPost, "/v1/bulk/cancel", nil, `{"status":"queued"}`))
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, `"changed":0`) {
		t.Fatalf("bulk cancel: %d %s, want nothing changed", resp.StatusCode, resp.Body)
	}
	resp = e.route(t, caller(t, "me", http.MethodGet, "/v1/uploads/"+up.ID, nil, ""))
	if !strings.Contains(resp.Body, `"status":"open"`) {
		t.Fatalf("the upload after them: %s, want open", resp.Body)
	}
}
