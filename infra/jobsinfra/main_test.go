package jobsinfra

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/aws/jsii-runtime-go"
)

func TestMain(m *testing.M) {
	code := m.Run()
	// Without it, every run leaks a jsii-runtime temp folder.
	jsii.Close()
	for _, dir := range []string{bootstrapsDir, oneBootstrapDir} {
		if dir != "" {
			os.RemoveAll(dir)
		}
	}
	os.Exit(code)
}

// cdkContext is the feature flags of the repository's CDK app (cdk.json),
// which NewApp does not read itself.
func cdkContext(t *testing.T) *map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "cdk.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return &c.Context
}

var (
	bootstrapsOnce sync.Once
	bootstrapsDir  string
)

// fakeBootstraps is a folder of <function>/bootstrap stand-ins: the
// construct only checks they exist and packs them.
func fakeBootstraps(t *testing.T) string {
	t.Helper()
	bootstrapsOnce.Do(func() {
		dir, err := os.MkdirTemp("", "jobsinfra-bootstraps-")
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range FunctionNames {
			if err := os.MkdirAll(filepath.Join(dir, f), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f, "bootstrap"), []byte("test "+f), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		bootstrapsDir = dir
	})
	return bootstrapsDir
}
