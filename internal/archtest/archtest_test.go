package archtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestArchitectureDoc: docs/architecture.md's layer and package tables
// agree with `go list -json ./...` (GOOS=linux: the files the testbed
// builds): every package is in both tables, every proxybench import of
// its non-test files is in its row and every import in its row is in the
// code, and no import points up the layer list.
func TestArchitectureDoc(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	root := filepath.Join("..", "..")
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOOS=linux")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -json ./...: %v\n%s", err, stderr.Bytes())
	}
	pkgs, err := GoList(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list gave %d packages of %s, want the whole tree", len(pkgs), Module)
	}
	f, err := os.Open(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := Parse(f)
	if err != nil {
		t.Fatalf("docs/architecture.md: %v", err)
	}
	for _, e := range Check(d, pkgs) {
		t.Errorf("docs/architecture.md: %s", e)
	}
}

const sampleDoc = "# x\n\n## Layers\n\ntext\n\n" +
	"| layer | package | imports | also |\n| --- | --- | --- | --- |\n" +
	"| top | `a` | `b`, `c` | cobra |\n" +
	"| | `a/x` | nothing of proxybench | |\n" +
	"| middle | `b` | `c` | |\n" +
	"| bottom | `c` | nothing of proxybench | |\n" +
	"\n| other | table |\n| --- | --- |\n| `z` | ignored |\n" +
	"\n## Packages\n\n| package | owns | must not |\n| --- | --- | --- |\n" +
	"| `a` | | |\n| `a/<sub>` | | |\n| `b` | | |\n| `c` | | |\n| `k` | (own module) pins | |\n" +
	"\n## Later\n\n| `y` | not a package row |\n"

// TestParse reads the layer rows (an empty layer cell continues the
// layer above), the package table's entries and its own-module entries,
// and ignores later tables.
func TestParse(t *testing.T) {
	d, err := Parse(strings.NewReader(sampleDoc))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Layers) != 4 {
		t.Fatalf("layers %+v, want 4 rows", d.Layers)
	}
	want := []struct {
		index         int
		name, pkg     string
		imports, line int
	}{{0, "top", "a", 2, 9}, {0, "top", "a/x", 0, 10}, {1, "middle", "b", 1, 11}, {2, "bottom", "c", 0, 12}}
	for i, w := range want {
		l := d.Layers[i]
		if l.Index != w.index || l.Name != w.name || l.Package != w.pkg || len(l.Imports) != w.imports || l.Line != w.line {
			t.Errorf("row %d: %+v, want %+v", i, l, w)
		}
	}
	if strings.Join(d.Packages, " ") != "a a/<sub> b c" || strings.Join(d.OwnModule, " ") != "k" {
		t.Errorf("packages %q, own module %q", d.Packages, d.OwnModule)
	}
}

// TestCheckCatches: each kind of disagreement is reported, naming the
// package and the import; the sample agrees with its own tree.
func TestCheckCatches(t *testing.T) {
	d, err := Parse(strings.NewReader(sampleDoc))
	if err != nil {
		t.Fatal(err)
	}
	agree := []Package{{Path: "a", Imports: []string{"b", "c"}}, {Path: "a/x"}, {Path: "b", Imports: []string{"c"}}, {Path: "c"}}
	if errs := Check(d, agree); len(errs) != 0 {
		t.Fatalf("the sample's own tree: %q", errs)
	}
	cases := []struct {
		name string
		pkgs []Package
		want string
	}{
		{"import not in the table", []Package{{Path: "a", Imports: []string{"b", "c"}}, {Path: "a/x", Imports: []string{"c"}}, {Path: "b", Imports: []string{"c"}}, {Path: "c"}},
			"a/x imports c in the code; the table does not list it"},
		{"import the code no longer has", []Package{{Path: "a", Imports: []string{"b"}}, {Path: "a/x"}, {Path: "b", Imports: []string{"c"}}, {Path: "c"}},
			"lists a importing c; the code does not import it"},
		{"package missing from the tables", append(append([]Package{}, agree...), Package{Path: "d", Imports: []string{"c"}}),
			"layer table: d is missing"},
		{"package missing from the package table", append(append([]Package{}, agree...), Package{Path: "d"}),
			"package table: d is missing"},
		{"import up a layer", []Package{{Path: "a", Imports: []string{"b", "c"}}, {Path: "a/x"}, {Path: "b", Imports: []string{"c"}}, {Path: "c", Imports: []string{"b"}}},
			`c (layer "bottom") imports b (layer "middle"): an import up the layer list`},
		{"table entry of no package", agree[:3],
			"layer table line 12: c is no package of the tree"},
	}
	for _, c := range cases {
		errs := Check(d, c.pkgs)
		found := false
		for _, e := range errs {
			found = found || strings.Contains(e, c.want)
		}
		if !found {
			t.Errorf("%s: %q, want one containing %q", c.name, errs, c.want)
		}
	}
}

// TestGoList keeps the module's packages and their imports of the module,
// relative to it, and drops the rest.
func TestGoList(t *testing.T) {
	in := `{"ImportPath": "github.com/proxybench/proxybench/sim", "Imports": ["fmt", "github.com/proxybench/proxybench/workload", "github.com/proxybench/proxybench/reports"]}
{"ImportPath": "golang.org/x/sys/unix", "Imports": ["syscall"]}
{"ImportPath": "github.com/proxybench/proxybench/measure"}`
	pkgs, err := GoList(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) != 2 || pkgs[0].Path != "measure" || pkgs[1].Path != "sim" || strings.Join(pkgs[1].Imports, " ") != "reports workload" {
		t.Errorf("%+v", pkgs)
	}
}
