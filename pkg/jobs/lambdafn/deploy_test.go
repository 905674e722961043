package lambdafn_test

import (
	"strings"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/deploy"
	"github.com/lambdajobs/lambdajobs/internal/examplekinds"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/lambdafn"
)

// lambdafn reads exactly the variables the deployment's descriptor lists
// (the construct sets them and the docs' table is rendered from it), and
// builds exactly its functions: a variable or a function removed from the
// descriptor, or read here without being in it, fails this test.
func TestReadsWhatTheDescriptorLists(t *testing.T) {
	read := map[string]bool{}
	_, _ = lambdafn.ConfigFromEnv(func(name string) string {
		read[name] = true
		return ""
	})
	// Read outside ConfigFromEnv: by Serve, and by this repository's own
	// functions (examplekinds.Enabled).
	read["JOBS_PRINT_SCHEDULES"], read["JOBS_PRINT_LANES"], read[examplekinds.Switch], read["JOBS_EXAMPLE_ROUTE_OWNER"], read[examplekinds.ExportDirEnv], read[examplekinds.SpansDirEnv] = true, true, true, true, true, true
	for name := range read {
		if _, ok := deploy.Lookup(name); !ok && strings.HasPrefix(name, "JOBS_") && read[name] {
			t.Errorf("%s is read but not in the descriptor (internal/deploy)", name)
		}
	}
	for _, v := range deploy.Env {
		if !read[v.Name] {
			t.Errorf("%s is in the descriptor but nothing reads it", v.Name)
		}
	}
	for _, name := range deploy.FunctionNames() {
		if _, err := lambdafn.FunctionNamed(name); err != nil {
			t.Errorf("function %s of the descriptor: %v", name, err)
		}
	}
	if _, err := lambdafn.FunctionNamed("nope"); err == nil {
		t.Error("a function the descriptor does not have was built")
	}
}
