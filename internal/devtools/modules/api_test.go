package modules_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// make apidiff compares every package a team codes against with the
// baseline: each package under the library's pkg/ and each of the
// construct's module, but for main and internal packages. The Makefile's
// API_PACKAGES lists them as <module directory>:<package directory>.
func TestAPIDiffCoversEveryPublicPackage(t *testing.T) {
	r := root(t)
	mk, err := os.ReadFile(filepath.Join(r, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^API_PACKAGES\s*:=\s*(.*)$`).FindSubmatch(mk)
	if m == nil {
		t.Fatal("the Makefile has no API_PACKAGES line")
	}
	listed := strings.Fields(string(m[1]))

	var public []string
	for _, mod := range []struct{ dir, pattern string }{{".", "./pkg/..."}, {"infra", "./..."}} {
		out := run(t, filepath.Join(r, mod.dir), nil, "list", "-f", "{{.Name}} {{.Dir}}", mod.pattern)
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			name, dir, _ := strings.Cut(line, " ")
			rel, err := filepath.Rel(filepath.Join(r, mod.dir), dir)
			if err != nil {
				t.Fatal(err)
			}
			rel = filepath.ToSlash(rel)
			if name == "main" || rel == "internal" || strings.HasPrefix(rel, "internal/") || strings.Contains(rel, "/internal/") || strings.HasSuffix(rel, "/internal") {
				continue
			}
			public = append(public, mod.dir+":"+rel)
		}
	}
	slices.Sort(public)
	sorted := slices.Clone(listed)
	slices.Sort(sorted)
	for _, p := range public {
		if !slices.Contains(sorted, p) {
			t.Errorf("%s is public but not in the Makefile's API_PACKAGES: make apidiff would let a break in it pass", p)
		}
	}
	for _, p := range sorted {
		if !slices.Contains(public, p) {
			t.Errorf("API_PACKAGES lists %s, which is not a public package", p)
		}
	}
	if len(public) < 10 {
		t.Fatalf("found %d public packages: %v", len(public), public)
	}
}
