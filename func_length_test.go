package api_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxFuncLines is the most lines a product function may span, from its
// func line to its closing brace: past it, a function is a design
// question rather than a unit a reviewer holds in their head.
const maxFuncLines = 60

// notProduct are the main module's folders of tools and test
// infrastructure, which the operator and the kit never link.
var notProduct = []string{"bench", "e2e", "hack", "testenv"}

// TestFuncLength fails naming each function of the product code (the
// non-test files of the main module, outside notProduct, and of the
// examples' module) longer than maxFuncLines.
func TestFuncLength(t *testing.T) {
	for _, root := range []string{".", "examples"} {
		found, err := longFuncs(root, maxFuncLines, notProduct...)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range found {
			t.Errorf("function over %d lines: %s", maxFuncLines, filepath.Join(root, f))
		}
	}
}

// TestLongFuncsFound plants long and short declarations and function
// literals in a module with a nested module, a testdata folder and a test
// file, and checks that only the long ones of the product files are
// reported.
func TestLongFuncsFound(t *testing.T) {
	dir := t.TempDir()
	body := func(n int) string { return strings.Repeat("\t_ = 0\n", n-2) }
	long := "package p\n\nfunc Long() {\n" + body(4) + "}\n\n" +
		"func (*T) Method() {\n" + body(4) + "}\n\ntype T struct{}\n\n" +
		"var V = func() {\n" + body(4) + "}\n\nfunc Fits() {\n" + body(3) + "}\n"
	files := map[string]string{
		"go.mod":               "module example.com/p\n",
		"p.go":                 long,
		"p_test.go":            long,
		"testdata/p.go":        long,
		"nested/go.mod":        "module example.com/nested\n",
		"nested/p.go":          long,
		"sub/notgo.txt":        long,
		"sub/sub.go":           "package sub\n\nfunc F() {\n\tgo func() {\n" + body(4) + "\t}()\n}\n",
		"_ignored/p.go":        long,
		"tools/p.go":           long,
		".hidden/p.go":         long,
		"sub/deeper/broken.go": "package deeper\n\nfunc F() {\n",
	}
	for name, text := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := longFuncs(dir, 3, "tools"); err == nil || !strings.Contains(err.Error(), "broken.go") {
		t.Fatalf("a file that does not parse: err = %v, want one naming it", err)
	}
	if err := os.Remove(filepath.Join(dir, "sub", "deeper", "broken.go")); err != nil {
		t.Fatal(err)
	}
	found, err := longFuncs(dir, 3, "tools")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"p.go:3 Long (4 lines)",
		"p.go:8 T.Method (4 lines)",
		"p.go:15 func literal (4 lines)",
		"sub/sub.go:3 F (6 lines)",
		"sub/sub.go:4 func literal (4 lines)",
	}
	if !slices.Equal(found, want) {
		t.Errorf("found:\n%s\nwant:\n%s", strings.Join(found, "\n"), strings.Join(want, "\n"))
	}
}

// longFuncs lists, in file order, each function declaration and function
// literal longer than max lines in the non-test .go files of the module
// whose top folder is root, as "path:line Name (n lines)". It skips what
// the go command skips (testdata, folders named with a leading dot or
// underscore), nested modules (a folder with a go.mod of its own) and
// the folders of root named in skip.
func longFuncs(root string, max int, skip ...string) ([]string, error) {
	var found []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			if path != root && (skipDir(path, d.Name()) || slices.Contains(skip, filepath.ToSlash(rel))) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			name := ""
			switch n := n.(type) {
			case *ast.FuncDecl:
				name = n.Name.Name
				if n.Recv != nil && len(n.Recv.List) == 1 {
					name = recvName(n.Recv.List[0].Type) + "." + name
				}
			case *ast.FuncLit:
				name = "func literal"
			default:
				return true
			}
			from, to := fset.Position(n.Pos()).Line, fset.Position(n.End()).Line
			if to-from+1 > max {
				found = append(found, fmt.Sprintf("%s:%d %s (%d lines)", filepath.ToSlash(rel), from, name, to-from+1))
			}
			return true
		})
		return nil
	})
	return found, err
}

// skipDir reports whether the walk of a module skips the folder at path:
// the go command ignores it, or it holds a module of its own.
func skipDir(path, name string) bool {
	if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
		return true
	}
	_, err := os.Stat(filepath.Join(path, "go.mod"))
	return err == nil
}

// recvName is the name of a method's receiver type, without a pointer or
// type parameters.
func recvName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvName(e.X)
	case *ast.IndexExpr:
		return recvName(e.X)
	case *ast.IndexListExpr:
		return recvName(e.X)
	case *ast.Ident:
		return e.Name
	}
	return "?"
}
