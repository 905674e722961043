package codestyle

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxParams is the most parameters a function or method may take (its
// receiver not counted; a variadic parameter counts one).
const maxParams = 5

// params counts the parameters of a function type: each name of a field,
// or one for an unnamed field.
func params(ft *ast.FuncType) int {
	n := 0
	for _, f := range ft.Params.List {
		n += max(len(f.Names), 1)
	}
	return n
}

// TestNoFunctionTakesMoreThanFiveParameters parses every non-test .go file
// of the root module (not the modules nested in it, testdata, tools'
// folders or generated files) and fails for any function, method or
// function literal with more than five parameters.
func TestNoFunctionTakesMoreThanFiveParameters(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	fset := token.NewFileSet()
	files := 0
	sawWorker := false
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == root {
				return nil
			}
			name := d.Name()
			if name == "testdata" || name == "node_modules" || strings.HasPrefix(name, "_") || strings.HasPrefix(name, ".") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a module of its own (infra, bench, examples)
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if ast.IsGenerated(f) {
			return nil
		}
		files++
		if filepath.ToSlash(path) == "../../../pkg/jobs/worker.go" {
			sawWorker = true
		}
		ast.Inspect(f, func(n ast.Node) bool {
			var name string
			var ft *ast.FuncType
			switch fn := n.(type) {
			case *ast.FuncDecl:
				name, ft = fn.Name.Name, fn.Type
				if fn.Recv != nil && len(fn.Recv.List) == 1 {
					name = recvName(fn.Recv.List[0].Type) + "." + name
				}
			case *ast.FuncLit:
				name, ft = "a function literal", fn.Type
			default:
				return true
			}
			if got := params(ft); got > maxParams {
				t.Errorf("%s: %s takes %d parameters, want at most %d: hold what they share in a struct (as the engine's run does)",
					fset.Position(n.Pos()), name, got, maxParams)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 || !sawWorker {
		t.Fatalf("parsed %d files (pkg/jobs/worker.go among them: %v): the walk missed the module", files, sawWorker)
	}
}

// recvName is the type name of a method's receiver.
func recvName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return recvName(x.X)
	case *ast.IndexExpr:
		return recvName(x.X)
	case *ast.IndexListExpr:
		return recvName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return "?"
}
