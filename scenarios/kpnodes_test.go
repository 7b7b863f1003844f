package scenarios

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestKubeProxyMemoryAt(t *testing.T) {
	a, b := KubeProxyMemory[0], KubeProxyMemory[len(KubeProxyMemory)-1]
	for _, c := range []struct {
		services int
		kp, cp   int64
	}{
		{a.Services / 2, a.KubeProxy, a.ControlPlane}, // below the first size: the first's
		{a.Services, a.KubeProxy, a.ControlPlane},
		{b.Services, b.KubeProxy, b.ControlPlane},
	} {
		kp, cp := KubeProxyMemoryAt(c.services)
		if kp != c.kp || cp != c.cp {
			t.Errorf("%d services: %d, %d; want %d, %d", c.services, kp, cp, c.kp, c.cp)
		}
	}
	// Between two sizes: strictly between their figures.
	mid := (a.Services + b.Services) / 2
	if kp, cp := KubeProxyMemoryAt(mid); kp <= a.KubeProxy || kp >= b.KubeProxy || cp <= a.ControlPlane || cp >= b.ControlPlane {
		t.Errorf("%d services: %d, %d not between the sizes around it", mid, kp, cp)
	}
	for _, p := range KubeProxyMemory {
		if p.Source == "" {
			t.Errorf("%d services: no source", p.Services)
		}
	}
}

func TestMaxKubeProxyNodes(t *testing.T) {
	kp, cp := KubeProxyMemoryAt(1000)
	avail := int64(16 << 30)
	n := MaxKubeProxyNodes(1000, avail)
	used := cp + int64(n)*kp + MemReserve + avail/10
	if n < 1 || used > avail || used+kp <= avail {
		t.Errorf("1k services, 16 GiB: %d nodes use %d of %d bytes (one more would use %d)", n, used, avail, used+kp)
	}
	if MaxKubeProxyNodes(10000, avail) >= n {
		t.Errorf("10k services holds no fewer nodes than 1k (%d)", n)
	}
	if got := MaxKubeProxyNodes(1000, 256<<20); got != 0 {
		t.Errorf("256 MiB: %d nodes", got)
	}
}

// The node-count limit refuses more nodes than free memory holds, at the
// field, naming the limit and the figures; the same count fits with more
// memory, and builtin rows are not limited.
func TestKubeProxyNodesLimit(t *testing.T) {
	avail := int64(8 << 30)
	cat := testCatalog
	cat.MemAvailable = func() (int64, error) { return avail, nil }
	limit := MaxKubeProxyNodes(1000, avail)
	yaml := func(nodes int, impl string) []byte {
		return []byte(fmt.Sprintf("services: {count: 1000}\nmodes: [iptables]\nimplementation: [%s]\ntopology: {nodes: %d}\n", impl, nodes))
	}
	_, err := cat.Parse(yaml(limit+1, "kube-proxy"), "t.yaml")
	want := fmt.Sprintf("topology.nodes: %d nodes with kube-proxy at 1000 services do not fit this machine: it holds at most %d (MemAvailable 8.0 GiB", limit+1, limit)
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), fmt.Sprintf("fix: use topology.nodes: %d or fewer", limit)) {
		t.Errorf("%d nodes: %v, want %q", limit+1, err, want)
	}
	var fe *FieldError
	if !errors.As(err, &fe) && !strings.Contains(err.Error(), "t.yaml:") {
		t.Errorf("not at the file: %v", err)
	}
	if _, err := cat.Parse(yaml(limit, "kube-proxy"), "t.yaml"); err != nil {
		t.Errorf("%d nodes (the limit): %v", limit, err)
	}
	if _, err := cat.Parse(yaml(limit+1, "builtin"), "t.yaml"); err != nil {
		t.Errorf("builtin on %d nodes: %v", limit+1, err)
	}
	cat.MemAvailable = func() (int64, error) { return 0, errors.New("no /proc") }
	if _, err := cat.Parse(yaml(2, "kube-proxy"), "t.yaml"); err == nil || !strings.Contains(err.Error(), "free memory unknown (no /proc)") {
		t.Errorf("unknown memory: %v", err)
	}
}

// A phase that does not run with kube-proxy on several nodes is refused
// there, and only there.
func TestNotWithKubeProxyNodes(t *testing.T) {
	cat := testCatalog
	cat.Phases = []PhaseRule{{Name: "soak", Field: "soak", Wants: func(s *Scenario) bool { return true }, NotWithKubeProxyNodes: "its samples read node-0 only"}}
	for _, c := range []struct {
		yaml, want string
	}{
		{"implementation: [kube-proxy]\ntopology: {nodes: 2}\n", "soak: not yet with implementation kube-proxy on several nodes (topology.nodes > 1): its samples read node-0 only"},
		{"implementation: [kube-proxy]\n", ""},
		{"implementation: [builtin]\ntopology: {nodes: 2}\n", ""},
	} {
		_, err := cat.Parse([]byte("services: {count: 10}\nmodes: [iptables]\n"+c.yaml), "t.yaml")
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%q: %v, want %q", c.yaml, err, c.want)
		}
	}
}
