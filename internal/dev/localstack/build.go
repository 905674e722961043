package localstack

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
)

// BuildBootstraps builds each function's bootstrap (deploy.Functions, each
// a folder under functions/ of the repository) for Linux on this
// machine's architecture into dir/<function>/bootstrap, with the flags
// `make build` uses for Lambda, so tests run the same code that deploys.
func BuildBootstraps(root, dir string) error {
	for _, fn := range deploy.FunctionNames() {
		cmd := exec.Command("go", "build", "-trimpath", "-tags", "lambda.norpc", "-o", filepath.Join(dir, fn, "bootstrap"), "./functions/"+fn)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %v\n%s", fn, err, out)
		}
	}
	return nil
}
