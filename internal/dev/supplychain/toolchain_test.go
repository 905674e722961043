package supplychain

import (
	"go/version"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// makefilePin is the Go release the Makefile pins (GO_RELEASE, exported
// as GOTOOLCHAIN).
func makefilePin(t *testing.T, root string) string {
	t.Helper()
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^GO_RELEASE\s*:=\s*(\S+)\s*$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile has no `GO_RELEASE := goX.Y.Z` line")
	}
	if !regexp.MustCompile(`(?m)^export GOTOOLCHAIN\s*:=\s*\$\(GO_RELEASE\)\s*$`).Match(mk) {
		t.Fatal("the Makefile does not run go with its pin: want `export GOTOOLCHAIN := $(GO_RELEASE)`")
	}
	pin := string(m[1])
	if !version.IsValid(pin) || version.Lang(pin) == pin {
		t.Fatalf("the Makefile pins GO_RELEASE=%s: want a release with its patch number, such as go1.26.10", pin)
	}
	return pin
}

// goMods lists the go.mod files of the repository (not those of
// installed tools or build outputs).
func goMods(t *testing.T, root string) []string {
	t.Helper()
	var mods []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root {
			n := d.Name()
			if n == "node_modules" || n == "build" || n == "bin" || n == "cdk.out" || n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_") {
				return filepath.SkipDir
			}
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			mods = append(mods, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return mods
}

// Every module builds with the release the Makefile pins: its toolchain
// line names that release (so go run outside make, with GOTOOLCHAIN=auto,
// fetches the same one), and its go line asks for no newer language or
// release than it.
func TestGoModsAgreeWithTheMakefile(t *testing.T) {
	t.Parallel()
	root := repoRoot(t)
	pin := makefilePin(t, root)
	mods := goMods(t, root)
	if len(mods) < 5 {
		t.Fatalf("found %d go.mod files, want the 5 modules of this repository: %v", len(mods), mods)
	}
	goLine := regexp.MustCompile(`(?m)^go\s+(\S+)\s*$`)
	toolchainLine := regexp.MustCompile(`(?m)^toolchain\s+(\S+)\s*$`)
	for _, path := range mods {
		rel, _ := filepath.Rel(root, path)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if m := toolchainLine.FindSubmatch(b); m == nil {
			t.Errorf("%s has no toolchain line: want `toolchain %s` (the Makefile's GO_RELEASE)", rel, pin)
		} else if got := string(m[1]); got != pin {
			t.Errorf("%s: toolchain %s, but the Makefile pins GO_RELEASE=%s: make them agree", rel, got, pin)
		}
		m := goLine.FindSubmatch(b)
		if m == nil {
			t.Errorf("%s has no go line", rel)
			continue
		}
		goVersion := "go" + string(m[1])
		switch {
		case !version.IsValid(goVersion):
			t.Errorf("%s: go %s is no Go version", rel, m[1])
		case version.Lang(goVersion) != version.Lang(pin):
			t.Errorf("%s: go %s is another language version than the Makefile's GO_RELEASE=%s", rel, m[1], pin)
		case version.Compare(goVersion, pin) > 0:
			t.Errorf("%s: go %s is newer than the Makefile's GO_RELEASE=%s", rel, m[1], pin)
		}
	}
}

// make's check of the Node.js on PATH (_tools/check-node.sh).
func TestCheckNodeWantsThePinnedMajor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, node, npm string // "" for a command that is missing
		ok              bool
		says            string
	}{
		{name: "pinned major", node: "v20.20.2", npm: "11.19.1", ok: true, says: "node v20.20.2, npm 11.19.1 (pinned: Node.js 20)"},
		{name: "another patch", node: "v20.9.0", npm: "10.1.0", ok: true, says: "node v20.9.0"},
		{name: "newer major", node: "v22.23.5", npm: "10.9.0", says: "node v22.23.5 is on PATH"},
		{name: "older major", node: "v18.20.4", npm: "9.2.0", says: "pinned to Node.js 20"},
		{name: "major 2", node: "v2.0.0", npm: "9.2.0", says: "pinned to Node.js 20"},
		{name: "no node", npm: "9.2.0", says: "node is not on PATH"},
		{name: "no npm", node: "v20.20.2", says: "npm is not on PATH"},
		{name: "npm 6", node: "v20.20.2", npm: "6.14.18", says: "npm 6.14.18 cannot read the lockfiles"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakes(t)
			if tc.node != "" {
				f.add("node", "echo "+tc.node)
			}
			if tc.npm != "" {
				f.add("npm", "echo "+tc.npm)
			}
			out, code := runScript(t, "check-node.sh", f.dir, nil, "20")
			if (code == 0) != tc.ok {
				t.Errorf("exit code %d, want success %v; output:\n%s", code, tc.ok, out)
			}
			if !strings.Contains(out, tc.says) {
				t.Errorf("output %q does not say %q", out, tc.says)
			}
		})
	}
}
