package deploy

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// docs/reference/CONFIGURATION.md shows the descriptor's tables as rendered here:
// the environment and the routes are written once, in this package. Run
// with UPDATE_DOCS=1 to rewrite them.
func TestConfigurationDocIsRenderedFromTheDescriptor(t *testing.T) {
	const path = "../../docs/reference/CONFIGURATION.md"
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	for _, sec := range []struct{ name, table string }{{"env", EnvMarkdown()}, {"service", ServiceList()}, {"routes", RouteTable()}} {
		begin, end := "<!-- deploy:"+sec.name+" -->\n", "<!-- /deploy:"+sec.name+" -->"
		i, j := strings.Index(doc, begin), strings.Index(doc, end)
		if i < 0 || j < i {
			t.Fatalf("%s: no %s ... %s section", path, strings.TrimSpace(begin), end)
		}
		if got := doc[i+len(begin) : j]; got != sec.table {
			if os.Getenv("UPDATE_DOCS") == "1" {
				doc = doc[:i+len(begin)] + sec.table + doc[j:]
				continue
			}
			t.Errorf("%s: the %s table differs from the descriptor's; run UPDATE_DOCS=1 go test ./internal/deploy", path, sec.name)
		}
	}
	if os.Getenv("UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Each route is served by a function of the deployment behind the API, and
// no request could match two routes.
func TestRoutesAreUnambiguous(t *testing.T) {
	api := map[string]bool{}
	for _, f := range Functions {
		api[f.Name] = f.API
	}
	ids := map[string]bool{}
	for _, r := range Routes {
		if !api[r.Function] {
			t.Errorf("%s: function %q is not behind the API", r.Key(), r.Function)
		}
		if ids[r.ID] {
			t.Errorf("route id %s twice", r.ID)
		}
		ids[r.ID] = true
		// A concrete request for r: each {param} filled.
		path := r.pathWith("x")
		var matches []string
		for _, other := range Routes {
			if _, ok := other.Match(r.Method, path); ok {
				matches = append(matches, other.Key())
			}
		}
		if !slices.Equal(matches, []string{r.Key()}) {
			t.Errorf("%s %s matches %v", r.Method, path, matches)
		}
	}
}

// Every variable lambdafn.NewService reads (what GrantEnqueue passes on)
// is a variable of the descriptor that the enqueue function reads.
func TestServiceVarsAreTheEnqueueFunctions(t *testing.T) {
	for _, v := range ServiceVars {
		switch {
		case !slices.Contains(Env, v):
			t.Errorf("ServiceVars lists %s, which Env does not", v.Name)
		case !v.ReadBy(Enqueue):
			t.Errorf("ServiceVars lists %s, which the enqueue function does not read", v.Name)
		}
	}
}

// The Makefile's list of functions (functions.mk, which it includes) is
// rendered from the descriptor. Run with UPDATE_DOCS=1 to rewrite it.
func TestMakefileListsTheDescriptorsFunctions(t *testing.T) {
	const path = "functions.mk"
	raw, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if got, want := string(raw), FunctionsMakefile(); got != want {
		if os.Getenv("UPDATE_DOCS") == "1" {
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("%s is %q, want %q; run UPDATE_DOCS=1 go test ./internal/deploy", path, got, want)
	}
}

// Every route says who may call it, with an Auth httpapi knows; only the
// callback route, whose token is its authority, admits anyone.
func TestEveryRouteHasAKnownAuth(t *testing.T) {
	for _, r := range Routes {
		switch {
		case r.Auth == AuthNone && r.ID != RouteCallback:
			t.Errorf("%s (%s): auth none, which only the callback route has", r.ID, r.Key())
		case r.Auth != AuthCaller && r.Auth != AuthOperator && r.Auth != AuthNone:
			t.Errorf("%s (%s): auth %q, want caller, operator or none", r.ID, r.Key(), r.Auth)
		}
	}
}

// PathFor fills each {param} escaped as one segment, and refuses a
// missing, empty or unknown parameter.
func TestPathForFillsTheParameters(t *testing.T) {
	for _, tc := range []struct {
		id     string
		params map[string]string
		want   string
	}{
		{RouteListJobs, nil, "/v1/jobs"},
		{RouteGetJob, map[string]string{"id": "j1"}, "/v1/jobs/j1"},
		{RouteGetSchedule, map[string]string{"name": "a/b c?d"}, "/v1/schedules/a%2Fb%20c%3Fd"},
		{RouteAdminJobAction, map[string]string{"id": "j1", "action": "retry"}, "/v1/admin/jobs/j1/retry"},
	} {
		got, err := PathOf(tc.id, tc.params)
		if err != nil || got != tc.want {
			t.Errorf("PathOf(%s, %v) = %q, %v; want %q", tc.id, tc.params, got, err, tc.want)
		}
		// What the client builds, the table matches with the same values.
		r, _ := RouteByID(tc.id)
		if tc.id != RouteGetSchedule {
			if params, ok := r.Match(r.Method, got); !ok || len(params) != len(tc.params) {
				t.Errorf("%s does not match its own path %q: %v", tc.id, got, params)
			}
		}
	}
	for _, tc := range []struct {
		id     string
		params map[string]string
	}{
		{RouteGetJob, nil},
		{RouteGetJob, map[string]string{"id": ""}},
		{RouteGetJob, map[string]string{"id": "j1", "name": "x"}},
		{RouteListJobs, map[string]string{"id": "j1"}},
		{"NoSuchRoute", nil},
	} {
		if got, err := PathOf(tc.id, tc.params); err == nil {
			t.Errorf("PathOf(%s, %v) = %q, want an error", tc.id, tc.params, got)
		}
	}
}
