package dashboard_test

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// A page shows a message only as the dashboard's own text for a code of
// its own: ?flash=<any text> is never rendered, an unknown code shows
// nothing, and a count that is not a number hides the message. A link from
// another site can choose among the dashboard's messages, never write one.
func TestFlashIsACodeNeverText(t *testing.T) {
	srv, _, _ := fullServer(t)
	pages := []string{"/", "/jobs", "/jobs/j1", "/dlq", "/pauses"}
	texts := []string{
		"Your session expired: sign in again at https://evil.example/login",
		"<i>from the link</i>",
		"Cancelled.", // a message's text is not its code
		"cancelled ",
		"CANCELLED",
		"1 messages are back on the queue.",
	}
	for _, path := range pages {
		for _, text := range texts {
			for _, q := range []url.Values{
				{"flash": {text}},
				{"flash": {"bulk_retried"}, "matched": {text}, "changed": {"1"}},
				{"flash": {"redriven_all"}, "n": {text}},
			} {
				r := send(t, http.MethodGet, srv.URL+path+"?"+q.Encode(), "", nil, nil)
				if r.status != http.StatusOK || strings.Contains(r.body, `class="flash"`) {
					t.Errorf("GET %s?%s: %d, want the page with no message:\n%s", path, q.Encode(), r.status, r.body)
				}
				if strings.Contains(r.body, text) || strings.Contains(r.body, html.EscapeString(text)) {
					t.Errorf("GET %s?%s shows the query's text %q", path, q.Encode(), text)
				}
			}
		}
	}
	for query, want := range map[string]string{
		"flash=cancelled":                                  "Cancelled.",
		"flash=cancel_requested":                           "Cancel requested: the job stops at its next check.",
		"flash=bulk_retried&matched=103&changed=102":       "103 jobs matched, 102 retried.",
		"flash=bulk_cancelled&matched=3&changed=3":         "3 jobs matched, 3 cancelled.",
		"flash=redriven_all&n=4":                           "4 messages are back on the queue.",
		"flash=nope":                                       "",
		"flash=bulk_retried":                               "", // its counts missing
		"flash=bulk_retried&matched=-1&changed=0":          "",
		"flash=bulk_retried&matched=1e3&changed=0":         "",
		"flash=bulk_retried&matched=99999999999&changed=0": "",
	} {
		r := send(t, http.MethodGet, srv.URL+"/jobs?"+query, "", nil, nil)
		shown := strings.Contains(r.body, `class="flash"`)
		if want == "" && shown || want != "" && !strings.Contains(r.body, `<p class="flash" role="status">`+want+`</p>`) {
			t.Errorf("GET /jobs?%s: want the message %q:\n%s", query, want, r.body)
		}
	}
}

// An action the API refuses shows the API's problem (escaped) on a page of
// its own, with the API's status and a way back to the job; no redirect
// carries its text.
func TestARefusedActionShowsTheProblem(t *testing.T) {
	srv, api, _ := fullServer(t)
	r := send(t, http.MethodPost, srv.URL+"/jobs/j2/retry", "", http.Header{"Sec-Fetch-Site": {"same-origin"}}, nil)
	if r.status != http.StatusConflict || r.header.Get("Location") != "" {
		t.Fatalf("a refused retry: %d, Location %q, want 409 and no redirect", r.status, r.header.Get("Location"))
	}
	for _, want := range []string{`role="alert">Not done: Conflict: only a failed or cancelled job is retried &lt;b&gt;now&lt;/b&gt;</p>`, `<a href="/jobs/j2">Back</a>`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the refused retry's page lacks %q:\n%s", want, r.body)
		}
	}
	if got := api.requests(); len(got) != 1 || got[0] != "POST /v1/jobs/j2/retry" {
		t.Errorf("the API received %v, want the retry", got)
	}
}
