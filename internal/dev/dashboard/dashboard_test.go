package dashboard_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/dev/dashboard"
)

// fakeAPI answers the jobs API's routes with canned bodies and records
// every request ("METHOD /path") and the bulk requests' bodies.
type fakeAPI struct {
	mu      sync.Mutex
	calls   []string
	bulk    []map[string]string
	replays []string // the bodies of replays
	signals []string // the bodies of signals
	pauses  []string // "METHOD /path body" of each pause and resume
}

// requests returns the requests the API received.
func (f *fakeAPI) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.calls = append(f.calls, r.Method+" "+r.URL.Path)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/v1/jobs":
		// A kind name with markup: the pages must escape it.
		io.WriteString(w, `{"jobs":[{"id":"j1","kind":"<script>alert(1)</script>","status":"failed","error":"boom","attempt":2,"created_at":"2026-11-30T08:00:00Z","updated_at":"2026-11-30T08:00:01Z"}],"next_page_token":"tok"}`)
	case r.URL.Path == "/v1/jobs/j1":
		io.WriteString(w, `{"id":"j1","kind":"k","status":"running","result":{"done":2,"total":4},"error":null,"attempt":1,"batch_id":"b1","payload":{"customer":"c-42","card":"[secret]"},"created_at":"2026-11-30T08:00:00Z","updated_at":"2026-11-30T08:00:01Z"}`)
	case r.URL.Path == "/v1/jobs/j2":
		io.WriteString(w, `{"id":"j2","kind":"k","status":"queued","waiting_on":"concurrency","error":null,"attempt":1,"created_at":"2026-11-30T08:00:00Z","updated_at":"2026-11-30T08:00:01Z"}`)
	case r.URL.Path == "/v1/jobs/j5":
		io.WriteString(w, `{"id":"j5","kind":"k","status":"succeeded","result":null,"result_bytes":20000000,"result_url":"https://parts.s3.amazonaws.com/parts/ab/j5/result-x?X-Amz-Expires=300&X-Amz-Signature=s","payload":null,"payload_bytes":307200,"error":null,"attempt":1,"created_at":"2026-11-30T08:00:00Z","updated_at":"2026-11-30T08:00:01Z"}`)
	case r.URL.Path == "/v1/jobs/j6":
		io.WriteString(w, `{"id":"j6","kind":"k","status":"queued","waiting_on":"signal","signal":"<b>approval","run_at":"2026-12-01T08:00:00Z","error":null,"attempt":0,`+
			`"steps":[{"name":"ask","kind":"step","status":"done","at":"2026-11-30T08:00:01Z"},{"name":"<b>approval","kind":"signal","status":"waiting","at":"2026-11-30T08:00:01Z","until":"2026-12-01T08:00:00Z"}],`+
			`"created_at":"2026-11-30T08:00:00Z","updated_at":"2026-11-30T08:00:01Z"}`)
	case r.URL.Path == "/v1/jobs/j6/signals/<b>approval" && r.Method == http.MethodPost:
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.signals = append(f.signals, string(b))
		f.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"duplicate":false,"woke":true}`)
	case r.URL.Path == "/v1/jobs/j4":
		io.WriteString(w, `{"id":"j4","kind":"k","status":"queued","waiting_on":"paused","error":null,"attempt":0,"created_at":"2026-11-30T08:00:00Z","updated_at":"2026-11-30T08:00:01Z"}`)
	case r.URL.Path == "/v1/jobs/j1/cancel" && r.Method == http.MethodPost:
		io.WriteString(w, `{"id":"j1","kind":"k","status":"cancelled","error":null,"attempt":1,"created_at":"2026-11-30T08:00:00Z","updated_at":"2026-11-30T08:00:01Z"}`)
	case r.URL.Path == "/v1/jobs/j3":
		io.WriteString(w, `{"id":"j3","kind":"k","status":"queued","waiting_on":"parents","after":["j1","j2"],"parents_left":1,"replay_of":"j0","child_of":"j9","error":null,"attempt":0,"payload":{},"created_at":"2026-11-30T08:00:00Z","updated_at":"2026-11-30T08:00:01Z"}`)
	case r.URL.Path == "/v1/jobs/j1/replay" && r.Method == http.MethodPost:
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.replays = append(f.replays, string(b))
		f.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		io.WriteString(w, `{"id":"j7","kind":"k","status":"queued","replay_of":"j1","error":null,"attempt":0,"created_at":"2026-11-30T08:00:00Z","updated_at":"2026-11-30T08:00:01Z"}`)
	case r.URL.Path == "/v1/jobs/j2/retry" && r.Method == http.MethodPost:
		// A refusal whose detail holds markup: the page must escape it.
		w.WriteHeader(http.StatusConflict)
		io.WriteString(w, `{"type":"x","title":"Conflict","status":409,"detail":"only a failed or cancelled job is retried <b>now</b>","code":"not_retryable"}`)
	case r.URL.Path == "/v1/jobs/nope":
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"type":"x","title":"Not found","status":404,"detail":"no such job","code":"not_found"}`)
	case r.URL.Path == "/v1/batches/b1":
		io.WriteString(w, `{"id":"b1","status":"running","total":4,"counts":{"pending":1,"succeeded":2,"failed":1,"cancelled":0},"completion_job_id":null,"created_at":"2026-11-30T08:00:00Z","job_ids":["j1"],"next_page_token":null}`)
	case r.URL.Path == "/v1/counts":
		io.WriteString(w, `{"kinds":{"report":{"queued":5000,"running":3,"waiting":4990}},"truncated":false}`)
	case r.URL.Path == "/v1/kinds":
		// A kind name with markup too.
		io.WriteString(w, `{"kinds":[{"name":"<b>plain</b>"},{"name":"report","lane":"bulk","concurrency":3,"rate_limit_per_key":2,"rate_period_seconds":60,"limit_key":"owner","max_queued":10000}]}`)
	case r.URL.Path == "/v1/schedules":
		io.WriteString(w, `{"schedules":[{"name":"nightly","expression":"cron(0 2 * * ? *)","time_zone":"Europe/Paris","kind":"k","payload":{},"overlap":"skip","created_at":"2026-11-30T08:00:00Z","next_fire":"2026-12-01T01:00:00Z"}]}`)
	case r.URL.Path == "/v1/admin/jobs":
		if r.URL.Query().Get("owner") != "arn:aws:iam::1:role/team" {
			http.Error(w, "owner", http.StatusBadRequest)
			return
		}
		io.WriteString(w, `{"jobs":[{"id":"j9","kind":"k","status":"failed","error":"boom","attempt":1,"created_at":"2026-11-30T08:00:00Z","updated_at":"2026-11-30T08:00:01Z"}],"next_page_token":null}`)
	case r.URL.Path == "/v1/admin/jobs/j9":
		io.WriteString(w, `{"job":{"id":"j9","kind":"k","status":"failed","error":"boom","attempt":1,"payload":{"x":1},"created_at":"2026-11-30T08:00:00Z","updated_at":"2026-11-30T08:00:01Z"},"owner":"arn:aws:iam::1:role/team"}`)
	case r.URL.Path == "/v1/admin/jobs/j9/retry" && r.Method == http.MethodPost:
		io.WriteString(w, `{"id":"j9","kind":"k","status":"queued","error":null,"attempt":1,"created_at":"2026-11-30T08:00:00Z","updated_at":"2026-11-30T08:00:01Z"}`)
	case strings.HasPrefix(r.URL.Path, "/v1/pauses") || strings.HasPrefix(r.URL.Path, "/v1/admin/pauses"):
		f.servePauses(w, r)
	case strings.HasPrefix(r.URL.Path, "/v1/bulk/"):
		var body map[string]string
		_ = json.NewDecoder(r.Body).Decode(&body)
		f.mu.Lock()
		f.bulk = append(f.bulk, body)
		n := len(f.bulk)
		f.mu.Unlock()
		if n == 1 {
			io.WriteString(w, `{"matched":100,"changed":99,"continuation_token":"c1"}`)
		} else {
			io.WriteString(w, `{"matched":3,"changed":3,"continuation_token":null}`)
		}
	default:
		http.NotFound(w, r)
	}
}

// serve serves a dashboard configured by cfg on a test server, whose
// listener's address it answers at (cfg.Addr).
func serve(t *testing.T, cfg dashboard.Config) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	cfg.Addr = srv.Listener.Addr().String()
	d, err := dashboard.New(cfg)
	if err != nil {
		srv.Close()
		t.Fatal(err)
	}
	srv.Config.Handler = d
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// newAPI starts a fake jobs API and returns it with its URL.
func newAPI(t *testing.T) (*fakeAPI, *url.URL) {
	t.Helper()
	f := &fakeAPI{}
	api := httptest.NewServer(f)
	t.Cleanup(api.Close)
	u, _ := url.Parse(api.URL)
	return f, u
}

func newServer(t *testing.T) (*httptest.Server, *fakeAPI) {
	f, u := newAPI(t)
	return serve(t, dashboard.Config{API: u}), f
}

func get(t *testing.T, u string) (int, string, http.Header) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// Every page renders from the API's answers, escapes what it shows, is
// labelled for screen readers and loads nothing from elsewhere.
func TestPages(t *testing.T) {
	srv, _ := newServer(t)
	for path, want := range map[string][]string{
		"/": {"Jobs by kind", "CloudWatch dashboard", `<th scope="row">report</th><td><a href="/jobs?kind=report&amp;status=queued">5000</a></td><td>4990</td><td><a href="/jobs?kind=report&amp;status=running">3</a></td>`,
			"Kinds and their limits", `<th scope="row">&lt;b&gt;plain&lt;/b&gt;</th><td>default</td><td></td>`},
		"/jobs":          {"&lt;script&gt;alert(1)&lt;/script&gt;", `href="/jobs?limit=25&amp;page_token=tok"`, `<label for="f-status">`, `aria-live="polite"`},
		"/jobs/j1":       {`id="status"`, "running", `<dd id="lane">default</dd>`, `&#34;done&#34;: 2`, `href="/batches/b1"`, `id="retry" disabled`},
		"/batches/b1":    {`max="4" value="3"`, `href="/jobs/j1"`},
		"/schedules":     {"nightly", "cron(0 2 * * ? *)", "Europe/Paris"},
		"/jobs?kind=x":   {`action="/bulk/cancel"`, `data-confirm=`},
		"/assets/app.js": {"fetch("},
	} {
		code, body, h := get(t, srv.URL+path)
		if code != http.StatusOK {
			t.Errorf("%s: %d %s", path, code, body)
			continue
		}
		for _, w := range want {
			if !strings.Contains(body, w) {
				t.Errorf("%s lacks %q", path, w)
			}
		}
		if strings.Contains(body, "<script>alert") {
			t.Errorf("%s shows markup from the API unescaped", path)
		}
		if strings.Contains(body, "http://") || strings.Contains(body, "https://") {
			t.Errorf("%s loads something from elsewhere", path)
		}
		if !strings.Contains(h.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Errorf("%s: no content security policy", path)
		}
		noFraming(t, path, h)
	}
	if code, body, _ := get(t, srv.URL+"/jobs/nope"); code != http.StatusNotFound || !strings.Contains(body, "no such job") {
		t.Errorf("an unknown job: %d %s", code, body)
	}
	if code, _, _ := get(t, srv.URL+"/dlq"); code != http.StatusNotFound {
		t.Errorf("the dead-letter page without queues: %d", code)
	}
}

// A bulk action follows the continuation tokens over the whole filter,
// bounded to jobs created before the click, and says what it did.
func TestBulkFollowsTheFilter(t *testing.T) {
	srv, f := newServer(t)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm(srv.URL+"/bulk/retry", url.Values{"status": {"failed"}, "kind": {"k"}, "query": {"status=failed&kind=k"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/jobs?") || !strings.Contains(loc, "flash=bulk_retried") {
		t.Fatalf("after the bulk retry: %d %s", resp.StatusCode, loc)
	}
	if _, body, _ := get(t, srv.URL+loc); !strings.Contains(body, `<p class="flash" role="status">103 jobs matched, 102 retried.</p>`) {
		t.Fatalf("the page after the bulk retry (%s) does not say what it did:\n%s", loc, body)
	}
	if len(f.bulk) != 2 || f.bulk[0]["status"] != "failed" || f.bulk[0]["kind"] != "k" || f.bulk[0]["created_before"] == "" || f.bulk[1]["continuation_token"] != "c1" {
		t.Fatalf("bulk requests %v", f.bulk)
	}
	// Without a filter, nothing is sent.
	resp, _ = client.PostForm(srv.URL+"/bulk/cancel", url.Values{"query": {""}})
	resp.Body.Close()
	if len(f.bulk) != 2 || !strings.Contains(resp.Header.Get("Location"), "flash=bulk_needs_filter") {
		t.Fatalf("a bulk action without a filter: %v %s", f.bulk, resp.Header.Get("Location"))
	}
	// A tag alone is a filter.
	resp, _ = client.PostForm(srv.URL+"/bulk/cancel", url.Values{"tag": {"import=42"}, "query": {"tag=import%3D42"}})
	resp.Body.Close()
	if len(f.bulk) != 3 || f.bulk[2]["tag"] != "import=42" || f.bulk[2]["status"] != "" || !strings.Contains(resp.Header.Get("Location"), "flash=bulk_cancelled") {
		t.Fatalf("a bulk cancel by tag: %v %s", f.bulk, resp.Header.Get("Location"))
	}
	// A form cannot send the browser elsewhere.
	resp, _ = client.PostForm(srv.URL+"/bulk/cancel", url.Values{"status": {"queued"}, "query": {"//evil.example/x"}})
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); !strings.HasPrefix(loc, "/jobs?") {
		t.Fatalf("redirected to %s", loc)
	}
}

// An operator's dashboard reads one owner's jobs at a time through the
// admin routes, shows each job's owner, and acts through the admin routes.
func TestOperatorMode(t *testing.T) {
	_, u := newAPI(t)
	srv := serve(t, dashboard.Config{API: u, Operator: true})
	if code, body, _ := get(t, srv.URL+"/jobs"); code != http.StatusOK || !strings.Contains(body, `id="f-owner"`) || !strings.Contains(body, "Give the owner") {
		t.Fatalf("without an owner: %d %s", code, body)
	}
	code, body, _ := get(t, srv.URL+"/jobs?owner="+url.QueryEscape("arn:aws:iam::1:role/team"))
	if code != http.StatusOK || !strings.Contains(body, "j9") || strings.Contains(body, "/bulk/") {
		t.Fatalf("an owner's jobs: %d %s", code, body)
	}
	if code, body, _ := get(t, srv.URL+"/jobs/j9"); code != http.StatusOK || !strings.Contains(body, "arn:aws:iam::1:role/team") || !strings.Contains(body, "boom") {
		t.Fatalf("a job's page: %d %s", code, body)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.PostForm(srv.URL+"/jobs/j9/retry", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !strings.Contains(resp.Header.Get("Location"), "flash=retried") {
		t.Fatalf("retry through the admin route: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// The overview shows each kind's counts and throughput from the local
// stack's metrics.
func TestOverviewShowsThroughput(t *testing.T) {
	stats := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"kinds":{"example.hash":{"counts":{"JobsSucceeded":40,"JobsFailed":2},"durations_ms":{"RunDuration":{"n":42,"p50":12,"p99":40}},"ended_per_minute":8.4}}}`)
	}))
	t.Cleanup(stats.Close)
	_, u := newAPI(t)
	su, _ := url.Parse(stats.URL)
	srv := serve(t, dashboard.Config{API: u, Stats: su})
	code, body, _ := get(t, srv.URL+"/")
	if code != http.StatusOK || !strings.Contains(body, "example.hash") || !strings.Contains(body, "<td>8.4</td>") || !strings.Contains(body, "12 / 40") {
		t.Fatalf("overview: %d %s", code, body)
	}
}

// A queued job that waits on a limit, a pause or a signal says so on its
// page; a paused one links to the pauses.
func TestJobPageShowsWhatAJobWaitsOn(t *testing.T) {
	srv, _ := newServer(t)
	for id, want := range map[string]string{
		"j2": `<dd id="waiting">concurrency (flow control: no attempt spent)</dd>`,
		"j4": `<dd id="waiting">paused: <a href="/pauses">a pause</a> holds it (no attempt spent)</dd>`,
		"j6": `<dd id="waiting">the signal <code>&lt;b&gt;approval</code>, at most until the run time above (no attempt spent)</dd>`,
	} {
		status, body, _ := get(t, srv.URL+"/jobs/"+id)
		if status != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("%s: status %d, want %s in:\n%s", id, status, want, body)
		}
	}
}

func TestJobPageShowsWhatAJobRunsAfter(t *testing.T) {
	srv, _ := newServer(t)
	status, body, _ := get(t, srv.URL+"/jobs/j3")
	for _, want := range []string{`<dd id="waiting">1 of the jobs it runs after (no attempt spent)</dd>`,
		`<li><a href="/jobs/j1">j1</a></li><li><a href="/jobs/j2">j2</a></li>`, `<dt>Replays</dt><dd><a href="/jobs/j0">j0</a></dd>`,
		`<dd id="child-of"><a href="/jobs/j9">j9</a> (its handler)</dd>`} {
		if status != http.StatusOK || !strings.Contains(body, want) {
			t.Fatalf("status %d, want %s in:\n%s", status, want, body)
		}
	}
}

// A job whose payload and result are S3 objects shows their sizes and a
// link to the result, and offers no replay with an edited payload (there
// is none to edit).
func TestJobPageShowsPartsKeptAsObjects(t *testing.T) {
	srv, _ := newServer(t)
	status, body, _ := get(t, srv.URL+"/jobs/j5")
	for _, want := range []string{`<p id="payload-object">307200 bytes, kept as an S3 object: too large to show.</p>`,
		`<a id="result-link" href="https://parts.s3.amazonaws.com/parts/ab/j5/result-x?X-Amz-Expires=300&amp;X-Amz-Signature=s" rel="noreferrer">download it</a>`} {
		if status != http.StatusOK || !strings.Contains(body, want) {
			t.Fatalf("status %d, want %s in:\n%s", status, want, body)
		}
	}
	if strings.Contains(body, `id="replay-edited"`) {
		t.Error("a job whose payload is an object offers a replay with an edited payload")
	}
}

// The Replay buttons post to the API's replay, the edited one with its
// payload, and show the new job.
func TestReplayFromTheJobPage(t *testing.T) {
	srv, f := newServer(t)
	_, page, _ := get(t, srv.URL+"/jobs/j1")
	if !strings.Contains(page, `action="/jobs/j1/replay"`) || !strings.Contains(page, `<textarea id="replay-payload" name="payload"`) {
		t.Fatalf("no replay forms on the job page:\n%s", page)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, form := range []url.Values{nil, {"payload": {`{"customer":"c-43","card":"[secret]"}`}}, {"payload": {`{nope`}}} {
		resp, err := client.PostForm(srv.URL+"/jobs/j1/replay", form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		switch {
		case form.Get("payload") == "{nope":
			if !strings.HasPrefix(loc, "/jobs/j1?") || !strings.Contains(loc, "flash=payload_not_json") {
				t.Fatalf("a replay with a malformed payload: %d %s", resp.StatusCode, loc)
			}
		case resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/jobs/j7?"):
			t.Fatalf("after the replay: %d %s", resp.StatusCode, loc)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.replays) != 2 || f.replays[0] != "" || f.replays[1] != `{"payload":{"customer":"c-43","card":"[secret]"}}` {
		t.Fatalf("replay bodies %q", f.replays)
	}
}

// A job that waits for a signal shows its steps as a timeline (escaped)
// and a form that sends the signal through the API's route.
func TestJobPageShowsStepsAndSendsASignal(t *testing.T) {
	srv, f := newServer(t)
	_, page, _ := get(t, srv.URL+"/jobs/j6")
	for _, want := range []string{`<table id="steps"`, `<td>ask</td><td>step</td><td>done</td>`, `<td>&lt;b&gt;approval</td><td>signal</td><td>waiting</td>`,
		`action="/jobs/j6/signal"`, `<input type="hidden" name="name" value="&lt;b&gt;approval">`} {
		if !strings.Contains(page, want) {
			t.Fatalf("want %s in the job page:\n%s", want, page)
		}
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for payload, flash := range map[string]string{`{"approved":true}`: "signalled", `{nope`: "payload_not_json"} {
		resp, err := client.PostForm(srv.URL+"/jobs/j6/signal", url.Values{"name": {"<b>approval"}, "payload": {payload}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || !strings.Contains(loc, "flash="+flash) {
			t.Fatalf("a signal %s: %d %s, want flash %s", payload, resp.StatusCode, loc, flash)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.signals) != 1 || f.signals[0] != `{"approved":true}` {
		t.Fatalf("signal bodies %q", f.signals)
	}
}

// fakeBus is the local event bus as the Events page reads it: canned
// events, oldest first; it records each request ("METHOD query").
type fakeBus struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeBus) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeBus) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.calls = append(f.calls, r.Method+" "+r.URL.RawQuery)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `[{"id":"local-1","detail_type":"Job Finished","time":"2026-12-01T10:00:01Z",`+
		`"detail":{"id":"j1/1","job_id":"j1","sequence":1,"kind":"<b>k</b>","status":"failed","code":"boom","attempt":2,"finished_at":"2026-12-01T10:00:00Z"}},`+
		`{"id":"local-2","detail_type":"Job Finished","time":"2026-12-01T10:05:01Z",`+
		`"detail":{"id":"j2/1","job_id":"j2","sequence":1,"kind":"k","status":"succeeded","attempt":1,"result":{"ok":true},"finished_at":"2026-12-01T10:05:00Z"}}]`)
}

// newBus starts a fake event bus and returns it with its URL.
func newBus(t *testing.T) (*fakeBus, *url.URL) {
	t.Helper()
	f := &fakeBus{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL + "/_local/eventbus")
	return f, u
}

// The Events page lists the local bus's events newest first, each linked
// to its job, escaped, with the filter passed to the bus; a dashboard
// without a bus says where a deployment's events are.
func TestEventsPage(t *testing.T) {
	bus, bu := newBus(t)
	_, u := newAPI(t)
	srv := serve(t, dashboard.Config{API: u, Events: bu})
	code, body, h := get(t, srv.URL+"/events?kind=k&status=failed&limit=7")
	if code != http.StatusOK {
		t.Fatalf("GET /events: %d %s", code, body)
	}
	for _, want := range []string{`<a href="/jobs/j1">j1</a>`, `<a href="/jobs/j2">j2</a>`, "&lt;b&gt;k&lt;/b&gt;", "<td>boom</td>", "2026-12-01 10:05:01.000",
		`<label for="e-status">`, `value="failed" selected`, `aria-current="page">Events`} {
		if !strings.Contains(body, want) {
			t.Errorf("GET /events lacks %q", want)
		}
	}
	if i, j := strings.Index(body, "j2/1"), strings.Index(body, "j1/1"); i < 0 || j < 0 || i > j {
		t.Errorf("the events are not newest first (j2/1 at %d, j1/1 at %d)", i, j)
	}
	if strings.Contains(body, "<b>k</b>") {
		t.Error("the page shows markup from the bus unescaped")
	}
	noFraming(t, "/events", h)
	if got := bus.requests(); len(got) != 1 || got[0] != "GET kind=k&limit=7&status=failed" {
		t.Errorf("the bus received %v, want one GET with the filter", got)
	}
	plain := serve(t, dashboard.Config{API: u})
	if code, body, _ := get(t, plain.URL+"/events"); code != http.StatusNotFound || !strings.Contains(body, "EventBridge bus") {
		t.Errorf("without a bus: %d %s", code, body)
	}
}

// The overview shows each kind's lane, limits and caps (GET /v1/kinds)
// and how many of the caller's jobs wait on them (GET /v1/counts); an
// operator, who reads one owner at a time, sees the limits only. Each
// kind has a Pause button that asks first: the caller's jobs of it, or an
// operator's every owner's.
func TestOverviewShowsLimitsAndWaiting(t *testing.T) {
	srv, _ := newServer(t)
	code, body, _ := get(t, srv.URL+"/")
	want := `<tr data-kind="report"><th scope="row">report</th><td>bulk</td><td>3</td><td></td><td></td><td>2 per 60s</td><td>owner</td><td>10000</td><td></td><td class="waiting">4990</td>` + "\n" +
		`<td><form method="post" action="/pauses" data-confirm="Pause your jobs of kind report? Queued ones stop starting within 5 seconds until resumed (13 days at most); running ones run on."><input type="hidden" name="kind" value="report"><button type="submit" aria-label="Pause kind report">Pause</button></form></td></tr>`
	if code != http.StatusOK || !strings.Contains(body, want) {
		t.Fatalf("overview: %d, want the row\n%s\nin\n%s", code, want, body)
	}
	f, u := newAPI(t)
	op := serve(t, dashboard.Config{API: u, Operator: true})
	code, body, _ = get(t, op.URL+"/")
	if code != http.StatusOK || !strings.Contains(body, `<td>10000</td><td></td><td class="waiting">-</td>`) || strings.Contains(body, `id="now"`) ||
		!strings.Contains(body, `data-confirm="Pause every owner's jobs of kind report?`) {
		t.Fatalf("operator overview: %d\n%s", code, body)
	}
	for _, c := range f.requests() {
		if strings.HasSuffix(c, "/v1/counts") {
			t.Fatalf("the operator's overview read %s: counts are the caller's own", c)
		}
	}
}
