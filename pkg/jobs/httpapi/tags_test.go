package httpapi_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
)

// Tags over HTTP: an enqueue's "tags" show in the job's view; GET
// /v1/jobs?tag= lists the caller's jobs with the tag (never another
// caller's), in pages whose tokens are bound to the tag; POST
// /v1/bulk/cancel {"tag"} cancels exactly those; bad tags are a 400 that
// stores nothing.
func TestTags(t *testing.T) {
	e := newEnv(t)
	post := func(who, body string) jobs.View {
		t.Helper()
		resp := e.route(t, caller(t, who, http.MethodPost, "/v1/jobs", nil, body))
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("enqueue %s: %d %s", body, resp.StatusCode, resp.Body)
		}
		return decodeView(t, resp)
	}
	var tagged []string
	for i := range 3 {
		v := post("me", `{"kind":"echo","payload":{"text":"t"},"tags":{"import":"42","customer":"acme"}}`)
		if want := map[string]string{"import": "42", "customer": "acme"}; !reflect.DeepEqual(v.Tags, want) {
			t.Fatalf("job %d tags %v, want %v", i, v.Tags, want)
		}
		tagged = append(tagged, v.ID)
	}
	untagged := post("me", `{"kind":"echo","payload":{"text":"u"}}`)
	otherTag := post("me", `{"kind":"echo","payload":{"text":"u"},"tags":{"import":"43"}}`)
	theirs := post("other", `{"kind":"echo","payload":{"text":"x"},"tags":{"import":"42"}}`)
	if strings.Contains(e.route(t, caller(t, "me", http.MethodGet, "/v1/jobs/"+untagged.ID, nil, "")).Body, `"tags"`) {
		t.Error("a job without tags shows a tags field")
	}
	if v, _ := e.svcGet(t, "me", tagged[0]); v.Tags["import"] != "42" {
		t.Errorf("GET shows tags %v", v.Tags)
	}

	// Listed by tag, one a page: the three, newest first.
	var listed []string
	q := map[string]string{"tag": "import=42", "limit": "1"}
	for range 10 {
		l := decodeList(t, e.route(t, caller(t, "me", http.MethodGet, "/v1/jobs", q, "")))
		for _, v := range l.Jobs {
			listed = append(listed, v.ID)
		}
		if l.NextPageToken == nil {
			break
		}
		q = map[string]string{"tag": "import=42", "limit": "1", "page_token": *l.NextPageToken}
	}
	if want := []string{tagged[2], tagged[1], tagged[0]}; !reflect.DeepEqual(listed, want) {
		t.Fatalf("listed by tag %v, want %v", listed, want)
	}
	// A page token is bound to its tag.
	l := decodeList(t, e.route(t, caller(t, "me", http.MethodGet, "/v1/jobs", map[string]string{"tag": "import=42", "limit": "1"}, "")))
	resp := e.route(t, caller(t, "me", http.MethodGet, "/v1/jobs", map[string]string{"tag": "import=43", "page_token": *l.NextPageToken}, ""))
	if p := decodeProblem(t, resp); p.Status != http.StatusBadRequest {
		t.Errorf("a token used with another tag: %+v", p)
	}

	// Cancelled in bulk by tag: the three, none else.
	resp = e.route(t, caller(t, "me", http.MethodPost, "/v1/bulk/cancel", nil, `{"tag":"import=42"}`))
	var r httpapi.BulkResult
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(resp.Body), &r) != nil || r.Matched != 3 || r.Changed != 3 {
		t.Fatalf("bulk cancel by tag: %d %s", resp.StatusCode, resp.Body)
	}
	for _, id := range tagged {
		if v, _ := e.svcGet(t, "me", id); v.Status != jobs.StatusCancelled {
			t.Errorf("tagged job %s: %s", id, v.Status)
		}
	}
	for who, id := range map[string]string{"me": untagged.ID, "me ": otherTag.ID, "other": theirs.ID} {
		if v, _ := e.svcGet(t, strings.TrimSpace(who), id); v.Status != jobs.StatusQueued {
			t.Errorf("%s's job %s outside the tag: %s", who, id, v.Status)
		}
	}

	before := e.store.Len()
	for name, body := range map[string]string{
		"four tags":         `{"kind":"echo","payload":{},"tags":{"a":"1","b":"2","c":"3","d":"4"}}`,
		"upper-case key":    `{"kind":"echo","payload":{},"tags":{"Import":"42"}}`,
		"empty value":       `{"kind":"echo","payload":{},"tags":{"import":""}}`,
		"a space":           `{"kind":"echo","payload":{},"tags":{"import":"4 2"}}`,
		"long value":        `{"kind":"echo","payload":{},"tags":{"import":"` + strings.Repeat("x", 65) + `"}}`,
		"long key":          `{"kind":"echo","payload":{},"tags":{"` + strings.Repeat("k", 33) + `":"1"}}`,
		"not an object":     `{"kind":"echo","payload":{},"tags":["import=42"]}`,
		"a non-string":      `{"kind":"echo","payload":{},"tags":{"n":1}}`,
		"key starts with .": `{"kind":"echo","payload":{},"tags":{".a":"1"}}`,
	} {
		resp := e.route(t, caller(t, "me", http.MethodPost, "/v1/jobs", nil, body))
		if p := decodeProblem(t, resp); p.Status != http.StatusBadRequest {
			t.Errorf("%s: %+v", name, p)
		}
	}
	for name, tag := range map[string]string{"no =": "import", "bad key": "Im=1", "empty value": "import=", "bad value": "import=a b"} {
		resp := e.route(t, caller(t, "me", http.MethodGet, "/v1/jobs", map[string]string{"tag": tag}, ""))
		if p := decodeProblem(t, resp); p.Status != http.StatusBadRequest {
			t.Errorf("list %s: %+v", name, p)
		}
		resp = e.route(t, caller(t, "me", http.MethodPost, "/v1/bulk/cancel", nil, `{"tag":"`+tag+`"}`))
		if p := decodeProblem(t, resp); p.Status != http.StatusBadRequest {
			t.Errorf("bulk %s: %+v", name, p)
		}
	}
	if after := e.store.Len(); after != before {
		t.Errorf("refused requests stored %d jobs", after-before)
	}
}
