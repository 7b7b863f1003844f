package reports

import (
	"os/exec"
	"strings"
	"testing"
)

// TestReadsResultsOnly: reports links no proxy mode and no kernel
// library (`go list -deps`, the full list): the values modes fill come
// from the leaf package measure (docs/architecture.md, "Layers").
func TestReadsResultsOnly(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps gave %d packages", len(deps))
	}
	for _, d := range deps {
		for _, bad := range []string{"github.com/proxybench/proxybench/proxymodes", "github.com/proxybench/proxybench/topology",
			"github.com/proxybench/proxybench/workload", "github.com/vishvananda/", "sigs.k8s.io/knftables", "github.com/moby/ipvs", "github.com/coreos/go-iptables"} {
			if d == bad || strings.HasPrefix(d, bad+"/") {
				t.Errorf("reports links %s", d)
			}
		}
	}
}
