package localstack

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
)

// The runner for teams' repositories installs the same Runtime Interface
// Emulator as make: one pin.
func TestRIEPinMatchesTheMakefile(t *testing.T) {
	root, err := localaws.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^RIE_VERSION\s*:=\s*(\S+)`).FindSubmatch(mk)
	if m == nil || string(m[1]) != RIEVersion {
		t.Fatalf("Makefile RIE_VERSION %q, localstack.RIEVersion %q", m, RIEVersion)
	}
}
