// Package openapi turns docs/reference/openapi.yaml into the JSON document the
// library's contract tests read (pkg/jobs/httpapi/testdata/openapi.json),
// and its test keeps that copy equal to the YAML.
//
// The YAML is the one source: people edit it. The library's module needs
// no YAML parser for its tests to read it, and so none enters the module
// graph of a team that requires the library; the parser lives here, in
// the module internal/devtools (see docs/guide/MODULES.md). After editing the
// YAML, `make openapi-json` rewrites the copy.
package openapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// JSON returns the YAML document doc as indented JSON (object keys
// sorted, a final newline). It refuses what JSON cannot say or what
// would be read two ways: more than one document, a key given twice, a
// merge key, a non-finite number, a tag other than YAML's core ones.
func JSON(doc []byte) ([]byte, error) {
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		return nil, fmt.Errorf("openapi: line %d: a second document; want one", more.Line)
	}
	v, err := value(&root)
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	return out.Bytes(), nil
}

// value is the JSON value of one YAML node.
func value(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return nil, errors.New("an empty document")
		}
		return value(n.Content[0])
	case yaml.AliasNode:
		return value(n.Alias)
	case yaml.SequenceNode:
		list := make([]any, 0, len(n.Content))
		for _, item := range n.Content {
			v, err := value(item)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		return list, nil
	case yaml.MappingNode:
		return object(n)
	case yaml.ScalarNode:
		return scalar(n)
	}
	return nil, fmt.Errorf("line %d: a node of kind %d", n.Line, n.Kind)
}

// object is a mapping's JSON object; its keys are the keys' text (a
// status code written 200 is the key "200", as OpenAPI means it).
func object(n *yaml.Node) (map[string]any, error) {
	obj := make(map[string]any, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: a key that is not a scalar", k.Line)
		}
		if k.ShortTag() == "!!merge" {
			return nil, fmt.Errorf("line %d: a merge key (<<), which JSON has no form for", k.Line)
		}
		if _, dup := obj[k.Value]; dup {
			return nil, fmt.Errorf("line %d: key %q given twice", k.Line, k.Value)
		}
		val, err := value(v)
		if err != nil {
			return nil, err
		}
		obj[k.Value] = val
	}
	return obj, nil
}

// scalar is a scalar's JSON value, by its resolved tag.
func scalar(n *yaml.Node) (any, error) {
	switch n.ShortTag() {
	case "!!str", "!!timestamp", "!!binary":
		return n.Value, nil
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return b, nil
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return json.Number(strconv.FormatInt(i, 10)), nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("line %d: %s, which JSON has no number for", n.Line, n.Value)
		}
		return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
	}
	return nil, fmt.Errorf("line %d: tag %s", n.Line, n.Tag)
}
