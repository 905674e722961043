package supplychain

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// npmInstall matches a command (or its words in a Go call) that installs
// npm packages.
var npmInstall = regexp.MustCompile(`\bnpm("?,?\s*"?)(ci|install|i)\b`)

// Every place that installs npm packages passes --ignore-scripts: the
// Makefile, CI, the Go code that installs the emulators in a team's
// repository, and the hints its errors give (comments aside).
func TestEveryNpmInstallIgnoresScripts(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	files := []string{"Makefile", ".ci/run"}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (d.Name() == "node_modules" || d.Name() == "cdk.out" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			rel, _ := filepath.Rel(root, path)
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if c := strings.TrimSpace(line); strings.HasPrefix(c, "#") || strings.HasPrefix(c, "//") || !npmInstall.MatchString(line) {
				continue
			}
			found++
			if !strings.Contains(line, "--ignore-scripts") {
				t.Errorf("%s:%d installs npm packages without --ignore-scripts: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
	if found < 3 {
		t.Errorf("found %d npm installs, want at least the Makefile's, and localstack's and its hints: is the pattern stale?", found)
	}
}

// lockfile is what npm ci reads of a package-lock.json.
type lockfile struct {
	LockfileVersion int `json:"lockfileVersion"`
	Packages        map[string]struct {
		Version          string `json:"version"`
		Integrity        string `json:"integrity"`
		Link             bool   `json:"link"`
		HasInstallScript bool   `json:"hasInstallScript"`
	} `json:"packages"`
}

// problems lists what makes a lockfile unfit for npm ci --ignore-scripts:
// a package with an install script (it would not run: review it, and
// keep its script only if it is needed), one without an integrity hash.
func (l lockfile) problems() []string {
	var out []string
	for name, p := range l.Packages {
		switch {
		case name == "" || p.Link:
		case p.HasInstallScript:
			out = append(out, name+" "+p.Version+" has an install script")
		case p.Integrity == "":
			out = append(out, name+" "+p.Version+" has no integrity hash")
		}
	}
	if l.LockfileVersion != 3 {
		out = append(out, "lockfileVersion is not 3")
	}
	slices.Sort(out)
	return out
}

// No package in the lockfiles (the tools', the TypeScript client's, the
// MCP client test's) has an install script, so ignoring
// scripts skips nothing the tools need; each is pinned by its hash.
func TestLockedPackagesHaveNoInstallScripts(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	for _, f := range []string{"_tools/package-lock.json", "infra/_tools/package-lock.json", "clients/typescript/package-lock.json", "internal/devtools/mcpserver/nodeclient/package-lock.json"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		var l lockfile
		if err := json.Unmarshal(b, &l); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(l.Packages) < 3 {
			t.Fatalf("%s: %d packages, want the tools and their dependencies", f, len(l.Packages))
		}
		for _, p := range l.problems() {
			t.Errorf("%s: %s", f, p)
		}
	}
}

// The check itself: a lockfile with an install script or a package
// without its hash is reported.
func TestLockfileProblemsAreFound(t *testing.T) {
	t.Parallel()
	var l lockfile
	err := json.Unmarshal([]byte(`{"lockfileVersion":3,"packages":{
		"":{"name":"x"},
		"node_modules/ok":{"version":"1.0.0","integrity":"sha512-a"},
		"node_modules/builds":{"version":"2.0.0","integrity":"sha512-b","hasInstallScript":true},
		"node_modules/unhashed":{"version":"3.0.0"}}}`), &l)
	if err != nil {
		t.Fatal(err)
	}
	got := l.problems()
	want := []string{"node_modules/builds 2.0.0 has an install script", "node_modules/unhashed 3.0.0 has no integrity hash"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
