package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/lambdajobs/lambdajobs/pkg/jobs"
	"github.com/lambdajobs/lambdajobs/pkg/jobs/jobstest"
)

// order is a payload with most of what a payload type holds: nested
// structs, pointers, slices, maps, times, raw JSON, a secret.
type order struct {
	ID       string            `json:"id"`
	Amount   int64             `json:"amount"`
	Ratio    float64           `json:"ratio,omitempty"`
	Express  bool              `json:"express"`
	Card     string            `json:"card" jobs:"secret"`
	Lines    []orderLine       `json:"lines"`
	Ship     *address          `json:"ship,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Due      time.Time         `json:"due"`
	Extra    json.RawMessage   `json:"extra,omitempty"`
	Counts   [3]uint8          `json:"counts"`
	internal int
}

type orderLine struct {
	SKU string `json:"sku"`
	Qty uint16 `json:"qty"`
}

type address struct {
	Street string `json:"street"`
	Zip    string `json:"zip,omitempty"`
}

// quotedPayload's number travels as a string; addressedPayload's address
// encodes itself as text: their Go shapes do not say their JSON.
type quotedPayload struct {
	N int `json:"n,string"`
}

type addressedPayload struct {
	Addrs []netip.Addr `json:"addrs"`
}

// maskedResult writes its public JSON itself, under other names.
type maskedResult struct{ Email string }

func (m maskedResult) PublicJSON() ([]byte, error) {
	return json.Marshal(map[string]string{"sent_to": "a***"})
}

type orderResult struct {
	Charged int64 `json:"charged"`
}

// schemaService registers "order" (a rich payload, a JSON result),
// "ping" (NoResult) and an internal kind, and returns the service.
func schemaService(t *testing.T) *jobs.Service {
	t.Helper()
	reg := jobs.NewRegistry()
	jobs.MustRegister(reg, "order", func(context.Context, *jobs.Job[order]) (jobs.JSON[orderResult], error) {
		return jobs.JSON[orderResult]{}, nil
	}, &jobs.KindOpts{FailureCodes: []string{"declined", "card_expired"}})
	jobs.MustRegister(reg, "masked", func(context.Context, *jobs.Job[struct{}]) (maskedResult, error) { return maskedResult{}, nil }, nil)
	jobs.MustRegister(reg, "quoted", func(context.Context, *jobs.Job[quotedPayload]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
	jobs.MustRegister(reg, "addressed", func(context.Context, *jobs.Job[addressedPayload]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
	jobs.MustRegister(reg, "ping", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil }, nil)
	jobs.MustRegister(reg, "hidden", func(context.Context, *jobs.Job[struct{}]) (jobs.NoResult, error) { return jobs.NoResult{}, nil },
		&jobs.KindOpts{Internal: true})
	sealer, err := jobs.NewAESSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	c, err := jobs.NewClient(jobs.Config{Registry: reg, Store: jobstest.NewMemStore(nil), Queue: &jobstest.MemQueue{}, Sealer: sealer})
	if err != nil {
		t.Fatal(err)
	}
	return c.Service().ForCallers()
}

func kindInfo(t *testing.T, svc *jobs.Service, name string) (jobs.KindInfo, bool) {
	t.Helper()
	for _, k := range svc.Kinds() {
		if k.Name == name {
			return k, true
		}
	}
	return jobs.KindInfo{}, false
}

func resolve(t *testing.T, raw json.RawMessage) *jsonschema.Resolved {
	t.Helper()
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("schema %s: %v", raw, err)
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Fatalf("schema %s: %v", raw, err)
	}
	return rs
}

// A kind describes its payload and result as JSON Schema, its secret
// fields write-only, with its failure codes; a kind without a result has
// no result schema; an internal kind is absent for API callers.
func TestKindsDescribeThemselves(t *testing.T) {
	svc := schemaService(t)
	k, ok := kindInfo(t, svc, "order")
	if !ok {
		t.Fatal("no order kind")
	}
	if !slices.Equal(k.FailureCodes, []string{"card_expired", "declined"}) {
		t.Errorf("failure codes %v", k.FailureCodes)
	}
	var p jsonschema.Schema
	if err := json.Unmarshal(k.PayloadSchema, &p); err != nil {
		t.Fatal(err)
	}
	if p.Schema != "https://json-schema.org/draft/2020-12/schema" || p.AdditionalProperties == nil || p.AdditionalProperties.Not == nil {
		t.Errorf("payload schema %s: want draft 2020-12, closed", k.PayloadSchema)
	}
	if !p.Properties["card"].WriteOnly || p.Properties["id"].WriteOnly {
		t.Errorf("payload schema %s: want card (secret) writeOnly, id not", k.PayloadSchema)
	}
	if p.Properties["due"].Format != "date-time" {
		t.Errorf("a time is %+v, want a date-time string", p.Properties["due"])
	}
	if _, ok := p.Properties["internal"]; ok || (order{internal: 1}).internal != 1 {
		t.Error("an unexported field is described")
	}
	if !slices.Contains(p.Required, "id") || slices.Contains(p.Required, "ratio") {
		t.Errorf("required %v: want the fields without omitempty", p.Required)
	}
	if string(k.ResultSchema) == "" || resolve(t, k.ResultSchema).Validate(map[string]any{"charged": 12}) != nil {
		t.Errorf("result schema %s: want orderResult's, JSON's value", k.ResultSchema)
	}
	if ping, _ := kindInfo(t, svc, "ping"); ping.ResultSchema != nil || ping.PayloadSchema == nil {
		t.Errorf("a kind without a result: payload %s, result %s", ping.PayloadSchema, ping.ResultSchema)
	}
	// A payload whose JSON its Go shape does not say gets no schema.
	for _, name := range []string{"quoted", "addressed"} {
		if k, _ := kindInfo(t, svc, name); k.PayloadSchema != nil {
			t.Errorf("kind %s is described as %s", name, k.PayloadSchema)
		}
	}
	// A result type of the kind's own writes its public JSON itself: its
	// Go type would describe other names.
	if masked, _ := kindInfo(t, svc, "masked"); masked.ResultSchema != nil {
		t.Errorf("a result with its own PublicJSON is described: %s", masked.ResultSchema)
	}
	if _, ok := kindInfo(t, svc, "hidden"); ok {
		t.Error("an internal kind is described to API callers")
	}
}

// The schema describes what the strict decoder accepts: payloads drawn at
// random from the order kind's schema are all accepted at enqueue.
func TestSchemaValidPayloadsDecode(t *testing.T) {
	svc := schemaService(t)
	k, _ := kindInfo(t, svc, "order")
	var s jsonschema.Schema
	if err := json.Unmarshal(k.PayloadSchema, &s); err != nil {
		t.Fatal(err)
	}
	rs := resolve(t, k.PayloadSchema)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		v := draw(rng, &s, 0)
		if err := rs.Validate(v); err != nil {
			t.Fatalf("draw %d is not valid against its own schema (%v): %v", i, err, v)
		}
		raw, _ := json.Marshal(v)
		if _, err := svc.Prepare(jobs.EnqueueRequest{Owner: "o", Kind: "order", Payload: raw}); err != nil {
			t.Fatalf("schema-valid payload %s refused: %v", raw, err)
		}
	}
}

// The decoder's three leniencies, which the schema does not share: keys
// in another case, null for a plain field, a required field missing.
// Each is accepted at enqueue and invalid against the schema; a change to
// either side shows here.
func TestDecoderLeniencies(t *testing.T) {
	svc := schemaService(t)
	k, _ := kindInfo(t, svc, "order")
	rs := resolve(t, k.PayloadSchema)
	valid := `{"id":"o-1","amount":5,"express":false,"card":"4111","lines":[],"due":"2026-12-05T09:00:00Z","counts":[1,2,3]}`
	var v any
	_ = json.Unmarshal([]byte(valid), &v)
	if err := rs.Validate(v); err != nil {
		t.Fatalf("the valid payload: %v", err)
	}
	for name, raw := range map[string]string{
		"a key in another case":    `{"ID":"o-1","amount":5,"express":false,"card":"4111","lines":[],"due":"2026-12-05T09:00:00Z","counts":[1,2,3]}`,
		"null for a plain field":   `{"id":null,"amount":5,"express":false,"card":"4111","lines":[],"due":"2026-12-05T09:00:00Z","counts":[1,2,3]}`,
		"a required field missing": `{"amount":5,"express":false,"card":"4111","lines":[],"due":"2026-12-05T09:00:00Z","counts":[1,2,3]}`,
	} {
		if _, err := svc.Prepare(jobs.EnqueueRequest{Owner: "o", Kind: "order", Payload: []byte(raw)}); err != nil {
			t.Errorf("%s: refused by the decoder (%v): a leniency is gone, say so in docs/reference/HTTP.md", name, err)
		}
		var v any
		_ = json.Unmarshal([]byte(raw), &v)
		if rs.Validate(v) == nil {
			t.Errorf("%s: valid against the schema, which describes the canonical form only", name)
		}
	}
	// What both refuse: an unknown field, a wrong type.
	for name, raw := range map[string]string{
		"an unknown field": `{"id":"o-1","amount":5,"express":false,"card":"4111","lines":[],"due":"2026-12-05T09:00:00Z","counts":[1,2,3],"x":1}`,
		"a wrong type":     `{"id":"o-1","amount":"5","express":false,"card":"4111","lines":[],"due":"2026-12-05T09:00:00Z","counts":[1,2,3]}`,
	} {
		if _, err := svc.Prepare(jobs.EnqueueRequest{Owner: "o", Kind: "order", Payload: []byte(raw)}); !errors.Is(err, jobs.ErrInvalidPayload) {
			t.Errorf("%s: the decoder answered %v, want ErrInvalidPayload", name, err)
		}
		var v any
		_ = json.Unmarshal([]byte(raw), &v)
		if rs.Validate(v) == nil {
			t.Errorf("%s: valid against the schema", name)
		}
	}
}

// draw returns a random instance of s (as encoding/json decodes into
// any): each required property and some optional ones, nulls where the
// schema allows them.
func draw(rng *rand.Rand, s *jsonschema.Schema, depth int) any {
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	}
	if len(types) == 0 {
		return map[string]any{"free": rng.IntN(10)} // any JSON
	}
	switch typ := types[rng.IntN(len(types))]; typ {
	case "null":
		return nil
	case "boolean":
		return rng.IntN(2) == 0
	case "string":
		if s.Format == "date-time" {
			return time.Unix(rng.Int64N(4e9), 0).UTC().Format(time.RFC3339)
		}
		return fmt.Sprint("s", rng.IntN(1000))
	case "integer":
		lo, hi := -1000.0, 1000.0
		if s.Minimum != nil {
			lo = *s.Minimum
		}
		if s.Maximum != nil {
			hi = *s.Maximum
		}
		return float64(int64(lo) + rng.Int64N(int64(hi-lo)+1))
	case "number":
		return rng.Float64() * 100
	case "array":
		n := rng.IntN(4)
		if s.MinItems != nil {
			n = *s.MinItems
		}
		out := []any{}
		for range n {
			if s.Items != nil && depth < 6 {
				out = append(out, draw(rng, s.Items, depth+1))
			}
		}
		return out
	case "object":
		out := map[string]any{}
		for name, p := range s.Properties {
			if slices.Contains(s.Required, name) || rng.IntN(2) == 0 {
				out[name] = draw(rng, p, depth+1)
			}
		}
		if ap := s.AdditionalProperties; ap != nil && len(s.Properties) == 0 && depth < 6 {
			for i := range rng.IntN(3) {
				out[fmt.Sprint("k", i)] = draw(rng, ap, depth+1)
			}
		}
		return out
	}
	return nil
}
