package modes_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/proxymodes/modes"
	"github.com/proxybench/proxybench/scenarios"
)

// modePackages are the folders (below the module root) that may compare a
// mode's name with a string literal: each mode's own package
// (proxymodes/<name>, with its subpackages), the mode list, and
// proxymodes/kubeproxy, the kube-proxy implementation of the modes, whose
// mode strings are KubeProxyConfiguration's `mode` values (kube-proxy's
// API: the config block and metrics it writes per mode).
func modePackages() []string {
	out := []string{"proxymodes/modes", "proxymodes/kubeproxy"}
	for _, n := range modes.Names() {
		out = append(out, "proxymodes/"+n)
	}
	return out
}

// nameTests are the calls that compare their string arguments with a
// value: slices.Contains(modes, "ipvs") is a mode-name switch as much as
// mode == "ipvs" is.
var nameTests = map[string]bool{
	"slices.Contains": true, "slices.Index": true,
	"strings.HasPrefix": true, "strings.HasSuffix": true, "strings.EqualFold": true,
	"contains": true,
}

// TestNoModeNameSwitches fails when a non-test .go file outside the mode
// packages compares a string literal naming a mode (a name of
// modes.Names()): == or != with such a literal, a switch case of one, a
// map index or key of one, or a membership test (nameTests) with one.
// What a caller asks of a mode is a field or method of proxymodes.Mode
// (docs/architecture.md, "A mode is one value"); the reports, which know
// no mode, read the row's recorded Traits, and the baseline's name is
// scenarios.BaselineMode. Tests and their fixtures may name modes.
func TestNoModeNameSwitches(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	names := modes.Names()
	allowed := modePackages()
	isName := func(e ast.Expr) (string, bool) {
		lit, ok := ast.Unparen(e).(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return "", false
		}
		v, err := strconv.Unquote(lit.Value)
		return v, err == nil && slices.Contains(names, v)
	}
	var found []string
	fset := token.NewFileSet()
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "." {
				return filepath.SkipDir // a module of its own (internal/kubebin)
			}
			for _, a := range allowed {
				if rel == a || strings.HasPrefix(rel, a+"/") {
					return filepath.SkipDir
				}
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
		checked++
		report := func(n ast.Node, name, how string) {
			found = append(found, fset.Position(n.Pos()).String()+": "+how+" "+strconv.Quote(name))
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BinaryExpr:
				if n.Op == token.EQL || n.Op == token.NEQ {
					for _, side := range []ast.Expr{n.X, n.Y} {
						if name, ok := isName(side); ok {
							report(n, name, "compares with")
						}
					}
				}
			case *ast.CaseClause:
				for _, e := range n.List {
					if name, ok := isName(e); ok {
						report(e, name, "switch case")
					}
				}
			case *ast.IndexExpr:
				if name, ok := isName(n.Index); ok {
					report(n, name, "indexes by")
				}
			case *ast.CompositeLit:
				if _, isMap := n.Type.(*ast.MapType); isMap {
					for _, el := range n.Elts {
						if kv, ok := el.(*ast.KeyValueExpr); ok {
							if name, ok := isName(kv.Key); ok {
								report(kv, name, "map keyed by")
							}
						}
					}
				}
			case *ast.CallExpr:
				fn := ""
				switch f := n.Fun.(type) {
				case *ast.Ident:
					fn = f.Name
				case *ast.SelectorExpr:
					if x, ok := f.X.(*ast.Ident); ok {
						fn = x.Name + "." + f.Sel.Name
					}
				}
				if nameTests[fn] {
					for _, a := range n.Args {
						if name, ok := isName(a); ok {
							report(n, name, fn+" with")
						}
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked only %d files under %s: is the walk's root right?", checked, root)
	}
	for _, f := range found {
		t.Errorf("%s: a mode-name switch outside the mode packages; ask a field or method of proxymodes.Mode (reports: ModeResult.Traits, scenarios.BaselineMode)", f)
	}
}

// TestModeFactsAgree: the facts a caller asks of a mode agree with each
// other and with the scenario layer's names: one direct mode, the
// baseline; a walked list exactly for a linear lookup; fallbacks and
// kube-proxy's modes name modes of the build.
func TestModeFactsAgree(t *testing.T) {
	var direct []string
	for _, m := range modes.All {
		if m.Direct {
			direct = append(direct, m.Name)
		}
		if m.Direct != (m.Sim.Lookup == proxymodes.LookupDirect) {
			t.Errorf("%s: Direct %v but Sim.Lookup %q", m.Name, m.Direct, m.Sim.Lookup)
		}
		if linear := m.Sim.Lookup == proxymodes.LookupLinear; linear != (m.Traits.Walk != "") {
			t.Errorf("%s: Sim.Lookup %q but Traits.Walk %q (a linear lookup names the list it walks)", m.Name, m.Sim.Lookup, m.Traits.Walk)
		}
		if m.Sim.PartialRewritesWalk && m.Sim.Lookup != proxymodes.LookupLinear {
			t.Errorf("%s: PartialRewritesWalk without a walked list", m.Name)
		}
		if m.FallsBackTo != "" {
			if _, err := modes.Lookup(m.FallsBackTo); err != nil || m.FallsBackTo == m.Name {
				t.Errorf("%s: FallsBackTo %q: %v", m.Name, m.FallsBackTo, err)
			}
		}
		if m.Traits.Unordered {
			t.Errorf("%s: a builtin mode writes its rules in the scenario's order, but Traits.Unordered", m.Name)
		}
		for _, c := range m.ReadBack {
			if c.Name == "" {
				t.Errorf("%s: a ReadBack command without a name", m.Name)
			}
		}
	}
	if !slices.Equal(direct, []string{scenarios.BaselineMode}) {
		t.Errorf("direct modes %v, want the baseline %s alone", direct, scenarios.BaselineMode)
	}
	for _, n := range scenarios.KubeProxyModes {
		if _, err := modes.Lookup(n); err != nil {
			t.Errorf("scenarios.KubeProxyModes: %v", err)
		}
	}
	if c := modes.Catalog(); len(c.Schedulers) == 0 || len(c.Terminating) == 0 {
		t.Errorf("catalog: schedulers %v, terminating %v; want the modes with those facts", c.Schedulers, c.Terminating)
	}
}
