package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/driver"
)

// schema is the subset of JSON Schema docs/reference/event.schema.json uses; check
// validates a value against it (a hand check: the module has no JSON
// Schema library, and the schema is small).
type schema struct {
	Type                 string             `json:"type"`
	Required             []string           `json:"required"`
	Properties           map[string]*schema `json:"properties"`
	AdditionalProperties *bool              `json:"additionalProperties"`
	Pattern              string             `json:"pattern"`
	Enum                 []string           `json:"enum"`
	Minimum              *float64           `json:"minimum"`
	Format               string             `json:"format"`
}

func (s *schema) check(path string, v any) error {
	switch s.Type {
	case "object":
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %T, want an object", path, v)
		}
		for _, name := range s.Required {
			if _, ok := obj[name]; !ok {
				return fmt.Errorf("%s: %q missing", path, name)
			}
		}
		for name, val := range obj {
			p, ok := s.Properties[name]
			if !ok {
				if s.AdditionalProperties != nil && !*s.AdditionalProperties {
					return fmt.Errorf("%s: %q not allowed", path, name)
				}
				continue
			}
			if err := p.check(path+"."+name, val); err != nil {
				return err
			}
		}
	case "string":
		str, ok := v.(string)
		if !ok {
			return fmt.Errorf("%s: %T, want a string", path, v)
		}
		if s.Pattern != "" && !regexp.MustCompile(s.Pattern).MatchString(str) {
			return fmt.Errorf("%s: %q does not match %s", path, str, s.Pattern)
		}
		if s.Format == "date-time" {
			if _, err := time.Parse(time.RFC3339Nano, str); err != nil {
				return fmt.Errorf("%s: %q is not a date-time", path, str)
			}
		}
	case "integer":
		n, ok := v.(float64)
		if !ok || n != float64(int64(n)) {
			return fmt.Errorf("%s: %v, want an integer", path, v)
		}
		if s.Minimum != nil && n < *s.Minimum {
			return fmt.Errorf("%s: %v below %v", path, n, *s.Minimum)
		}
	case "":
	default:
		return fmt.Errorf("%s: the hand check does not know type %q", path, s.Type)
	}
	if len(s.Enum) > 0 {
		if str, _ := v.(string); !slices.Contains(s.Enum, str) {
			return fmt.Errorf("%s: %v not one of %v", path, v, s.Enum)
		}
	}
	return nil
}

func loadEventSchema(t *testing.T) *schema {
	t.Helper()
	b, err := os.ReadFile("../../docs/reference/event.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("docs/reference/event.schema.json: %v", err)
	}
	return &s
}

// The schema names exactly the fields of jobs.Event, and its required
// fields are those Event always sends.
func TestEventSchemaMatchesEventType(t *testing.T) {
	t.Parallel()
	s := loadEventSchema(t)
	var fields, always []string
	typ := reflect.TypeFor[jobs.Event]()
	for i := range typ.NumField() {
		name, opts, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		fields = append(fields, name)
		if opts != "omitempty" {
			always = append(always, name)
		}
	}
	var props []string
	for name := range s.Properties {
		props = append(props, name)
	}
	sort.Strings(fields)
	sort.Strings(props)
	sort.Strings(always)
	required := slices.Sorted(slices.Values(s.Required))
	if !slices.Equal(fields, props) || !slices.Equal(always, required) {
		t.Fatalf("schema properties %v required %v; jobs.Event fields %v always sent %v", props, required, fields, always)
	}
}

// Every event the engine emits, one of each outcome, validates.
func TestEmittedEventsValidateAgainstSchema(t *testing.T) {
	t.Parallel()
	s := loadEventSchema(t)
	r := newEventRig(t, nil)
	ids := []string{r.enqueue(t, "ev", ""), r.enqueue(t, "ev", "declared"), r.enqueue(t, "ev", "internal"), r.enqueue(t, "ev", "big")}
	r.run(t, context.Background(), ids...)
	cancelled := r.enqueue(t, "ev", "")
	if _, err := r.svc.Cancel(context.Background(), "alice", cancelled); err != nil {
		t.Fatal(err)
	}
	interrupted := r.enqueue(t, "ev", "")
	if _, err := r.mem.Claim(context.Background(), interrupted, driver.Claim{Token: "dead", At: r.clock.Now(), LeaseUntil: r.clock.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	r.sweepLater(t)
	raw := r.bus.Raw()
	if len(raw) != 6 {
		t.Fatalf("%d events, want 6", len(raw))
	}
	statuses := map[string]bool{}
	for _, ev := range raw {
		var v any
		if err := json.Unmarshal(ev.Detail, &v); err != nil {
			t.Fatal(err)
		}
		if err := s.check("detail", v); err != nil {
			t.Errorf("%s: %v", ev.Detail, err)
		}
		statuses[v.(map[string]any)["status"].(string)] = true
	}
	if len(statuses) != 3 {
		t.Fatalf("statuses %v, want all three", statuses)
	}
	// The check catches what the schema forbids.
	for _, bad := range []string{`{"id":"x"}`, strings.Replace(string(raw[0].Detail), `"kind"`, `"payload":{},"kind"`, 1)} {
		var v any
		_ = json.Unmarshal([]byte(bad), &v)
		if s.check("detail", v) == nil {
			t.Errorf("%s validated; want refused", bad)
		}
	}
}
