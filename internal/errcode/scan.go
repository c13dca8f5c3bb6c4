package errcode

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
)

// Unmapped returns the sentinel errors of the packages in dirs that t does
// not list, by their entry names (see Entry.Name), so that a test fails
// when a package gains a sentinel that no table maps. root is the module's
// root directory; each dir is relative to it, and a dir ending in "/..."
// stands for it and every package below it. A sentinel is an exported
// package-level Err* variable whose value is made in its package by
// errors.New or fmt.Errorf (an alias of another package's sentinel is
// mapped under that package's name). found is the number of sentinels
// seen, for the caller to check that the scan found any.
func Unmapped(t Table, root string, dirs ...string) (missing []string, found int, err error) {
	for _, d := range dirs {
		names, err := sentinels(root, d)
		if err != nil {
			return nil, 0, err
		}
		for _, n := range names {
			found++
			if _, ok := t.ByName(n); !ok {
				missing = append(missing, n)
			}
		}
	}
	return missing, found, nil
}

// sentinels returns the entry names of the sentinels in dir (relative to
// root; "/..." for the tree below it).
func sentinels(root, dir string) ([]string, error) {
	rec := strings.HasSuffix(dir, "/...")
	dir = strings.TrimSuffix(dir, "/...")
	var out []string
	err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != filepath.Join(root, dir) && (!rec || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		names, err := fileSentinels(path)
		for _, n := range names {
			out = append(out, filepath.ToSlash(rel)+"."+n)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("scan %s for sentinel errors: %w", dir, err)
	}
	return out, nil
}

// fileSentinels returns the names of the sentinels the Go file at path
// declares.
func fileSentinels(path string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range f.Decls {
		gd, ok := d.(*ast.GenDecl)
		if !ok || gd.Tok != token.VAR {
			continue
		}
		for _, sp := range gd.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, id := range vs.Names {
				if !id.IsExported() || !strings.HasPrefix(id.Name, "Err") || i >= len(vs.Values) {
					continue
				}
				if call, ok := vs.Values[i].(*ast.CallExpr); ok {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "New" || sel.Sel.Name == "Errorf") {
						out = append(out, id.Name)
					}
				}
			}
		}
	}
	return out, nil
}
