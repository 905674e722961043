package partitions

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// built runs the SDK's expression builder, as the store does, and returns
// the expression with its names and values in the model's terms.
func built(t *testing.T, upd expression.UpdateBuilder) (string, map[string]string, map[string]*value) {
	t.Helper()
	expr, err := expression.NewBuilder().WithUpdate(upd).Build()
	if err != nil {
		t.Fatal(err)
	}
	return *expr.Update(), expr.Names(), wireValues(t, expr.Values())
}

// wireValues turns SDK attribute values into the model's, through the
// JSON DynamoDB's protocol would carry.
func wireValues(t *testing.T, in map[string]types.AttributeValue) map[string]*value {
	t.Helper()
	out := map[string]*value{}
	b, err := json.Marshal(wireMap(in))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustItem(t *testing.T, js string) item {
	t.Helper()
	it, err := decodeItem(json.RawMessage(js))
	if err != nil {
		t.Fatalf("decode %s: %v", js, err)
	}
	return it
}

func TestApplyUpdate(t *testing.T) {
	key := `{"id":{"S":"j1"}}`
	cases := []struct {
		name string
		upd  expression.UpdateBuilder
		old  string // "" : the item does not exist
		want string
	}{
		{"set values on a new item",
			expression.Set(expression.Name("status"), expression.Value("queued")).Set(expression.Name("n"), expression.Value(3)),
			"", `{"id":{"S":"j1"},"status":{"S":"queued"},"n":{"N":"3"}}`},
		{"the store's finish: set, remove the sweep keys",
			expression.Set(expression.Name("status"), expression.Value("succeeded")).
				Set(expression.Name("finished_ms"), expression.Value(1700000000123)).
				Remove(expression.Name("token")).Remove(expression.Name("sweep_shard")).Remove(expression.Name("sweep_at")),
			`{"id":{"S":"j1"},"status":{"S":"running"},"token":{"S":"t"},"sweep_shard":{"S":"3"},"sweep_at":{"N":"17"}}`,
			`{"id":{"S":"j1"},"status":{"S":"succeeded"},"finished_ms":{"N":"1700000000123"}}`},
		{"if_not_exists takes the old attribute",
			expression.Set(expression.Name("ls"), expression.IfNotExists(expression.Name("lo"), expression.Value("-"))),
			`{"id":{"S":"j1"},"lo":{"S":"owner"}}`, `{"id":{"S":"j1"},"lo":{"S":"owner"},"ls":{"S":"owner"}}`},
		{"if_not_exists takes the value when the attribute is missing",
			expression.Set(expression.Name("ls"), expression.IfNotExists(expression.Name("lo"), expression.Value("-"))),
			`{"id":{"S":"j1"}}`, `{"id":{"S":"j1"},"ls":{"S":"-"}}`},
		{"operands read the item before the update",
			expression.Set(expression.Name("last_error"), expression.IfNotExists(expression.Name("error_code"), expression.Value("cancelled"))).
				Remove(expression.Name("error_code")),
			`{"id":{"S":"j1"},"error_code":{"S":"boom"}}`, `{"id":{"S":"j1"},"last_error":{"S":"boom"}}`},
		{"add to counters, negative too",
			expression.Add(expression.Name("remaining"), expression.Value(-1)).Add(expression.Name("succeeded"), expression.Value(1)),
			`{"id":{"S":"j1"},"remaining":{"N":"10"}}`, `{"id":{"S":"j1"},"remaining":{"N":"9"},"succeeded":{"N":"1"}}`},
		{"plus and minus",
			expression.Set(expression.Name("a"), expression.Name("a").Plus(expression.Value(2.5))).
				Set(expression.Name("b"), expression.Name("b").Minus(expression.Value(1))),
			`{"id":{"S":"j1"},"a":{"N":"1"},"b":{"N":"1"}}`, `{"id":{"S":"j1"},"a":{"N":"3.5"},"b":{"N":"0"}}`},
		{"list_append",
			expression.Set(expression.Name("l"), expression.ListAppend(expression.Name("l"), expression.Value([]string{"y"}))),
			`{"id":{"S":"j1"},"l":{"L":[{"S":"x"}]}}`, `{"id":{"S":"j1"},"l":{"L":[{"S":"x"},{"S":"y"}]}}`},
		{"add and delete set elements",
			expression.Add(expression.Name("tags"), expression.Value(&types.AttributeValueMemberSS{Value: []string{"b", "c"}})).Delete(expression.Name("gone"), expression.Value(&types.AttributeValueMemberSS{Value: []string{"x"}})),
			`{"id":{"S":"j1"},"tags":{"SS":["a","b"]},"gone":{"SS":["x"]}}`, `{"id":{"S":"j1"},"tags":{"SS":["a","b","c"]}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			expr, names, values := built(t, tc.upd)
			u, err := parseUpdate(expr, names, values)
			if err != nil {
				t.Fatalf("parse %q: %v", expr, err)
			}
			var old item
			if tc.old != "" {
				old = mustItem(t, tc.old)
			}
			got, err := u.apply(old, mustItem(t, key))
			if err != nil {
				t.Fatalf("apply %q: %v", expr, err)
			}
			if want := mustItem(t, tc.want); !got.equal(want) {
				t.Errorf("%q on %s: got %s, want %s", expr, tc.old, render(got), render(want))
			}
		})
	}
}

func TestUpdateByHand(t *testing.T) {
	values := map[string]*value{":v": {t: "S", s: "x"}, ":n": {t: "N", s: "2"}}
	cases := []struct {
		expr, old, want string
	}{
		{"set a = :v, b = :n", `{}`, `{"a":{"S":"x"},"b":{"N":"2"}}`},
		{"remove a SET b = :v", `{"a":{"S":"x"}}`, `{"b":{"S":"x"}}`},
		{"  Add n :n  ", `{"n":{"N":"40"}}`, `{"n":{"N":"42"}}`},
		{"SET a = b", `{"b":{"S":"copied"}}`, `{"a":{"S":"copied"},"b":{"S":"copied"}}`},
		// A slot item's release drops one holder from its map.
		{"REMOVE h.w1 ADD n :n", `{"h":{"M":{"w1":{"N":"1"},"w2":{"N":"2"}}},"n":{"N":"1"}}`, `{"h":{"M":{"w2":{"N":"2"}}},"n":{"N":"3"}}`},
		{"REMOVE h.gone", `{"h":{"M":{"w1":{"N":"1"}}}}`, `{"h":{"M":{"w1":{"N":"1"}}}}`},
		// A take sets one holder's lease; a release or a pop takes the first
		// waiter off the list (an index past its end changes nothing).
		{"SET h.w2 = :n ADD n :n", `{"h":{"M":{"w1":{"N":"1"}}},"n":{"N":"1"}}`, `{"h":{"M":{"w1":{"N":"1"},"w2":{"N":"2"}}},"n":{"N":"3"}}`},
		{"REMOVE h.w1, w[0]", `{"h":{"M":{"w1":{"N":"1"}}},"w":{"L":[{"S":"a"},{"S":"b"}]}}`, `{"h":{"M":{}},"w":{"L":[{"S":"b"}]}}`},
		{"REMOVE w[0], w[2]", `{"w":{"L":[{"S":"a"},{"S":"b"},{"S":"c"}]}}`, `{"w":{"L":[{"S":"b"}]}}`},
		{"REMOVE w[0]", `{"w":{"L":[]}}`, `{"w":{"L":[]}}`},
		{"SET h.a = :v REMOVE h.w1", `{"h":{"M":{"w1":{"N":"1"}}}}`, `{"h":{"M":{"a":{"S":"x"}}}}`},
	}
	for _, tc := range cases {
		u, err := parseUpdate(tc.expr, nil, values)
		if err != nil {
			t.Errorf("parse %q: %v", tc.expr, err)
			continue
		}
		got, err := u.apply(mustItem(t, tc.old), item{})
		if err != nil {
			t.Errorf("apply %q: %v", tc.expr, err)
			continue
		}
		if want := mustItem(t, tc.want); !got.equal(want) {
			t.Errorf("%q on %s: got %s, want %s", tc.expr, tc.old, render(got), render(want))
		}
	}
}

func TestUpdateRefused(t *testing.T) {
	names := map[string]string{"#0": "a", "#1": "b"}
	values := map[string]*value{":0": {t: "S", s: "x"}}
	cases := []struct{ name, expr string }{
		{"a member's member", "SET #0.#1.#0 = :0"},
		{"list element", "SET #0[1] = :0"},
		{"a removed list element's member", "REMOVE #0[1].#1"},
		{"a removed member's member", "REMOVE #0.#1.#0"},
		{"a member as an operand", "SET #0 = #1.#0"},
		{"name not given", "SET #9 = :0"},
		{"value not given", "SET #0 = :9"},
		{"two SET clauses", "SET #0 = :0 SET #1 = :0"},
		{"no keyword", "#0 = :0"},
		{"empty", ""},
		{"unknown function", "SET #0 = size(#1)"},
		{"garbage", "SET #0 = :0 ;"},
		{"dangling comma", "REMOVE #0,"},
		{"ADD without a value", "ADD #0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseUpdate(tc.expr, names, values)
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("parse %q: %v, want ErrUnsupported", tc.expr, err)
			}
		})
	}
}

func TestUpdateThatDynamoDBRefuses(t *testing.T) {
	u, err := parseUpdate("SET a = b", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.apply(item{}, item{}); !errors.Is(err, errInvalid) {
		t.Fatalf("a copy of a missing attribute: %v, want errInvalid", err)
	}
	u, err = parseUpdate("REMOVE a.b", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, old := range []string{`{}`, `{"a":{"S":"x"}}`} {
		if _, err := u.apply(mustItem(t, old), item{}); !errors.Is(err, errInvalid) {
			t.Errorf("a member of %s removed: %v, want errInvalid", old, err)
		}
	}
	for _, expr := range []string{"SET a.b = :v", "REMOVE a[0]"} {
		u, err := parseUpdate(expr, nil, map[string]*value{":v": {t: "S", s: "x"}})
		if err != nil {
			t.Fatal(err)
		}
		// The release of a slot item written before its waiters were
		// always there: DynamoDB refuses it, and so does the model.
		for _, old := range []string{`{}`, `{"a":{"S":"x"}}`} {
			if _, err := u.apply(mustItem(t, old), item{}); !errors.Is(err, errInvalid) {
				t.Errorf("%s on %s: %v, want errInvalid", expr, old, err)
			}
		}
	}
}

func TestPartitionValue(t *testing.T) {
	kc := expression.Key("lo").Equal(expression.Value("owner-1")).And(expression.Key("lc").LessThan(expression.Value("0001")))
	expr, err := expression.NewBuilder().WithKeyCondition(kc).Build()
	if err != nil {
		t.Fatal(err)
	}
	v, err := partitionValue(*expr.KeyCondition(), "lo", expr.Names(), wireValues(t, expr.Values()))
	if err != nil || v.s != "owner-1" {
		t.Fatalf("%q: %v %v, want owner-1", *expr.KeyCondition(), v, err)
	}
	values := map[string]*value{":p": {t: "S", s: "x"}, ":s": {t: "N", s: "1"}}
	for expr, want := range map[string]string{
		"pk = :p":                            "x",
		":p = pk AND sk >= :s":               "x",
		"pk = :p AND begins_with(sk, :s)":    "x",
		"sk BETWEEN :s AND :s AND pk = :p":   "x",
		"sk <= :s AND pk=:p":                 "x",
		"(pk = :p) AND (sk <> :s)":           "x",
		"other = :p":                         "",
		"pk < :p":                            "",
		"pk = :missing":                      "",
		"pk = :p AND sk = :s AND garbage ; ": "",
	} {
		v, err := partitionValue(expr, "pk", nil, values)
		switch {
		case want == "" && !errors.Is(err, ErrUnsupported):
			t.Errorf("%q: %v %v, want ErrUnsupported", expr, v, err)
		case want != "" && (err != nil || v.s != want):
			t.Errorf("%q: %v %v, want %s", expr, v, err, want)
		}
	}
}

func TestSizes(t *testing.T) {
	cases := []struct {
		av   string
		want int
	}{
		{`{"S":"hello"}`, 5},
		{`{"S":"é"}`, 2},
		{`{"N":"1"}`, 2},
		{`{"N":"1000"}`, 2},
		{`{"N":"123"}`, 3},
		{`{"N":"-12.5"}`, 3},
		{`{"N":"1700000000123"}`, 8},
		{`{"B":"AAEC"}`, 3},
		{`{"BOOL":true}`, 1},
		{`{"NULL":true}`, 1},
		{`{"L":[{"S":"ab"},{"N":"1"}]}`, 3 + 2 + 1 + 2 + 1},
		{`{"M":{"k":{"S":"ab"}}}`, 3 + 1 + 2 + 1},
		{`{"SS":["a","bc"]}`, 3},
		{`{"NS":["1","22"]}`, 4},
	}
	for _, tc := range cases {
		var v value
		if err := json.Unmarshal([]byte(tc.av), &v); err != nil {
			t.Fatalf("%s: %v", tc.av, err)
		}
		if got := v.size(); got != tc.want {
			t.Errorf("size of %s: %d, want %d", tc.av, got, tc.want)
		}
		again, err := json.Marshal(&v)
		if err != nil {
			t.Fatal(err)
		}
		var back value
		if err := json.Unmarshal(again, &back); err != nil || !back.equal(&v) {
			t.Errorf("%s round-tripped as %s (%v)", tc.av, again, err)
		}
	}
	it := mustItem(t, `{"id":{"S":"abc"},"n":{"N":"5"}}`)
	if got := it.size(); got != 2+3+1+2 {
		t.Errorf("item size %d, want 8", got)
	}
}

func TestNumbersAreCanonical(t *testing.T) {
	for in, want := range map[string]string{"1.50": "1.5", "15e-1": "1.5", "-0": "0", "007": "7", "1E3": "1000", "0.000": "0"} {
		got, err := canonNumber(in)
		if err != nil || got != want {
			t.Errorf("canonNumber(%q) = %q %v, want %q", in, got, err, want)
		}
	}
	if _, err := canonNumber("ten"); err == nil {
		t.Error("canonNumber(ten): no error")
	}
}

// FuzzParseUpdate: no expression makes the parser or the evaluator panic,
// and whatever parses applies or fails with an error.
func FuzzParseUpdate(f *testing.F) {
	for _, s := range []string{
		"SET #0 = :0, #1 = if_not_exists(#2, :1)\nREMOVE #3",
		"ADD #0 :0\nDELETE #1 :1\nREMOVE #2\nSET #3 = list_append(#4, :1), #5 = #6 + :0",
		"SET #0.#1 = :0", "SET a = b - :0", "REMOVE", "SET = :0", "if_not_exists(", "SET #0 = if_not_exists(#1, if_not_exists(#2, :0))",
	} {
		f.Add(s)
	}
	names := map[string]string{"#0": "a", "#1": "b", "#2": "c", "#3": "d", "#4": "e", "#5": "f", "#6": "g"}
	values := map[string]*value{":0": {t: "N", s: "1"}, ":1": {t: "SS", set: []string{"x"}}}
	old := item{"a": {t: "N", s: "4"}, "e": {t: "L"}, "b": {t: "SS", set: []string{"x", "y"}}, "g": {t: "S", s: "s"}}
	f.Fuzz(func(t *testing.T, expr string) {
		u, err := parseUpdate(expr, names, values)
		if err != nil {
			if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "partition model") {
				t.Fatalf("%q: error %v is not ErrUnsupported", expr, err)
			}
			return
		}
		_, _ = u.apply(old, item{"id": {t: "S", s: "k"}})
		_, _ = partitionValue(expr, "a", names, values)
	})
}

// wireMap writes SDK attribute values as DynamoDB's JSON protocol does.
func wireMap(in map[string]types.AttributeValue) map[string]any {
	out := map[string]any{}
	for k, v := range in {
		out[k] = wire(v)
	}
	return out
}

func wire(v types.AttributeValue) map[string]any {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return map[string]any{"S": v.Value}
	case *types.AttributeValueMemberN:
		return map[string]any{"N": v.Value}
	case *types.AttributeValueMemberB:
		return map[string]any{"B": v.Value}
	case *types.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": v.Value}
	case *types.AttributeValueMemberNULL:
		return map[string]any{"NULL": true}
	case *types.AttributeValueMemberSS:
		return map[string]any{"SS": v.Value}
	case *types.AttributeValueMemberNS:
		return map[string]any{"NS": v.Value}
	case *types.AttributeValueMemberBS:
		return map[string]any{"BS": v.Value}
	case *types.AttributeValueMemberL:
		l := make([]any, len(v.Value))
		for i, e := range v.Value {
			l[i] = wire(e)
		}
		return map[string]any{"L": l}
	case *types.AttributeValueMemberM:
		return map[string]any{"M": wireMap(v.Value)}
	}
	panic("unknown attribute value")
}
