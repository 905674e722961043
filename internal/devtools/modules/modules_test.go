package modules_test

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"

	"github.com/lambdajobs/lambdajobs/internal/devtools/modules"
)

var update = flag.Bool("update", false, "TestEveryModuleIsTidy: write what go mod tidy gives to each module's go.mod and go.sum")

// root is the repository's root (this package is internal/devtools/modules).
func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func workspace(t *testing.T) []modules.Module {
	t.Helper()
	mods, err := modules.Workspace(root(t))
	if err != nil {
		t.Fatal(err)
	}
	return mods
}

// goTool is the go command of the release running this test. The tests
// run it with GOTOOLCHAIN=local: with a module cache of their own, a
// switch of release would download one into it.
func goTool(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "bin", "go")
}

// run runs the go command in dir with env added to the test's, and
// returns its standard output; it fails the test if the command fails.
func run(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(goTool(t), args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append([]string{"GOTOOLCHAIN=local"}, env...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("in %s, go %s: %v\n%s%s", dir, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// go.work names every module of the repository, and nothing else.
func TestGoWorkUsesEveryModule(t *testing.T) {
	r := root(t)
	var found []string
	err := filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != r {
			n := d.Name()
			if n == "node_modules" || n == "testdata" || n == "cdk.out" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") ||
				(filepath.Dir(p) == r && (n == "bin" || n == "build")) {
				return filepath.SkipDir
			}
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			found = append(found, filepath.Dir(p))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var used []string
	for _, m := range workspace(t) {
		used = append(used, m.Dir)
	}
	slices.Sort(found)
	slices.Sort(used)
	if !slices.Equal(found, used) {
		t.Fatalf("go.work uses\n  %s\nthe repository's modules are\n  %s", strings.Join(used, "\n  "), strings.Join(found, "\n  "))
	}
}

// releaseRequired is the one version at which this repository's own
// modules require each other (the library, the construct): the release
// they will be tagged with together.
func releaseRequired(t *testing.T) string {
	t.Helper()
	var version string
	for _, m := range workspace(t) {
		if !modules.Ours(m.Path) {
			continue // the examples are a team's modules: see TestAQuickstartCopyResolvesFromAModuleProxy
		}
		for _, r := range m.File.Replace {
			if modules.Ours(r.Old.Path) {
				t.Errorf("%s replaces %s: the workspace (go.work) resolves it here, and a replace would hide a requirement that does not resolve elsewhere", m.Path, r.Old.Path)
			}
		}
		for _, r := range m.File.Require {
			if !modules.Ours(r.Mod.Path) {
				continue
			}
			v := r.Mod.Version
			if semver.Prerelease(v) != "" || semver.Build(v) != "" || semver.Compare(v, "v0.1.0") < 0 {
				t.Errorf("%s requires %s at %s, want the release it will be tagged with (v0.1.0 or later, no pre-release): a team's go command must find that version", m.Path, r.Mod.Path, v)
			}
			if version != "" && v != version {
				t.Errorf("%s requires %s at %s, another module at %s: the repository's modules are released together, at one version", m.Path, r.Mod.Path, v, version)
			}
			version = v
		}
	}
	if version == "" {
		t.Fatal("no module of the repository requires another: want infra and bench to require the library")
	}
	return version
}

// The construct and the bench require the library at the version the
// release will have, with no replace: infra@vX resolves for a team.
func TestOurModulesRequireTheReleaseWithoutReplace(t *testing.T) {
	releaseRequired(t)
}

// Built in the workspace, the library links the versions its own go.mod
// selects: the workspace joins every module's requirements, and a newer
// version another module needs (the construct's jsii runtime, say) would
// otherwise reach the bootstraps and the tests without reaching the
// library's go.mod, which is what a team gets.
func TestWorkspaceBuildsTheLibraryAsItsGoModSays(t *testing.T) {
	r := root(t)
	list := func(gowork string) []string {
		out := run(t, r, []string{"GOWORK=" + gowork, "GOFLAGS=-mod=readonly"}, "list", "-deps", "-test", "-f", "{{with .Module}}{{.Path}} {{.Version}}{{end}}", "./...")
		lines := strings.Fields(strings.ReplaceAll(out, " ", "@"))
		slices.Sort(lines)
		return slices.Compact(lines)
	}
	inWorkspace, alone := list(filepath.Join(r, "go.work")), list("off")
	for _, m := range inWorkspace {
		if !slices.Contains(alone, m) && !strings.HasPrefix(m, modules.Library+"@") {
			t.Errorf("in the workspace the library links %s; its go.mod alone selects otherwise (GOWORK=off go get %s in the root)", m, m)
		}
	}
	if len(inWorkspace) < 10 {
		t.Fatalf("the library links %d modules in the workspace: %v", len(inWorkspace), inWorkspace)
	}
}

// Each module's go.mod and go.sum are what go mod tidy makes of them
// (go mod tidy ignores go.work: the library and the construct, required
// at a version not yet released, are given to it as the tree's own
// directories, with no go.sum lines for them). -update writes the result.
func TestEveryModuleIsTidy(t *testing.T) {
	mods := workspace(t)
	dirs := map[string]string{}
	for _, m := range mods {
		dirs[m.Path] = m.Dir
	}
	for _, m := range mods {
		t.Run(strings.TrimPrefix(m.Path, modules.Library+"/"), func(t *testing.T) {
			tmp := t.TempDir()
			alt := filepath.Join(tmp, "go.mod")
			for _, name := range []string{"go.mod", "go.sum"} {
				b, err := os.ReadFile(filepath.Join(m.Dir, name))
				if err != nil && !(name == "go.sum" && os.IsNotExist(err)) {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			replaced := map[string]bool{}
			for _, r := range m.File.Replace {
				replaced[r.Old.Path] = true
			}
			var added []string
			for _, r := range m.File.Require {
				if modules.Ours(r.Mod.Path) && !replaced[r.Mod.Path] {
					added = append(added, r.Mod.Path)
					run(t, m.Dir, nil, "mod", "edit", "-modfile="+alt, "-replace="+r.Mod.Path+"="+dirs[r.Mod.Path])
				}
			}
			run(t, m.Dir, []string{"GOWORK=off", "GOFLAGS="}, "mod", "tidy", "-modfile="+alt)
			for _, p := range added {
				run(t, m.Dir, nil, "mod", "edit", "-modfile="+alt, "-dropreplace="+p)
			}
			for _, name := range []string{"go.mod", "go.sum"} {
				want, _ := os.ReadFile(filepath.Join(tmp, name))
				got, _ := os.ReadFile(filepath.Join(m.Dir, name))
				if bytes.Equal(got, want) {
					continue
				}
				if *update {
					if err := os.WriteFile(filepath.Join(m.Dir, name), want, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				t.Errorf("%s is not what go mod tidy makes of it (make tidy writes that):\n%s", filepath.Join(m.Dir, name), lineDiff(string(got), string(want)))
			}
		})
	}
}

// lineDiff lists the lines only in got (-) and only in want (+).
func lineDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	var out []string
	for _, l := range g {
		if !slices.Contains(w, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range w {
		if !slices.Contains(g, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

// parseMod parses dir/go.mod.
func parseMod(t *testing.T, dir string) *modfile.File {
	t.Helper()
	name := filepath.Join(dir, "go.mod")
	f, err := modfile.Parse(name, mustRead(t, name), nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// A release tags every module of the repository at one version, each
// under its directory, and none of the team's example modules: a team's
// go command finds infra@v0.1.0 at the tag infra/v0.1.0.
func TestReleaseTagsEveryModuleOfOurs(t *testing.T) {
	tags, err := modules.Tags(root(t), "v0.1.0", workspace(t))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"v0.1.0", "infra/v0.1.0", "bench/v0.1.0", "internal/devtools/v0.1.0"}
	slices.Sort(tags)
	slices.Sort(want)
	if !slices.Equal(tags, want) {
		t.Fatalf("tags %v, want %v", tags, want)
	}
	for _, bad := range []string{"0.1.0", "v0.1", "v0.1.0-rc.1", ""} {
		if _, err := modules.Tags(root(t), bad, workspace(t)); err == nil {
			t.Errorf("tags for %q, want an error", bad)
		}
	}
}
