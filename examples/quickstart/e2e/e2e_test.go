// Package e2e runs the team's own functions on the local stack, started as
// a team starts it (go run .../cmd/lambdajobs-local -main ./cmd/jobs), and
// one of its jobs through the HTTP API.
package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type view struct {
	ID     string          `json:"id"`
	Status string          `json:"status"`
	Result json.RawMessage `json:"result"`
	Error  *string         `json:"error"`
}

func TestTeamFunctionsOnTheLocalStack(t *testing.T) {
	api := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cache := os.Getenv("QUICKSTART_TOOLS_CACHE") // CI keeps the emulators between runs
	if cache == "" {
		cache = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", "github.com/lambdajobs/lambdajobs/cmd/lambdajobs-local", "-main", "./cmd/jobs")
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(),
		"JOBS_LOCAL_API_ADDR="+api,
		// Any free port, taken when it starts: a port picked here could be
		// taken by one of its emulators by then.
		"JOBS_LOCAL_DASHBOARD_ADDR=127.0.0.1:0",
		fmt.Sprintf("JOBS_LOCAL_DYNAMODB_PORT=%d", freePort(t)),
		fmt.Sprintf("JOBS_LOCAL_SQS_PORT=%d", freePort(t)),
		"JOBS_LOCAL_CACHE="+filepath.Clean(cache),
		"JOBS_LOCAL_SWEEP_EVERY=10s")
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("lambdajobs-local output:\n%s", out.String())
		}
	}()

	base := "http://" + api
	do := func(method, path, body string) (int, []byte, error) {
		req, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Local-Caller", "team")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, b, err
	}
	var job view
	for {
		code, body, err := do("POST", "/v1/jobs", `{"kind":"reports.build","payload":{"account":"acme","months":4}}`)
		if err == nil && code == 202 {
			if err := json.Unmarshal(body, &job); err != nil {
				t.Fatal(err)
			}
			break
		}
		if err == nil && code != 202 {
			t.Fatalf("POST /v1/jobs: %d %s", code, body)
		}
		if ctx.Err() != nil || cmd.ProcessState != nil {
			t.Fatalf("the local stack never answered: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for {
		code, body, err := do("GET", "/v1/jobs/"+job.ID, "")
		if err != nil || code != 200 {
			t.Fatalf("GET: %d %s %v", code, body, err)
		}
		if err := json.Unmarshal(body, &job); err != nil {
			t.Fatal(err)
		}
		if job.Status == "succeeded" || job.Status == "failed" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("job still %s", job.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if job.Status != "succeeded" || string(job.Result) != `{"account":"acme","rows":100}` {
		t.Fatalf("job %+v, want succeeded with 100 rows", job)
	}
	// The demo kinds are not there: only the team's own.
	if code, body, _ := do("POST", "/v1/jobs", `{"kind":"example.hash","payload":{"text":"x","rounds":1}}`); code != 422 {
		t.Fatalf("a demo kind on the team's functions: %d %s, want 422", code, body)
	}

	// The team's other program enqueues with the environment the stack
	// printed, and the job runs like the others.
	enqueue := exec.CommandContext(ctx, "go", "run", "./cmd/enqueue", "-account", "globex", "-months", "2")
	enqueue.Dir = ".."
	enqueue.Env = append(os.Environ(), printedExports(t, out.String())...)
	id, err := enqueue.Output()
	if err != nil {
		t.Fatalf("cmd/enqueue: %v", err)
	}
	job = view{ID: strings.TrimSpace(string(id))}
	for job.Status != "succeeded" && job.Status != "failed" {
		time.Sleep(200 * time.Millisecond)
		code, body, err := do("GET", "/v1/jobs/"+job.ID, "")
		if err != nil || code != 200 || json.Unmarshal(body, &job) != nil || ctx.Err() != nil {
			t.Fatalf("GET the other program's job: %d %s %v", code, body, err)
		}
	}
	if job.Status != "succeeded" || string(job.Result) != `{"account":"globex","rows":30}` {
		t.Fatalf("the other program's job %+v, want succeeded with 30 rows", job)
	}

	// The team's TypeScript types, written from its running stack with
	// the documented command (clients/typescript's lambdajobs-kinds).
	kinds := typeScriptKinds(ctx, t, base)
	for _, want := range []string{"export interface ReportsBuildPayload", "account: string", "months: number", "token?: string",
		`"reports.build": { payload: ReportsBuildPayload; result: ReportsBuildResult; failureCode: "no_such_account" }`} {
		if !strings.Contains(kinds, want) {
			t.Fatalf("lambdajobs-kinds wrote no %q:\n%s", want, kinds)
		}
	}
	if strings.Contains(kinds, "example.hash") {
		t.Fatalf("lambdajobs-kinds wrote a demo kind:\n%s", kinds)
	}
}

// typeScriptKinds runs lambdajobs-kinds against the API at base, building
// the TypeScript client first when it is not built (npm ci, npm run build).
func typeScriptKinds(ctx context.Context, t *testing.T, base string) string {
	t.Helper()
	client, err := filepath.Abs("../../../clients/typescript")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(client, "dist", "src", "bin", "lambdajobs-kinds.js")
	if _, err := os.Stat(bin); err != nil {
		for _, args := range [][]string{{"ci", "--no-audit", "--no-fund", "--loglevel=error"}, {"run", "build", "--silent"}} {
			cmd := exec.CommandContext(ctx, "npm", args...)
			cmd.Dir = client
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("npm %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	}
	cmd := exec.CommandContext(ctx, "node", bin, base)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("lambdajobs-kinds: %v\n%s", err, stderr.String())
	}
	return string(out)
}

// printedExports reads the variables lambdajobs-local printed after
// "export" for another program.
func printedExports(t *testing.T, out string) []string {
	t.Helper()
	_, rest, ok := strings.Cut(out, "  export ")
	if !ok {
		t.Fatalf("lambdajobs-local printed no exports:\n%s", out)
	}
	var env []string
	for _, line := range strings.Split(rest, "\n") {
		more := strings.HasSuffix(line, "\\")
		env = append(env, strings.Fields(strings.TrimSuffix(line, "\\"))...)
		if !more {
			break
		}
	}
	return env
}

// syncBuffer is a bytes.Buffer the process writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
