package browser_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
	"github.com/lambdajobs/lambdajobs/internal/dev/localstack"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// The browser tests start the whole local stack (emulators, the seven
// bootstraps under the Runtime Interface Emulator, gateway, event source)
// on free ports, as the end-to-end tests of internal/dev/localstack do, and
// serve dashboards over it.

var (
	stack *localstack.Stack
	logs  = &syncBuffer{}
)

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

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "browser:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	root, err := localaws.FindRoot()
	if err != nil {
		return 0, err
	}
	rie := os.Getenv("JOBS_TEST_RIE")
	if rie == "" {
		rie = filepath.Join(root, "bin", "aws-lambda-rie")
	}
	if _, err := os.Stat(rie); err != nil {
		return 0, fmt.Errorf("the AWS Lambda Runtime Interface Emulator is required at %s (make test installs it: make bin/aws-lambda-rie): %w", rie, err)
	}
	dir, err := os.MkdirTemp("", "lambdajobs-browser-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	if err := localstack.BuildBootstraps(root, dir); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stack, err = localstack.Start(ctx, localstack.Config{
		Root: root, Bootstraps: dir, RIE: rie,
		APIAddr: "127.0.0.1:0", DynamoDBPort: 0, SQSPort: 0,
		Table: "browser", Queue: "browser",
		WorkerTimeout: 8 * time.Second, APITimeout: 10 * time.Second,
		WorkerInstances: 2, BatchSize: 5,
		NoSchedules: true,
		Output:      logs,
	})
	if err != nil {
		return 0, fmt.Errorf("start the local stack: %w\n%s", err, logs.String())
	}
	defer stack.Stop()
	return m.Run(), nil
}

type answer struct {
	status int
	header http.Header
	body   string
}

func call(t *testing.T, method, path, caller, contentType, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, stack.APIURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if caller != "" {
		req.Header.Set(localstack.CallerHeader, caller)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

func enqueue(t *testing.T, caller, kind, payload string) jobs.View {
	t.Helper()
	a := call(t, "POST", "/v1/jobs", caller, "application/json", `{"kind":"`+kind+`","payload":`+payload+`}`)
	if a.status != 202 {
		t.Fatalf("POST %s: %d %s", kind, a.status, a.body)
	}
	var v jobs.View
	if err := json.Unmarshal([]byte(a.body), &v); err != nil {
		t.Fatal(err)
	}
	if a.header.Get("Location") != "/v1/jobs/"+v.ID {
		t.Fatalf("Location %q", a.header.Get("Location"))
	}
	return v
}

func get(t *testing.T, caller, id string) (answer, jobs.View) {
	t.Helper()
	a := call(t, "GET", "/v1/jobs/"+id, caller, "", "")
	var v jobs.View
	if a.status == 200 {
		if err := json.Unmarshal([]byte(a.body), &v); err != nil {
			t.Fatal(err)
		}
	}
	return a, v
}

// waitFinal polls GET until the job is final; it records every answer.
func waitFinal(t *testing.T, caller, id string, within time.Duration) (jobs.View, []answer) {
	t.Helper()
	var seen []answer
	deadline := time.Now().Add(within)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		a, v := get(t, caller, id)
		seen = append(seen, a)
		if v.Status.Final() {
			return v, seen
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s not final after %v: %s", id, within, a.body)
		}
	}
	panic("unreachable")
}
