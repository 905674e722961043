package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/dashboard"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/sqsqueue"
)

// noFraming fails unless h forbids every page from being framed.
func noFraming(t *testing.T, what string, h http.Header) {
	t.Helper()
	if got := h.Get("X-Frame-Options"); got != "DENY" {
		t.Errorf("%s: X-Frame-Options %q, want DENY", what, got)
	}
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") || !strings.Contains(csp, "default-src 'self'") {
		t.Errorf("%s: Content-Security-Policy %q, want default-src 'self' and frame-ancestors 'none'", what, csp)
	}
}

// fakeDLQ is the dead-letter queue as the dashboard uses it; it counts
// each call by method, records the lane and shapes each was asked for,
// and holds one dead letter.
type fakeDLQ struct {
	mu    sync.Mutex
	calls map[string]int
	asked []string // "Op lane anyShape"
}

func (f *fakeDLQ) ask(op, lane string, anyShape bool) {
	f.count(op)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, fmt.Sprintf("%s %q %v", op, lane, anyShape))
}

func (f *fakeDLQ) count(op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[op]++
}

// n is how many times op was called.
func (f *fakeDLQ) n(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// total is how many calls were made, and how many of them were more than
// a read of the queues' depths.
func (f *fakeDLQ) total() (all, changing int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for op, n := range f.calls {
		all += n
		if op != "Depths" {
			changing += n
		}
	}
	return all, changing
}

func (f *fakeDLQ) Depths(context.Context) (sqsqueue.Depths, error) {
	f.count("Depths")
	return sqsqueue.Depths{Queue: 3, DeadLetters: 7, Lanes: map[string]int{"bulk": 1999}, LaneDeadLetters: map[string]int{"bulk": 4}}, nil
}

func (f *fakeDLQ) Peek(_ context.Context, lane string, _ int) ([]dashboard.DeadLetter, error) {
	f.ask("Peek", lane, false)
	return []dashboard.DeadLetter{{ID: "m-1", Shape: "JSON object of 14 bytes with keys [job_id]", Receives: 6,
		SentAt: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC), Why: sqsqueue.Why(`{"job_id":"x"}`), Sort: "job", Sender: "AROAWORKER:worker", Redrive: sqsqueue.RedriveMoves},
		{ID: "m-2", Shape: "JSON object of 60 bytes with keys [idempotency_key kind payload]", Receives: 1,
			SentAt: time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), Why: sqsqueue.Why(`{"kind":"k"}`), Sort: "envelope", Sender: "AIDAINSIDER", Redrive: sqsqueue.RedriveOnlyAnyShape},
		{ID: "m-3", Shape: "JSON object of 30 bytes with keys [kind payload]", Receives: 1,
			SentAt: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), Why: sqsqueue.Why(`{"kind":"k"}`), Sort: "envelope_without_key", Sender: "AIDAINSIDER", Redrive: sqsqueue.RedriveNever}}, nil
}

func (f *fakeDLQ) Redrive(_ context.Context, lane, _ string, anyShape bool) error {
	f.ask("Redrive", lane, anyShape)
	return nil
}

func (f *fakeDLQ) RedriveAll(_ context.Context, lane string, anyShape bool) (httpapi.RedriveAnswer, error) {
	f.ask("RedriveAll", lane, anyShape)
	return httpapi.RedriveAnswer{Lane: lane, Redriven: 1, Skipped: []httpapi.Skipped{{Sort: "s3", Count: 2, Why: sqsqueue.Refusal("s3")}}}, nil
}

// fullServer serves a dashboard with every source: the API, the metrics,
// the event bus and the queues.
func fullServer(t *testing.T) (*httptest.Server, *fakeAPI, *fakeDLQ) {
	srv, f, q, _ := fullServerWithBus(t)
	return srv, f, q
}

// fullServerWithBus is fullServer, with its event bus.
func fullServerWithBus(t *testing.T) (*httptest.Server, *fakeAPI, *fakeDLQ, *fakeBus) {
	t.Helper()
	f, u := newAPI(t)
	stats := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"kinds":{}}`)
	}))
	t.Cleanup(stats.Close)
	su, _ := url.Parse(stats.URL)
	bus, bu := newBus(t)
	q := &fakeDLQ{}
	srv := serve(t, dashboard.Config{API: u, Stats: su, DLQ: q, Events: bu})
	return srv, f, q, bus
}

type reply struct {
	status int
	header http.Header
	body   string
}

// send sends one request to the dashboard without following redirects;
// host, when set, replaces the Host header.
func send(t *testing.T, method, u, host string, header http.Header, form url.Values) reply {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if host != "" {
		req.Host = host
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, string(b)}
}

// The routes that change something, with a form each would accept.
var postRoutes = map[string]url.Values{
	"/jobs/j1/cancel": nil,
	"/jobs/j1/retry":  nil,
	"/jobs/j1/replay": nil,
	"/bulk/cancel":    {"status": {"queued"}, "query": {"status=queued"}},
	"/bulk/retry":     {"status": {"failed"}, "query": {"status=failed"}},
	"/dlq/redrive":    {},
	"/dlq/peek":       nil,
	"/pauses":         {"kind": {"report"}},
	"/pauses/resume":  {"kind": {"report"}},
}

// A POST from another site (as a browser marks it: Sec-Fetch-Site, or only
// an Origin for an older one) is refused before the dashboard calls the API
// or SQS: a page the operator visits cannot act with their identity.
func TestCrossOriginPostsAreRefused(t *testing.T) {
	srv, api, q := fullServer(t)
	for name, header := range map[string]http.Header{
		"another site":                 {"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}},
		"another port of this host":    {"Sec-Fetch-Site": {"same-site"}, "Origin": {"http://127.0.0.1:1"}},
		"an old browser, other Origin": {"Origin": {"https://evil.example"}},
		"a sandboxed frame (null)":     {"Sec-Fetch-Site": {"cross-site"}, "Origin": {"null"}},
	} {
		for path, form := range postRoutes {
			r := send(t, http.MethodPost, srv.URL+path, "", header, form)
			if r.status != http.StatusForbidden || strings.Contains(r.body, "<html") {
				t.Errorf("%s, POST %s: %d %.60q, want 403 and no page", name, path, r.status, r.body)
			}
			noFraming(t, name+" POST "+path, r.header)
		}
	}
	if got := api.requests(); len(got) != 0 {
		t.Errorf("the API received %v after cross-origin POSTs, want nothing", got)
	}
	if all, _ := q.total(); all != 0 {
		t.Errorf("SQS received %d calls after cross-origin POSTs, want none", all)
	}
}

// The dashboard's own forms (Sec-Fetch-Site: same-origin, or an Origin
// equal to the Host) and clients that are not browsers still act.
func TestSameOriginPostsWork(t *testing.T) {
	for name, header := range map[string]func(srv string) http.Header{
		"the dashboard's own page":    func(string) http.Header { return http.Header{"Sec-Fetch-Site": {"same-origin"}} },
		"an old browser, same Origin": func(srv string) http.Header { return http.Header{"Origin": {srv}} },
		"typed in the address bar":    func(string) http.Header { return http.Header{"Sec-Fetch-Site": {"none"}} },
		"not a browser":               func(string) http.Header { return nil },
	} {
		t.Run(name, func(t *testing.T) {
			srv, api, _ := fullServer(t)
			r := send(t, http.MethodPost, srv.URL+"/jobs/j1/cancel", "", header(srv.URL), nil)
			if r.status != http.StatusSeeOther || !strings.Contains(r.header.Get("Location"), "flash=cancelled") {
				t.Fatalf("POST /jobs/j1/cancel: %d %s %q", r.status, r.header.Get("Location"), r.body)
			}
			if got := api.requests(); len(got) != 1 || got[0] != "POST /v1/jobs/j1/cancel" {
				t.Fatalf("the API received %v, want the cancel", got)
			}
		})
	}
}

// A request whose Host is not the dashboard's address (a DNS-rebound name
// of another site) gets no page and makes no call, whatever its method;
// localhost with the dashboard's port is the same dashboard.
func TestOtherHostsGetNoPage(t *testing.T) {
	srv, api, q, bus := fullServerWithBus(t)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	for _, host := range []string{"evil.example", "evil.example:" + port, "127.0.0.1", "127.0.0.1:1", "localhost", "localhost.:" + port, "127.0.0.1.nip.io:" + port} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			for _, path := range []string{"/", "/jobs", "/events", "/dlq", "/pauses", "/jobs/j1/cancel", "/bulk/cancel", "/dlq/peek", "/pauses/resume"} {
				r := send(t, method, srv.URL+path, host, http.Header{"Sec-Fetch-Site": {"same-origin"}}, url.Values{"status": {"queued"}})
				if r.status != http.StatusMisdirectedRequest || strings.Contains(r.body, "<html") || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
					t.Errorf("Host %s, %s %s: %d %.60q, want 421 and no page", host, method, path, r.status, r.body)
				}
				noFraming(t, "Host "+host, r.header)
			}
		}
	}
	if got := append(api.requests(), bus.requests()...); len(got) != 0 {
		t.Errorf("the API and the event bus received %v for other hosts, want nothing", got)
	}
	if all, _ := q.total(); all != 0 {
		t.Errorf("SQS received %d calls for other hosts, want none", all)
	}
	for _, host := range []string{"localhost:" + port, "LOCALHOST:" + port} {
		if r := send(t, http.MethodGet, srv.URL+"/jobs", host, nil, nil); r.status != http.StatusOK || !strings.Contains(r.body, "j1") {
			t.Errorf("Host %s: %d, want the job list", host, r.status)
		}
	}
}

// New refuses an address whose Host it could not check.
func TestNewNeedsTheListenAddress(t *testing.T) {
	u, _ := url.Parse("http://127.0.0.1:1")
	for _, addr := range []string{"", "127.0.0.1", "127.0.0.1:0", ":8081", "0.0.0.0:8081", "[::]:8081"} {
		if _, err := dashboard.New(dashboard.Config{API: u, Addr: addr}); err == nil || !strings.Contains(err.Error(), "Addr") {
			t.Errorf("New with Addr %q: %v, want an error naming Addr", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:8081", "[::1]:8081", "localhost:8081", "192.0.2.10:80"} {
		if _, err := dashboard.New(dashboard.Config{API: u, Addr: addr}); err != nil {
			t.Errorf("New with Addr %q: %v", addr, err)
		}
	}
}

// No GET changes anything: every page reads the API with GETs only and the
// queues' attributes only; the dead-letter page receives nothing.
func TestNoGetChangesAnything(t *testing.T) {
	srv, api, q, bus := fullServerWithBus(t)
	for _, path := range []string{"/", "/jobs", "/jobs?status=failed&kind=k", "/jobs?partial=rows", "/jobs/j1", "/api/jobs/j1", "/batches/b1", "/schedules", "/pauses", "/pauses?flash=paused", "/events", "/events?status=failed", "/dlq", "/dlq?flash=x", "/assets/app.js"} {
		if r := send(t, http.MethodGet, srv.URL+path, "", nil, nil); r.status != http.StatusOK {
			t.Errorf("GET %s: %d %q", path, r.status, r.body)
		}
	}
	for _, c := range append(api.requests(), bus.requests()...) {
		if !strings.HasPrefix(c, "GET ") {
			t.Errorf("a GET of the dashboard sent %s to the API or the event bus", c)
		}
	}
	if len(bus.requests()) != 2 {
		t.Errorf("the event bus got %v for the two GETs of /events", bus.requests())
	}
	if q.n("Peek") != 0 {
		t.Errorf("GETs peeked %d times at the dead-letter queue, want 0", q.n("Peek"))
	}
	if _, changing := q.total(); changing != 0 || q.n("Depths") == 0 {
		t.Errorf("dead-letter calls for GETs: %d more than depths, %d depths; want depths only", changing, q.n("Depths"))
	}
}

// GET /dlq shows the depths and a button; the button's POST shows the dead
// letters (receiving them and releasing them at once).
func TestDeadLettersAreShownByAPost(t *testing.T) {
	srv, _, q := fullServer(t)
	r := send(t, http.MethodGet, srv.URL+"/dlq", "", nil, nil)
	for _, want := range []string{`id="dlq-depth">7<`, `action="/dlq/peek"`, "Show dead letters", `action="/dlq/redrive"`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("GET /dlq lacks %q", want)
		}
	}
	if strings.Contains(r.body, "m-1") || q.n("Peek") != 0 {
		t.Fatalf("GET /dlq peeked at messages (%d calls)", q.n("Peek"))
	}
	r = send(t, http.MethodPost, srv.URL+"/dlq/peek", "", http.Header{"Sec-Fetch-Site": {"same-origin"}}, nil)
	if r.status != http.StatusOK {
		t.Fatalf("POST /dlq/peek: %d %q", r.status, r.body)
	}
	for _, want := range []string{`aria-label="Redrive message m-1"`, "a job&#39;s message", "<td>6</td>", `id="dlq-depth">7<`} {
		if !strings.Contains(r.body, want) {
			t.Errorf("POST /dlq/peek lacks %q", want)
		}
	}
	if q.n("Peek") != 1 {
		t.Errorf("the POST peeked %d times, want 1", q.n("Peek"))
	}
	if q.n("Redrive")+q.n("RedriveAll") != 0 {
		t.Errorf("the peek moved messages")
	}
}

// The dead-letter page serves each lane: it shows each lane's dead-letter
// depth, peeks at the lane the form names and redrives to it; a row
// shows its dead letter's sort and sender, and offers a redrive of a
// message that is not a job reference only as "Redrive anyway" (with
// shapes=any, after a confirmation) and none for an envelope without a
// key; "Redrive all" moves job references only, and says what it left.
func TestDeadLettersOfEachLane(t *testing.T) {
	srv, _, q := fullServer(t)
	same := http.Header{"Sec-Fetch-Site": {"same-origin"}}
	r := send(t, http.MethodGet, srv.URL+"/dlq", "", nil, nil)
	if !strings.Contains(r.body, `class="lane-dlq-depth" data-lane="bulk">4<`) || !strings.Contains(r.body, `<option value="bulk">bulk</option>`) {
		t.Errorf("GET /dlq lacks the bulk lane's dead letters: %s", r.body)
	}
	r = send(t, http.MethodPost, srv.URL+"/dlq/peek", "", same, url.Values{"lane": {"bulk"}})
	for _, want := range []string{"of the bulk lane", `<option value="bulk" selected>`, "<td>AIDAINSIDER</td>", "<td>envelope</td>",
		`name="lane" value="bulk"><input type="hidden" name="id" value="m-1"><button type="submit" aria-label="Redrive message m-1">`,
		`name="id" value="m-2"><input type="hidden" name="shapes" value="any"><button type="submit" aria-label="Redrive message m-2 anyway">`,
		"Never redriven", "Redrive all job references of the bulk lane"} {
		if !strings.Contains(r.body, want) {
			t.Errorf("POST /dlq/peek lane=bulk lacks %q", want)
		}
	}
	if strings.Contains(r.body, `value="m-3"`) {
		t.Errorf("an envelope without a key has a redrive button")
	}
	send(t, http.MethodPost, srv.URL+"/dlq/redrive", "", same, url.Values{"lane": {"bulk"}, "id": {"m-2"}, "shapes": {"any"}})
	r = send(t, http.MethodPost, srv.URL+"/dlq/redrive", "", same, url.Values{"lane": {"bulk"}})
	// The message is a code with its counts (never text): one moved, two
	// left (the fake's s3 record and keyless envelope).
	loc := r.header.Get("Location")
	if loc != "/dlq?flash=redriven_all_skipped&n=1&skipped=2" {
		t.Errorf("redrive all redirects to %q, want the code of what was moved and left", loc)
	}
	if page := send(t, http.MethodGet, srv.URL+loc, "", nil, nil); !strings.Contains(page.body, "1 messages are back on the queue; 2 left in the dead-letter queue") {
		t.Errorf("GET %s does not say what was moved and left", loc)
	}
	send(t, http.MethodPost, srv.URL+"/dlq/redrive", "", same, url.Values{})
	want := []string{`Peek "bulk" false`, `Redrive "bulk" true`, `RedriveAll "bulk" false`, `RedriveAll "" false`}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !slices.Equal(q.asked, want) {
		t.Errorf("the dashboard asked %q, want %q", q.asked, want)
	}
}

// The overview and the dead-letter page show each other lane's queue
// depth beside the default queue's.
func TestPagesShowEachLanesDepth(t *testing.T) {
	srv, _, _ := fullServer(t)
	for _, path := range []string{"/", "/dlq"} {
		r := send(t, http.MethodGet, srv.URL+path, "", nil, nil)
		if r.status != http.StatusOK || !strings.Contains(r.body, `data-lane="bulk">1999<`) || !strings.Contains(r.body, "Messages in the bulk lane") {
			t.Errorf("GET %s: %d, want the bulk lane's depth 1999 shown:\n%s", path, r.status, r.body)
		}
	}
}
