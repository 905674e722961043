package modules_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/devtools/modules"
)

// inherited reports whether a module path names a browser driver or a
// YAML library: what the library's own tests need and a team's module
// must not inherit.
func inherited(path string) bool {
	return strings.Contains(path, "chromedp") || strings.Contains(path, "yaml")
}

// A team's module (the quickstart, copied out of this tree, with its
// replace directives dropped) resolves the library and the construct at
// the release version from a module proxy holding this repository's
// modules, with no workspace, and inherits neither a browser driver nor a
// YAML library from them: no module of ours requires one, none is in the
// graph through ours, and no package of one is built or tested.
func TestAQuickstartCopyResolvesFromAModuleProxy(t *testing.T) {
	version := releaseRequired(t)
	r := root(t)
	var ours []modules.Module
	for _, m := range workspace(t) {
		if modules.Ours(m.Path) {
			ours = append(ours, m)
		}
	}
	proxy := t.TempDir()
	if err := modules.WriteProxy(proxy, version, ours); err != nil {
		t.Fatal(err)
	}
	team := filepath.Join(t.TempDir(), "quickstart")
	copyTree(t, filepath.Join(r, "examples", "quickstart"), team)

	// The other modules come from the module cache here, read as a proxy,
	// then from the usual proxy; into a module cache of the test's own, so
	// that the test's copies of our modules never reach the shared one.
	cache := strings.TrimSpace(run(t, r, nil, "env", "GOMODCACHE"))
	upstream := strings.TrimSpace(run(t, r, nil, "env", "GOPROXY"))
	env := []string{
		"GOWORK=off",
		"GOFLAGS=-mod=mod -modcacherw",
		"GOMODCACHE=" + t.TempDir(),
		"GOPROXY=file://" + filepath.ToSlash(proxy) + ",file://" + filepath.ToSlash(filepath.Join(cache, "cache", "download")) + "," + upstream,
		"GONOSUMDB=" + modules.Library, // ours are not in the checksum database; the rest are in go.sum
		"GOPRIVATE=", "GONOPROXY=", "GOINSECURE=",
	}
	for _, dir := range []string{team, filepath.Join(team, "infra")} {
		f := parseMod(t, dir)
		args := []string{"mod", "edit"}
		for _, rep := range f.Replace {
			if modules.Ours(rep.Old.Path) {
				args = append(args, "-dropreplace="+rep.Old.Path)
			}
		}
		for _, req := range f.Require {
			if modules.Ours(req.Mod.Path) {
				args = append(args, "-require="+req.Mod.Path+"@"+version)
			}
		}
		run(t, dir, env, args...)
		if got := string(mustRead(t, filepath.Join(dir, "go.mod"))); strings.Contains(got, "=> ../../") {
			t.Fatalf("%s still points at this tree:\n%s", dir, got)
		}

		graph := run(t, dir, env, "mod", "graph")
		for _, line := range strings.Split(strings.TrimSpace(graph), "\n") {
			from, to, _ := strings.Cut(line, " ")
			if strings.Contains(line, "chromedp") {
				t.Errorf("%s: go mod graph has a browser driver: %s", dir, line)
			}
			if modules.Ours(strings.Split(from, "@")[0]) && inherited(to) {
				t.Errorf("%s: a module of ours requires %s (%s)", dir, to, line)
			}
		}
		if got := strings.TrimSpace(run(t, dir, env, "list", "-m", "-f", "{{.Version}} {{.Replace}}", modules.Library)); got != version+" <nil>" {
			t.Errorf("%s: the library resolves as %q, want %s from the proxy", dir, got, version)
		}
	}
	cdk := filepath.Join(team, "infra")
	if got := strings.TrimSpace(run(t, cdk, env, "list", "-m", "-f", "{{.Version}} {{.Replace}}", modules.Library+"/infra")); got != version+" <nil>" {
		t.Errorf("the construct resolves as %q, want %s from the proxy", got, version)
	}
	// Required alone, the construct brings the library at the release
	// version, and its source comes from the proxy.
	alone := t.TempDir()
	if err := os.WriteFile(filepath.Join(alone, "go.mod"), []byte("module example.com/constructonly\n\ngo 1.26.0\n\nrequire "+modules.Library+"/infra "+version+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(run(t, alone, env, "list", "-m", "-f", "{{.Version}}", modules.Library)); got != version {
		t.Errorf("a module requiring the construct alone gets the library at %q, want %s", got, version)
	}
	run(t, alone, env, "mod", "download", modules.Library)

	// The team's packages load from the proxy's zips (every import and
	// embedded file found), and none it builds or tests is a browser
	// driver or a YAML parser.
	for _, p := range strings.Fields(run(t, team, env, "list", "-deps", "-test", "./...")) {
		if inherited(p) {
			t.Errorf("the quickstart builds %s", p)
		}
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// copyTree copies the files git would commit under src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = src
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files in %s: %v", src, err)
	}
	for _, name := range strings.Split(string(out), "\x00") {
		if name == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, name))
		if os.IsNotExist(err) {
			continue // deleted from the tree, not yet from the index
		}
		if err != nil {
			t.Fatal(err)
		}
		to := filepath.Join(dst, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
