package localstack

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Functions are the system's Lambda functions, each a folder under
// functions/ of the repository.
var Functions = []string{"enqueue", "getjob", "cancel", "worker", "sweeper", "schedules"}

// BuildBootstraps builds each function's bootstrap for Linux on this
// machine's architecture into dir/<function>/bootstrap, with the flags
// `make build` uses for Lambda, so tests run the same code that deploys.
func BuildBootstraps(root, dir string) error {
	for _, fn := range Functions {
		cmd := exec.Command("go", "build", "-trimpath", "-tags", "lambda.norpc", "-o", filepath.Join(dir, fn, "bootstrap"), "./functions/"+fn)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %v\n%s", fn, err, out)
		}
	}
	return nil
}
