package partitions

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
)

// value is one attribute value as DynamoDB's JSON protocol carries it
// ({"S": "..."}, {"N": "12"}, {"M": {...}}, ...). Numbers are kept in a
// canonical form (no leading or trailing zeros, no exponent) so that two
// spellings of one number compare equal and name one partition, as in
// DynamoDB.
type value struct {
	t   string            // S N B BOOL NULL M L SS NS BS
	s   string            // S; N (canonical); B (the raw bytes); BOOL "true"/"false"
	m   map[string]*value // M
	l   []*value          // L
	set []string          // SS; NS (canonical); BS (raw bytes)
}

// item is an item, or a key, as attribute name -> value.
type item map[string]*value

func (v *value) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("attribute value: %w", err)
	}
	if len(raw) != 1 {
		return fmt.Errorf("attribute value with %d types, want 1", len(raw))
	}
	for t, r := range raw {
		v.t = t
		switch t {
		case "S":
			return json.Unmarshal(r, &v.s)
		case "N":
			var s string
			if err := json.Unmarshal(r, &s); err != nil {
				return err
			}
			n, err := canonNumber(s)
			v.s = n
			return err
		case "B":
			var b []byte
			if err := json.Unmarshal(r, &b); err != nil {
				return err
			}
			v.s = string(b)
		case "BOOL":
			var x bool
			if err := json.Unmarshal(r, &x); err != nil {
				return err
			}
			v.s = fmt.Sprint(x)
		case "NULL":
			v.s = "true"
		case "M":
			return json.Unmarshal(r, &v.m)
		case "L":
			return json.Unmarshal(r, &v.l)
		case "SS":
			return json.Unmarshal(r, &v.set)
		case "NS":
			if err := json.Unmarshal(r, &v.set); err != nil {
				return err
			}
			for i, s := range v.set {
				n, err := canonNumber(s)
				if err != nil {
					return err
				}
				v.set[i] = n
			}
		case "BS":
			var bs [][]byte
			if err := json.Unmarshal(r, &bs); err != nil {
				return err
			}
			for _, b := range bs {
				v.set = append(v.set, string(b))
			}
		default:
			return fmt.Errorf("unknown attribute value type %q", t)
		}
	}
	return nil
}

func (v *value) MarshalJSON() ([]byte, error) {
	var inner any
	switch v.t {
	case "S", "N":
		inner = v.s
	case "B":
		inner = []byte(v.s)
	case "BOOL":
		inner = v.s == "true"
	case "NULL":
		inner = true
	case "M":
		inner = v.m
		if v.m == nil {
			inner = map[string]*value{}
		}
	case "L":
		inner = v.l
		if v.l == nil {
			inner = []*value{}
		}
	case "SS", "NS":
		inner = v.set
	case "BS":
		bs := make([][]byte, len(v.set))
		for i, s := range v.set {
			bs[i] = []byte(s)
		}
		inner = bs
	default:
		return nil, fmt.Errorf("unknown attribute value type %q", v.t)
	}
	return json.Marshal(map[string]any{v.t: inner})
}

// size is the value's size as DynamoDB counts it for capacity units: a
// string's UTF-8 bytes, a binary's bytes, about one byte per two
// significant digits of a number plus one, one byte for a boolean or a
// null, 3 bytes for a list or a map plus one per element (and a map's
// names), and the sum of a set's elements.
func (v *value) size() int {
	switch v.t {
	case "S", "B":
		return len(v.s)
	case "N":
		return numberSize(v.s)
	case "BOOL", "NULL":
		return 1
	case "M":
		n := 3
		for k, e := range v.m {
			n += len(k) + e.size() + 1
		}
		return n
	case "L":
		n := 3
		for _, e := range v.l {
			n += e.size() + 1
		}
		return n
	case "SS", "BS":
		n := 0
		for _, s := range v.set {
			n += len(s)
		}
		return n
	case "NS":
		n := 0
		for _, s := range v.set {
			n += numberSize(s)
		}
		return n
	}
	return 0
}

// equal reports whether two values are the same value (sets in any order).
func (v *value) equal(o *value) bool {
	if v == nil || o == nil {
		return v == o
	}
	if v.t != o.t || v.s != o.s || len(v.m) != len(o.m) || len(v.l) != len(o.l) || len(v.set) != len(o.set) {
		return false
	}
	for k, e := range v.m {
		if !e.equal(o.m[k]) {
			return false
		}
	}
	for i, e := range v.l {
		if !e.equal(o.l[i]) {
			return false
		}
	}
	if len(v.set) > 0 {
		a, b := slices.Clone(v.set), slices.Clone(o.set)
		slices.Sort(a)
		slices.Sort(b)
		return slices.Equal(a, b)
	}
	return true
}

// keyString is the value as a partition or sort key: a string, a number
// (canonical) or a binary (base64). Other types cannot be keys.
func (v *value) keyString() (string, bool) {
	if v == nil {
		return "", false
	}
	switch v.t {
	case "S", "N":
		return v.s, true
	case "B":
		return base64.StdEncoding.EncodeToString([]byte(v.s)), true
	}
	return "", false
}

// size is the item's size: each attribute's name and value.
func (it item) size() int {
	n := 0
	for name, v := range it {
		n += len(name) + v.size()
	}
	return n
}

func (it item) clone() item {
	if it == nil {
		return nil
	}
	out := make(item, len(it))
	for k, v := range it {
		out[k] = v
	}
	return out
}

func (it item) equal(o item) bool {
	if (it == nil) != (o == nil) || len(it) != len(o) {
		return false
	}
	for k, v := range it {
		if !v.equal(o[k]) {
			return false
		}
	}
	return true
}

// decodeItem decodes an item (or a key) in DynamoDB JSON.
func decodeItem(raw json.RawMessage) (item, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var it item
	if err := json.Unmarshal(raw, &it); err != nil {
		return nil, err
	}
	return it, nil
}

var errNumber = errors.New("not a number")

// canonNumber writes a DynamoDB number without exponent, sign of zero,
// leading or trailing zeros: "1.50" and "15e-1" are both "1.5".
func canonNumber(s string) (string, error) {
	r, ok := new(big.Rat).SetString(strings.TrimSpace(s))
	if !ok {
		return "", fmt.Errorf("%w: %q", errNumber, s)
	}
	return formatRat(r), nil
}

func formatRat(r *big.Rat) string {
	if r.IsInt() {
		return r.Num().String()
	}
	// DynamoDB numbers are decimals of at most 38 significant digits.
	out := r.FloatString(40)
	out = strings.TrimRight(out, "0")
	return strings.TrimSuffix(out, ".")
}

// numberSize: one byte per two significant digits, plus one.
func numberSize(canon string) int {
	digits := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, canon)
	digits = strings.Trim(digits, "0")
	d := max(1, len(digits))
	return (d+1)/2 + 1
}

// addNumbers returns a+b (sub: a-b) for canonical numbers.
func addNumbers(a, b string, sub bool) (string, error) {
	x, ok := new(big.Rat).SetString(a)
	if !ok {
		return "", fmt.Errorf("%w: %q", errNumber, a)
	}
	y, ok := new(big.Rat).SetString(b)
	if !ok {
		return "", fmt.Errorf("%w: %q", errNumber, b)
	}
	if sub {
		y.Neg(y)
	}
	return formatRat(x.Add(x, y)), nil
}
