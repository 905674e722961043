package jobs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/jsonin"
	"github.com/lambdajobs/lambdajobs/pkg/jobs"
)

type strictPayload struct {
	Text   string `json:"text"`
	Rounds int    `json:"rounds"`
	Tags   []any  `json:"tags,omitempty"`
}

func TestDecodePayload(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`[`, jobs.MaxJSONDepth+1) + strings.Repeat(`]`, jobs.MaxJSONDepth+1)
	okDeep := `{"text":"x","rounds":1,"tags":` + strings.Repeat(`[`, jobs.MaxJSONDepth-1) + strings.Repeat(`]`, jobs.MaxJSONDepth-1) + `}`
	tests := []struct {
		name, in string
		wantErr  string // substring of the reason; empty: accepted
	}{
		{"valid", `{"text":"hi","rounds":3}`, ""},
		{"valid with whitespace", " {\n\"text\" : \"hi\" }\n", ""},
		{"nested at the limit", okDeep, ""},
		{"unknown field", `{"text":"hi","secret_field":1}`, `unknown field "secret_field"`},
		{"duplicate key", `{"text":"a","text":"b"}`, "duplicate key"},
		{"duplicate key differing in case", `{"text":"a","TEXT":"b"}`, "duplicate key"},
		{"duplicate key nested", `{"tags":[{"a":1,"a":2}]}`, "duplicate key"},
		{"too deep", deep, "nested deeper"},
		{"null", `null`, "null"},
		{"empty", ``, "empty"},
		{"trailing value", `{"text":"a"} {"text":"b"}`, "more than one"},
		{"trailing garbage", `{"text":"a"}x`, "malformed"},
		{"malformed", `{"text":`, "malformed"},
		{"invalid UTF-8", "{\"text\":\"\xff\"}", "UTF-8"},
		{"wrong type", `{"rounds":"many"}`, `field "rounds": expected a number in range, got string`},
		{"huge number", `{"rounds":1e999}`, "rounds"},
		{"number overflows int", `{"rounds":99999999999999999999}`, "rounds"},
		{"array instead of object", `[1,2]`, "expected an object"},
		{"too large", `{"text":"` + strings.Repeat("a", jobs.MaxPayloadBytes) + `"}`, "allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := jobs.DecodePayload[strictPayload]([]byte(tt.in))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted %q, want an error containing %q", tt.in, tt.wantErr)
			}
			if !errors.Is(err, jobs.ErrInvalidPayload) {
				t.Fatalf("error %v does not match ErrInvalidPayload", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %q, want it to contain %q", err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "jobs_test.") || strings.Contains(err.Error(), "strictPayload") {
				t.Fatalf("error %q names a Go type", err)
			}
		})
	}
}

func FuzzDecodePayload(f *testing.F) {
	for _, seed := range []string{`{"text":"hi","rounds":3}`, `{"text":"a","TEXT":"b"}`, `[[[[]]]]`, `null`, `{"rounds":1e999}`, "\xff", `{"tags":[{"a":{}}]}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := jobs.DecodePayload[strictPayload](in)
		if err != nil {
			if !errors.Is(err, jobs.ErrInvalidPayload) {
				t.Fatalf("error %v is not a payload error", err)
			}
			return
		}
		// Whatever is accepted must pass the structural check on its own.
		if err := jsonin.Check(in, jobs.MaxPayloadBytes); err != nil {
			t.Fatalf("accepted %q but CheckJSON refuses it: %v", in, err)
		}
		_ = p
	})
}
