package codestyle

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// routePath finds an API path in a string literal's value: "/v1" ending
// there or followed by "/", "?" or a quote, at the start of the value or
// after a quote, a host (127.0.0.1:8080/v1/...) or a format verb
// (%s/v1/...). A path in prose (an error's "use GET /v1/jobs ...", after
// a space) is text for a person, not a request, and is not matched.
var routePath = regexp.MustCompile(`(^|["'\w%])/v1($|[/?"'])`)

// pathLiteralsAllowed are the files that may write an API path, and why.
// Everything else names a route by its id in the table
// (internal/deploy.Routes): the API client (internal/dev/apiclient) builds the
// request, httpapi dispatches it, the construct and the local gateway
// match it.
var pathLiteralsAllowed = map[string]string{
	"internal/deploy/routes.go":                "the route table itself: the one place a path is written",
	"internal/deploy/*_test.go":                "the table's own tests: what PathFor builds",
	"internal/dev/apiclient/*_test.go":         "what the client sends, asserted by path",
	"internal/dev/codestyle/*_test.go":         "this check's own examples",
	"pkg/jobs/events_test.go":                  "an event's result_url, asserted as callers read it",
	"pkg/jobs/events.go":                       "an event's result_url: deploy imports jobs, so jobs cannot read the table (TestEventsResultPathIsTheGetJobRoute ties them)",
	"pkg/jobs/lambdafn/awsenv_test.go":         "the container credentials endpoint's own /v1 path, not this API's",
	"pkg/jobs/lambdafn/tracing/otlp/*_test.go": "OTLP/HTTP's own /v1/traces path, not this API's",
	// Tests that assert HTTP behaviour on purpose: they send requests at
	// paths written out, so a path changed in the table without its
	// callers (API Gateway's clients) fails them.
	"pkg/jobs/httpapi/*_test.go":          "httpapi's answers, problems and routing, against docs/reference/openapi.yaml",
	"pkg/jobs/httpapi/testdata/*":         "API Gateway's own events, recorded",
	"internal/dev/localstack/*_test.go":   "the local gateway, host check and stack end to end over HTTP",
	"internal/dev/integration/*_test.go":  "the HTTP API over DynamoDB Local",
	"internal/dev/reliability/*_test.go":  "the reliability runs over the local stack's HTTP API",
	"internal/dev/dashboard/*_test.go":    "the fake API the dashboard's tests answer from, by path",
	"internal/devtools/browser/*_test.go": "the dashboard in chromium over a local stack, by path",
	"internal/dev/cli/*_test.go":          "what ljob sends, asserted by path",
	"examples/quickstart/e2e/*_test.go":   "a team's end-to-end run, as a team's own client would call the API",
	"infra/jobsinfra/*_test.go":           "the synthesized routes, grants and execute-api ARNs",
}

func allowed(rel string) bool {
	for pattern := range pathLiteralsAllowed {
		if ok, _ := filepath.Match(pattern, rel); ok {
			return true
		}
	}
	return false
}

// TestNoRoutePathLiteralsOutsideTheTable parses every .go file of the
// repository, its nested modules included (infra, bench, examples), and
// fails for a string literal that writes an API path (routePath) in a file
// pathLiteralsAllowed does not list: a path written twice can disagree.
func TestNoRoutePathLiteralsOutsideTheTable(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	fset := token.NewFileSet()
	var found []string
	files := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "node_modules" || strings.HasPrefix(name, "_") || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if allowed(rel) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		imports := map[*ast.BasicLit]bool{}
		for _, im := range f.Imports {
			imports[im.Path] = true
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING || imports[lit] {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				v = lit.Value
			}
			if routePath.MatchString(v) {
				found = append(found, fset.Position(lit.Pos()).String()+": "+lit.Value)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 300 {
		t.Fatalf("parsed %d files: the walk missed the repository", files)
	}
	slices.Sort(found)
	for _, f := range found {
		t.Errorf("an API path written outside the route table (name the route in internal/deploy; the API client builds it): %s", f)
	}
}

// The pattern finds the paths it is for, and leaves prose and import
// paths alone.
func TestRoutePathPattern(t *testing.T) {
	for _, s := range []string{"/v1/jobs", "/v1", "/v1/jobs?limit=1", `{"rawPath":"/v1/jobs/x"}`, "%s/v1/jobs", "http://127.0.0.1:8080/v1/jobs/%s", "x/v1/y"} {
		if !routePath.MatchString(s) {
			t.Errorf("%q: not found", s)
		}
	}
	for _, s := range []string{"use GET /v1/jobs or POST /v1/jobs", "/v10/x", "/v1beta"} {
		if routePath.MatchString(s) {
			t.Errorf("%q: found", s)
		}
	}
}
