package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/lambdajobs/lambdajobs/internal/dev/cli"
	"github.com/lambdajobs/lambdajobs/internal/devtools/apitest"
	"github.com/lambdajobs/lambdajobs/internal/devtools/mcpserver"
)

const secret = "tok-9f2c41d7"

// api runs the real HTTP API in-process (apitest) and returns its URL and
// a function that runs the jobs queued so far through the real worker.
func api(t *testing.T) (string, func()) {
	t.Helper()
	a := apitest.Start(t)
	return a.URL, a.Work
}

// session connects an MCP client to a server made by Main's own path
// (cli.APIClient, mcpserver.New) for the API at url, as caller.
func session(t *testing.T, url, caller string) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	env := cli.Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	c, _, ok := cli.APIClient(ctx, []string{"-api", url, "-caller", caller}, env)
	if !ok {
		t.Fatal("no API client")
	}
	s, err := mcpserver.New(ctx, c, mcpserver.Version)
	if err != nil {
		t.Fatal(err)
	}
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// call calls the tool name with args and returns its text and whether it
// was a tool error.
func call(t *testing.T, cs *mcp.ClientSession, name string, args any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return err.Error(), true
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

// The tools: one per enqueueable kind with its payload schema (a payload
// that is not an object as the tool's one property), no internal kind,
// and the job tools.
func TestToolsAreTheKindsAndTheJobCalls(t *testing.T) {
	url, _ := api(t)
	cs := session(t, url, "ana")
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tools := map[string]*mcp.Tool{}
	var names []string
	for _, tool := range res.Tools {
		tools[tool.Name] = tool
		names = append(names, tool.Name)
	}
	want := "enqueue_approve enqueue_digest enqueue_greet enqueue_shout.word get_job wait_job list_jobs count_jobs cancel_job retry_job signal_job"
	if got := strings.Join(names, " "); len(names) != len(strings.Fields(want)) || strings.Contains(got, "cleanup") {
		t.Fatalf("tools %s, want %s", got, want)
	}
	for _, name := range strings.Fields(want) {
		if tools[name] == nil {
			t.Fatalf("no tool %s among %v", name, names)
		}
	}
	schema, _ := json.Marshal(tools["enqueue_greet"].InputSchema)
	if !strings.Contains(string(schema), `"name"`) || !strings.Contains(string(schema), `"writeOnly":true`) {
		t.Fatalf("enqueue_greet's input schema is not greet's payload schema: %s", schema)
	}
	schema, _ = json.Marshal(tools["enqueue_shout.word"].InputSchema)
	if !strings.Contains(string(schema), `"payload":{"type":"string"}`) {
		t.Fatalf("enqueue_shout.word's input schema does not hold the string payload: %s", schema)
	}
}

// An agent enqueues a job with its kind's tool and follows it to its end
// with get_job; no answer carries the payload's secret field.
func TestAnAgentEnqueuesAndFollowsAJob(t *testing.T) {
	url, work := api(t)
	cs := session(t, url, "ana")
	text, isErr := call(t, cs, "enqueue_greet", map[string]any{"name": "ana", "token": secret})
	var job struct {
		ID     string          `json:"id"`
		Status string          `json:"status"`
		Result json.RawMessage `json:"result"`
	}
	if isErr || json.Unmarshal([]byte(text), &job) != nil || job.Status != "queued" {
		t.Fatalf("enqueue_greet: %s", text)
	}
	work()
	got, isErr := call(t, cs, "get_job", map[string]any{"id": job.ID})
	if isErr || json.Unmarshal([]byte(got), &job) != nil || job.Status != "succeeded" || string(job.Result) != `"hello ana"` {
		t.Fatalf("get_job: %s", got)
	}
	list, isErr := call(t, cs, "list_jobs", map[string]any{"kind": "greet"})
	counts, isErr2 := call(t, cs, "count_jobs", map[string]any{})
	if isErr || isErr2 || !strings.Contains(list, job.ID) {
		t.Fatalf("list_jobs: %s; count_jobs: %s", list, counts)
	}
	for _, answer := range []string{text, got, list, counts} {
		if strings.Contains(answer, secret) {
			t.Fatalf("an answer carries the secret field: %s", answer)
		}
	}
	// A payload that is not an object goes as the tool's "payload".
	text, isErr = call(t, cs, "enqueue_shout.word", map[string]any{"payload": "hey"})
	if isErr || json.Unmarshal([]byte(text), &job) != nil {
		t.Fatalf("enqueue_shout.word: %s", text)
	}
	work()
	if got, _ := call(t, cs, "get_job", map[string]any{"id": job.ID}); !strings.Contains(got, `"result":"HEY"`) {
		t.Fatalf("get_job of the word: %s", got)
	}
}

// wait_job answers a job at its next change, not at its timeout, and an
// ended job at once.
func TestWaitJobAnswersAtTheChange(t *testing.T) {
	url, work := api(t)
	cs := session(t, url, "wes")
	text, isErr := call(t, cs, "enqueue_approve", map[string]any{})
	var job struct {
		ID string `json:"id"`
	}
	if isErr || json.Unmarshal([]byte(text), &job) != nil {
		t.Fatalf("enqueue_approve: %s", text)
	}
	work() // it parks, waiting for its signal
	parked, _ := call(t, cs, "get_job", map[string]any{"id": job.ID})
	if !strings.Contains(parked, `"waiting_on":"signal"`) {
		t.Fatalf("the job does not wait for its signal: %s", parked)
	}
	// Unchanged, a wait answers the job as get_job does, at its timeout.
	if same, _ := call(t, cs, "wait_job", map[string]any{"id": job.ID, "seconds": 1}); same != parked {
		t.Fatalf("an unchanged job's wait: %s; want %s", same, parked)
	}
	start := time.Now()
	go func() {
		time.Sleep(500 * time.Millisecond)
		call(t, cs, "signal_job", map[string]any{"id": job.ID, "name": "approval", "payload": true})
		work()
	}()
	// The change may be the signal's wake (due at once, waiting on
	// nothing) or the run after it.
	got, isErr := call(t, cs, "wait_job", map[string]any{"id": job.ID, "seconds": 15})
	if took := time.Since(start); isErr || got == parked || strings.Contains(got, `"waiting_on"`) || took < 500*time.Millisecond || took > 5*time.Second {
		t.Fatalf("wait_job answered after %v: %s; want the job changed, soon after the signal at 0.5 s", took, got)
	}
	for !strings.Contains(got, `"status":"succeeded"`) {
		if got, isErr = call(t, cs, "wait_job", map[string]any{"id": job.ID, "seconds": 5}); isErr {
			t.Fatalf("wait_job: %s", got)
		}
	}
	start = time.Now()
	if got, _ := call(t, cs, "wait_job", map[string]any{"id": job.ID}); !strings.Contains(got, `"status":"succeeded"`) || time.Since(start) > time.Second {
		t.Fatalf("wait_job of an ended job answered after %v: %s", time.Since(start), got)
	}
	if got, isErr := call(t, cs, "wait_job", map[string]any{"id": job.ID + "x"}); !isErr || !strings.Contains(got, "404") {
		t.Fatalf("wait_job of no job: %s", got)
	}
}

// Bad input is a tool error that says why and changes nothing; another
// caller's job is as unknown as a missing one; signals and cancels reach
// the caller's jobs.
func TestBadCallsAndOtherCallers(t *testing.T) {
	url, work := api(t)
	cs := session(t, url, "ana")
	for name, args := range map[string]map[string]any{
		"enqueue_greet": {"name": "x", "token": secret, "nmae": "typo"},
		"get_job":       {"id": "not-an-id"},
		"cancel_job":    {"id": "00000000-0000-7000-8000-000000000000"},
	} {
		if text, isErr := call(t, cs, name, args); !isErr || strings.Contains(text, secret) {
			t.Errorf("%s %v: no error, or one that carries the secret field: %s", name, args, text)
		}
	}
	if list, _ := call(t, cs, "list_jobs", map[string]any{}); strings.Contains(list, `"id"`) {
		t.Fatalf("a refused call stored a job: %s", list)
	}
	text, _ := call(t, cs, "enqueue_approve", map[string]any{})
	var job struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(text), &job); err != nil {
		t.Fatalf("enqueue_approve: %s", text)
	}
	work()
	other := session(t, url, "bob")
	if text, isErr := call(t, other, "get_job", map[string]any{"id": job.ID}); !isErr || !strings.Contains(text, "404") {
		t.Fatalf("another caller's get_job: %s", text)
	}
	if text, isErr := call(t, other, "signal_job", map[string]any{"id": job.ID, "name": "approval", "payload": true}); !isErr || !strings.Contains(text, "404") {
		t.Fatalf("another caller's signal_job: %s", text)
	}
	if text, isErr := call(t, cs, "signal_job", map[string]any{"id": job.ID, "name": "approval", "payload": true}); isErr {
		t.Fatalf("signal_job: %s", text)
	}
	work()
	if got, _ := call(t, cs, "get_job", map[string]any{"id": job.ID}); !strings.Contains(got, `"status":"succeeded"`) || !strings.Contains(got, `"result":true`) {
		t.Fatalf("the approval after its signal: %s", got)
	}
	text, _ = call(t, cs, "enqueue_approve", map[string]any{})
	_ = json.Unmarshal([]byte(text), &job)
	if got, isErr := call(t, cs, "cancel_job", map[string]any{"id": job.ID}); isErr || !strings.Contains(got, `"status":"cancelled"`) {
		t.Fatalf("cancel_job: %s", got)
	}
}

// Over streamable HTTP the server answers its own address only: another
// Host gets 421, a cross-site browser request 403, and an MCP client at
// the address gets the tools.
func TestStreamableHTTPAnswersThisMachineOnly(t *testing.T) {
	url, _ := api(t)
	env := cli.Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
	c, _, _ := cli.APIClient(context.Background(), []string{"-api", url}, env)
	s, err := mcpserver.New(context.Background(), c, mcpserver.Version)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h, err := mcpserver.Handler(s, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: h}}
	srv.Start()
	t.Cleanup(srv.Close)
	endpoint := srv.URL + mcpserver.Path
	for _, tc := range []struct {
		method, host, origin, site string
		want                       int
	}{
		{"POST", "evil.example:80", "", "", http.StatusMisdirectedRequest},
		{"POST", "", "https://evil.example", "cross-site", http.StatusForbidden},
		{"GET", "", "https://evil.example", "cross-site", http.StatusForbidden},
		{"DELETE", "", "https://evil.example", "", http.StatusForbidden},
		{"GET", "", "", "same-site", http.StatusForbidden},
	} {
		req, _ := http.NewRequest(tc.method, endpoint, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tc.host != "" {
			req.Host = tc.host
		}
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		if tc.site != "" {
			req.Header.Set("Sec-Fetch-Site", tc.site)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Fatalf("%s host %q origin %q site %q: %d, want %d", tc.method, tc.host, tc.origin, tc.site, resp.StatusCode, tc.want)
		}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(res.Tools) != 11 {
		t.Fatalf("tools over HTTP: %v %v", res, err)
	}
	if _, err := mcpserver.Handler(s, "0.0.0.0:8090"); err == nil {
		t.Fatal("a handler for every interface")
	}
	// ljob-mcp listens on this machine only.
	var stderr strings.Builder
	env = cli.Env{Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }}
	if code := mcpserver.Main(context.Background(), []string{"-api", url, "http", "0.0.0.0:0"}, env); code != 1 || !strings.Contains(stderr.String(), "not a loopback address") {
		t.Fatalf("ljob-mcp http 0.0.0.0:0: exit %d, %s", code, stderr.String())
	}
}

// An MCP client no one here wrote, @modelcontextprotocol/sdk's (pinned in
// nodeclient/package.json), runs ljob-mcp over stdio against the API:
// it lists one tool per enqueueable kind, runs a job through its tool to
// its end with wait_job, gets a tool error for a bad payload, and sees
// no secret in any output (nodeclient/client.test.mjs).
func TestAnMCPClientNoOneHereWrote(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed: make deps checks for Node.js 20")
	}
	bin := filepath.Join(t.TempDir(), "ljob-mcp")
	build := exec.Command("go", "build", "-o", bin, "../cmd/ljob-mcp")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir, err := filepath.Abs("nodeclient")
	if err != nil {
		t.Fatal(err)
	}
	node := func(env []string, name string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	node(nil, "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error")
	a := apitest.Start(t)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.WorkUntil(ctx) }()
	defer func() { stop(); <-done }()
	out := node([]string{"LJOB_MCP=" + bin, "LAMBDAJOBS_API=" + a.URL, "SECRET=" + secret}, "node", "--test", "client.test.mjs")
	if !strings.Contains(out, "# pass 1") || !strings.Contains(out, "# fail 0") {
		t.Fatalf("node --test:\n%s", out)
	}
}
