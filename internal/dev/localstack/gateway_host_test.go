package localstack_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/dev/hostcheck"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
)

// countingInvoker answers every invocation with 200 {} and counts them.
type countingInvoker struct{ n atomic.Int64 }

func (c *countingInvoker) Invoke(context.Context, []byte) ([]byte, error) {
	c.n.Add(1)
	return []byte(`{"statusCode":200,"body":"{}"}`), nil
}

// sendWithHost sends one request to url with the Host host ("" for the
// URL's own) and returns its status and body.
func sendWithHost(t *testing.T, method, url, host, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// The local API answers only requests for its own address (and localhost
// with its port): any other Host, another site's name pointed at this
// machine, gets 421 and reaches no function, as the dashboard does.
func TestGatewayAnswersOnlyItsOwnHost(t *testing.T) {
	fn := &countingInvoker{}
	gw := &localstack.Gateway{Enqueue: fn, GetJob: fn, Cancel: fn, Schedules: fn}
	srv := httptest.NewUnstartedServer(nil)
	hosts, err := hostcheck.For(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = localstack.OwnHostOnly(hosts, gw, nil)
	srv.Start()
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	routes := []struct{ method, path, body string }{
		{"POST", "/v1/jobs", `{"kind":"example.hash","payload":{}}`},
		{"GET", "/v1/jobs", ""},
		{"GET", "/v1/jobs" + "/j1", ""},
		{"POST", "/v1/batches", `{"jobs":[]}`},
		{"GET", "/v1/schedules", ""},
	}
	for _, host := range []string{"evil.example", "evil.example:" + port, "127.0.0.1", "127.0.0.1:1", "localhost", "localhost.:" + port, "127.0.0.1.nip.io:" + port} {
		for _, r := range routes {
			status, body := sendWithHost(t, r.method, srv.URL+r.path, host, r.body)
			var msg struct{ Message string }
			if status != http.StatusMisdirectedRequest || json.Unmarshal([]byte(body), &msg) != nil || !strings.Contains(msg.Message, "Misdirected") {
				t.Errorf("Host %s, %s %s: %d %s, want 421 with a message", host, r.method, r.path, status, body)
			}
		}
	}
	if n := fn.n.Load(); n != 0 {
		t.Fatalf("the functions were invoked %d times for other hosts, want 0", n)
	}
	for _, host := range []string{"", "localhost:" + port, "LOCALHOST:" + port} {
		if status, body := sendWithHost(t, "GET", srv.URL+"/v1/jobs"+"/j1", host, ""); status != http.StatusOK {
			t.Errorf("Host %q: %d %s, want the function's answer", host, status, body)
		}
	}
	if n := fn.n.Load(); n != 3 {
		t.Errorf("the functions were invoked %d times for the API's own host, want 3", n)
	}
}

// The running local stack (make run) puts the check in front of
// everything on its API address: the functions, the local Scheduler's
// API, the event bus and the stats. A job enqueued for another Host is
// never made; the stack's own callers (its functions, the dashboard, ljob,
// these tests) use its address and are answered.
func TestLocalStackRefusesOtherHosts(t *testing.T) {
	const caller = "host-check"
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(stack.APIURL, "http://"))
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/jobs", `{"kind":"example.hash","payload":{"text":"rebound","rounds":1}}`},
		{"GET", "/v1/jobs", ""},
		{"GET", localstack.EventBusPath, ""},
		{"GET", localstack.StatsPath, ""},
		{"GET", localstack.SchedulesPath, ""},
		{"POST", localstack.SchedulerAPIPrefix + "nightly", "{}"},
	} {
		req, _ := http.NewRequest(r.method, stack.APIURL+r.path, strings.NewReader(r.body))
		req.Host = "evil.example:" + port
		req.Header.Set(localstack.CallerHeader, caller)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("Host evil.example, %s %s: %d, want 421", r.method, r.path, resp.StatusCode)
		}
	}
	if a := call(t, "GET", "/v1/jobs", caller, "", ""); a.status != http.StatusOK || a.body != `{"jobs":[],"next_page_token":null}` {
		t.Fatalf("the caller's jobs after requests for another host: %d %s, want none", a.status, a.body)
	}
	status, body := sendWithHost(t, "GET", stack.APIURL+"/v1/jobs", "localhost:"+port, "")
	if status != http.StatusOK {
		t.Fatalf("Host localhost:%s: %d %s, want the API's answer", port, status, body)
	}
}
