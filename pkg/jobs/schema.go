package jobs

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
)

// A kind's payload and result described as JSON Schema (draft 2020-12),
// generated from its Go types by github.com/google/jsonschema-go (the
// schema package of the official MCP Go SDK): what GET /v1/kinds shows,
// and what a client generates its types from (docs/reference/HTTP.md, "Kinds and
// their schemas").
//
// The schemas describe the canonical form, which the strict decoder
// always accepts (a type whose JSON its Go shape does not say, one that
// encodes itself or a ",string" field, gets no schema): a payload valid against its kind's schema is never
// refused at enqueue for its shape (TestSchemaValidPayloadsDecode). The
// decoder is more lenient in three ways, kept as they are
// (TestDecoderLeniencies): it matches keys case-insensitively, it takes
// null for a field that is not a pointer, slice or map (leaving its zero
// value), and it takes an object without a field the schema requires
// (the Go zero value). Fields tagged jobs:"secret" are marked writeOnly.

// kindSchemas are a kind's schemas, built once, when first asked for: an
// instance that never serves GET /v1/kinds never builds them.
type kindSchemas struct {
	once            sync.Once
	payload, result json.RawMessage
}

// resultValue is implemented by JSON[T], whose public JSON is T's.
type resultValue interface{ resultValueType() reflect.Type }

func (JSON[T]) resultValueType() reflect.Type { return reflect.TypeFor[T]() }

// schemaTypes are the types whose JSON is not what their Go shape says.
var schemaTypes = map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[json.RawMessage](): {},
	reflect.TypeFor[time.Time]():       {Type: "string", Format: "date-time"},
	reflect.TypeFor[[]byte]():          {Types: []string{"null", "string"}, ContentEncoding: "base64"},
}

// customEncoded says why t's JSON is not what its Go shape says ("" when
// it is): a type of its own encoding (json.Marshaler, encoding.
// TextMarshaler) other than those of schemaTypes, or a field with the
// ",string" option. A schema of such a type would describe values the
// decoder refuses, so none is given.
func customEncoded(t reflect.Type, seen map[reflect.Type]bool) string {
	if schemaTypes[t] != nil || seen[t] {
		return ""
	}
	seen[t] = true
	for _, m := range []reflect.Type{reflect.TypeFor[json.Marshaler](), reflect.TypeFor[encoding.TextMarshaler](),
		reflect.TypeFor[json.Unmarshaler](), reflect.TypeFor[encoding.TextUnmarshaler]()} {
		if t.Implements(m) || reflect.PointerTo(t).Implements(m) {
			return fmt.Sprintf("%v encodes itself", t)
		}
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return customEncoded(t.Elem(), seen)
	case reflect.Map:
		if why := customEncoded(t.Key(), seen); why != "" {
			return why
		}
		return customEncoded(t.Elem(), seen)
	case reflect.Struct:
		for _, f := range reflect.VisibleFields(t) {
			if !f.IsExported() && !f.Anonymous {
				continue
			}
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			if _, opts, _ := strings.Cut(tag, ","); slices.Contains(strings.Split(opts, ","), "string") {
				return fmt.Sprintf("field %s is encoded as a string", f.Name)
			}
			if why := customEncoded(f.Type, seen); why != "" {
				return why
			}
		}
	}
	return ""
}

// schemas returns k's payload and result schemas: a result's only for a
// JSON[T] (T's), whose public JSON is its value's; none for NoResult or
// a result type of the kind's own, whose PublicJSON may write any shape
// (a masked field, other names); and none for a type the generator
// cannot describe (a recursive one).
func (k *kindDef) schemas() (payload, result json.RawMessage) {
	s := k.schema
	s.once.Do(func() {
		s.payload, _ = schemaOf(k.payloadType, k.secrets)
		if k.resultType == nil {
			return
		}
		if v, ok := reflect.Zero(k.resultType).Interface().(resultValue); ok {
			s.result, _ = schemaOf(v.resultValueType(), nil)
		}
	})
	return s.payload, s.result
}

// schemaOf is t's schema, with the top-level properties named in
// writeOnly marked so; an error for a type whose JSON its Go shape does
// not say (customEncoded).
func schemaOf(t reflect.Type, writeOnly []string) (json.RawMessage, error) {
	if why := customEncoded(t, map[reflect.Type]bool{}); why != "" {
		return nil, fmt.Errorf("jobs: %v cannot be described: %s", t, why)
	}
	s, err := jsonschema.ForType(t, &jsonschema.ForOptions{TypeSchemas: schemaTypes, IgnoreInvalidTypes: true})
	if err != nil {
		return nil, fmt.Errorf("jobs: the schema of %v: %w", t, err)
	}
	s.Schema = "https://json-schema.org/draft/2020-12/schema"
	for _, name := range writeOnly {
		if p := s.Properties[name]; p != nil {
			p.WriteOnly = true
		}
	}
	return json.Marshal(s)
}
