package cluster

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/proxybench/proxybench/proxymodes/kubeproxy"
	"github.com/proxybench/proxybench/reports"
)

// TestWithModeKeepsTheRest: the switched configuration has the new mode
// and every other field as it was; one that does not parse is an error.
func TestWithModeKeepsTheRest(t *testing.T) {
	in := "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: iptables\nmetricsBindAddress: 0.0.0.0:10249\nconntrack:\n  maxPerCore: 0\n"
	out, err := WithMode(in, "nftables")
	if err != nil {
		t.Fatal(err)
	}
	if m, err := ModeOf(out); err != nil || m != "nftables" {
		t.Errorf("mode of %q: %q, %v", out, m, err)
	}
	for _, keep := range []string{"metricsBindAddress: 0.0.0.0:10249", "maxPerCore: 0", "kind: KubeProxyConfiguration"} {
		if !strings.Contains(out, keep) {
			t.Errorf("%q lost %q", out, keep)
		}
	}
	if _, err := WithMode("mode: [", "ipvs"); err == nil {
		t.Error("a configuration that does not parse was switched")
	}
}

// TestMetricsPort: the port of metricsBindAddress, kube-proxy's default
// 10249 when unset or unparsable.
func TestMetricsPort(t *testing.T) {
	for in, want := range map[string]int{"metricsBindAddress: 0.0.0.0:10251\n": 10251, "mode: ipvs\n": 10249,
		"metricsBindAddress: bogus\n": 10249, "metricsBindAddress: '[::]:9000'\n": 9000} {
		if got := metricsPort(in); got != want {
			t.Errorf("metricsPort(%q) = %d, want %d", in, got, want)
		}
	}
}

// TestSwitchModes: the cluster's own mode first, then the scenario's
// kube-proxy modes once each; none and userspace are not kube-proxy
// modes to switch to.
func TestSwitchModes(t *testing.T) {
	got := switchModes("iptables", []string{"none", "iptables", "nftables", "userspace", "ipvs", "nftables"})
	if want := []string{"iptables", "nftables", "ipvs"}; !slices.Equal(got, want) {
		t.Errorf("switchModes = %v, want %v", got, want)
	}
}

// TestWriteConfigAndRoll: the ConfigMap's config.conf is replaced and the
// DaemonSet's pod template annotated (rolled); a cluster without the
// DaemonSet is not an error and says it was not rolled.
func TestWriteConfigAndRoll(t *testing.T) {
	ctx := context.Background()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system"}, Data: map[string]string{KubeProxyConfigKey: "mode: iptables\n", "other": "x"}}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "kube-proxy", Namespace: "kube-system"}}
	cs := fake.NewClientset(cm, ds)
	c := &Cluster{Client: cs}
	if err := c.writeConfig(ctx, "mode: nftables\n"); err != nil {
		t.Fatal(err)
	}
	got, _ := cs.CoreV1().ConfigMaps("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if got.Data[KubeProxyConfigKey] != "mode: nftables\n" || got.Data["other"] != "x" {
		t.Errorf("ConfigMap after the write: %v", got.Data)
	}
	rolled, err := c.rollDaemonSet(ctx)
	if err != nil || !rolled {
		t.Fatalf("roll: %v, %v", rolled, err)
	}
	d, _ := cs.AppsV1().DaemonSets("kube-system").Get(ctx, "kube-proxy", metav1.GetOptions{})
	if d.Spec.Template.Annotations[RestartedAtAnnotation] == "" {
		t.Errorf("DaemonSet not rolled: %v", d.Spec.Template.Annotations)
	}
	c = &Cluster{Client: fake.NewClientset(cm)}
	if rolled, err := c.rollDaemonSet(ctx); err != nil || rolled {
		t.Errorf("no DaemonSet: rolled %v, %v", rolled, err)
	}
}

// TestProgrammingOwn: a node's own histogram is the growth between the
// two scrapes; a node missing either scrape is absent with the reason.
func TestProgrammingOwn(t *testing.T) {
	b := kubeproxy.Histogram{Count: 2, Sum: 1, Bounds: []float64{0.25, 1}, Buckets: []uint64{1, 2}}
	a := kubeproxy.Histogram{Count: 7, Sum: 3, Bounds: []float64{0.25, 1}, Buckets: []uint64{4, 7}}
	nodes := []reports.ClusterNode{{Name: "node-0"}, {Name: "node-1"}}
	sb := kubeproxy.Histogram{Count: 10, Sum: 2, Bounds: []float64{0.25, 1}, Buckets: []uint64{9, 10}}
	sa := kubeproxy.Histogram{Count: 13, Sum: 2.9, Bounds: []float64{0.25, 1}, Buckets: []uint64{10, 13}}
	programmingOwn(nodes, map[string]ownHistograms{"node-0": {b, sb}}, map[string]ownHistograms{"node-0": {a, sa}}, map[string]string{"node-1": "forbidden"})
	if h := nodes[0].ProgrammingOwn; h == nil || h.Count != 5 || h.Buckets[0].Count != 3 {
		t.Errorf("node-0: %+v", nodes[0].ProgrammingOwn)
	}
	if h := nodes[0].SyncOwn; h == nil || h.Count != 3 || math.Abs(h.SumSeconds-0.9) > 1e-9 {
		t.Errorf("node-0 syncs: %+v", nodes[0].SyncOwn)
	}
	if nodes[1].ProgrammingOwn != nil || nodes[1].SyncOwn != nil || nodes[1].ProgrammingOwnAbsent != "forbidden" {
		t.Errorf("node-1: %+v", nodes[1])
	}
}

// TestMinSyncPeriod: kube-proxy's minSyncPeriod for a mode from its
// configuration: v1alpha2's top-level field first, then the mode's own
// section, else 1 s; 0 is the default in iptables and nftables (their
// defaulting reads it as unset), not in ipvs.
func TestMinSyncPeriod(t *testing.T) {
	for _, c := range []struct {
		config, mode string
		want         time.Duration
	}{
		{"mode: iptables\n", "iptables", time.Second},
		{"iptables:\n  minSyncPeriod: 250ms\nnftables:\n  minSyncPeriod: 2s\n", "iptables", 250 * time.Millisecond},
		{"iptables:\n  minSyncPeriod: 250ms\nnftables:\n  minSyncPeriod: 2s\n", "nftables", 2 * time.Second},
		{"minSyncPeriod: 3s\niptables:\n  minSyncPeriod: 250ms\n", "iptables", 3 * time.Second},
		{"iptables:\n  minSyncPeriod: 0s\n", "iptables", time.Second},
		{"ipvs:\n  minSyncPeriod: 0s\n", "ipvs", 0},
		{"iptables: [", "iptables", time.Second},
		{"iptables:\n  minSyncPeriod: soon\n", "iptables", time.Second},
	} {
		if got := minSyncPeriod(c.config, c.mode); got != c.want {
			t.Errorf("minSyncPeriod(%q, %s) = %v, want %v", c.config, c.mode, got, c.want)
		}
	}
}

// TestIdleAt: the next change waits for the latest node: minSyncPeriod
// (+10 ms) after the last sync each node's kube-proxy reports
// (kubeproxy_sync_proxy_rules_last_timestamp_seconds, read through the
// node proxy); a node whose metrics cannot be read counts as having
// synced when the previous change was seen everywhere; with nothing
// seen and nothing readable there is no wait.
func TestIdleAt(t *testing.T) {
	last := time.Unix(1796294000, 500_000_000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/nodes/http:node-0:10249/proxy/metrics":
			fmt.Fprintf(w, "# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge\nkubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family=\"IPv4\"} %.3f\n",
				float64(last.UnixMilli())/1e3)
		default:
			http.Error(w, `{"kind":"Status","message":"no"}`, http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Client: cs}
	ctx := context.Background()
	both := []reports.ClusterNode{{Name: "node-0"}, {Name: "node-1"}}
	if got, want := c.idleAt(ctx, both, 10249, time.Second, time.Time{}), last.Add(1010*time.Millisecond); !got.Equal(want) {
		t.Errorf("nothing seen: idle at %v, want node-0's last sync + 1.01 s = %v", got, want)
	}
	seen := last.Add(300 * time.Millisecond)
	if got, want := c.idleAt(ctx, both, 10249, time.Second, seen), seen.Add(1010*time.Millisecond); !got.Equal(want) {
		t.Errorf("node-1 unreadable: idle at %v, want seen + 1.01 s = %v", got, want)
	}
	if got, want := c.idleAt(ctx, both[:1], 10249, 2*time.Second, last.Add(-time.Second)), last.Add(2010*time.Millisecond); !got.Equal(want) {
		t.Errorf("node-0 alone, minSyncPeriod 2 s: idle at %v, want %v", got, want)
	}
	if got := c.idleAt(ctx, both[1:], 10249, time.Second, time.Time{}); !got.IsZero() {
		t.Errorf("nothing readable, nothing seen: idle at %v, want no wait", got)
	}
}

// TestProgrammingTargets: the probes' changes alternate between the
// pool's halves, each disjoint from the endpoints before it, starting
// with the half the service is not on; a service on both halves first
// gets an unmeasured move to the first.
func TestProgrammingTargets(t *testing.T) {
	pool := []netip.Addr{netip.MustParseAddr("198.19.0.2"), netip.MustParseAddr("198.19.0.3"), netip.MustParseAddr("198.19.1.2"), netip.MustParseAddr("198.19.1.3")}
	lo, hi := pool[:2], pool[2:]
	for _, c := range []struct {
		cur   []netip.Addr
		warm  []netip.Addr
		first []netip.Addr
	}{
		{cur: hi, first: lo},
		{cur: lo, first: hi},
		{cur: []netip.Addr{pool[1]}, first: hi},
		{cur: []netip.Addr{pool[3], pool[0]}, warm: lo, first: hi},
	} {
		warm, targets := programmingTargets(pool, c.cur, 5)
		if !slices.Equal(warm, c.warm) || len(targets) != 5 || !slices.Equal(targets[0], c.first) {
			t.Errorf("from %v: warm %v, targets %v; want warm %v, first %v", c.cur, warm, targets, c.warm, c.first)
			continue
		}
		prev := c.cur
		if warm != nil {
			prev = warm
		}
		for k, next := range targets {
			if slices.ContainsFunc(next, func(a netip.Addr) bool { return slices.Contains(prev, a) }) {
				t.Errorf("from %v: change %d to %v keeps an endpoint of %v", c.cur, k, next, prev)
			}
			prev = next
		}
	}
}

// TestPodWhy: a pod's reason for not being Ready: a container's waiting
// reason first; a pod bound to a node whose kubelet never took it (no
// start time) says so, not just Pending; an unbound one is unscheduled.
func TestPodWhy(t *testing.T) {
	now := metav1.Now()
	for _, c := range []struct {
		pod  corev1.Pod
		want string
	}{
		{corev1.Pod{Spec: corev1.PodSpec{NodeName: "node-ghost"}, Status: corev1.PodStatus{Phase: corev1.PodPending}}, "no kubelet has reported it"},
		{corev1.Pod{Spec: corev1.PodSpec{NodeName: "node-0"}, Status: corev1.PodStatus{Phase: corev1.PodPending, StartTime: &now,
			ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImageNeverPull", Message: "not present"}}}}}}, "ErrImageNeverPull: not present"},
		{corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "0/2 nodes"}}}}, "unscheduled: 0/2 nodes"},
		{corev1.Pod{Spec: corev1.PodSpec{NodeName: "node-0"}, Status: corev1.PodStatus{Phase: corev1.PodPending, StartTime: &now}}, "Pending"},
	} {
		if got := podWhy(&c.pod); got != c.want {
			t.Errorf("podWhy(%+v) = %q, want %q", c.pod.Status, got, c.want)
		}
	}
}
