package codestyle

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// internal/ holds what ships, internal/dev/ what only tests, the local
// stack, the CLI and the bench use (internal/devtools is a module of its
// own, for the dependencies a team must not inherit). The line is kept
// both ways, from what the bootstraps and the public packages link (go
// list -deps, with tracing linked and without): nothing of internal/dev in
// them, and nothing directly under internal/ that none of them links.
func TestWhatShipsIsApartFromWhatTests(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	const module = "github.com/lambdajobs/lambdajobs/"
	linked := map[string]bool{}
	for _, tags := range []string{"", "lambdajobs.notracing"} {
		cmd := exec.Command("go", "list", "-deps", "-tags", tags, "./functions/...", "./pkg/...")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOWORK=off")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list -deps: %v", err)
		}
		for _, p := range strings.Fields(string(out)) {
			linked[p] = true
		}
	}
	for p := range linked {
		if strings.HasPrefix(p, module+"internal/dev/") {
			t.Errorf("%s is linked by a function or a public package: what ships belongs directly under internal/", p)
		}
	}
	entries, err := os.ReadDir(filepath.Join(root, "internal"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "dev" || e.Name() == "devtools" {
			continue
		}
		n++
		if p := module + "internal/" + e.Name(); !linked[p] {
			t.Errorf("%s is linked by no function and no public package: move it to internal/dev/", p)
		}
	}
	if n == 0 {
		t.Fatal("no package directly under internal/: is the root right?")
	}
}
