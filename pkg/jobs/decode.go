package jobs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"
)

// PayloadError says why a payload was refused. Its message describes only
// the shape of the caller's own input, so it is safe to return to the caller.
type PayloadError struct {
	Reason string
}

func (e *PayloadError) Error() string { return "invalid payload: " + e.Reason }

// ErrInvalidPayload matches every *PayloadError with errors.Is.
var ErrInvalidPayload = errors.New("jobs: invalid payload")

// Is reports whether target is ErrInvalidPayload.
func (e *PayloadError) Is(target error) bool { return target == ErrInvalidPayload }

func payloadErr(format string, args ...any) error {
	return &PayloadError{Reason: fmt.Sprintf(format, args...)}
}

// CheckJSON validates raw as one JSON value in the form this package accepts
// from outside: valid UTF-8, at most maxBytes long, nested at most
// [MaxJSONDepth] deep, no object with two keys that are equal ignoring case
// (encoding/json would silently keep the last one), nothing after the value.
func CheckJSON(raw []byte, maxBytes int) error {
	if len(raw) > maxBytes {
		return payloadErr("%d bytes is more than the %d allowed", len(raw), maxBytes)
	}
	if !utf8.Valid(raw) {
		return payloadErr("not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	type frame struct {
		object bool
		keys   map[string]struct{}
		expect bool // in an object: the next token is a key
	}
	var stack []*frame
	values := 0
	// valueDone marks the end of a value: the enclosing object now expects a key.
	valueDone := func() {
		if len(stack) == 0 {
			values++
		} else if top := stack[len(stack)-1]; top.object {
			top.expect = true
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return payloadErr("malformed JSON: %s", jsonReason(err))
		}
		if len(stack) == 0 && values > 0 {
			return payloadErr("more than one JSON value")
		}
		if len(stack) > 0 {
			if top := stack[len(stack)-1]; top.object && top.expect {
				if d, ok := tok.(json.Delim); ok && d == '}' {
					stack = stack[:len(stack)-1]
					valueDone()
					continue
				}
				key, _ := tok.(string)
				folded := strings.ToLower(key)
				if _, dup := top.keys[folded]; dup {
					return payloadErr("duplicate key %q", truncate(key, 64))
				}
				top.keys[folded] = struct{}{}
				top.expect = false
				continue
			}
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				if len(stack) >= MaxJSONDepth {
					return payloadErr("nested deeper than %d levels", MaxJSONDepth)
				}
				f := &frame{object: d == '{', expect: d == '{'}
				if f.object {
					f.keys = map[string]struct{}{}
				}
				stack = append(stack, f)
			case ']':
				stack = stack[:len(stack)-1]
				valueDone()
			}
			continue
		}
		valueDone()
	}
	if len(stack) > 0 {
		return payloadErr("malformed JSON: unexpected end of JSON")
	}
	if values == 0 {
		return payloadErr("empty")
	}
	return nil
}

// DecodePayload decodes raw strictly into a P: raw must pass [CheckJSON]
// with [MaxPayloadBytes], must not be null, and must not carry fields that P
// does not have. The same function runs at enqueue and again before a
// handler runs, so a job that was accepted decodes the same way later.
func DecodePayload[P any](raw []byte) (P, error) {
	var p P
	if err := CheckJSON(raw, MaxPayloadBytes); err != nil {
		return p, err
	}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return p, payloadErr("payload is null")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, payloadErr("%s", jsonReason(err))
	}
	return p, nil
}

// canonicalPayload returns the stored form of a payload that passed
// DecodePayload: the payload decoded into P (numbers in interface fields
// kept exactly) and encoded again, so the HTTP path, the Go path and a
// retry with reordered keys store the same bytes and the same request hash.
func canonicalPayload[P any](raw []byte) ([]byte, error) {
	var p P
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&p); err != nil {
		return nil, payloadErr("%s", jsonReason(err))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, payloadErr("does not encode back to JSON")
	}
	out := bytes.TrimRight(buf.Bytes(), "\n")
	if len(out) > MaxPayloadBytes {
		return nil, payloadErr("%d bytes once encoded is more than the %d allowed", len(out), MaxPayloadBytes)
	}
	return out, nil
}

// jsonReason rewrites an encoding/json error into a message that names the
// caller's field and JSON type but not Go type names.
func jsonReason(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("%s at offset %d", strings.TrimPrefix(syn.Error(), "json: "), syn.Offset)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return fmt.Sprintf("expected %s, got %s", jsonKind(typ.Type.Kind().String()), typ.Value)
		}
		return fmt.Sprintf("field %q: expected %s, got %s", truncate(field, 64), jsonKind(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "unexpected end of JSON"
	}
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return "unknown field " + truncate(rest, 70)
	}
	if strings.HasPrefix(msg, "json: cannot unmarshal") {
		return "value does not fit the payload type"
	}
	return "does not decode"
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64":
		return "a number in range"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	}
	return "another type"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// topLevelKeys returns up to max top-level keys of a JSON object (each cut
// to 32 bytes), or false if body is not a JSON object.
func topLevelKeys(body string, max int) ([]string, bool) {
	if CheckJSON([]byte(body), 256<<10) != nil {
		return nil, false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &obj) != nil {
		return nil, false
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, truncate(k, 32))
	}
	sort.Strings(keys)
	if len(keys) > max {
		keys = keys[:max]
	}
	return keys, true
}
