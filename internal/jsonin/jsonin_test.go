package jsonin_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/jsonin"
)

func nested(depth int) string {
	return strings.Repeat("[", depth) + strings.Repeat("]", depth)
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		max       int
		want      string // a part of the refusal's reason; empty: accepted
	}{
		{name: "an object", raw: `{"a":1,"b":[true,null,"x"],"c":{"d":1.5e3}}`},
		{name: "a string", raw: `"x"`},
		{name: "a number with spaces around", raw: " 12 \n"},
		{name: "the same key in sibling objects", raw: `[{"a":1},{"a":2}]`},
		{name: "keys that differ beyond case", raw: `{"ab":1,"a_b":2}`},
		{name: "MaxDepth deep", raw: nested(jsonin.MaxDepth)},
		{name: "exactly the limit", raw: `"abc"`, max: 5},
		{name: "over the limit", raw: `"abcd"`, max: 5, want: "6 bytes is more than the 5 allowed"},
		{name: "not UTF-8", raw: "\"\xff\"", want: "not valid UTF-8"},
		{name: "malformed", raw: `{"a":}`, want: "malformed JSON: invalid character '}'"},
		{name: "unterminated", raw: `{"a":1`, want: "malformed JSON: unexpected end of JSON"},
		{name: "an unclosed array", raw: `[1,2`, want: "unexpected end of JSON"},
		{name: "two values", raw: `{} {}`, want: "more than one JSON value"},
		{name: "a value after a number", raw: `1 2`, want: "more than one JSON value"},
		{name: "a duplicate key", raw: `{"a":1,"a":2}`, want: `duplicate key "a"`},
		{name: "keys equal ignoring case", raw: `{"kind":1,"KIND":2}`, want: `duplicate key "KIND"`},
		{name: "a duplicate in a nested object", raw: `{"a":{"x":1,"X":2}}`, want: `duplicate key "X"`},
		{name: "a long duplicate key is cut", raw: `{"` + strings.Repeat("k", 100) + `":1,"` + strings.Repeat("K", 100) + `":2}`, want: `duplicate key "` + strings.Repeat("K", 64) + `…"`},
		{name: "deeper than MaxDepth", raw: nested(jsonin.MaxDepth + 1), want: fmt.Sprintf("nested deeper than %d levels", jsonin.MaxDepth)},
		{name: "nothing", raw: "", want: "empty"},
		{name: "only spaces", raw: "  \n\t", want: "empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			max := tc.max
			if max == 0 {
				max = 1 << 20
			}
			err := jsonin.Check([]byte(tc.raw), max)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Check(%q) = %v, want nil", tc.raw, err)
				}
				return
			}
			var je *jsonin.Error
			if !errors.As(err, &je) {
				t.Fatalf("Check(%q) = %v (%T), want a *jsonin.Error", tc.raw, err, err)
			}
			if !strings.Contains(je.Reason, tc.want) || err.Error() != "invalid JSON: "+je.Reason {
				t.Fatalf("Check(%q) = %q, want a reason with %q", tc.raw, err, tc.want)
			}
		})
	}
}

func TestReason(t *testing.T) {
	type payload struct {
		Count int      `json:"count"`
		Tags  []string `json:"tags"`
	}
	decode := func(raw string, strict bool) error {
		dec := json.NewDecoder(strings.NewReader(raw))
		if strict {
			dec.DisallowUnknownFields()
		}
		var p payload
		return dec.Decode(&p)
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{name: "a syntax error", err: decode(`{"count":x}`, false), want: "invalid character 'x' looking for beginning of value at offset 10"},
		{name: "a field of another type", err: decode(`{"count":"many"}`, false), want: `field "count": expected a number in range, got string`},
		{name: "a number out of range", err: json.Unmarshal([]byte(`300`), new(int8)), want: "expected a number in range, got number 300"},
		{name: "an array for an object", err: decode(`[1]`, false), want: "expected an object, got array"},
		{name: "an object for an array", err: decode(`{"tags":{}}`, false), want: `field "tags": expected an array, got object`},
		{name: "an unknown field", err: decode(`{"count":1,"zz":2}`, true), want: `unknown field "zz"`},
		{name: "a cut body", err: io.ErrUnexpectedEOF, want: "unexpected end of JSON"},
		{name: "no body", err: io.EOF, want: "unexpected end of JSON"},
		{name: "anything else", err: errors.New("json: something new at main.payload"), want: "does not decode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil {
				t.Fatal("the input decoded: no error to word")
			}
			if got := jsonin.Reason(tc.err); got != tc.want {
				t.Fatalf("Reason(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exact", 5, "exact"},
		{"longer", 4, "long…"},
		{"héllo", 2, "h…"}, // é is two bytes: never cut inside a rune
		{"héllo", 3, "hé…"},
		{"日本", 2, "…"},
		{"x", 0, "…"},
		{"xy", 0, "…"},
	} {
		if got := jsonin.Truncate(tc.s, tc.n); got != tc.want {
			t.Errorf("Truncate(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
		}
	}
}

// Whatever the bytes, Check answers without panicking; what it accepts is
// one valid JSON value encoding/json decodes, and what it refuses it refuses
// with a *jsonin.Error whose text stays short: it quotes no more of the
// input than a key cut to 64 bytes (escaped by %q: at most 4 bytes each).
func FuzzCheck(f *testing.F) {
	for _, seed := range []string{`{"a":1}`, `[1,"x",null]`, `{"a":1,"A":2}`, `{} {}`, nested(40), "\"\xff\"", `{"a":{"b":[{"c":true}]}}`, ``, `"\u00e9"`, strings.Repeat("7", 310), `{"n":1e400}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		err := jsonin.Check(raw, 4096)
		if err == nil {
			if !json.Valid(raw) {
				t.Fatalf("Check accepted %q, which is not valid JSON", raw)
			}
			// Numbers as json.Number: a number out of float64's range is
			// valid JSON that Check passes on, for the payload's decoder
			// to refuse naming its field (TestDecodePayload, huge_number).
			var v any
			dec := json.NewDecoder(strings.NewReader(string(raw)))
			dec.UseNumber()
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("Check accepted %q, which does not decode: %v", raw, err)
			}
			if _, err := dec.Token(); err != io.EOF {
				t.Fatalf("Check accepted %q, which has more after its value", raw)
			}
			return
		}
		var je *jsonin.Error
		if !errors.As(err, &je) {
			t.Fatalf("Check(%q) = %v (%T), want a *jsonin.Error", raw, err, err)
		}
		if len(err.Error()) > 320 {
			t.Fatalf("Check(%q)'s error is %d bytes long: %q", raw, len(err.Error()), err)
		}
	})
}
