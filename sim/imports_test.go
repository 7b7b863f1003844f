package sim

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoKernelImports: the sim package imports no kernel package
// directly (ARCHITECTURE.md: sim must not import kernel packages).
func TestNoKernelImports(t *testing.T) {
	forbidden := []string{"vishvananda/netlink", "vishvananda/netns", "/topology", "/internal/runner", "/internal/uml",
		"moby/ipvs", "coreos/go-iptables", "golang.org/x/sys/unix", "os/exec", "syscall"}
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		pf, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range pf.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbidden {
				if strings.Contains(p, bad) {
					t.Errorf("%s imports %s", f, p)
				}
			}
		}
	}
}
