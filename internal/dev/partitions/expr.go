package partitions

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The update expressions the model understands, so that it knows an
// item's new index keys before the write is forwarded.
//
// Parsed (the grammar of DynamoDB's update expressions, as the SDK's
// expression builder writes them and as people write them by hand):
//
//	SET    path = operand [+|- operand], ...
//	       operand: path | :value | if_not_exists(path, operand) | list_append(operand, operand)
//	REMOVE path, ...
//	ADD    path :value, ...     numbers add, sets join
//	DELETE path :value, ...     set elements leave
//
// Clauses come in any order, each at most once, keywords in any case;
// paths are #names (resolved through ExpressionAttributeNames) or plain
// names.
//
// Three nested forms are understood, one level deep, which is how a slot
// item changes without being read first: SET and REMOVE of a map's member
// (#a.#b: a holder's lease set, a holder dropped) and REMOVE of a list's
// element (#a[0]: the first waiter taken off). None can touch an index
// key, which is a top-level scalar. Refused, with an error the model
// reports (see ErrUnsupported): every other nested path (SET #a[0],
// deeper paths), and a nested path in an operand: a nested change could
// not be told apart from a change of an index key. A malformed expression
// is refused the same way, never guessed at.

// ErrUnsupported is a request the model cannot charge exactly: an update
// expression it does not parse, a key condition without the partition key,
// an item without its key. The model refuses such a request (HTTP 400
// ValidationException, its message prefixed "partition model:") and lists
// it in its report's errors, so a test never passes on a guess.
var ErrUnsupported = errors.New("partition model: unsupported request")

type token struct {
	kind byte // 'n' #name, 'v' :value, 'i' identifier, 'd' digits, or the punctuation itself
	text string
}

func tokenize(s string) ([]token, error) {
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case strings.IndexByte("=,()+-.[]<>", c) >= 0:
			// <, >, <=, >=, <> appear in key conditions; = in both.
			if (c == '<' || c == '>') && i+1 < len(s) && (s[i+1] == '=' || s[i+1] == '>') {
				out = append(out, token{kind: 'o', text: s[i : i+2]})
				i += 2
				continue
			}
			out = append(out, token{kind: c, text: string(c)})
			i++
		case c == '#' || c == ':' || isIdentStart(c):
			j := i + 1
			for j < len(s) && isIdentPart(s[j]) {
				j++
			}
			kind := byte('i')
			if c == '#' {
				kind = 'n'
			} else if c == ':' {
				kind = 'v'
			}
			if j == i+1 && kind != 'i' {
				return nil, fmt.Errorf("a lone %q at %d", c, i)
			}
			out = append(out, token{kind: kind, text: s[i:j]})
			i = j
		case c >= '0' && c <= '9':
			j := i
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			out = append(out, token{kind: 'd', text: s[i:j]})
			i = j
		default:
			return nil, fmt.Errorf("unexpected %q at %d", c, i)
		}
	}
	return out, nil
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentPart(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

// operand is a value in a SET action.
type operand struct {
	op   string // "path", "value", "if_not_exists", "list_append", "+", "-"
	name string // path: the attribute
	val  *value // value
	a, b *operand
}

type action struct {
	name   string
	member string   // SET or REMOVE name.member: one member of a map
	index  int      // REMOVE name[index]: one element of a list (-1: none)
	val    *operand // SET
	arg    *value   // ADD, DELETE
}

// update is a parsed update expression.
type update struct {
	set, remove, add, del []action
}

type parser struct {
	toks   []token
	pos    int
	names  map[string]string
	values map[string]*value
}

func (p *parser) peek() (token, bool) {
	if p.pos < len(p.toks) {
		return p.toks[p.pos], true
	}
	return token{}, false
}

func (p *parser) next() (token, bool) {
	t, ok := p.peek()
	if ok {
		p.pos++
	}
	return t, ok
}

func (p *parser) expect(kind byte) error {
	t, ok := p.next()
	if !ok || t.kind != kind {
		return fmt.Errorf("expected %q at token %d, found %q", kind, p.pos, t.text)
	}
	return nil
}

// parseUpdate parses an update expression with its names and values.
func parseUpdate(expr string, names map[string]string, values map[string]*value) (*update, error) {
	toks, err := tokenize(expr)
	if err != nil {
		return nil, fmt.Errorf("%w: update expression: %v", ErrUnsupported, err)
	}
	p := &parser{toks: toks, names: names, values: values}
	u, err := p.update()
	if err != nil {
		return nil, fmt.Errorf("%w: update expression %q: %v", ErrUnsupported, expr, err)
	}
	return u, nil
}

func (p *parser) update() (*update, error) {
	u := &update{}
	seen := map[string]bool{}
	if len(p.toks) == 0 {
		return nil, errors.New("empty")
	}
	for {
		t, ok := p.next()
		if !ok {
			return u, nil
		}
		kw := strings.ToUpper(t.text)
		if t.kind != 'i' || !slices.Contains([]string{"SET", "REMOVE", "ADD", "DELETE"}, kw) {
			return nil, fmt.Errorf("expected SET, REMOVE, ADD or DELETE, found %q", t.text)
		}
		if seen[kw] {
			return nil, fmt.Errorf("two %s clauses", kw)
		}
		seen[kw] = true
		for {
			var name, member string
			index := -1
			var err error
			switch kw {
			case "REMOVE":
				name, member, index, err = p.memberPath(true)
			case "SET":
				name, member, _, err = p.memberPath(false)
			default:
				name, err = p.path()
			}
			if err != nil {
				return nil, err
			}
			switch kw {
			case "SET":
				if err := p.expect('='); err != nil {
					return nil, err
				}
				v, err := p.setValue()
				if err != nil {
					return nil, err
				}
				u.set = append(u.set, action{name: name, member: member, index: -1, val: v})
			case "REMOVE":
				u.remove = append(u.remove, action{name: name, member: member, index: index})
			case "ADD", "DELETE":
				v, err := p.value()
				if err != nil {
					return nil, err
				}
				if kw == "ADD" {
					u.add = append(u.add, action{name: name, arg: v})
				} else {
					u.del = append(u.del, action{name: name, arg: v})
				}
			}
			if t, ok := p.peek(); ok && t.kind == ',' {
				p.pos++
				continue
			}
			break
		}
	}
}

// memberPath reads a top-level path, a map's member (#a.#b) or, with
// elements, a list's element (#a[0]), and returns the attribute's name,
// the member's ("" for none) and the element's index (-1 for none).
func (p *parser) memberPath(elements bool) (name, member string, index int, err error) {
	t, _ := p.peek()
	top := t.text
	index = -1
	if name, err = p.attrName(); err != nil {
		return "", "", -1, err
	}
	n, ok := p.peek()
	switch {
	case ok && n.kind == '.':
		p.pos++
		if member, err = p.attrName(); err != nil {
			return "", "", -1, err
		}
	case ok && n.kind == '[' && elements:
		p.pos++
		d, ok := p.next()
		if !ok || d.kind != 'd' {
			return "", "", -1, fmt.Errorf("expected an index in %s[...]", top)
		}
		if index, err = strconv.Atoi(d.text); err != nil {
			return "", "", -1, err
		}
		if err := p.expect(']'); err != nil {
			return "", "", -1, err
		}
	}
	return name, member, index, p.refuseNested(top)
}

// path reads a top-level attribute path and returns its name.
func (p *parser) path() (string, error) {
	t, _ := p.peek()
	name, err := p.attrName()
	if err != nil {
		return "", err
	}
	return name, p.refuseNested(t.text)
}

// refuseNested fails when the path goes on (a '.' or a '[' follows).
func (p *parser) refuseNested(top string) error {
	if n, ok := p.peek(); ok && (n.kind == '.' || n.kind == '[') {
		return fmt.Errorf("nested path %s%s... is not modelled", top, n.text)
	}
	return nil
}

// attrName reads one #name or plain name and resolves it.
func (p *parser) attrName() (string, error) {
	t, ok := p.next()
	if !ok {
		return "", errors.New("expected a path, found the end")
	}
	var name string
	switch t.kind {
	case 'n':
		n, ok := p.names[t.text]
		if !ok {
			return "", fmt.Errorf("name %s is not in ExpressionAttributeNames", t.text)
		}
		name = n
	case 'i':
		name = t.text
	default:
		return "", fmt.Errorf("expected a path, found %q", t.text)
	}
	return name, nil
}

func (p *parser) value() (*value, error) {
	t, ok := p.next()
	if !ok || t.kind != 'v' {
		return nil, fmt.Errorf("expected a :value, found %q", t.text)
	}
	v, ok := p.values[t.text]
	if !ok {
		return nil, fmt.Errorf("value %s is not in ExpressionAttributeValues", t.text)
	}
	return v, nil
}

// setValue: operand [+|- operand].
func (p *parser) setValue() (*operand, error) {
	a, err := p.operand()
	if err != nil {
		return nil, err
	}
	if t, ok := p.peek(); ok && (t.kind == '+' || t.kind == '-') {
		p.pos++
		b, err := p.operand()
		if err != nil {
			return nil, err
		}
		return &operand{op: t.text, a: a, b: b}, nil
	}
	return a, nil
}

func (p *parser) operand() (*operand, error) {
	t, ok := p.peek()
	if !ok {
		return nil, errors.New("expected an operand, found the end")
	}
	switch {
	case t.kind == 'v':
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		return &operand{op: "value", val: v}, nil
	case t.kind == 'i' && (t.text == "if_not_exists" || t.text == "list_append") &&
		p.pos+1 < len(p.toks) && p.toks[p.pos+1].kind == '(':
		p.pos += 2
		var a, b *operand
		var err error
		if t.text == "if_not_exists" {
			var name string
			if name, err = p.path(); err != nil {
				return nil, err
			}
			a = &operand{op: "path", name: name}
		} else if a, err = p.operand(); err != nil {
			return nil, err
		}
		if err := p.expect(','); err != nil {
			return nil, err
		}
		if b, err = p.operand(); err != nil {
			return nil, err
		}
		if err := p.expect(')'); err != nil {
			return nil, err
		}
		return &operand{op: t.text, a: a, b: b}, nil
	case t.kind == 'n' || t.kind == 'i':
		name, err := p.path()
		if err != nil {
			return nil, err
		}
		return &operand{op: "path", name: name}, nil
	}
	return nil, fmt.Errorf("expected an operand, found %q", t.text)
}

// errInvalid is an update DynamoDB itself refuses (a path that does not
// exist, a type mismatch): the write fails and changes nothing.
var errInvalid = errors.New("the update fails in DynamoDB")

// apply returns the item after the update, evaluated as DynamoDB does:
// every operand reads the item before the update. old is nil when the
// item does not exist (an update creates it from key).
func (u *update) apply(old, key item) (item, error) {
	out := old.clone()
	if out == nil {
		out = key.clone()
	}
	// member sets (v) or, with v nil, removes one member of map name:
	// DynamoDB refuses a member path into a missing attribute or a non-map
	// ("The document path provided in the update expression is invalid for
	// update"); a missing member's removal is a no-op. Members of one map
	// changed by one update all apply.
	member := func(op, name, key string, v *value) error {
		if cur := old[name]; cur == nil || cur.t != "M" {
			return fmt.Errorf("%w: %s %s.%s of a missing or non-map attribute", errInvalid, op, name, key)
		}
		base := out[name]
		m := make(map[string]*value, len(base.m)+1)
		for k, e := range base.m {
			if k != key {
				m[k] = e
			}
		}
		if v != nil {
			m[key] = v
		}
		out[name] = &value{t: "M", m: m}
		return nil
	}
	for _, a := range u.set {
		v, err := eval(a.val, old)
		if err != nil {
			return nil, err
		}
		if a.member != "" {
			if err := member("SET", a.name, a.member, v); err != nil {
				return nil, err
			}
			continue
		}
		out[a.name] = v
	}
	// Elements removed from one list by one update are its elements at
	// those indexes before the update; an index past the end is a no-op.
	drop := map[string]map[int]bool{}
	for _, a := range u.remove {
		switch {
		case a.member != "":
			if err := member("REMOVE", a.name, a.member, nil); err != nil {
				return nil, err
			}
		case a.index >= 0:
			if cur := old[a.name]; cur == nil || cur.t != "L" {
				return nil, fmt.Errorf("%w: REMOVE %s[%d] of a missing or non-list attribute", errInvalid, a.name, a.index)
			}
			if drop[a.name] == nil {
				drop[a.name] = map[int]bool{}
			}
			drop[a.name][a.index] = true
		default:
			delete(out, a.name)
		}
	}
	for name, at := range drop {
		l := []*value{}
		for i, e := range old[name].l {
			if !at[i] {
				l = append(l, e)
			}
		}
		out[name] = &value{t: "L", l: l}
	}
	for _, a := range u.add {
		cur := old[a.name]
		switch {
		case cur == nil:
			out[a.name] = a.arg
		case cur.t == "N" && a.arg.t == "N":
			n, err := addNumbers(cur.s, a.arg.s, false)
			if err != nil {
				return nil, err
			}
			out[a.name] = &value{t: "N", s: n}
		case cur.t == a.arg.t && (cur.t == "SS" || cur.t == "NS" || cur.t == "BS"):
			set := slices.Clone(cur.set)
			for _, e := range a.arg.set {
				if !slices.Contains(set, e) {
					set = append(set, e)
				}
			}
			out[a.name] = &value{t: cur.t, set: set}
		default:
			return nil, fmt.Errorf("%w: ADD %s to a %s", errInvalid, a.arg.t, cur.t)
		}
	}
	for _, a := range u.del {
		cur := old[a.name]
		if cur == nil {
			continue
		}
		if cur.t != a.arg.t {
			return nil, fmt.Errorf("%w: DELETE %s from a %s", errInvalid, a.arg.t, cur.t)
		}
		var set []string
		for _, e := range cur.set {
			if !slices.Contains(a.arg.set, e) {
				set = append(set, e)
			}
		}
		if len(set) == 0 {
			delete(out, a.name)
		} else {
			out[a.name] = &value{t: cur.t, set: set}
		}
	}
	return out, nil
}

func eval(o *operand, old item) (*value, error) {
	switch o.op {
	case "value":
		return o.val, nil
	case "path":
		v := old[o.name]
		if v == nil {
			return nil, fmt.Errorf("%w: attribute %q does not exist", errInvalid, o.name)
		}
		return v, nil
	case "if_not_exists":
		if v := old[o.a.name]; v != nil {
			return v, nil
		}
		return eval(o.b, old)
	}
	a, err := eval(o.a, old)
	if err != nil {
		return nil, err
	}
	b, err := eval(o.b, old)
	if err != nil {
		return nil, err
	}
	switch o.op {
	case "list_append":
		if a.t != "L" || b.t != "L" {
			return nil, fmt.Errorf("%w: list_append of %s and %s", errInvalid, a.t, b.t)
		}
		return &value{t: "L", l: append(slices.Clone(a.l), b.l...)}, nil
	default: // + and -
		if a.t != "N" || b.t != "N" {
			return nil, fmt.Errorf("%w: %s %s %s", errInvalid, a.t, o.op, b.t)
		}
		n, err := addNumbers(a.s, b.s, o.op == "-")
		if err != nil {
			return nil, err
		}
		return &value{t: "N", s: n}, nil
	}
}

// partitionValue finds, in a key condition expression, the value the
// partition key attribute hashKey must equal: "#0 = :0", "(#0 = :0) AND
// (#1 <= :1)", "pk = :v AND begins_with(sk, :p)".
func partitionValue(expr, hashKey string, names map[string]string, values map[string]*value) (*value, error) {
	toks, err := tokenize(expr)
	if err != nil {
		return nil, fmt.Errorf("%w: key condition: %v", ErrUnsupported, err)
	}
	resolve := func(t token) string {
		switch t.kind {
		case 'n':
			return names[t.text]
		case 'i':
			return t.text
		}
		return ""
	}
	for i := 0; i+2 < len(toks); i++ {
		if toks[i+1].kind != '=' {
			continue
		}
		l, r := toks[i], toks[i+2]
		if r.kind == 'v' && resolve(l) == hashKey {
			if v, ok := values[r.text]; ok {
				return v, nil
			}
		}
		if l.kind == 'v' && resolve(r) == hashKey {
			if v, ok := values[l.text]; ok {
				return v, nil
			}
		}
	}
	return nil, fmt.Errorf("%w: key condition %q has no %s = :value", ErrUnsupported, expr, hashKey)
}
