// Package api_test holds the test of the module's public API as a whole:
// an operator in another module can use every exported identifier of a
// package outside internal/, so none of them may name an internal type.
package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNoInternalTypeInPublicAPI fails when an exported identifier of a
// package outside internal/ (a func's signature, a method of an exported
// type, an exported field, a var, a const, a type or an alias) names a
// type of an internal package: another module could not make or name a
// value of it.
func TestNoInternalTypeInPublicAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the export data of every package")
	}
	found, err := internalTypesInAPI(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("internal type in the public API: %s", f)
	}
}

// TestInternalTypeInPublicAPIFound plants each kind of leak in a module
// of its own and checks that every one is reported, and nothing else.
func TestInternalTypeInPublicAPIFound(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":                "module example.com/leak\n\ngo 1.26\n",
		"lib/internal/x/x.go":   "package x\n\ntype T struct{}\n\ntype U int\n",
		"lib/internal/ok/ok.go": "package ok\n\nimport \"example.com/leak/lib/internal/x\"\n\nfunc F() x.T { return x.T{} }\n",
		"main.go":               "package main\n\nimport \"example.com/leak/lib\"\n\nfunc main() { _ = lib.F }\n",
		"lib/lib.go": `package lib

import "example.com/leak/lib/internal/x"

func F(n int) (*x.T, error) { return nil, nil }

type S struct {
	Field  map[string][]x.U
	hidden x.T
}

func (S) M() chan x.T  { return nil }
func (S) m() x.T       { return x.T{} }
func unexported() x.T  { return x.T{} }

type A = x.T

var V func(x.U)

const C x.U = 1

type G[P interface{ x.U | string }] struct{}

type I interface{ N() []x.T }

type E struct{ x.T }

type Fine struct{ N int }

func (Fine) Ok() string { return "" }

var (
	_ = unexported
	_ = S{}.hidden
	_ = S.m
)
`,
	}
	for name, body := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	found, err := internalTypesInAPI(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"example.com/leak/lib.A: example.com/leak/lib/internal/x.T",
		"example.com/leak/lib.C: example.com/leak/lib/internal/x.U",
		"example.com/leak/lib.E.T: example.com/leak/lib/internal/x.T",
		"example.com/leak/lib.F: example.com/leak/lib/internal/x.T",
		"example.com/leak/lib.G: example.com/leak/lib/internal/x.U",
		"example.com/leak/lib.I.N: example.com/leak/lib/internal/x.T",
		"example.com/leak/lib.S.Field: example.com/leak/lib/internal/x.U",
		"example.com/leak/lib.S.M: example.com/leak/lib/internal/x.T",
		"example.com/leak/lib.V: example.com/leak/lib/internal/x.U",
	}
	if !slices.Equal(found, want) {
		t.Errorf("found:\n%s\nwant:\n%s", strings.Join(found, "\n"), strings.Join(want, "\n"))
	}
}

// listed is what go list says of one package.
type listed struct {
	ImportPath, Name, Export string
	GoFiles                  []string
	Standard, DepOnly        bool
	Error                    *struct{ Err string }
}

// internalTypesInAPI lists, sorted, each exported identifier of the
// module in dir, outside internal/, main packages and packages of tests
// alone, that names a type
// of an internal package, as "pkg.Ident[.Member]: internal/pkg.Type".
// It reads the packages' export data, which go list builds.
func internalTypesInAPI(dir string) ([]string, error) {
	cmd := exec.Command("go", "list", "-e", "-export", "-deps", "-json=ImportPath,Name,Export,GoFiles,Standard,DepOnly,Error", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v: %s", err, stderr.Bytes())
	}
	exports := map[string]string{}
	var public []string
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		exports[p.ImportPath] = p.Export
		if !p.Standard && !p.DepOnly && len(p.GoFiles) > 0 && p.Name != "main" && !isInternal(p.ImportPath) {
			public = append(public, p.ImportPath)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		if exports[path] == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(exports[path])
	})
	var found []string
	for _, path := range public {
		pkg, err := imp.Import(path)
		if err != nil {
			return nil, err
		}
		found = append(found, leaks(pkg)...)
	}
	slices.Sort(found)
	return slices.Compact(found), nil
}

// isInternal reports whether path has an element named internal.
func isInternal(path string) bool {
	return slices.Contains(strings.Split(path, "/"), "internal")
}

// leaks returns the internal types that the exported identifiers of pkg
// name.
func leaks(pkg *types.Package) []string {
	var found []string
	report := func(where string) func(*types.TypeName) {
		return func(tn *types.TypeName) {
			found = append(found, fmt.Sprintf("%s.%s: %s.%s", pkg.Path(), where, tn.Pkg().Path(), tn.Name()))
		}
	}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		tn, ok := obj.(*types.TypeName)
		if !ok || tn.IsAlias() {
			walk(obj.Type(), report(name), nil)
			continue
		}
		named := tn.Type().(*types.Named)
		for tp := range named.TypeParams().TypeParams() {
			walk(tp.Constraint(), report(name), nil)
		}
		for m := range named.Methods() {
			if m.Exported() {
				walk(m.Type(), report(name+"."+m.Name()), nil)
			}
		}
		switch u := named.Underlying().(type) {
		case *types.Struct:
			for f := range u.Fields() {
				if f.Exported() {
					walk(f.Type(), report(name+"."+f.Name()), nil)
				}
			}
		case *types.Interface:
			for m := range u.Methods() {
				walk(m.Type(), report(name+"."+m.Name()), nil)
			}
			for e := range u.EmbeddedTypes() {
				walk(e, report(name), nil)
			}
		default:
			walk(u, report(name), nil)
		}
	}
	return found
}

// walk calls found for each named type of an internal package that t
// names, looking through composite types, signatures, type arguments and
// constraints, but not into the definition of a named type, which is
// checked with its own package. seen breaks cycles through type
// parameters.
func walk(t types.Type, found func(*types.TypeName), seen map[types.Type]bool) {
	if seen[t] {
		return
	}
	if seen == nil {
		seen = map[types.Type]bool{}
	}
	seen[t] = true
	switch t := t.(type) {
	case *types.Named:
		if tn := t.Obj(); tn.Pkg() != nil && isInternal(tn.Pkg().Path()) {
			found(tn)
		}
		for a := range t.TypeArgs().Types() {
			walk(a, found, seen)
		}
	case *types.Alias:
		if tn := t.Obj(); tn.Pkg() != nil && isInternal(tn.Pkg().Path()) {
			found(tn)
		}
		walk(types.Unalias(t), found, seen)
	case *types.Pointer:
		walk(t.Elem(), found, seen)
	case *types.Slice:
		walk(t.Elem(), found, seen)
	case *types.Array:
		walk(t.Elem(), found, seen)
	case *types.Chan:
		walk(t.Elem(), found, seen)
	case *types.Map:
		walk(t.Key(), found, seen)
		walk(t.Elem(), found, seen)
	case *types.Signature:
		for tp := range t.TypeParams().TypeParams() {
			walk(tp.Constraint(), found, seen)
		}
		for v := range t.Params().Variables() {
			walk(v.Type(), found, seen)
		}
		for v := range t.Results().Variables() {
			walk(v.Type(), found, seen)
		}
	case *types.Struct:
		for f := range t.Fields() {
			walk(f.Type(), found, seen)
		}
	case *types.Interface:
		for m := range t.ExplicitMethods() {
			walk(m.Type(), found, seen)
		}
		for e := range t.EmbeddedTypes() {
			walk(e, found, seen)
		}
	case *types.Union:
		for term := range t.Terms() {
			walk(term.Type(), found, seen)
		}
	case *types.TypeParam:
		walk(t.Constraint(), found, seen)
	}
}
