package openapi_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/devtools/openapi"
)

var update = flag.Bool("update", false, "rewrite pkg/jobs/httpapi/testdata/openapi.json from docs/reference/openapi.yaml")

const (
	specYAML = "../../../docs/reference/openapi.yaml"
	specJSON = "../../../pkg/jobs/httpapi/testdata/openapi.json"
)

// The JSON copy the library's contract tests read is docs/reference/openapi.yaml,
// exactly: a change to the YAML not carried to the copy fails here (make
// openapi-json carries it).
func TestHTTPAPISpecIsTheYAML(t *testing.T) {
	raw, err := os.ReadFile(specYAML)
	if err != nil {
		t.Fatal(err)
	}
	want, err := openapi.JSON(raw)
	if err != nil {
		t.Fatalf("docs/reference/openapi.yaml: %v", err)
	}
	if *update {
		if err := os.WriteFile(specJSON, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(specJSON)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not docs/reference/openapi.yaml as JSON: run make openapi-json (first difference at byte %d)", filepath.Clean(strings.TrimPrefix(specJSON, "../../../")), firstDiff(got, want))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestJSON(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"status codes are string keys", "responses:\n  200: {description: ok}\n  \"404\": {description: gone}\n",
			`{"responses":{"200":{"description":"ok"},"404":{"description":"gone"}}}`},
		{"scalars keep their types", "a: 1\nb: 1.5\nc: true\nd: null\ne: \"1\"\nf: ~\ng: 2026-01-02\nh: 1e3\n",
			`{"a":1,"b":1.5,"c":true,"d":null,"e":"1","f":null,"g":"2026-01-02","h":1000}`},
		{"lists and keys sorted", "z: [b, a]\na: {y: 1, x: 2}\n", `{"a":{"x":2,"y":1},"z":["b","a"]}`},
		{"an alias is its anchor's value", "a: &x {k: v}\nb: *x\n", `{"a":{"k":"v"},"b":{"k":"v"}}`},
		{"no HTML escaping", "a: \"<b>&</b>\"\n", `{"a":"<b>&</b>"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := openapi.JSON([]byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if compact := strings.Join(strings.Fields(string(got)), ""); compact != tt.want {
				t.Errorf("got %s, want %s", compact, tt.want)
			}
			if !bytes.HasSuffix(got, []byte("}\n")) {
				t.Errorf("got %q, want indented JSON with a final newline", got)
			}
		})
	}
}

// What JSON cannot say, or what could be read two ways, is refused.
func TestJSONRefuses(t *testing.T) {
	for name, doc := range map[string]string{
		"a key twice":         "a: 1\na: 2\n",
		"a merge key":         "base: &b {x: 1}\nc:\n  <<: *b\n",
		"two documents":       "a: 1\n---\nb: 2\n",
		"infinity":            "a: .inf\n",
		"not a number":        "a: .nan\n",
		"a tag of its own":    "a: !thing x\n",
		"a key that is a map": "? {a: 1}\n: b\n",
		"not YAML":            "a: [\n",
		"empty":               "",
	} {
		if got, err := openapi.JSON([]byte(doc)); err == nil {
			t.Errorf("%s: got %s, want an error", name, got)
		}
	}
}
