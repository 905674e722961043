package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/cli"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/internal/dev/testenv"
	"github.com/lambdajobs/lambdajobs/internal/dev/testroles"
	"github.com/lambdajobs/lambdajobs/internal/wire"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/eventbus"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/httpapi"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
)

type stepsPayload struct {
	Steps int `json:"steps"`
}

// server runs the API in-process behind the local gateway, with a worker
// that runs every queued job each time the CLI reads one, so a watch sees
// the job move.
func server(t *testing.T) string {
	t.Helper()
	return serverWith(t, nil)
}

// serverWith is server, its gateway changed by change.
func serverWith(t *testing.T, change func(*localstack.Gateway)) string {
	t.Helper()
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "steps",
		func(ctx context.Context, j *jobs.Job[stepsPayload]) (jobs.JSON[map[string]int], error) {
			for i := 1; i < j.Payload.Steps; i++ {
				_ = j.Publish(ctx, jobs.JSON[map[string]int]{V: map[string]int{"done": i, "total": j.Payload.Steps}})
			}
			if j.Payload.Steps == 0 {
				return jobs.JSON[map[string]int]{}, jobs.Fail("no_steps", nil)
			}
			return jobs.JSON[map[string]int]{V: map[string]int{"done": j.Payload.Steps, "total": j.Payload.Steps}}, nil
		}, &jobs.KindOpts{FailureCodes: []string{"no_steps"}})
	export := jobs.MustRegister(reg, "export", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) {
		return jobs.NoResult{}, nil
	}, &jobs.KindOpts{Lane: "long"})
	jobs.MustRegister(reg, "fan", func(ctx context.Context, j *jobs.Job[struct{}]) (jobs.NoResult, error) {
		_, err := export.EnqueueChild(ctx, j, "only", struct{}{}, nil)
		return jobs.NoResult{}, err
	}, nil)
	jobs.MustRegister(reg, "big", func(_ context.Context, j *jobs.Job[stepsPayload]) (jobs.JSON[string], error) {
		return jobs.JSON[string]{V: strings.Repeat("r", j.Payload.Steps)}, nil
	}, &jobs.KindOpts{MaxResultBytes: 1 << 20})
	jobs.MustRegister(reg, "approve", func(ctx context.Context, j *jobs.Job[struct{}]) (jobs.JSON[approval], error) {
		if _, err := jobs.Step(ctx, j, "ask", func(context.Context) (bool, error) { return true, nil }); err != nil {
			return jobs.JSON[approval]{}, err
		}
		a, _, err := jobs.WaitForSignal[approval](ctx, j, "approval", time.Hour)
		return jobs.JSON[approval]{V: a}, err
	}, &jobs.KindOpts{Signals: map[string]any{"approval": approval{}}})
	sealer, _ := jobs.NewAESSealer(make([]byte, 32))
	store, queue := jobstest.NewMemStore(nil), &jobstest.MemQueue{}
	// Results past 4,000 bytes are kept as objects, as with an S3 tier.
	store.KeepPayloadsApart(2000)
	store.KeepObjectsOver(4000)
	// The CLI's caller's runtime schedule (ljob run-now, ljob pause schedule:...).
	_ = store.AddOwnerSchedule(context.Background(), wire.OwnerKey(localstack.LocalTrustedCaller), jobs.Schedule{Name: "nightly", Expression: "rate(1 day)",
		TimeZone: "UTC", Kind: "steps", Payload: []byte(`{"steps":2}`), Overlap: jobs.OverlapAllow, Owner: localstack.LocalTrustedCaller}, 20)
	svc, _ := testroles.Service(jobs.Config{Registry: reg, Store: store, Queue: queue, PageTokenKey: make([]byte, 32), Sealer: sealer})
	worker, _ := testroles.Worker(jobs.Config{Registry: reg, Store: store, Sealer: sealer})
	// The CLI's caller (the local gateway's default) may give a tenant.
	api := httpapi.New(svc, httpapi.Config{TrustedCallers: []string{localstack.LocalTrustedCaller}})
	ran := 0
	get := func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		if sent := queue.Sent(); ran < len(sent) {
			// One message per read, in the order they were sent.
			id := sent[ran]
			ran++
			_, _ = worker.HandleSQS(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: id, Body: fmt.Sprintf(`{"job_id":%q}`, id)}}})
		}
		return api.Route(ctx, req)
	}
	gw := &localstack.Gateway{
		Enqueue: localstack.FunctionHandler[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse](api.Route),
		GetJob:  localstack.FunctionHandler[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse](get),
		WaitJob: localstack.FunctionHandler[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse](get),
		Cancel:  localstack.FunctionHandler[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse](api.Route),
	}
	if change != nil {
		change(gw)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return srv.URL
}

// watch follows a job with waits from the version it last saw, and
// reads it instead after -interval when a wait is refused (429
// too_many_waits, or 500: every wait instance busy).
func TestWatchWaitsAndFallsBackToReads(t *testing.T) {
	var waits []string
	var mu sync.Mutex
	url := serverWith(t, func(gw *localstack.Gateway) {
		next := gw.WaitJob
		gw.WaitJob = localstack.FunctionHandler[events.APIGatewayV2HTTPRequest, events.APIGatewayV2HTTPResponse](func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			mu.Lock()
			waits = append(waits, req.QueryStringParameters["timeout"]+" "+req.Headers["if-none-match"])
			n := len(waits)
			mu.Unlock()
			if n == 1 {
				return events.APIGatewayV2HTTPResponse{StatusCode: http.StatusTooManyRequests, Body: `{"code":"too_many_waits"}`}, nil
			}
			raw, err := next.Invoke(ctx, mustJSON(t, req))
			var resp events.APIGatewayV2HTTPResponse
			_ = json.Unmarshal(raw, &resp)
			return resp, err
		})
	})
	// Two jobs ahead of the watched one: the fake runs one message per
	// read, so the watched job stays queued for two reads.
	for range 2 {
		if code, _, errOut := runCLI(t, url, "enqueue", "steps", `{"steps":1}`); code != 0 {
			t.Fatalf("enqueue: exit %d %s", code, errOut)
		}
	}
	code, out, errOut := runCLI(t, url, "-interval", "10ms", "-wait", "enqueue", "steps", `{"steps":3}`)
	if code != 0 || !strings.Contains(out, `result:   {"done":3,"total":3}`) {
		t.Fatalf("enqueue -wait: exit %d\n%s%s", code, out, errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(waits) != 2 {
		t.Fatalf("waits %q: want one refused, then waits again", waits)
	}
	for _, w := range waits {
		timeout, etag, _ := strings.Cut(w, " ")
		if timeout != "20" || !strings.HasPrefix(etag, `"`) {
			t.Fatalf("a wait sent timeout %q and If-None-Match %q: want 20 and the ETag last seen", timeout, etag)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func runCLI(t *testing.T, url string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	env := func(k string) string {
		if k == "LJOB_API" {
			return url
		}
		return ""
	}
	code := cli.Main(context.Background(), append([]string{"-interval", "1ms"}, args...), cli.Env{Stdin: strings.NewReader(`{"steps":2}`), Stdout: &out, Stderr: &errOut, Getenv: env})
	return code, out.String(), errOut.String()
}

func TestEnqueueWaitSucceeds(t *testing.T) {
	url := server(t)
	code, out, errOut := runCLI(t, url, "-wait", "enqueue", "steps", `{"steps":3}`)
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	if !strings.Contains(out, "status:   succeeded") || !strings.Contains(out, `result:   {"done":3,"total":3}`) {
		t.Fatalf("stdout:\n%s", out)
	}
	if !strings.Contains(errOut, "[##############################] 3/3") {
		t.Fatalf("no progress bar on stderr:\n%s", errOut)
	}
}

func TestEnqueueFromStdinAndJSONOutput(t *testing.T) {
	url := server(t)
	code, out, _ := runCLI(t, url, "-json", "enqueue", "steps")
	if code != 0 || !strings.HasPrefix(out, `{"id":"`) || !strings.Contains(out, `"status":"queued"`) {
		t.Fatalf("exit %d stdout %s", code, out)
	}
}

func TestFailedJobExitsTwo(t *testing.T) {
	url := server(t)
	code, out, _ := runCLI(t, url, "-wait", "enqueue", "steps", `{"steps":0}`)
	if code != 2 || !strings.Contains(out, "error:    no_steps") {
		t.Fatalf("exit %d stdout %s", code, out)
	}
}

func TestProblemsAndUsage(t *testing.T) {
	url := server(t)
	if code, _, errOut := runCLI(t, url, "enqueue", "nope", `{}`); code != 1 || !strings.Contains(errOut, "422") || !strings.Contains(errOut, "unknown_kind") {
		t.Fatalf("unknown kind: exit %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, url, "get", wire.NewID()); code != 1 || !strings.Contains(errOut, "404") {
		t.Fatalf("unknown id: exit %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, url, "enqueue", "steps", `{not json`); code != 1 || !strings.Contains(errOut, "not valid JSON") {
		t.Fatalf("bad payload: exit %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, url, "frobnicate"); code != 1 || !strings.Contains(errOut, "Usage:") {
		t.Fatalf("usage: exit %d %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "ftp://x", "get", "x"); code != 1 || !strings.Contains(errOut, "not an http(s) URL") {
		t.Fatalf("bad api: exit %d %s", code, errOut)
	}
}

func TestProgress(t *testing.T) {
	tests := []struct {
		result, status, want string
	}{
		{`{"done":1,"total":4}`, "running", "[#######.......................] 1/4"},
		{`{"percent":50}`, "running", "[###############...............] 50%"},
		{`{"rounds_done":200000}`, "running", `{"rounds_done":200000}`},
		{`null`, "queued", "queued    id"},
	}
	for _, tt := range tests {
		got := cli.Progress(cli.Job{ID: "id", Status: tt.status, Result: []byte(tt.result)})
		if !strings.Contains(got, tt.want) {
			t.Errorf("Progress(%s) = %q, want it to contain %q", tt.result, got, tt.want)
		}
	}
}

func TestCancelAndDelay(t *testing.T) {
	url := server(t)
	code, out, errOut := runCLI(t, url, "-json", "-delay", "1h", "enqueue", "steps", `{"steps":2}`)
	if code != 0 || !strings.Contains(out, `"run_at":"`) {
		t.Fatalf("delayed enqueue: exit %d %s %s", code, out, errOut)
	}
	id := out[len(`{"id":"`):][:36]
	code, out, errOut = runCLI(t, url, "cancel", id)
	if code != 0 || !strings.Contains(out, "status:   cancelled") {
		t.Fatalf("cancel: exit %d %s %s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, url, "cancel", id); code != 1 || !strings.Contains(errOut, "409") {
		t.Fatalf("cancel again: exit %d %s", code, errOut)
	}
}

// TestSigV4 checks that -sigv4 signs every request with the default
// credential chain (here: the environment) for execute-api.
func TestSigV4(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	var auth, date string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth, date = r.Header.Get("Authorization"), r.Header.Get("X-Amz-Date")
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(404)
		_, _ = w.Write([]byte(`{"type":"urn:lambdajobs:problem:not_found","title":"Not found","status":404,"code":"not_found"}`))
	}))
	defer srv.Close()
	code, _, errOut := runCLI(t, srv.URL, "-sigv4", "-region", "eu-west-1", "get", wire.NewID())
	if code != 1 || !strings.Contains(errOut, "404") {
		t.Fatalf("exit %d %s", code, errOut)
	}
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") || !strings.Contains(auth, "/eu-west-1/execute-api/aws4_request") || date == "" {
		t.Fatalf("Authorization %q, X-Amz-Date %q", auth, date)
	}
}

func TestBatchCommand(t *testing.T) {
	url := server(t)
	var out, errOut bytes.Buffer
	env := func(k string) string {
		if k == "LJOB_API" {
			return url
		}
		return ""
	}
	lines := strings.NewReader("{\"kind\":\"steps\",\"payload\":{\"steps\":1}}\n\n{\"kind\":\"steps\",\"payload\":{\"steps\":2}}\n")
	code := cli.Main(context.Background(), []string{"-interval", "1ms", "-wait", "batch"}, cli.Env{Stdin: lines, Stdout: &out, Stderr: &errOut, Getenv: env})
	if code != 0 || !strings.Contains(out.String(), "status:    succeeded") || !strings.Contains(errOut.String(), "2/2") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out.String(), errOut.String())
	}
	bad := strings.NewReader("{\"kind\":\"steps\",\"payload\":{\"steps\":1}}\n{\"kind\":\"nope\",\"payload\":{}}\n")
	out.Reset()
	errOut.Reset()
	if code := cli.Main(context.Background(), []string{"batch"}, cli.Env{Stdin: bad, Stdout: &out, Stderr: &errOut, Getenv: env}); code != 1 || !strings.Contains(errOut.String(), "jobs[1]") {
		t.Fatalf("bad batch: exit %d %s", code, errOut.String())
	}
}

// Signed requests never travel in the clear to another machine.
func TestSigV4RefusesPlainHTTPToOtherHosts(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	code, _, errOut := runCLI(t, "http://jobs.example.com", "-sigv4", "-region", "eu-west-1", "get", wire.NewID())
	if code == 0 || !strings.Contains(errOut, "signs only over https") {
		t.Fatalf("exit %d, stderr %q: want a refusal before any request", code, errOut)
	}
}

// ljob stats prints the local stack's metrics per kind, and explains where
// they are when the API has no such endpoint (a deployed environment).
func TestStats(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/local/stats" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"kinds":{"example.hash":{"counts":{"JobsEnqueued":3,"JobsStarted":3,"JobsSucceeded":2,"JobsFailed":1,"JobsWaited":17,"JobsWoken":16,"JobsRefused":4},`+
			`"durations_ms":{"RunDuration":{"n":3,"p50":12,"p99":40},"QueueLatency":{"n":3,"p50":5,"p99":9}}}}}`)
	}))
	defer srv.Close()
	code, out, errOut := runCLI(t, srv.URL, "stats")
	if code != 0 || !strings.Contains(out, "example.hash") || !strings.Contains(out, "12/40") || !strings.Contains(out, "5/9") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr: %s", code, out, errOut)
	}
	// Flow control's counts: waited, woken, refused at a cap.
	header, row, _ := strings.Cut(out, "\n")
	if !strings.Contains(header, "waited") || !strings.Contains(header, "woken") || !strings.Contains(header, "refused") ||
		!regexp.MustCompile(`\b17\s+16\s+4\b`).MatchString(row) {
		t.Fatalf("stats without flow control's counts:\n%s", out)
	}
	gone := httptest.NewServer(http.NotFoundHandler())
	defer gone.Close()
	if code, _, errOut := runCLI(t, gone.URL, "stats"); code != 1 || !strings.Contains(errOut, "CloudWatch dashboard") {
		t.Fatalf("against a deployed API: exit %d, stderr %s", code, errOut)
	}
}

// ljob schedules lists the local stack's schedules with their next fires,
// and says where a deployed environment's are.
func TestSchedules(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/local/schedules" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"schedules":[{"name":"example.tick","expression":"rate(1 minute)","time_zone":"UTC","kind":"example.tick",`+
			`"payload":{"note":"x"},"overlap":"skip","owner":"o","group":"lambdajobs-local","next_fire":"2026-11-30T08:31:00Z",`+
			`"last_fire":"2026-11-30T08:30:00Z","last_job_id":"6a1f0c1e-1c5e-5b7a-9d3e-0f1e2d3c4b5a"}]}`)
	}))
	defer srv.Close()
	code, out, errOut := runCLI(t, srv.URL, "schedules")
	if code != 0 || !strings.Contains(out, "example.tick") || !strings.Contains(out, "rate(1 minute)") || !strings.Contains(out, "2026-11-30 08:31:00") ||
		!strings.Contains(out, "6a1f0c1e-1c5e-5b7a-9d3e-0f1e2d3c4b5a") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr: %s", code, out, errOut)
	}
	gone := httptest.NewServer(http.NotFoundHandler())
	defer gone.Close()
	if code, _, errOut := runCLI(t, gone.URL, "schedules"); code != 1 || !strings.Contains(errOut, "EventBridge Scheduler") {
		t.Fatalf("against a deployed API: exit %d, stderr %s", code, errOut)
	}
}

// ljob list follows the pages with -all and prints each job once; ljob
// retry posts to the job's retry route.
func TestListAndRetry(t *testing.T) {
	var retried string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/jobs" && r.URL.Query().Get("page_token") == "":
			if r.URL.Query().Get("status") != "failed" || r.URL.Query().Get("limit") != "1" {
				t.Errorf("query %s", r.URL.RawQuery)
			}
			fmt.Fprint(w, `{"jobs":[{"id":"j1","kind":"k","status":"failed","error":"boom","attempt":1,"created_at":"2026-11-30T08:00:00Z"}],"next_page_token":"p2"}`)
		case r.Method == http.MethodGet && r.URL.Path == "/v1/jobs":
			fmt.Fprint(w, `{"jobs":[{"id":"j2","kind":"k","status":"failed","error":"boom","attempt":2,"created_at":"2026-11-30T07:00:00Z"}],"next_page_token":null}`)
		case r.Method == http.MethodPost && r.URL.Path == "/v1/jobs/j1/retry":
			retried = "j1"
			fmt.Fprint(w, `{"id":"j1","kind":"k","status":"queued","attempt":1,"created_at":"2026-11-30T08:00:00Z"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	code, out, errOut := runCLI(t, srv.URL, "-status", "failed", "-limit", "1", "-all", "list")
	if code != 0 || !strings.Contains(out, "j1") || !strings.Contains(out, "j2") || strings.Count(out, "boom") != 2 {
		t.Fatalf("list: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, out, _ := runCLI(t, srv.URL, "-status", "failed", "-limit", "1", "list"); code != 0 || strings.Contains(out, "j2") || !strings.Contains(out, "-all") {
		t.Fatalf("one page: %d\n%s", code, out)
	}
	if code, out, _ := runCLI(t, srv.URL, "retry", "j1"); code != 0 || retried != "j1" || !strings.Contains(out, "queued") {
		t.Fatalf("retry: %d %s", code, out)
	}
}

// ljob list says at once that nothing matches: "(nothing running)" after
// the one request an empty last page takes, with -all too, and no "more"
// hint; -json prints the page alone.
func TestListSaysNothingRunning(t *testing.T) {
	var mu sync.Mutex
	requests := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/jobs" {
			http.NotFound(w, r)
			return
		}
		mu.Lock()
		requests++
		mu.Unlock()
		fmt.Fprint(w, `{"jobs":[],"next_page_token":null}`)
	}))
	defer srv.Close()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-status", "running", "list"}, "(nothing running)\n"},
		{[]string{"-status", "running", "-all", "list"}, "(nothing running)\n"},
		{[]string{"-status", "queued", "list"}, "(nothing queued)\n"},
		{[]string{"-status", "failed", "list"}, "(no failed job)\n"},
		{[]string{"list"}, "(no job)\n"},
		{[]string{"-json", "-status", "running", "list"}, `{"jobs":[],"next_page_token":null}` + "\n"},
	} {
		mu.Lock()
		requests = 0
		mu.Unlock()
		code, out, errOut := runCLI(t, srv.URL, c.args...)
		mu.Lock()
		n := requests
		mu.Unlock()
		if code != 0 || !strings.HasSuffix(out, c.want) || strings.Contains(out, "more") || n != 1 {
			t.Errorf("ljob %v: exit %d after %d requests, printed %q (stderr %q); want %q after one request",
				c.args, code, n, out, errOut, c.want)
		}
		if strings.Contains(c.want, "nothing") && strings.Count(out, "\n") != 2 {
			t.Errorf("ljob %v printed %q: want the header and the message alone", c.args, out)
		}
	}
}

// ljob ui serves the dashboard on loopback only, over the API it is given.
func TestUI(t *testing.T) {
	if code, _, errOut := runCLI(t, "http://127.0.0.1:1", "-listen", "0.0.0.0:8081", "ui"); code != 1 || !strings.Contains(errOut, "loopback") {
		t.Fatalf("a non-loopback address: %d %s", code, errOut)
	}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/jobs" || r.Header.Get("X-Local-Caller") != "ops" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"jobs":[{"id":"j-ui","kind":"k","status":"failed","error":"boom","attempt":1,"created_at":"2026-11-30T08:00:00Z"}],"next_page_token":null}`)
	}))
	defer api.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	var out, errOut testenv.SyncBuffer
	go func() {
		done <- cli.Main(ctx, []string{"-api", api.URL, "-caller", "ops", "-listen", addr, "ui"}, cli.Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }})
	}()
	var body string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/jobs")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		break
	}
	// It answers only at the address it listens on (DNS rebinding), and
	// refuses a POST from another site.
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/jobs", nil)
	req.Host = "evil.example"
	rebound, rerr := http.DefaultClient.Do(req)
	req, _ = http.NewRequest(http.MethodPost, "http://"+addr+"/jobs/j-ui/cancel", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	forged, ferr := http.DefaultClient.Do(req)
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("ui exited %d: %s", code, errOut.String())
	}
	if !strings.Contains(body, "j-ui") || !strings.Contains(body, "boom") {
		t.Fatalf("the dashboard's job list: %s", body)
	}
	if rerr != nil || rebound.StatusCode != http.StatusMisdirectedRequest {
		t.Fatalf("Host evil.example: %v %v, want 421", rebound, rerr)
	}
	rebound.Body.Close()
	if ferr != nil || forged.StatusCode != http.StatusForbidden {
		t.Fatalf("a cross-site POST: %v %v, want 403", forged, ferr)
	}
	forged.Body.Close()
}

// The flow control options of enqueue reach the API: a second enqueue
// with the unique key makes no job and says which job holds the key; a
// tenant and a start-by are accepted; a malformed start-by is refused
// before any request.
func TestEnqueueUniqueTenantAndStartBy(t *testing.T) {
	url := server(t)
	args := []string{"-json", "-delay", "1h", "-unique-key", "k1", "-unique", "until_started", "-tenant", "acme",
		"-start-by", time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339), "enqueue", "steps", `{"steps":2}`}
	code, out, errOut := runCLI(t, url, args...)
	if code != 0 {
		t.Fatalf("first: exit %d %s %s", code, out, errOut)
	}
	first := out[len(`{"id":"`):][:36]
	code, out, errOut = runCLI(t, url, args[1:]...) // without -json: the duplicate is said on stderr
	if code != 0 || !strings.Contains(errOut, "no new job (unique): "+first+" holds the unique key") || !strings.Contains(out, "id:       "+first) {
		t.Fatalf("second: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, url, "-start-by", "tomorrow", "enqueue", "steps", `{"steps":2}`); code != 1 || !strings.Contains(errOut, "-start-by") {
		t.Fatalf("a malformed -start-by: exit %d %s", code, errOut)
	}
}

func TestEnqueueAfterAndReplay(t *testing.T) {
	url := server(t)
	code, out, errOut := runCLI(t, url, "-json", "enqueue", "steps", `{"steps":1}`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var first cli.Job
	if err := json.Unmarshal([]byte(out), &first); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, url, "-after", first.ID, "enqueue", "steps", `{"steps":1}`)
	if code != 0 || !strings.Contains(out, "waiting:  on 1 of the jobs it runs after") || !strings.Contains(out, "after:    "+first.ID) {
		t.Fatalf("enqueue -after: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut = runCLI(t, url, "-after", "nope", "enqueue", "steps", `{"steps":1}`); code != 1 || !strings.Contains(errOut, "invalid_request") {
		t.Fatalf("enqueue -after nope: exit %d %s", code, errOut)
	}
	code, out, errOut = runCLI(t, url, "-wait", "replay", first.ID, `{"steps":2}`)
	if code != 0 || !strings.Contains(out, "replays:  "+first.ID) || !strings.Contains(out, `result:   {"done":2,"total":2}`) {
		t.Fatalf("replay -wait: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut = runCLI(t, url, "replay", "0190b8a2-7b8e-7c4e-9d2f-3a1b2c3d4e5f"); code != 1 || !strings.Contains(errOut, "not_found") {
		t.Fatalf("replay of an unknown job: exit %d %s", code, errOut)
	}
}

// busServer serves a local event bus as the local stack does, and returns
// its URL with a function that puts job events on it as the functions do.
func busServer(t *testing.T) (string, func(details ...string)) {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(localstack.EventBusPath, &localstack.EventBus{})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	client := eventbridge.NewFromConfig(aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL + localstack.EventBusPath),
		Credentials: aws.AnonymousCredentials{}})
	bus := eventbus.New(client, localstack.LocalEventBus, eventbus.Config{})
	return srv.URL, func(details ...string) {
		t.Helper()
		evs := make([]driver.Event, len(details))
		for i, d := range details {
			evs[i] = driver.Event{DetailType: jobs.EventDetailType, Detail: []byte(d)}
		}
		if _, err := bus.Put(context.Background(), evs); err != nil {
			t.Fatal(err)
		}
	}
}

// ljob events lists the local bus's events newest first, filtered by kind
// and status and bounded by -limit, says where a deployed environment's
// are, and with -follow prints new events as they arrive until stopped.
func TestEvents(t *testing.T) {
	url, put := busServer(t)
	put(`{"id":"a/1","kind":"k1","status":"failed","code":"boom","attempt":2,"finished_at":"2026-12-01T10:00:00Z"}`,
		`{"id":"b/1","kind":"k2","status":"succeeded","attempt":1}`, `{"id":"c/1","kind":"k1","status":"succeeded","attempt":1}`)
	code, out, errOut := runCLI(t, url, "events")
	a, b, c := strings.Index(out, "a/1"), strings.Index(out, "b/1"), strings.Index(out, "c/1")
	if code != 0 || a < 0 || b < 0 || c < 0 || !(c < b && b < a) || !strings.Contains(out, "boom") || !strings.Contains(out, "2026-12-01T10:00:00.000Z") {
		t.Fatalf("events: exit %d, want a/1, b/1, c/1 newest first:\n%s%s", code, out, errOut)
	}
	if code, out, _ := runCLI(t, url, "-kind", "k1", "-status", "failed", "events"); code != 0 || !strings.Contains(out, "a/1") || strings.Contains(out, "b/1") || strings.Contains(out, "c/1") {
		t.Fatalf("-kind k1 -status failed: %d\n%s", code, out)
	}
	if code, out, _ := runCLI(t, url, "-limit", "1", "-json", "events"); code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"id":"local-3"`) {
		t.Fatalf("-limit 1 -json: %d\n%s", code, out)
	}
	gone := httptest.NewServer(http.NotFoundHandler())
	defer gone.Close()
	if code, _, errOut := runCLI(t, gone.URL, "events"); code != 1 || !strings.Contains(errOut, "EventBridge bus") {
		t.Fatalf("against a deployed API: exit %d, stderr %s", code, errOut)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var fout, ferr testenv.SyncBuffer
	done := make(chan int)
	go func() {
		done <- cli.Main(ctx, []string{"-api", url, "-interval", "1ms", "-limit", "2", "-follow", "events"},
			cli.Env{Stdin: strings.NewReader(""), Stdout: &fout, Stderr: &ferr, Getenv: func(string) string { return "" }})
	}()
	waitFor := func(s string) {
		t.Helper()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		deadline := time.After(10 * time.Second)
		for !strings.Contains(fout.String(), s) {
			select {
			case <-tick.C:
			case <-deadline:
				t.Fatalf("-follow never printed %s:\n%s%s", s, fout.String(), ferr.String())
			}
		}
	}
	waitFor("c/1")
	put(`{"id":"d/1","kind":"k1","status":"cancelled","attempt":1}`)
	waitFor("d/1")
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("-follow exited %d: %s", code, ferr.String())
	}
	got := fout.String()
	if strings.Contains(got, "a/1") || strings.Count(got, "c/1") != 1 || !(strings.Index(got, "b/1") < strings.Index(got, "c/1") && strings.Index(got, "c/1") < strings.Index(got, "d/1")) {
		t.Fatalf("-follow -limit 2: want b/1, c/1 then d/1, each once:\n%s", got)
	}
}

// ljob get says a job's lane: its kind's, or "default".
// ljob get names a child's parent.
func TestGetShowsTheParent(t *testing.T) {
	url := server(t)
	code, out, _ := runCLI(t, url, "-json", "enqueue", "fan", `{}`)
	var parent cli.Job
	if err := json.Unmarshal([]byte(out), &parent); code != 0 || err != nil {
		t.Fatalf("enqueue: %d %s", code, out)
	}
	runCLI(t, url, "get", parent.ID) // the test server runs a job at each read
	_, out, _ = runCLI(t, url, "-json", "-kind", "export", "list")
	var page struct{ Jobs []cli.Job }
	if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Jobs) != 1 {
		t.Fatalf("the child: %s", out)
	}
	if _, out, _ := runCLI(t, url, "get", page.Jobs[0].ID); !strings.Contains(out, "parent:   "+parent.ID+" (its handler started this job)\n") {
		t.Fatalf("ljob get of the child:\n%s", out)
	}
}

// ljob get says a result is kept as an object, with its size and the
// command that fetches it.
func TestGetShowsAResultKeptAsAnObject(t *testing.T) {
	url := server(t)
	code, out, _ := runCLI(t, url, "-json", "enqueue", "big", `{"steps":5000}`)
	var j cli.Job
	if err := json.Unmarshal([]byte(out), &j); code != 0 || err != nil {
		t.Fatalf("enqueue: %d %s", code, out)
	}
	runCLI(t, url, "get", j.ID) // the test server runs a job at each read
	_, out, _ = runCLI(t, url, "get", j.ID)
	if !strings.Contains(out, "result:   5002 bytes, kept as an S3 object: curl -o result.json 'https://objects.invalid/result#"+j.ID) {
		t.Fatalf("ljob get of a job whose result is an object:\n%s", out)
	}
}

func TestGetShowsTheLane(t *testing.T) {
	url := server(t)
	for kind, want := range map[string]string{"export": "lane:     long\n", "steps": "lane:     default\n"} {
		code, out, errOut := runCLI(t, url, "enqueue", kind, `{}`)
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("ljob enqueue %s: exit %d, stdout\n%s\nstderr %s\nwant %q", kind, code, out, errOut, want)
		}
	}
}

// ljob kinds prints each kind's lane, limits and caps (GET /v1/kinds);
// ljob counts the caller's queued, waiting and running jobs by kind (GET
// /v1/counts).
func TestKindsAndCounts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/kinds":
			fmt.Fprint(w, `{"kinds":[{"name":"example.hash"},{"name":"example.hold_limited","concurrency":5},`+
				`{"name":"crm.sync","lane":"bulk","concurrency_per_key":1,"limit_key":"payload.account","rate_limit":50,"rate_period_seconds":1,"max_queued":1000,"max_queued_per_owner":100}]}`)
		case "/v1/counts":
			fmt.Fprint(w, `{"kinds":{"example.hold_limited":{"queued":95,"running":5,"waiting":90},"example.hash":{"queued":1,"running":0,"waiting":0}},"truncated":false}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	code, out, errOut := runCLI(t, srv.URL, "kinds")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 4 || !strings.Contains(lines[0], "max queued") {
		t.Fatalf("kinds: exit %d, stdout:\n%s\nstderr: %s", code, out, errOut)
	}
	for i, want := range [][]string{
		{"example.hash", "default", "-", "-", "-", "-", "-", "-", "-"},
		{"example.hold_limited", "default", "5", "-", "-", "-", "-", "-", "-"},
		{"crm.sync", "bulk", "-", "1", "50/1s", "-", "payload.account", "1000", "100"},
	} {
		if got := strings.Fields(lines[i+1]); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("kinds line %d: %q, want %q", i+1, got, want)
		}
	}
	code, out, errOut = runCLI(t, srv.URL, "counts")
	if code != 0 || !regexp.MustCompile(`example.hold_limited\s+95\s+90\s+5`).MatchString(out) || !regexp.MustCompile(`example.hash\s+1\s+0\s+0`).MatchString(out) {
		t.Fatalf("counts: exit %d, stdout:\n%s\nstderr: %s", code, out, errOut)
	}
	if code, out, _ := runCLI(t, srv.URL, "-json", "counts"); code != 0 || !strings.Contains(out, `"waiting":90`) {
		t.Fatalf("counts -json: exit %d, %s", code, out)
	}
}

// ljob pause KIND holds your jobs of KIND back (ljob get shows
// waiting_on paused), ljob pauses lists it, ljob resume ends it; the
// operators' forms reach the admin routes (403 for a caller who is not
// one).
func TestPauseAndResume(t *testing.T) {
	url := server(t)
	if code, out, errOut := runCLI(t, url, "-for", "2h", "pause", "steps"); code != 0 || !strings.Contains(out, "paused kind:steps:owner:") {
		t.Fatalf("pause: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, url, "pauses"); code != 0 || !regexp.MustCompile(`kind:steps:owner:\w+\s+owner\s`).MatchString(out) {
		t.Fatalf("pauses: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut := runCLI(t, url, "-json", "enqueue", "steps")
	if code != 0 {
		t.Fatalf("enqueue: exit %d, %s", code, errOut)
	}
	var j cli.Job
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runCLI(t, url, "-json", "get", j.ID); code != 0 || !strings.Contains(out, `"waiting_on":"paused"`) {
		t.Fatalf("get of a paused job: exit %d, %s", code, out)
	}
	if code, _, errOut := runCLI(t, url, "-operator", "pause", "lane:default"); code != 1 || !strings.Contains(errOut, "403") {
		t.Fatalf("pause -operator by a caller who is not one: exit %d, stderr %q", code, errOut)
	}
	if code, out, errOut := runCLI(t, url, "resume", "steps"); code != 0 || !strings.Contains(out, "resumed steps") {
		t.Fatalf("resume: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := runCLI(t, url, "resume", "steps"); code != 1 || !strings.Contains(errOut, "404") {
		t.Fatalf("a second resume: exit %d, stderr %q", code, errOut)
	}
	if code, out, _ := runCLI(t, url, "pauses"); code != 0 || !strings.Contains(out, "no pause in force") {
		t.Fatalf("pauses after the resume: exit %d, %q", code, out)
	}
}

// ljob run-now SCHEDULE makes one job of your schedule (the same one again
// with the same -key); ljob pause and resume schedule:NAME pause its fires.
func TestRunNowAndSchedulePause(t *testing.T) {
	url := server(t)
	code, out, errOut := runCLI(t, url, "-json", "-key", "k1", "run-now", "nightly")
	var first, again cli.Job
	if code != 0 || json.Unmarshal([]byte(out), &first) != nil || first.ID == "" {
		t.Fatalf("run-now: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = runCLI(t, url, "-json", "-key", "k1", "run-now", "nightly")
	if code != 0 || json.Unmarshal([]byte(out), &again) != nil || again.ID != first.ID {
		t.Fatalf("run-now again with the key: exit %d, %q; want job %s", code, out, first.ID)
	}
	if !strings.Contains(out, `"manual_run_of":"nightly"`) {
		t.Fatalf("the job is not marked as run by hand: %s", out)
	}
	if code, out, errOut := runCLI(t, url, "pause", "schedule:nightly"); code != 0 || !strings.Contains(out, "its fires make no job") {
		t.Fatalf("pause schedule: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, _ := runCLI(t, url, "resume", "schedule:nightly"); code != 0 || !strings.Contains(out, "resumed schedule:nightly") {
		t.Fatalf("resume schedule: exit %d, %q", code, out)
	}
	if code, _, errOut := runCLI(t, url, "run-now", "nope"); code != 1 || !strings.Contains(errOut, "404") {
		t.Fatalf("run-now of no schedule: exit %d, stderr %q", code, errOut)
	}
}

// -tag tags an enqueued job (repeatable); get shows the tags; list -tag
// shows the tagged jobs only; bulk cancel -tag cancels them and no other.
func TestTagsListAndBulk(t *testing.T) {
	url := server(t)
	enqueue := func(tags ...string) string {
		t.Helper()
		args := []string{"-json", "-delay", "1h"}
		for _, tag := range tags {
			args = append(args, "-tag", tag)
		}
		code, out, errOut := runCLI(t, url, append(args, "enqueue", "steps", `{"steps":2}`)...)
		if code != 0 {
			t.Fatalf("enqueue %v: exit %d %s %s", tags, code, out, errOut)
		}
		var j cli.Job
		if err := json.Unmarshal([]byte(out), &j); err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
	a, b := enqueue("import=42", "customer=acme"), enqueue("import=42")
	other, untagged := enqueue("import=43"), enqueue()
	if code, out, _ := runCLI(t, url, "get", a); code != 0 || !strings.Contains(out, "tags:     customer=acme import=42\n") {
		t.Fatalf("get: %d\n%s", code, out)
	}
	code, out, errOut := runCLI(t, url, "-tag", "import=42", "list")
	if code != 0 || !strings.Contains(out, a) || !strings.Contains(out, b) || strings.Contains(out, other) || strings.Contains(out, untagged) {
		t.Fatalf("list -tag: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, url, "-tag", "import=42", "bulk", "cancel"); code != 0 || out != "2 jobs matched, 2 cancelled\n" {
		t.Fatalf("bulk cancel -tag: exit %d %q %s", code, out, errOut)
	}
	for id, want := range map[string]string{a: "cancelled", b: "cancelled", other: "queued", untagged: "queued"} {
		if _, out, _ := runCLI(t, url, "-json", "get", id); !strings.Contains(out, `"status":"`+want+`"`) {
			t.Errorf("job %s after the bulk cancel: %s, want %s", id, out, want)
		}
	}
	for name, args := range map[string][]string{
		"bulk without a filter": {"bulk", "cancel"},
		"an unknown action":     {"-kind", "steps", "bulk", "delete"},
		"two filter tags":       {"-tag", "a=1", "-tag", "b=2", "list"},
		"a tag without =":       {"-tag", "import", "enqueue", "steps", `{}`},
		"an upper-case key":     {"-tag", "Import=42", "enqueue", "steps", `{"steps":2}`},
	} {
		if code, _, errOut := runCLI(t, url, args...); code != 1 || errOut == "" {
			t.Errorf("%s: exit %d %q", name, code, errOut)
		}
	}
	if code, _, errOut := runCLI(t, url, "-tag", "Import=42", "list"); code != 1 || !strings.Contains(errOut, "400") {
		t.Errorf("list by a malformed tag: exit %d %s", code, errOut)
	}
}

type approval struct {
	OK bool `json:"ok"`
}

// ljob get shows a durable job's steps and the signal it waits for; ljob
// signal delivers it (a duplicate and a payload of another shape said so).
func TestSignalAndSteps(t *testing.T) {
	url := server(t)
	code, out, _ := runCLI(t, url, "-json", "enqueue", "approve", `{}`)
	var j cli.Job
	if err := json.Unmarshal([]byte(out), &j); code != 0 || err != nil {
		t.Fatalf("enqueue: %d %s", code, out)
	}
	runCLI(t, url, "get", j.ID) // the test server runs a message at each read
	_, out, _ = runCLI(t, url, "get", j.ID)
	for _, want := range []string{`waiting:  for the signal "approval"`, "steps:    ask (step, done ", "          approval (signal, waiting "} {
		if !strings.Contains(out, want) {
			t.Fatalf("want %q in ljob get:\n%s", want, out)
		}
	}
	if code, out, errOut := runCLI(t, url, "signal", j.ID, "approval", `{"nope":1}`); code == 0 || !strings.Contains(errOut, "invalid_payload") {
		t.Fatalf("a signal of another shape: %d %s %s", code, out, errOut)
	}
	if code, out, _ := runCLI(t, url, "signal", j.ID, "approval", `{"ok":true}`); code != 0 || !strings.Contains(out, "delivered: the job was waiting for it") {
		t.Fatalf("ljob signal: %d %s", code, out)
	}
	if _, out, _ := runCLI(t, url, "signal", j.ID, "approval", `{"ok":false}`); !strings.Contains(out, "duplicate") {
		t.Fatalf("ljob signal again: %s", out)
	}
	runCLI(t, url, "get", j.ID)
	if _, out, _ := runCLI(t, url, "get", j.ID); !strings.Contains(out, "status:   succeeded") || !strings.Contains(out, "          approval (signal, done ") {
		t.Fatalf("ljob get after the signal:\n%s", out)
	}
}

// ljob upload KIND FILE: the file goes up in the parts the API asks for,
// each PUT through its link with no credentials of the CLI's; the upload
// is completed with the PUTs' ETags in order, followed until ready, and
// enqueued with the enqueue flags. A failed upload exits 1 naming its
// code, and enqueues nothing.
func TestUploadSendsThePartsAndEnqueues(t *testing.T) {
	var mu sync.Mutex
	parts := map[string][]byte{}
	var completed, enqueued string
	failed := false
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/uploads":
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"id":"up1","kind":"example.blob","bytes":%d,"part_bytes":8,"parts":[{"number":1,"url":%q},{"number":2,"url":%q}],"expires_at":"2026-12-07T00:00:00Z"}`,
				len(`{"data":"x"}`), srv.URL+"/s3/p1?X-Amz-Signature=s", srv.URL+"/s3/p2?X-Amz-Signature=s")
		case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/s3/"):
			if r.Header.Get("Authorization") != "" || r.Header.Get("X-Local-Caller") != "" {
				t.Errorf("a part's PUT carries credentials: %v", r.Header)
			}
			parts[r.URL.Path] = body
			w.Header().Set("ETag", `"e-`+strings.TrimPrefix(r.URL.Path, "/s3/")+`"`)
		case r.URL.Path == "/v1/uploads/up1/complete":
			completed = string(body)
			w.WriteHeader(http.StatusAccepted)
			fmt.Fprint(w, `{"id":"up1","status":"validating","job_id":"j1"}`)
		case r.URL.Path == "/v1/uploads/up1":
			if failed {
				fmt.Fprint(w, `{"id":"up1","status":"failed","error":"upload_invalid","job_id":"j1"}`)
				return
			}
			fmt.Fprint(w, `{"id":"up1","status":"ready","job_id":"j1"}`)
		case r.Method == http.MethodPost && r.URL.Path == "/v1/jobs":
			enqueued = string(body)
			w.WriteHeader(http.StatusAccepted)
			fmt.Fprint(w, `{"id":"j1","kind":"example.blob","status":"queued","attempt":0,"result":null,"error":null,"created_at":"2026-12-07T00:00:00Z","updated_at":"2026-12-07T00:00:00Z"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "payload.json")
	if err := os.WriteFile(file, []byte(`{"data":"x"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, srv.URL, "-tag", "src=file", "upload", "example.blob", file)
	mu.Lock()
	if code != 0 || !strings.Contains(out, "j1") || string(parts["/s3/p1"])+string(parts["/s3/p2"]) != `{"data":"x"}` || len(parts["/s3/p1"]) != 8 {
		t.Fatalf("upload: exit %d, parts %q, stdout %s, stderr %s", code, parts, out, errOut)
	}
	if completed != `{"etags":["\"e-p1\"","\"e-p2\""]}` || enqueued != `{"kind":"example.blob","tags":{"src":"file"},"upload":"up1"}` {
		t.Fatalf("completed with %s, enqueued %s", completed, enqueued)
	}
	failed, enqueued = true, ""
	mu.Unlock()
	code, _, errOut = runCLI(t, srv.URL, "upload", "example.blob", file)
	mu.Lock()
	defer mu.Unlock()
	if code != 1 || !strings.Contains(errOut, "upload_invalid") || enqueued != "" {
		t.Fatalf("a failed upload: exit %d, stderr %s, enqueued %q", code, errOut, enqueued)
	}
}
