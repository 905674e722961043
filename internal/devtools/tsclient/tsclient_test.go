// Package tsclient tests the TypeScript client (clients/typescript)
// against the real HTTP API, run in-process (apitest): it installs the
// client's pinned packages (npm ci), generates its types from
// docs/reference/openapi.yaml and compiles it with tsc (npm run build), then runs
// its tests with node --test, the API's URL in LAMBDAJOBS_API; and it
// writes the types of the API's kinds with lambdajobs-kinds and
// type-checks test/typecheck/use.ts against them.
package tsclient_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/internal/devtools/apitest"
)

func run(t *testing.T, dir string, env []string, name string, args ...string) string {
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

func TestTheTypeScriptClientAgainstTheAPI(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not installed: make deps checks for Node.js 20")
	}
	dir, err := filepath.Abs("../../../clients/typescript")
	if err != nil {
		t.Fatal(err)
	}
	run(t, dir, nil, "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	run(t, dir, nil, "npm", "run", "build", "--silent")
	api := apitest.Start(t)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		api.WorkUntil(ctx)
	}()
	defer func() { stop(); <-done }()
	out := run(t, dir, []string{"LAMBDAJOBS_API=" + api.URL, "CI=true"}, "node", "--test", "dist/test/")
	if !strings.Contains(out, "# pass 6") || !strings.Contains(out, "# fail 0") {
		t.Fatalf("node --test:\n%s", out)
	}
	t.Logf("node --test:\n%s", out)

	// The kinds' types: written from the API, then used (and misused) in
	// use.ts, which must type-check.
	kinds := run(t, dir, nil, "node", "dist/src/bin/lambdajobs-kinds.js", api.URL, "--client", "../../src/index.js")
	for _, want := range []string{"export interface GreetPayload", "export type ShoutWordPayload = string", `"approve": { payload: ApprovePayload; result: ApproveResult`} {
		if !strings.Contains(kinds, want) {
			t.Fatalf("lambdajobs-kinds wrote no %q:\n%s", want, kinds)
		}
	}
	if strings.Contains(kinds, "internal.cleanup") {
		t.Fatalf("lambdajobs-kinds wrote an internal kind:\n%s", kinds)
	}
	gen := filepath.Join(dir, "test", "typecheck", "kinds.ts")
	if err := os.WriteFile(gen, []byte(kinds), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(gen) })
	run(t, dir, nil, "npx", "tsc", "-p", "test/typecheck")
}
