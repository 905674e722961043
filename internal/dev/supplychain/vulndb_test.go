package supplychain

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// make vulncheck states the database's age against `date` and fails past
// the bound (_tools/vulndb-age.sh).
func TestVulnDBAgeIsStatedAndBounded(t *testing.T) {
	t.Parallel()
	const db = "v0.0.0-20261105234957-e22db6528018" // 2026-11-05 23:49:57 UTC
	for _, tc := range []struct {
		name, version, bound string
		now                  time.Time
		ok                   bool
		says                 string
	}{
		{name: "fresh", version: db, bound: "45", now: time.Date(2026, 12, 3, 14, 0, 0, 0, time.UTC), ok: true,
			says: "golang.org/x/vulndb@" + db + " of 2026-11-05, 27 days old (bound: 45 days)"},
		{name: "at the bound", version: db, bound: "45", now: time.Date(2026, 12, 21, 23, 0, 0, 0, time.UTC), ok: true, says: "45 days old"},
		{name: "past the bound", version: db, bound: "45", now: time.Date(2026, 12, 22, 0, 0, 0, 0, time.UTC),
			says: "46 days old, more than the bound of 45 days: set VULN_VERSION"},
		{name: "a tighter bound", version: db, bound: "7", now: time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC), says: "more than the bound of 7 days"},
		{name: "pre-release pseudo-version", version: "v0.1.1-0.20261105234957-e22db6528018", bound: "45", now: time.Date(2026, 11, 6, 0, 0, 0, 0, time.UTC), ok: true, says: "of 2026-11-05, 0 days old"},
		{name: "a release, not a pseudo-version", version: "v1.2.3", bound: "45", now: time.Now(), says: "cannot read a date from golang.org/x/vulndb@v1.2.3"},
		{name: "no such day", version: "v0.0.0-20261399234957-e22db6528018", bound: "45", now: time.Now(), says: "2026-13-99 is no day"},
		{name: "a bound that is no number", version: db, bound: "45d", now: time.Now(), says: "must be a number of days"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakes(t)
			date, err := exec.LookPath("date")
			if err != nil {
				t.Fatal(err)
			}
			// date -d parses the database's day; plain date is now.
			f.add("date", fmt.Sprintf(`case " $* " in *" -d "*) exec %s "$@";; esac; echo %d`, date, tc.now.Unix()))
			out, code := runScript(t, "vulndb-age.sh", f.dir, nil, tc.version, tc.bound)
			if (code == 0) != tc.ok {
				t.Errorf("exit code %d, want success %v; output:\n%s", code, tc.ok, out)
			}
			if !strings.Contains(out, tc.says) {
				t.Errorf("output %q does not say %q", out, tc.says)
			}
		})
	}
}

// The Makefile checks the database it builds, with a bound it names.
func TestVulncheckChecksTheDatabaseAge(t *testing.T) {
	t.Parallel()
	mk, err := os.ReadFile(filepath.Join(repoRoot(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^VULNDB_MAX_AGE_DAYS\s*:=\s*[0-9]+\s*$`).Match(mk) {
		t.Error("the Makefile sets no VULNDB_MAX_AGE_DAYS := <days>")
	}
	recipe := regexp.MustCompile(`(?ms)^vulncheck:[^\n]*\n((?:\t[^\n]*\n)+)`).FindSubmatch(mk)
	if recipe == nil {
		t.Fatal("the Makefile has no vulncheck target")
	}
	check := strings.Index(string(recipe[1]), "vulndb-age.sh $(VULN_VERSION) $(VULNDB_MAX_AGE_DAYS)")
	scan := strings.Index(string(recipe[1]), "govulncheck")
	if check < 0 || scan < 0 || check > scan {
		t.Errorf("make vulncheck must run _tools/vulndb-age.sh $(VULN_VERSION) $(VULNDB_MAX_AGE_DAYS) before govulncheck; its recipe:\n%s", recipe[1])
	}
}
