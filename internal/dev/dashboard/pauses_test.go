package dashboard_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/dev/dashboard"
	"github.com/lambdajobs/lambdajobs/internal/wire"
)

// teamOwner is the owner whose jobs of "report" an operator paused in the
// fake API's list of every pause.
const teamOwner = "arn:aws:iam::1:role/team"

// servePauses answers the pause routes: the caller's list holds an
// operator's pause of a kind and the caller's own pause of a kind named
// with markup; the operator's, a kind's, a lane's and teamOwner's jobs of
// report. Pausing "held" is refused as an operator's pause, "full" as one
// too many; resuming "gone" finds no pause.
func (f *fakeAPI) servePauses(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	if r.Method == http.MethodPost {
		f.mu.Lock()
		f.pauses = append(f.pauses, r.Method+" "+r.URL.Path+" "+string(b))
		f.mu.Unlock()
	}
	const times = `"since":"2026-12-04T08:00:00Z","until":"2026-12-17T08:00:00Z"`
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v1/pauses":
		io.WriteString(w, `{"pauses":[{"id":"kind:report","kind":"report",`+times+`,"by":"operator"},`+
			`{"id":"kind:<b>mine</b>:owner:k1","kind":"<b>mine</b>","owner_key":"k1",`+times+`,"by":"owner"}]}`)
	case r.Method == http.MethodGet:
		io.WriteString(w, `{"pauses":[{"id":"kind:report","kind":"report",`+times+`,"by":"operator"},`+
			`{"id":"lane:bulk","lane":"bulk",`+times+`,"by":"operator"},`+
			`{"id":"kind:report:owner:`+wire.OwnerKey(teamOwner)+`","kind":"report","owner_key":"`+wire.OwnerKey(teamOwner)+`",`+times+`,"by":"operator"}]}`)
	case strings.Contains(string(b), `"kind":"held"`):
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, `{"type":"x","title":"Paused by an operator","status":409,"detail":"an operator paused these jobs; only an operator resumes or changes that pause","code":"paused_by_operator"}`)
	case strings.Contains(string(b), `"kind":"full"`):
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, `{"type":"x","title":"Too many pauses","status":409,"detail":"the deployment has 100 pauses in force; resume one first","code":"pause_limit"}`)
	case strings.Contains(string(b), `"kind":"gone"`):
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"type":"x","title":"Not found","status":404,"detail":"no such pause in force","code":"not_found"}`)
	case strings.HasSuffix(r.URL.Path, "/resume"):
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"kind:report","kind":"report",`+times+`,"by":"operator"}`)
	}
}

// pauseRequests returns the pause and resume requests the API received.
func (f *fakeAPI) pauseRequests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.pauses...)
}

var sameOrigin = http.Header{"Sec-Fetch-Site": {"same-origin"}}

// The Pauses page lists the pauses that hold the caller's jobs, escaped,
// each with since and until; the caller's own has a Resume button, an
// operator's says only an operator resumes it. Its form pauses the
// caller's jobs of a registered kind, after a confirmation.
func TestPausesPage(t *testing.T) {
	srv, f := newServer(t)
	r := send(t, http.MethodGet, srv.URL+"/pauses", "", nil, nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET /pauses: %d %s", r.status, r.body)
	}
	for _, want := range []string{
		`<tr data-pause="kind:report"><th scope="row">kind:report</th>`, "every owner's jobs of report</td>\n<td>operator</td><td>2026-12-04 08:00:00.000</td><td>2026-12-17 08:00:00.000</td>",
		"An operator's: only an operator resumes it.",
		`<th scope="row">kind:&lt;b&gt;mine&lt;/b&gt;:owner:k1</th>`, "your jobs of &lt;b&gt;mine&lt;/b&gt;",
		`<input type="hidden" name="kind" value="&lt;b&gt;mine&lt;/b&gt;"><button type="submit" aria-label="Resume kind:&lt;b&gt;mine&lt;/b&gt;:owner:k1">Resume</button>`,
		`<form method="post" action="/pauses" class="filters" id="pause-kind" data-confirm="Pause your jobs of this kind?`,
		`<option value="report">report</option>`, `<option value="3600">1 hour</option>`, `aria-current="page">Pauses`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("GET /pauses lacks %q:\n%s", want, r.body)
		}
	}
	if strings.Contains(r.body, "<b>mine</b>") {
		t.Error("GET /pauses shows markup from the API unescaped")
	}
	if strings.Count(r.body, `action="/pauses/resume"`) != 1 || strings.Contains(r.body, `id="pause-lane"`) || strings.Contains(r.body, `name="owner"`) {
		t.Errorf("a caller's page offers a resume of an operator's pause, a lane or an owner:\n%s", r.body)
	}
	if got := f.requests(); !slices.Equal(got, []string{"GET /v1/pauses", "GET /v1/kinds"}) {
		t.Errorf("the API received %v, want the caller's pauses and the kinds", got)
	}
}

// The pause and resume forms call the caller's routes with the kind (and
// "for", in seconds, when chosen), never a lane or an owner, and say what
// they did.
func TestPauseAndResumeAKind(t *testing.T) {
	srv, f := newServer(t)
	for _, c := range []struct {
		path string
		form url.Values
		want string
	}{
		{"/pauses", url.Values{"kind": {"report"}, "for": {"3600"}}, "paused"},
		{"/pauses", url.Values{"kind": {"report"}, "for": {""}, "lane": {"bulk"}, "owner": {"someone"}}, "paused"},
		{"/pauses/resume", url.Values{"kind": {"report"}, "owner_key": {"k9"}}, "resumed"},
	} {
		r := send(t, http.MethodPost, srv.URL+c.path, "", sameOrigin, c.form)
		if loc := r.header.Get("Location"); r.status != http.StatusSeeOther || loc != "/pauses?flash="+c.want {
			t.Fatalf("POST %s %v: %d %s, want a redirect to /pauses?flash=%s", c.path, c.form, r.status, loc, c.want)
		}
	}
	want := []string{`POST /v1/pauses {"for":3600,"kind":"report"}`, `POST /v1/pauses {"kind":"report"}`, `POST /v1/pauses/resume {"kind":"report"}`}
	if got := f.pauseRequests(); !slices.Equal(got, want) {
		t.Errorf("the API received\n%q\nwant\n%q", got, want)
	}
	for code, text := range map[string]string{"paused": "Paused: its queued jobs stop starting within 5 seconds", "resumed": "Resumed: each held job starts"} {
		if r := send(t, http.MethodGet, srv.URL+"/pauses?flash="+code, "", nil, nil); !strings.Contains(r.body, `<p class="flash" role="status">`+text) {
			t.Errorf("GET /pauses?flash=%s does not say %q", code, text)
		}
	}
	if r := send(t, http.MethodPost, srv.URL+"/pauses", "", sameOrigin, url.Values{"kind": {"report"}, "for": {"an hour"}}); r.status != http.StatusBadRequest {
		t.Errorf("a pause for %q: %d, want 400", "an hour", r.status)
	}
}

// A pause or resume the API refuses (an operator's pause of the caller's
// jobs, the deployment's 100 pauses, no such pause) shows the API's
// problem on a page of its own, with its status and a way back to the
// pauses, as every refused action does.
func TestARefusedPauseShowsTheProblem(t *testing.T) {
	srv, _ := newServer(t)
	for _, c := range []struct {
		path, kind string
		status     int
		want       string
	}{
		{"/pauses", "held", http.StatusConflict, "Not done: Paused by an operator: an operator paused these jobs; only an operator resumes or changes that pause"},
		{"/pauses", "full", http.StatusConflict, "Not done: Too many pauses: the deployment has 100 pauses in force; resume one first"},
		{"/pauses/resume", "held", http.StatusConflict, "Not done: Paused by an operator"},
		{"/pauses/resume", "gone", http.StatusNotFound, "Not done: Not found: no such pause in force"},
	} {
		r := send(t, http.MethodPost, srv.URL+c.path, "", sameOrigin, url.Values{"kind": {c.kind}})
		if r.status != c.status || r.header.Get("Location") != "" {
			t.Errorf("POST %s kind=%s: %d, Location %q, want %d and no redirect", c.path, c.kind, r.status, r.header.Get("Location"), c.status)
		}
		for _, want := range []string{`role="alert">` + c.want, `<a href="/pauses">Back</a>`} {
			if !strings.Contains(r.body, want) {
				t.Errorf("POST %s kind=%s lacks %q:\n%s", c.path, c.kind, want, r.body)
			}
		}
	}
}

// An operator's Pauses page lists every pause through the admin route
// and pauses a kind (every owner's, or one owner's) or a lane. A pause of
// one owner's jobs is listed by the owner's key only, so its Resume asks
// for the owner, and resumes only when the owner given has that key: a
// mistyped owner must not end another owner's pause of the kind.
func TestOperatorPausesKindsLanesAndOwners(t *testing.T) {
	f, u := newAPI(t)
	srv := serve(t, dashboard.Config{API: u, Operator: true})
	r := send(t, http.MethodGet, srv.URL+"/pauses", "", nil, nil)
	key := wire.OwnerKey(teamOwner)
	for _, want := range []string{
		`aria-label="Resume kind:report">`, `<input type="hidden" name="lane" value="bulk"><button type="submit" aria-label="Resume lane:bulk">`,
		"every job of the bulk lane", "one owner's jobs of report",
		`<input type="hidden" name="owner_key" value="` + key + `">`, `<input id="owner-kind:report:owner:` + key + `" name="owner"`,
		`id="pause-lane"`, `<option value="default">default</option><option value="bulk">bulk</option>`, `<input id="p-owner" name="owner"`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("the operator's GET /pauses lacks %q:\n%s", want, r.body)
		}
	}
	for _, c := range []struct {
		path string
		form url.Values
		want string
	}{
		{"/pauses", url.Values{"lane": {"bulk"}, "for": {"900"}}, "paused"},
		{"/pauses", url.Values{"kind": {"report"}, "owner": {teamOwner}}, "paused"},
		{"/pauses/resume", url.Values{"lane": {"bulk"}}, "resumed"},
		{"/pauses/resume", url.Values{"kind": {"report"}, "owner_key": {key}, "owner": {"arn:aws:iam::1:role/teem"}}, "resume_other_owner"},
		{"/pauses/resume", url.Values{"kind": {"report"}, "owner_key": {key}}, "resume_other_owner"},
		{"/pauses/resume", url.Values{"kind": {"report"}, "owner_key": {key}, "owner": {teamOwner}}, "resumed"},
	} {
		r := send(t, http.MethodPost, srv.URL+c.path, "", sameOrigin, c.form)
		if loc := r.header.Get("Location"); loc != "/pauses?flash="+c.want {
			t.Errorf("POST %s %v: %d %s, want a redirect to /pauses?flash=%s", c.path, c.form, r.status, loc, c.want)
		}
	}
	want := []string{`POST /v1/admin/pauses {"for":900,"lane":"bulk"}`, fmt.Sprintf(`POST /v1/admin/pauses {"kind":"report","owner":%q}`, teamOwner),
		`POST /v1/admin/pauses/resume {"lane":"bulk"}`, fmt.Sprintf(`POST /v1/admin/pauses/resume {"kind":"report","owner":%q}`, teamOwner)}
	if got := f.pauseRequests(); !slices.Equal(got, want) {
		t.Errorf("the API received\n%q\nwant\n%q", got, want)
	}
	if r := send(t, http.MethodGet, srv.URL+"/pauses?flash=resume_other_owner", "", nil, nil); !strings.Contains(r.body, "Not resumed: that owner&#39;s key is not the pause&#39;s.") {
		t.Errorf("the mismatch is not said:\n%s", r.body)
	}
}
