package localstack_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
)

// hook is a webhook target: it answers each request with the next of its
// statuses (the last one repeated), and records what it got.
type hook struct {
	mu       sync.Mutex
	statuses []int
	redirect string // Location of a 3xx answer
	got      []hookRequest
}

type hookRequest struct {
	at     time.Time
	header http.Header
	body   string
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	h.got = append(h.got, hookRequest{time.Now(), r.Header.Clone(), string(body)})
	status := h.statuses[min(len(h.got), len(h.statuses))-1]
	h.mu.Unlock()
	if status >= 300 && status < 400 {
		w.Header().Set("Location", h.redirect)
	}
	w.WriteHeader(status)
	// A body the webhook must drop unread into any log.
	fmt.Fprint(w, "target-secret-body")
}

func (h *hook) requests() []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookRequest(nil), h.got...)
}

// serveHook serves h on a loopback test server.
func serveHook(t *testing.T, h http.Handler) *url.URL {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL + "/hook")
	return u
}

// busWithWebhook serves a local bus whose webhook posts to target, and
// runs the webhook until the test ends.
func busWithWebhook(t *testing.T, wh *localstack.Webhook) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(localstack.EventBusPath, &localstack.EventBus{Webhook: wh})
	srv := httptest.NewServer(mux)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); wh.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; srv.Close() })
	return srv.URL
}

// waitStats waits until the webhook's counts satisfy ok.
func waitStats(t *testing.T, wh *localstack.Webhook, ok func(localstack.WebhookStats) bool) localstack.WebhookStats {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for {
		if st := wh.Stats(); ok(st) {
			return st
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("webhook stats %+v, still not as wanted", wh.Stats())
		}
	}
}

// Each event the bus takes reaches the webhook once, as an API destination
// with the recipe's input would post it: the detail as the body, with
// EventBridge's User-Agent and Content-Type and the event's id as
// Idempotency-Key. Two outcomes of one job are two deliveries.
func TestWebhookGetsEachEventOnce(t *testing.T) {
	t.Parallel()
	h := &hook{statuses: []int{http.StatusNoContent}}
	wh := &localstack.Webhook{URL: serveHook(t, h)}
	details := []string{`{"id":"j1/1","kind":"k","status":"cancelled"}`, `{"id":"j1/2","kind":"k","status":"succeeded"}`}
	putDetails(t, busWithWebhook(t, wh), details...)
	st := waitStats(t, wh, func(s localstack.WebhookStats) bool { return s.Delivered+s.Failed == 2 })
	got := h.requests()
	if st.Delivered != 2 || st.Tries != 2 || len(got) != 2 {
		t.Fatalf("stats %+v, %d requests: want 2 delivered in 2 tries", st, len(got))
	}
	bodies := map[string]string{}
	for _, r := range got {
		bodies[r.header.Get("Idempotency-Key")] = r.body
		if ua, ct := r.header.Get("User-Agent"), r.header.Get("Content-Type"); ua != "Amazon/EventBridge/ApiDestinations" || ct != "application/json; charset=utf-8" {
			t.Errorf("User-Agent %q, Content-Type %q", ua, ct)
		}
	}
	if bodies["j1/1"] != details[0] || bodies["j1/2"] != details[1] {
		t.Fatalf("deliveries by Idempotency-Key: %v, want each detail under its id", bodies)
	}
}

// A try that fails as API destinations retry (a 5xx, a 429, no answer) is
// retried after a backoff that grows; any other answer ends the delivery
// at once (a redirect is not followed), and the tries are bounded.
func TestWebhookRetriesAsAPIDestinations(t *testing.T) {
	t.Parallel()
	elsewhere := &hook{statuses: []int{http.StatusOK}}
	other := serveHook(t, elsewhere)
	const backoff = 40 * time.Millisecond
	for _, tt := range []struct {
		name      string
		statuses  []int
		attempts  int
		delivered bool
		tries     int
	}{
		{"fails twice, then succeeds", []int{500, 503, 200}, 8, true, 3},
		{"throttled once", []int{429, 202}, 8, true, 2},
		{"a 400 is final", []int{400, 200}, 8, false, 1},
		{"a 404 is final", []int{404, 200}, 8, false, 1},
		{"a redirect is not followed", []int{307, 200}, 8, false, 1},
		{"every try fails", []int{502}, 3, false, 3},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := &hook{statuses: tt.statuses, redirect: other.String()}
			wh := &localstack.Webhook{URL: serveHook(t, h), Attempts: tt.attempts, Backoff: backoff, MaxBackoff: time.Second}
			putDetails(t, busWithWebhook(t, wh), `{"id":"j/1"}`)
			st := waitStats(t, wh, func(s localstack.WebhookStats) bool { return s.Delivered+s.Failed == 1 })
			got := h.requests()
			if (st.Delivered == 1) != tt.delivered || st.Tries != int64(tt.tries) || len(got) != tt.tries {
				t.Fatalf("stats %+v, %d requests; want delivered %v after %d tries", st, len(got), tt.delivered, tt.tries)
			}
			// Each wait is drawn between half the backoff and all of it,
			// the backoff doubling: the nth retry waits at least
			// backoff * 2^(n-2).
			for i := 1; i < len(got); i++ {
				if gap, least := got[i].at.Sub(got[i-1].at), backoff<<(i-1)/2; gap < least {
					t.Errorf("retry %d came %v after the try before, want at least %v", i, gap, least)
				}
			}
			if n := len(elsewhere.requests()); n != 0 {
				t.Fatalf("the redirect's target got %d requests, want none", n)
			}
		})
	}
	// No answer at all (nothing listens): retried, then given up.
	closed := httptest.NewServer(http.NotFoundHandler())
	u, _ := url.Parse(closed.URL + "/hook")
	closed.Close()
	wh := &localstack.Webhook{URL: u, Attempts: 2, Backoff: time.Millisecond}
	putDetails(t, busWithWebhook(t, wh), `{"id":"j/1"}`)
	if st := waitStats(t, wh, func(s localstack.WebhookStats) bool { return s.Failed == 1 }); st.Tries != 2 || st.Delivered != 0 {
		t.Fatalf("a target that is down: %+v, want 2 tries and no delivery", st)
	}
}

// A target that never answers holds neither the bus nor the sender: the
// bus answers PutEvents at once, and with the backlog full an event is
// dropped, never waited for.
func TestWebhookNeverBlocksTheBus(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	hung := serveHook(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer close(release)
	wh := &localstack.Webhook{URL: hung}
	base := busWithWebhook(t, wh)
	for i := range 3 {
		putDetails(t, base, fmt.Sprintf(`{"id":"j/%d"}`, i+1)) // returns while the target hangs
	}
	// Without deliveries running, the backlog fills and Send still returns.
	idle := &localstack.Webhook{URL: hung}
	for i := range localstack.WebhookBacklog + 5 {
		idle.Send(localstack.BusEvent{ID: fmt.Sprint("local-", i+1), Detail: []byte(`{}`)})
	}
	if st := idle.Stats(); st.Dropped != 5 || st.Tries != 0 {
		t.Fatalf("an idle webhook after %d events: %+v, want 5 dropped", localstack.WebhookBacklog+5, st)
	}
}

// Only this machine: Start refuses a webhook elsewhere before it starts
// anything (this configuration could start nothing), and every address a
// webhook dials must be a loopback one, whatever a name resolved to.
func TestWebhookIsLoopbackOnly(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"http://127.0.0.1:9000/hook", "http://localhost:9000/hook", "https://[::1]:8443/x", "http://127.1.2.3/"} {
		if _, err := localstack.ParseWebhook(ok); err != nil {
			t.Errorf("ParseWebhook(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"http://example.com/hook", "http://10.0.0.1/", "http://0.0.0.0:9000/", "http://[::]:9000/", "ftp://127.0.0.1/",
		"127.0.0.1:9000", "http://127.0.0.1.nip.io/", "http://localhost.example.com/", "http://[::ffff:10.0.0.1]/"} {
		if _, err := localstack.ParseWebhook(bad); err == nil {
			t.Errorf("ParseWebhook(%q) accepted it", bad)
		}
	}
	_, err := localstack.Start(context.Background(), localstack.Config{Root: t.TempDir(), Bootstraps: t.TempDir(), Webhook: "http://hooks.example.com/jobs"})
	if err == nil || !strings.Contains(err.Error(), "only to this machine") {
		t.Fatalf("Start with a webhook elsewhere: %v, want it refused first", err)
	}
	for addr, ok := range map[string]bool{"127.0.0.1:80": true, "[::1]:80": true, "[::ffff:127.0.0.1]:80": true, "192.0.2.1:80": false, "[2001:db8::1]:80": false} {
		if err := localstack.LoopbackOnly("tcp", addr, nil); (err == nil) != ok {
			t.Errorf("dialling %s: %v, want allowed %v", addr, err, ok)
		}
	}
}
