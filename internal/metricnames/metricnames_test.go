package metricnames_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"testing"

	"github.com/lambdajobs/lambdajobs/internal/metricnames"
)

// Every metric constant is in All (and so Known), once, and is spelt as
// its own name; the dimensions are not metrics.
func TestAllListsEveryName(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "metricnames.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	dims := []string{metricnames.Service, metricnames.Kind, metricnames.Code, metricnames.Lane}
	var consts []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				v, err := strconv.Unquote(vs.Values[i].(*ast.BasicLit).Value)
				if err != nil {
					t.Fatal(err)
				}
				if slices.Contains(dims, v) {
					continue
				}
				if v != name.Name {
					t.Errorf("constant %s is %q: a metric constant is spelt as its value", name.Name, v)
				}
				consts = append(consts, v)
			}
		}
	}
	slices.Sort(consts)
	all := slices.Clone(metricnames.All)
	slices.Sort(all)
	if !slices.Equal(consts, all) {
		t.Errorf("All = %v, want every constant once: %v", all, consts)
	}
	if metricnames.Known("JobsSucceded") || !metricnames.Known(metricnames.JobsSucceeded) {
		t.Error("Known does not tell the names")
	}
}
