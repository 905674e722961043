package supplychain

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/dev/localaws"
)

// repoRoot is the folder holding the Makefile and _tools.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := localaws.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// fakes is a folder of stand-in commands put first on a script's PATH.
type fakes struct {
	t   *testing.T
	dir string
}

func newFakes(t *testing.T) *fakes {
	t.Helper()
	return &fakes{t: t, dir: t.TempDir()}
}

// add writes a bash script named name with body.
func (f *fakes) add(name, body string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(f.dir, name), []byte("#!/bin/bash\n"+body+"\n"), 0o755); err != nil {
		f.t.Fatal(err)
	}
}

// runScript runs the script _tools/name with bash, PATH set to path and the
// extra environment env, and returns its combined output, in the order
// written, and its exit code.
func runScript(t *testing.T, name, path string, env []string, args ...string) (string, int) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bash, append([]string{filepath.Join(repoRoot(t), "_tools", name)}, args...)...)
	cmd.Env = append([]string{"PATH=" + path, "HOME=" + t.TempDir(), "LC_ALL=C"}, env...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	default:
		t.Fatalf("%s: %v", name, err)
		return "", 0
	}
}
