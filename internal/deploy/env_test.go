package deploy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/schedulerapi"
)

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

// Each setting reads its value, else its default; a bad value is an error
// that names the variable and what it wants, without repeating a key.
func TestSettingsReadValuesAndDefaults(t *testing.T) {
	t.Run("default", func(t *testing.T) {
		got, err := EnvScheduleMaxEventAge.Get(env(nil))
		if err != nil || got != time.Hour {
			t.Fatalf("got %v, %v; want 1h", got, err)
		}
		if n, err := EnvWorkerConcurrency.Get(env(nil)); err != nil || n != 8 {
			t.Fatalf("concurrency: got %d, %v; want 8", n, err)
		}
		if all, err := EnvEvents.Get(env(nil)); err != nil || all {
			t.Fatalf("events: got %v, %v; want kinds (false)", all, err)
		}
	})
	t.Run("set", func(t *testing.T) {
		got, err := EnvDispatchGrace.Get(env(map[string]string{"JOBS_DISPATCH_GRACE": "90s"}))
		if err != nil || got != 90*time.Second {
			t.Fatalf("got %v, %v; want 90s", got, err)
		}
		graces, err := EnvLaneDispatchGraces.Get(env(map[string]string{"JOBS_LANE_DISPATCH_GRACES": `{"long":"17m"}`}))
		if err != nil || graces["long"] != 17*time.Minute {
			t.Fatalf("got %v, %v", graces, err)
		}
		ops, err := EnvOperators.Get(env(map[string]string{"JOBS_OPERATORS": " a, ,b"}))
		if err != nil || strings.Join(ops, "|") != "a|b" {
			t.Fatalf("got %q, %v", ops, err)
		}
	})
	for _, c := range []struct {
		name, value, want string
	}{
		{"JOBS_DISPATCH_GRACE", "-1s", `JOBS_DISPATCH_GRACE="-1s": want a positive duration such as 90s`},
		{"JOBS_WORKER_CONCURRENCY", "0", `JOBS_WORKER_CONCURRENCY="0": want 1..1000`},
		{"JOBS_TRACING", "yes", `JOBS_TRACING="yes": want on or off`},
		{"JOBS_EVENTS", "some", `JOBS_EVENTS="some": want all or kinds`},
		{"JOBS_LANE", "Bad", `JOBS_LANE="Bad": want a lower-case letter`},
		{"JOBS_PAGE_TOKEN_KEY", "short-secret", "JOBS_PAGE_TOKEN_KEY: want at least 32 characters"},
		{"JOBS_LANE_QUEUE_URLS", "[", "JOBS_LANE_QUEUE_URLS: want a JSON object"},
		{"JOBS_SOURCES", `[{"nope":1}]`, "JOBS_SOURCES: want a JSON list"},
	} {
		v, _ := Lookup(c.name)
		_, err := v.parse(c.value)
		if err == nil {
			t.Errorf("%s=%q: no error", c.name, c.value)
			continue
		}
		err = getError(c.name, c.value)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s=%q: got %v, want %q...", c.name, c.value, err, c.want)
		}
		if v.quiet && strings.Contains(err.Error(), c.value) {
			t.Errorf("%s: the error repeats the value: %v", c.name, err)
		}
	}
	if _, err := EnvTable.Get(env(nil)); err == nil || err.Error() != "JOBS_TABLE is required" {
		t.Errorf("JOBS_TABLE unset: got %v", err)
	}
}

// getError reads name=value through its typed Setting.
func getError(name, value string) error {
	e := env(map[string]string{name: value})
	for _, get := range []func() error{
		func() error { _, err := EnvDispatchGrace.Get(e); return err },
		func() error { _, err := EnvWorkerConcurrency.Get(e); return err },
		func() error { _, err := EnvTracing.Get(e); return err },
		func() error { _, err := EnvEvents.Get(e); return err },
		func() error { _, err := EnvLane.Get(e); return err },
		func() error { _, err := EnvPageTokenKey.Get(e); return err },
		func() error { _, err := EnvLaneQueueURLs.Get(e); return err },
		func() error { _, err := EnvSources.Get(e); return err },
	} {
		if err := get(); err != nil {
			return err
		}
	}
	return nil
}

// Every variable has a parser, every default parses, and the defaults
// are the library's own (what jobs and schedulerapi take when unset).
func TestEveryVariableParsesItsDefault(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range Env {
		if seen[v.Name] {
			t.Errorf("%s twice", v.Name)
		}
		seen[v.Name] = true
		if v.parse == nil || v.Type == "" {
			t.Errorf("%s: no parser or type", v.Name)
			continue
		}
		if v.Default != "" {
			if _, err := v.parse(v.Default); err != nil {
				t.Errorf("%s: default %q: %v", v.Name, v.Default, err)
			}
		}
	}
	d := jobs.DefaultDeadlines
	for _, c := range []struct {
		got, want time.Duration
	}{
		{EnvHandlerReserve.DefaultValue(), d.Reserve}, {EnvFinalWriteTimeout.DefaultValue(), d.FinalWrite},
		{EnvCallTimeout.DefaultValue(), d.Call}, {EnvMinRunTime.DefaultValue(), d.MinRun},
		{EnvDispatchGrace.DefaultValue(), jobs.DefaultDispatchGrace}, {EnvRetention.DefaultValue(), jobs.DefaultRetention},
		{EnvScheduleMaxEventAge.DefaultValue(), schedulerapi.DefaultMaxEventAge},
	} {
		if c.got != c.want {
			t.Errorf("got %v, want %v", c.got, c.want)
		}
	}
	if got := EnvDispatchGrace.Format(3 * time.Minute); got != "3m0s" {
		t.Errorf("Format(3m) = %q, want 3m0s", got)
	}
	if got := EnvEvents.Format(true) + EnvTracing.Format(false); got != "alloff" {
		t.Errorf("Format of the choices: %q, want all and off", got)
	}
}

// A function is told only the variables it reads, and its own name.
func TestValuesForGiveEachFunctionWhatItReads(t *testing.T) {
	vs := Values[string]{EnvTable.Var: "t", EnvQueueURL.Var: "q", EnvScheduleGroup.Var: "g", EnvWorkerConcurrency.Var: "8"}
	got := vs.For(GetJob, GetJob)
	if len(got) != 2 || got["JOBS_TABLE"] != "t" || got["JOBS_FUNCTION"] != GetJob {
		t.Errorf("getjob is told %v, want the table and its name", got)
	}
	if got := vs.For(Worker, Worker); got["JOBS_WORKER_CONCURRENCY"] != "8" || got["JOBS_QUEUE_URL"] != "q" || got["JOBS_SCHEDULE_GROUP"] != "" {
		t.Errorf("the worker is told %v", got)
	}
}

// No Go file outside this package writes the name of a variable of the
// functions' environment in a string: each reads it from the descriptor
// (EnvTable.Name, a Setting's Get, a Values map keyed by the variables),
// so a variable, its name or its default cannot be written twice. Tests
// are the outside's view (they set variables by name, as a team does);
// JOBS_LOCAL_ and JOBS_TEST_ variables are the local tools' own settings,
// not the functions'.
func TestNoVariableNameOutsideTheDescriptor(t *testing.T) {
	root := filepath.Join("..", "..")
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`\bJOBS_[A-Z0-9_]+`)
	files := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			abs, _ := filepath.Abs(path)
			if n := d.Name(); path != root && (abs == here || n == "node_modules" || n == "testdata" || n == "build" || n == "cdk.out" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				s = lit.Value
			}
			for _, m := range name.FindAllString(s, -1) {
				if !strings.HasPrefix(m, "JOBS_LOCAL_") && !strings.HasPrefix(m, "JOBS_TEST_") {
					t.Errorf("%s: %s is written here; use internal/deploy's variable", fset.Position(lit.Pos()), m)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("parsed %d Go files: the walk missed the repository", files)
	}
}
