package httpapi_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// enqueueBatch enqueues n echo jobs as who and returns the batch as POST
// /v1/batches answers it.
func (e *env) enqueueBatch(t *testing.T, who string, n int) jobs.Batch {
	t.Helper()
	specs := make([]string, n)
	for i := range specs {
		specs[i] = `{"kind":"echo","payload":{"text":"x"}}`
	}
	resp := e.route(t, caller(t, who, http.MethodPost, "/v1/batches", nil, `{"jobs":[`+strings.Join(specs, ",")+`]}`))
	var b jobs.Batch
	if err := json.Unmarshal([]byte(resp.Body), &b); resp.StatusCode != http.StatusAccepted || err != nil {
		t.Fatalf("POST /v1/batches: %d %s", resp.StatusCode, resp.Body)
	}
	return b
}

// getBatchPage is GET /v1/batches/{id} as who with query.
func (e *env) getBatchPage(t *testing.T, who, id string, query map[string]string) (jobs.Batch, int, string) {
	t.Helper()
	resp := e.route(t, caller(t, who, http.MethodGet, "/v1/batches/"+id, query, ""))
	var b jobs.Batch
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal([]byte(resp.Body), &b); err != nil {
			t.Fatal(err)
		}
	}
	return b, resp.StatusCode, resp.Body
}

// A batch's page tokens are the listing's signed tokens, bound to the
// caller and the batch: its pages give every job id once, in order, and a
// token that is forged, altered, or was given for another batch or another
// caller is a 400 invalid_request, as a listing's is.
func TestBatchPageTokensAreSignedAndBound(t *testing.T) {
	e := newEnv(t)
	a, b := e.enqueueBatch(t, "me", 5), e.enqueueBatch(t, "me", 5)
	theirs := e.enqueueBatch(t, "other", 5)
	if len(a.JobIDs) != 5 || a.NextPageToken != nil {
		t.Fatalf("POST /v1/batches answered %d job ids and token %v, want all 5 and none", len(a.JobIDs), a.NextPageToken)
	}
	var got []string
	var first string
	q := map[string]string{"limit": "2"}
	for {
		page, status, body := e.getBatchPage(t, "me", a.ID, q)
		if status != http.StatusOK {
			t.Fatalf("GET a page of the batch (%v): %d %s", q, status, body)
		}
		got = append(got, page.JobIDs...)
		if page.NextPageToken == nil {
			break
		}
		if first == "" {
			first = *page.NextPageToken
		}
		q = map[string]string{"limit": "2", "page_token": *page.NextPageToken}
	}
	if !slices.Equal(got, a.JobIDs) {
		t.Fatalf("the pages gave %v, want %v", got, a.JobIDs)
	}
	// The token with its position moved from 2 to 4, its signature kept.
	body64, mac, _ := strings.Cut(first, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(body64)
	moved := base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(raw), `"p":"2"`, `"p":"4"`, 1))) + "." + mac
	if moved == first {
		t.Fatalf("the token %s does not carry its position as the test expects", raw)
	}
	for name, c := range map[string]struct {
		who, batch, token string
	}{
		"an offset as a token":                {"me", a.ID, "2"},
		"a malformed token":                   {"me", a.ID, "garbage"},
		"a moved position":                    {"me", a.ID, moved},
		"another batch's token":               {"me", b.ID, first},
		"another caller's token, their batch": {"other", theirs.ID, first},
		"another caller's token, my batch":    {"other", a.ID, first},
	} {
		p := decodeProblem(t, e.route(t, caller(t, c.who, http.MethodGet, "/v1/batches/"+c.batch, map[string]string{"limit": "2", "page_token": c.token}, "")))
		if p.Status != http.StatusBadRequest || p.Code != "invalid_request" {
			t.Errorf("%s: %+v, want 400 invalid_request", name, p)
		}
	}
}
