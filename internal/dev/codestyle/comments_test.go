package codestyle

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// issueRef is a comment's citation of one of this project's issues: the
// word issue, then its number. A citation of another project's names its
// repository (aws-sdk-go-v2#3005) and is not one, nor is an expression's
// placeholder (#0).
var issueRef = regexp.MustCompile(`(?i)\bissues? #?\d+`)

// TestNoCommentCitesAnIssue parses every .go file of every module of the
// repository, tests included (not testdata, tools' folders or
// node_modules), and fails for a comment that cites an issue: a comment
// names the test or the doc that says why, which a reader of the code
// has, where an issue number points at a tracker the reader may never
// see.
func TestNoCommentCitesAnIssue(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, "_") || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		for _, g := range f.Comments {
			for _, c := range g.List {
				if m := issueRef.FindString(c.Text); m != "" {
					t.Errorf("%s: a comment cites an issue (%q): name the test or doc that says why", fset.Position(c.Pos()), strings.TrimSpace(m))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 300 {
		t.Fatalf("parsed %d files, want the repository's", files)
	}
}
