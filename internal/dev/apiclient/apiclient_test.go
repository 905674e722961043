package apiclient

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
)

// seen is what a test server received.
type seen struct {
	method, path, query, caller, contentType, key, body string
}

func server(t *testing.T, answer func(n int, w http.ResponseWriter)) (*Client, func() []seen) {
	t.Helper()
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get(CallerHeader), r.Header.Get("Content-Type"), r.Header.Get("Idempotency-Key"), string(b)})
		n := len(got)
		mu.Unlock()
		answer(n, w)
	}))
	t.Cleanup(srv.Close)
	base, _ := url.Parse(srv.URL + "/stage/")
	return &Client{Base: base, Caller: "alice"}, func() []seen {
		mu.Lock()
		defer mu.Unlock()
		return append([]seen(nil), got...)
	}
}

func ok(_ int, w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"id":"j1"}`)
}

// Every route of the table is sent with its method to its path, each
// parameter escaped as one segment, under the base URL's path: the table
// matches what arrives to the same route.
func TestEveryRouteIsSentAsTheTableSays(t *testing.T) {
	c, got := server(t, ok)
	params := map[string]string{"id": "a/b c", "name": "n?1", "action": "cancel", "token": "cb1.t/k"}
	for i, rt := range deploy.Routes {
		p := map[string]string{}
		for name, v := range params {
			if strings.Contains(rt.Path, "{"+name+"}") {
				p[name] = v
			}
		}
		if _, err := c.Call(context.Background(), Request{Route: rt.ID, Params: p, Query: url.Values{"limit": {"2"}}}, nil); err != nil {
			t.Fatalf("%s: %v", rt.ID, err)
		}
		s := got()[i]
		path, ok := strings.CutPrefix(s.path, "/stage")
		if !ok {
			t.Fatalf("%s: sent to %s, not under the base path", rt.ID, s.path)
		}
		match, mp, found := deploy.RouteFor(s.method, path)
		if !found || match.ID != rt.ID || len(mp) != len(p) {
			t.Errorf("%s: sent %s %s, which the table matches to %q %v", rt.ID, s.method, path, match.ID, mp)
		}
		for name, v := range mp {
			if u, _ := url.PathUnescape(v); u != p[name] {
				t.Errorf("%s: {%s} arrived as %q, want %q", rt.ID, name, u, p[name])
			}
		}
		if s.query != "limit=2" || s.caller != "alice" {
			t.Errorf("%s: query %q caller %q", rt.ID, s.query, s.caller)
		}
	}
}

// A body is sent as JSON with its media type and the request's headers;
// a request the table cannot build sends nothing.
func TestBodiesHeadersAndRequestsTheTableCannotBuild(t *testing.T) {
	c, got := server(t, ok)
	var out struct{ ID string }
	if _, err := c.Call(context.Background(), Request{Route: deploy.RouteEnqueue, Body: map[string]string{"kind": "k"}, Header: map[string]string{"Idempotency-Key": "k1"}}, &out); err != nil || out.ID != "j1" {
		t.Fatalf("enqueue: %v %+v", err, out)
	}
	if s := got()[0]; s.method != http.MethodPost || s.path != "/stage/v1/jobs" || s.contentType != "application/json" || s.key != "k1" || s.body != `{"kind":"k"}` {
		t.Errorf("sent %+v", s)
	}
	for _, req := range []Request{
		{Route: "NoSuchRoute"},
		{Route: deploy.RouteGetJob},
		{Route: deploy.RouteGetJob, Params: map[string]string{"id": "j1", "other": "x"}},
		{Route: deploy.RouteEnqueue, Body: func() {}},
	} {
		if _, err := c.Send(context.Background(), req); err == nil {
			t.Errorf("%+v: no error", req)
		}
	}
	if n := len(got()); n != 1 {
		t.Errorf("%d requests sent, want only the enqueue", n)
	}
}

// An answer of 300 or more is a *Problem: the API's problem+json fields,
// or for another body its status and body.
func TestProblemsAreErrors(t *testing.T) {
	c, _ := server(t, func(n int, w http.ResponseWriter) {
		if n == 1 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"type":"urn:lambdajobs:problem:already_finished","title":"Job already finished","status":409,"detail":"the job already ended succeeded","code":"already_finished"}`)
			return
		}
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, `{"message":"Internal Server Error"}`)
	})
	req := Request{Route: deploy.RouteCancelJob, Params: map[string]string{"id": "j1"}}
	resp, err := c.Call(context.Background(), req, nil)
	var p *Problem
	if !errors.As(err, &p) || p.Status != 409 || p.Code != "already_finished" || p.Title != "Job already finished" || p.Detail != "the job already ended succeeded" || resp.Status != 409 {
		t.Fatalf("got %v %+v", err, p)
	}
	if got, want := p.Message(), "Job already finished: the job already ended succeeded"; got != want {
		t.Errorf("Message %q, want %q", got, want)
	}
	_, err = c.Call(context.Background(), req, nil)
	if !errors.As(err, &p) || p.Status != 502 || p.Code != "" || p.Error() != `HTTP 502: {"message":"Internal Server Error"}` || p.Message() != "Bad Gateway" {
		t.Fatalf("got %v %+v", err, p)
	}
}

// With Attempts, a request that can be repeated safely (a GET, a DELETE,
// or one with an Idempotency-Key) is sent again after a 5xx or a failed
// send, up to Attempts times; any other is sent once.
func TestRetriesOnlyWhatIsSafeToRepeat(t *testing.T) {
	for _, tc := range []struct {
		name     string
		attempts int
		req      Request
		sent     int
		status   int
	}{
		{"a GET", 3, Request{Route: deploy.RouteListJobs}, 3, 200},
		{"a DELETE", 3, Request{Route: deploy.RouteDeleteSchedule, Params: map[string]string{"name": "n"}}, 3, 200},
		{"a POST with a key", 3, Request{Route: deploy.RouteEnqueueBatch, Body: []byte(`{}`), Header: map[string]string{"Idempotency-Key": "b1"}}, 3, 200},
		{"a POST without a key", 3, Request{Route: deploy.RouteEnqueueBatch, Body: []byte(`{}`)}, 1, 503},
		{"a GET, attempts 0", 0, Request{Route: deploy.RouteListJobs}, 1, 503},
		{"a GET that runs out", 2, Request{Route: deploy.RouteListJobs}, 2, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, got := server(t, func(n int, w http.ResponseWriter) {
				if n < 3 {
					w.WriteHeader(http.StatusServiceUnavailable)
					return
				}
				ok(n, w)
			})
			c.Attempts = tc.attempts
			resp, err := c.Send(context.Background(), tc.req)
			if err != nil || resp.Status != tc.status || len(got()) != tc.sent {
				t.Fatalf("got %v, %d sent; want status %d, %d sent", err, len(got()), tc.status, tc.sent)
			}
		})
	}
	// A send that fails on its way is tried again too.
	c, got := server(t, ok)
	fails := 1
	c.Attempts = 2
	c.Do = func(r *http.Request) (*http.Response, error) {
		if fails > 0 {
			fails--
			return nil, errors.New("connection reset")
		}
		return http.DefaultClient.Do(r)
	}
	if resp, err := c.Send(context.Background(), Request{Route: deploy.RouteListKinds}); err != nil || resp.Status != 200 || len(got()) != 1 {
		t.Fatalf("after a failed send: %v", err)
	}
}
