package dashboard_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/dev/dashboard"
)

// When nothing is queued or running, the dashboard says so at once: the
// job list filtered by status (the page and its live refresh) says
// "Nothing running." or "Nothing queued." with no next page, and the
// overview's "Now" table says "Nothing queued or running." (empty pages
// with a token, one after another, were all it once showed).
func TestNothingRunningIsSaidAtOnce(t *testing.T) {
	var (
		mu    sync.Mutex
		lists []string
	)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/jobs":
			mu.Lock()
			lists = append(lists, r.URL.RawQuery)
			mu.Unlock()
			io.WriteString(w, `{"jobs":[],"next_page_token":null}`)
		case "/v1/counts":
			io.WriteString(w, `{"kinds":{},"truncated":false}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(api.Close)
	u, _ := url.Parse(api.URL)
	srv := serve(t, dashboard.Config{API: u})
	for path, want := range map[string]string{
		"/jobs?status=running":              "Nothing running.",
		"/jobs?status=running&partial=rows": "Nothing running.",
		"/jobs?status=queued":               "Nothing queued.",
		"/jobs?status=failed":               "No failed job.",
		"/jobs":                             "No job.",
		"/":                                 `id="nothing-now">Nothing queued or running.`,
	} {
		code, body, _ := get(t, srv.URL+path)
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("%s: %d, lacks %q:\n%s", path, code, want, body)
		}
		if strings.Contains(body, `rel="next"`) {
			t.Errorf("%s offers a next page of nothing", path)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lists) != 5 {
		t.Errorf("%d listings for 5 job pages, want one each (no page followed): %v", len(lists), lists)
	}
}
