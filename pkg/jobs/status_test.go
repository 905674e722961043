package jobs_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

// Every place the docs list the runner's reserved failure codes lists
// exactly the codes the runner reserves: a code added to (or dropped
// from) the runner and not to the docs fails here.
func TestReservedCodesAreListedWhereTheDocsListThem(t *testing.T) {
	var want []string
	for code := range jobs.ReservedCodes() {
		want = append(want, code)
	}
	slices.Sort(want)
	code := regexp.MustCompile("`?([a-z][a-z0-9_]*)`?")
	for _, c := range []struct {
		file string
		list *regexp.Regexp // the list, as its one submatch
	}{
		{"../../docs/reference/HTTP.md", regexp.MustCompile("(?s)Reserved codes: (.*?)\\.\n")},
		{"../../docs/reference/STATE_MACHINE.md", regexp.MustCompile("(?s)Reserved failure codes: (.*?)\\.\n")},
		{"../../docs/reference/openapi.yaml", regexp.MustCompile(`or reserved \(([^)]*)\)`)},
	} {
		b, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		m := c.list.FindSubmatch(b)
		if m == nil {
			t.Errorf("%s: no list of the reserved codes as this test reads it", c.file)
			continue
		}
		var got []string
		for _, part := range strings.Split(strings.ReplaceAll(string(m[1]), "\n", " "), ",") {
			part = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(part), "and "))
			if sm := code.FindStringSubmatch(part); sm != nil {
				got = append(got, sm[1])
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s lists the reserved codes %v, want %v", c.file, got, want)
		}
	}
}
