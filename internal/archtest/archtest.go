// Package archtest checks docs/architecture.md against the code: its layer
// table (one row per package: its layer and the proxybench packages it
// imports) and its package table (what each package owns) against the
// packages and non-test imports `go list` reports. Its test fails, naming
// the package and the import, when the code imports a package the layer
// table does not list, when the table lists an import the code no longer
// has, when a package of the tree is missing from either table, and when
// an import points up the layer list. It is test support: no production
// package imports it (docs/architecture.md, "Layers").
package archtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Module is the main module's path; packages and imports are named
// relative to it ("internal/runner").
const Module = "github.com/proxybench/proxybench"

// Package is one package of the tree as go list reports it: its path
// relative to Module and the packages of Module its non-test files import.
type Package struct {
	Path    string
	Imports []string
}

// Layer is one package's row of the layer table.
type Layer struct {
	// Index is the layer's position in the table, 0 at the top: an
	// import may point to the same or a higher index, never a lower one.
	Index int
	// Name is the layer ("engines").
	Name string
	// Package is the package path relative to Module.
	Package string
	// Imports are the proxybench packages the table says it imports.
	Imports []string
	// Line is the row's line in the document, 1-based.
	Line int
}

// Doc is what the check reads from docs/architecture.md.
type Doc struct {
	// Layers are the layer table's rows, in table order.
	Layers []Layer
	// Packages are the first column of the package table: package paths
	// or patterns where a segment in angle brackets ("proxymodes/<mode>")
	// stands for any one path segment.
	Packages []string
	// OwnModule are the package table's entries whose "owns" cell
	// starts with "(own module)": not part of the main module's go list.
	OwnModule []string
}

var backticked = regexp.MustCompile("`([^`]*)`")

// Parse reads the layer table (the first table after the "## Layers"
// heading, whose header names "layer", "package" and "imports") and the
// package table (the first table after "## Packages"). In the layer
// table an empty layer cell continues the layer above; the package cell
// holds one package in backticks; every backticked word in the imports
// cell is a proxybench package (libraries are named in the other cells,
// in words).
func Parse(r io.Reader) (*Doc, error) {
	d := &Doc{}
	sc := bufio.NewScanner(r)
	section, line := "", 0
	inTable, header := false, false
	layer, index := "", -1
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(text, "## ") {
			section, inTable, header = strings.TrimPrefix(text, "## "), false, false
			continue
		}
		if !strings.HasPrefix(text, "|") {
			if inTable {
				section = "" // only the section's first table counts
			}
			inTable = false
			continue
		}
		cells := strings.Split(strings.Trim(text, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if !inTable {
			inTable, header = true, true
			if section == "Layers" && !(len(cells) >= 3 && strings.HasPrefix(cells[0], "layer") &&
				strings.HasPrefix(cells[1], "package") && strings.HasPrefix(cells[2], "imports")) {
				return nil, fmt.Errorf("line %d: the layer table's header is %q, want one that starts | layer | package | imports |", line, text)
			}
			continue
		}
		if header && strings.Trim(strings.Join(cells, ""), "-: ") == "" {
			header = false
			continue
		}
		switch section {
		case "Layers":
			if len(cells) < 3 {
				return nil, fmt.Errorf("line %d: layer table row %q has %d cells, want 3 or more", line, text, len(cells))
			}
			if cells[0] != "" {
				layer = cells[0]
				index++
			}
			if index < 0 {
				return nil, fmt.Errorf("line %d: the layer table's first row names no layer", line)
			}
			pkgs := backticked.FindAllStringSubmatch(cells[1], -1)
			if len(pkgs) != 1 {
				return nil, fmt.Errorf("line %d: layer table row %q: want one package in backticks in the package cell", line, text)
			}
			l := Layer{Index: index, Name: layer, Package: pkgs[0][1], Line: line}
			for _, m := range backticked.FindAllStringSubmatch(cells[2], -1) {
				l.Imports = append(l.Imports, m[1])
			}
			d.Layers = append(d.Layers, l)
		case "Packages":
			m := backticked.FindStringSubmatch(cells[0])
			if m == nil {
				return nil, fmt.Errorf("line %d: package table row %q: want the package in backticks in the first cell", line, text)
			}
			if len(cells) > 1 && strings.HasPrefix(cells[1], "(own module)") {
				d.OwnModule = append(d.OwnModule, m[1])
			} else {
				d.Packages = append(d.Packages, m[1])
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(d.Layers) == 0 {
		return nil, fmt.Errorf("no layer table under \"## Layers\"")
	}
	if len(d.Packages) == 0 {
		return nil, fmt.Errorf("no package table under \"## Packages\"")
	}
	return d, nil
}

// GoList reads the output of `go list -json ./...` (a stream of JSON
// objects) and returns each package of Module with its imports of
// Module, both relative to Module, sorted by path.
func GoList(r io.Reader) ([]Package, error) {
	var out []Package
	dec := json.NewDecoder(r)
	for {
		var p struct {
			ImportPath string
			Imports    []string
			Error      *struct{ Err string }
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list -json: %w", err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		path, ok := relative(p.ImportPath)
		if !ok {
			continue
		}
		pkg := Package{Path: path}
		for _, imp := range p.Imports {
			if rel, ok := relative(imp); ok {
				pkg.Imports = append(pkg.Imports, rel)
			}
		}
		sort.Strings(pkg.Imports)
		out = append(out, pkg)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// relative returns path relative to Module, and whether it is in Module.
func relative(path string) (string, bool) {
	if rest, ok := strings.CutPrefix(path, Module+"/"); ok {
		return rest, true
	}
	return "", false
}

// matches reports whether pkg is pattern, where a segment "<...>" of
// pattern stands for any one segment.
func matches(pattern, pkg string) bool {
	ps, ks := strings.Split(pattern, "/"), strings.Split(pkg, "/")
	if len(ps) != len(ks) {
		return false
	}
	for i := range ps {
		if ps[i] != ks[i] && !(strings.HasPrefix(ps[i], "<") && strings.HasSuffix(ps[i], ">")) {
			return false
		}
	}
	return true
}

// Check compares the document with the code and returns one line per
// disagreement, empty when they agree:
//
//   - a package of the tree missing from the layer table or the package
//     table, or a table entry that names no package of the tree;
//   - a package listed twice in the layer table;
//   - an import of the code the layer table does not list for the package;
//   - an import the layer table lists that the code does not have;
//   - an import of the code that points up the layer list (to a package
//     in a layer above the importer's).
func Check(d *Doc, pkgs []Package) []string {
	var errs []string
	byPath := map[string]Package{}
	for _, p := range pkgs {
		byPath[p.Path] = p
	}
	rows := map[string]Layer{}
	for _, l := range d.Layers {
		if prev, dup := rows[l.Package]; dup {
			errs = append(errs, fmt.Sprintf("layer table line %d: %s is listed again (first on line %d)", l.Line, l.Package, prev.Line))
			continue
		}
		rows[l.Package] = l
		if _, ok := byPath[l.Package]; !ok {
			errs = append(errs, fmt.Sprintf("layer table line %d: %s is no package of the tree (go list)", l.Line, l.Package))
		}
	}
	for _, pat := range d.Packages {
		if !slices.ContainsFunc(pkgs, func(p Package) bool { return matches(pat, p.Path) }) {
			errs = append(errs, fmt.Sprintf("package table: %s names no package of the tree (go list)", pat))
		}
	}
	for _, p := range pkgs {
		if !slices.ContainsFunc(d.Packages, func(pat string) bool { return matches(pat, p.Path) }) {
			errs = append(errs, fmt.Sprintf("package table: %s is missing (what it owns, what it must not do)", p.Path))
		}
		row, ok := rows[p.Path]
		if !ok {
			errs = append(errs, fmt.Sprintf("layer table: %s is missing (its layer and imports: %s)", p.Path, list(p.Imports)))
			continue
		}
		for _, imp := range p.Imports {
			if !slices.Contains(row.Imports, imp) {
				errs = append(errs, fmt.Sprintf("layer table line %d: %s imports %s in the code; the table does not list it", row.Line, p.Path, imp))
			}
			if to, ok := rows[imp]; ok && to.Index < row.Index {
				errs = append(errs, fmt.Sprintf("%s (layer %q) imports %s (layer %q): an import up the layer list", p.Path, row.Name, imp, to.Name))
			}
		}
		for _, imp := range row.Imports {
			if !slices.Contains(p.Imports, imp) {
				errs = append(errs, fmt.Sprintf("layer table line %d: lists %s importing %s; the code does not import it", row.Line, p.Path, imp))
			}
		}
	}
	return errs
}

// list is imports in backticks, comma-separated, or "nothing of
// proxybench": the imports cell the layer table wants.
func list(imports []string) string {
	if len(imports) == 0 {
		return "nothing of proxybench"
	}
	return "`" + strings.Join(imports, "`, `") + "`"
}
