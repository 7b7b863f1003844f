package sim

import (
	"os/exec"
	"strings"
	"testing"
)

// kernelPackages are the libraries that talk to a kernel (netlink
// sockets, namespaces, iptables and nft programs, IPVS) and the testbed
// packages built on them: the sim engine runs without root or a kernel,
// so none of them may be linked into it, directly or through any import
// (docs/architecture.md, "Layers").
var kernelPackages = []string{
	"github.com/vishvananda/netlink",
	"github.com/vishvananda/netns",
	"github.com/coreos/go-iptables",
	"sigs.k8s.io/knftables",
	"github.com/moby/ipvs",
	"github.com/google/nftables",
	"github.com/mdlayher/netlink",
	"github.com/proxybench/proxybench/topology",
	"github.com/proxybench/proxybench/workload/traffic",
	"github.com/proxybench/proxybench/internal/runner",
	"github.com/proxybench/proxybench/internal/uml",
	"github.com/proxybench/proxybench/internal/lib/nspool",
	"github.com/proxybench/proxybench/proxymodes/conntrack",
	"github.com/proxybench/proxybench/proxymodes/iptables",
	"github.com/proxybench/proxybench/proxymodes/ipvs",
	"github.com/proxybench/proxybench/proxymodes/nftables",
	// The mode list links every mode's kernel side; the sim gets it from
	// its caller (Options.Modes).
	"github.com/proxybench/proxybench/proxymodes/modes",
}

// TestNoKernelDependencies lists every package the sim package links
// (`go list -deps`, the full transitive list, not only direct imports)
// and fails on any kernel package.
func TestNoKernelDependencies(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps gave %d packages: %q", len(deps), out)
	}
	for _, d := range deps {
		if bad := kernelDependency(d); bad != "" {
			t.Errorf("sim links %s (matches %s)", d, bad)
		}
	}
}

// kernelDependency returns the entry of kernelPackages that pkg is or lies
// under, or "".
func kernelDependency(pkg string) string {
	for _, k := range kernelPackages {
		if pkg == k || strings.HasPrefix(pkg, strings.TrimSuffix(k, "/")+"/") {
			return k
		}
	}
	return ""
}

// TestKernelDependencyCatches checks the matcher on packages the sim
// linked before the mode list was injected (through proxymodes/ipvs,
// nftables and iptables), so a regression would be caught.
func TestKernelDependencyCatches(t *testing.T) {
	for _, p := range []string{"github.com/vishvananda/netlink/nl", "sigs.k8s.io/knftables", "github.com/moby/ipvs",
		"github.com/coreos/go-iptables/iptables", "github.com/proxybench/proxybench/proxymodes/modes",
		"github.com/proxybench/proxybench/proxymodes/ipvs/testing", "github.com/proxybench/proxybench/internal/lib/nspool", "github.com/proxybench/proxybench/workload/traffic"} {
		if kernelDependency(p) == "" {
			t.Errorf("%s is not caught", p)
		}
	}
	for _, p := range []string{"github.com/proxybench/proxybench/proxymodes", "github.com/proxybench/proxybench/proxymodes/syncloop",
		"github.com/proxybench/proxybench/workload", "github.com/proxybench/proxybench/reports", "golang.org/x/sys/unix",
		"github.com/proxybench/proxybench/proxymodes/userspace/balance"} {
		if bad := kernelDependency(p); bad != "" {
			t.Errorf("%s is caught as %s", p, bad)
		}
	}
}
