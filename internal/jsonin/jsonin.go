// Package jsonin checks JSON that comes from outside (request bodies,
// payloads, foreign messages) before anything decodes it, and words what is
// wrong with it without quoting more than a short piece of it.
package jsonin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting of arrays and objects accepted.
const MaxDepth = 32

// Error says why JSON was refused; its Reason describes only the shape of
// the caller's own input.
type Error struct{ Reason string }

func (e *Error) Error() string { return "invalid JSON: " + e.Reason }

func errorf(format string, args ...any) error { return &Error{Reason: fmt.Sprintf(format, args...)} }

// Check validates raw as one JSON value in the form package jobs accepts
// from outside: valid UTF-8, at most maxBytes long, nested at most
// MaxDepth deep, no object with two keys that are equal ignoring case
// (encoding/json would silently keep the last one), nothing after the value.
func Check(raw []byte, maxBytes int) error {
	if len(raw) > maxBytes {
		return errorf("%d bytes is more than the %d allowed", len(raw), maxBytes)
	}
	if !utf8.Valid(raw) {
		return errorf("not valid UTF-8")
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
			return errorf("malformed JSON: %s", Reason(err))
		}
		if len(stack) == 0 && values > 0 {
			return errorf("more than one JSON value")
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
					return errorf("duplicate key %q", Truncate(key, 64))
				}
				top.keys[folded] = struct{}{}
				top.expect = false
				continue
			}
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				if len(stack) >= MaxDepth {
					return errorf("nested deeper than %d levels", MaxDepth)
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
		return errorf("malformed JSON: unexpected end of JSON")
	}
	if values == 0 {
		return errorf("empty")
	}
	return nil
}

// Reason rewrites an encoding/json error into a message that names the
// caller's field and JSON type but not Go type names.
func Reason(err error) string {
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
		return fmt.Sprintf("field %q: expected %s, got %s", Truncate(field, 64), jsonKind(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "unexpected end of JSON"
	}
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return "unknown field " + Truncate(rest, 70)
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

func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
