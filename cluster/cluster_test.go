package cluster_test

import (
	"context"
	"net/netip"
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/proxybench/proxybench/cluster"
	"github.com/proxybench/proxybench/workload"
)

// TestObjectsUnprivilegedAndLabelled: every pod the run creates (pool,
// DaemonSet agent, pinned agent) carries the run's label, runs without
// privilege (no hostNetwork, no capability, nonroot, no escalation) and
// with the image's entrypoint given the right subcommand.
func TestObjectsUnprivilegedAndLabelled(t *testing.T) {
	const run = "a1b2c3"
	pool := cluster.PoolDeployment(run, "img:1", "Never", 4, []uint16{80, 8080})
	ds := cluster.AgentDaemonSet(run, "img:1", "Never")
	pin := cluster.AgentPod(run, "img:1", "Never", "node-b", 1)
	for _, c := range []struct {
		what string
		meta metav1.ObjectMeta
		tmpl map[string]string
		spec corev1.PodSpec
		args string
	}{
		{"pool", pool.ObjectMeta, pool.Spec.Template.Labels, pool.Spec.Template.Spec, "echo --ports 80,8080"},
		{"daemonset", ds.ObjectMeta, ds.Spec.Template.Labels, ds.Spec.Template.Spec, "agent --port 8080"},
		{"pinned", pin.ObjectMeta, pin.Labels, pin.Spec, "agent --port 8080"},
	} {
		if c.meta.Namespace != "proxybench-"+run || c.meta.Labels[cluster.RunLabel] != run || c.tmpl[cluster.RunLabel] != run {
			t.Errorf("%s: namespace %q labels %v / pods %v: want proxybench-%s and %s=%s", c.what, c.meta.Namespace, c.meta.Labels, c.tmpl, run, cluster.RunLabel, run)
		}
		if c.spec.HostNetwork || c.spec.HostPID || len(c.spec.Containers) != 1 {
			t.Errorf("%s: hostNetwork %v hostPID %v, %d containers", c.what, c.spec.HostNetwork, c.spec.HostPID, len(c.spec.Containers))
			continue
		}
		ct := c.spec.Containers[0]
		sc := ct.SecurityContext
		if sc == nil || sc.Privileged == nil || *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.Capabilities == nil || len(sc.Capabilities.Add) != 0 || len(sc.Capabilities.Drop) != 1 {
			t.Errorf("%s: security context %+v: want unprivileged, nonroot, every capability dropped", c.what, sc)
		}
		if got := strings.Join(ct.Args, " "); got != c.args || ct.Image != "img:1" || ct.ImagePullPolicy != "Never" {
			t.Errorf("%s: args %q image %s pull %s, want %q img:1 Never", c.what, got, ct.Image, ct.ImagePullPolicy, c.args)
		}
		// The image's entrypoint is `/proxybench agent`: without a
		// command the arguments would follow it (`proxybench agent echo
		// ...`, a crash loop on a real kubelet).
		if strings.Join(ct.Command, " ") != "/proxybench" {
			t.Errorf("%s: command %q, want [/proxybench] (the subcommand is the first argument)", c.what, ct.Command)
		}
	}
	if pin.Spec.NodeName != "node-b" || *pool.Spec.Replicas != 4 {
		t.Errorf("pinned agent on %q, pool of %d", pin.Spec.NodeName, *pool.Spec.Replicas)
	}
}

// TestPlaced: the services move to the run's namespace, lose their
// fixed ClusterIP (the cluster allocates one) and take their endpoints
// from the pool, distinct within a service and spread over the pool.
func TestPlaced(t *testing.T) {
	pool := []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.3")}
	var in []workload.Service
	for i := range 4 {
		s := workload.Service{Namespace: "default", Name: "s" + string(rune('0'+i)), ClusterIP: netip.MustParseAddr("198.18.0.1")}
		for k := range 2 {
			s.Endpoints = append(s.Endpoints, workload.NewEndpoint(netip.AddrFrom4([4]byte{198, 19, byte(i), byte(k)})))
		}
		in = append(in, s)
	}
	out := cluster.Placed("a1b2c3", in, pool)
	used := map[netip.Addr]int{}
	for i, s := range out {
		if s.Namespace != "proxybench-a1b2c3" || s.ClusterIP.IsValid() || len(s.Endpoints) != 2 || s.Endpoints[0].IP == s.Endpoints[1].IP {
			t.Errorf("service %d: %+v", i, s)
		}
		for _, e := range s.Endpoints {
			used[e.IP]++
			if !e.Ready {
				t.Errorf("service %d: endpoint %s lost its conditions", i, e.IP)
			}
		}
	}
	if len(used) != 3 || in[0].Namespace != "default" {
		t.Errorf("pool use %v (want all 3), input changed: %v", used, in[0].Namespace)
	}
	svc := cluster.ServiceObject("a1b2c3", out[0])
	if svc.Spec.ClusterIP != "" || svc.Labels[cluster.RunLabel] != "a1b2c3" || svc.Spec.Selector != nil {
		t.Errorf("Service object: clusterIP %q labels %v selector %v", svc.Spec.ClusterIP, svc.Labels, svc.Spec.Selector)
	}
}

// TestModeOf: kube-proxy's mode from its configuration, iptables when
// it names none; a configuration that does not parse is an error.
func TestModeOf(t *testing.T) {
	for _, c := range []struct{ cfg, want string }{
		{"apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nftables\n", "nftables"},
		{"apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: \"\"\n", "iptables"},
		{"kind: KubeProxyConfiguration\nmode: ipvs\nipvs:\n  scheduler: rr\n", "ipvs"},
	} {
		if got, err := cluster.ModeOf(c.cfg); err != nil || got != c.want {
			t.Errorf("ModeOf(%q) = %q, %v; want %q", c.cfg, got, err, c.want)
		}
	}
	if _, err := cluster.ModeOf("mode: [nftables"); err == nil {
		t.Error("a broken configuration parsed")
	}
}

// TestKubeProxyFacts: the ConfigMap's mode and the DaemonSet's image tag
// are read from kube-system; a cluster without them says why.
func TestKubeProxyFacts(t *testing.T) {
	cs := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-proxy"},
			Data: map[string]string{cluster.KubeProxyConfigKey: "kind: KubeProxyConfiguration\nmode: nftables\n"}},
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-proxy"},
			Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "kube-proxy", Image: "registry.k8s.io:5000/kube-proxy:v1.37.2"}}}}}})
	kp, err := (&cluster.Cluster{Client: cs}).KubeProxy(context.Background())
	if err != nil || kp.Mode != "nftables" || kp.Version != "v1.37.2" || kp.Absent != "" {
		t.Errorf("kube-proxy facts %+v, %v", kp, err)
	}
	kp, err = (&cluster.Cluster{Client: fake.NewClientset()}).KubeProxy(context.Background())
	if err != nil || kp.Mode != "" || !strings.Contains(kp.Absent, "no ConfigMap kube-system/kube-proxy") {
		t.Errorf("no kube-proxy: %+v, %v", kp, err)
	}
}

// TestAccessNamesWhatIsMissing: with every permission but pods/proxy
// create and the kube-proxy ConfigMap, Access is Unusable naming those
// two (SelfSubjectAccessReviews answered by a reactor) and the fix.
func TestAccessNamesWhatIsMissing(t *testing.T) {
	cs := fake.NewClientset()
	var asked int
	cs.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		asked++
		rev := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		ra := rev.Spec.ResourceAttributes
		deny := (ra.Resource == "pods" && ra.Subresource == "proxy" && ra.Verb == "create") || (ra.Resource == "configmaps" && ra.Name == "kube-proxy")
		rev.Status.Allowed = !deny
		return true, rev, nil
	})
	err := (&cluster.Cluster{Client: cs}).Access(context.Background(), "a1b2c3")
	if !cluster.IsUnusable(err) || !strings.Contains(err.Error(), "create pods/proxy in proxybench-a1b2c3") ||
		!strings.Contains(err.Error(), "get configmaps in kube-system") || !strings.Contains(err.Error(), "proxybench rbac") {
		t.Errorf("err %v: want Unusable naming create pods/proxy and get configmaps, and proxybench rbac", err)
	}
	want := 0
	for _, rs := range [][]rbacv1.PolicyRule{cluster.ClusterRules(), cluster.KubeSystemRules()} {
		for _, r := range rs {
			want += len(r.Resources) * len(r.Verbs)
		}
	}
	if asked != want {
		t.Errorf("%d reviews, want one per verb and resource of the rules (%d)", asked, want)
	}
}

// TestRBACManifest: the printed YAML holds the ClusterRole and Role with
// exactly the rules Access checks, bound to the subject.
func TestRBACManifest(t *testing.T) {
	y, err := cluster.RBACManifest("ServiceAccount", "ci/pb")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(y, "\n---\n")
	if len(docs) != 5 {
		t.Fatalf("%d documents, want a comment and 4 objects:\n%s", len(docs), y)
	}
	var cr rbacv1.ClusterRole
	var crb rbacv1.ClusterRoleBinding
	var role rbacv1.Role
	for i, v := range []any{&cr, &crb, &role} {
		if err := yaml.UnmarshalStrict([]byte(docs[i+1]), v); err != nil {
			t.Fatalf("document %d: %v", i+1, err)
		}
	}
	if len(cr.Rules) != len(cluster.ClusterRules()) || role.Namespace != "kube-system" || len(role.Rules) != len(cluster.KubeSystemRules()) {
		t.Errorf("ClusterRole %d rules, Role in %q %d rules", len(cr.Rules), role.Namespace, len(role.Rules))
	}
	if s := crb.Subjects; len(s) != 1 || s[0].Kind != "ServiceAccount" || s[0].Namespace != "ci" || s[0].Name != "pb" || crb.RoleRef.Name != cr.Name {
		t.Errorf("binding %+v", crb)
	}
	if _, err := cluster.RBACManifest("ServiceAccount", "pb"); !cluster.IsUnusable(err) {
		t.Errorf("a service account without namespace: %v", err)
	}
}

// TestCleanupByLabel: Cleanup deletes the labelled namespaces of the run
// (of every run without an ID) and never an unlabelled one.
func TestCleanupByLabel(t *testing.T) {
	ns := func(name string, lab map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lab}}
	}
	mk := func() *fake.Clientset {
		return fake.NewClientset(cluster.NamespaceObject("aaaaaa"), cluster.NamespaceObject("bbbbbb"), ns("proxybench-cccccc", nil), ns("default", nil))
	}
	left := func(cs *fake.Clientset) []string {
		l, _ := cs.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
		var out []string
		for _, n := range l.Items {
			out = append(out, n.Name)
		}
		return out
	}
	cs := mk()
	got, err := cluster.Cleanup(context.Background(), cs, "aaaaaa", 0)
	if err != nil || strings.Join(got, ",") != "proxybench-aaaaaa" || strings.Join(left(cs), ",") != "default,proxybench-bbbbbb,proxybench-cccccc" {
		t.Errorf("--run aaaaaa: deleted %v (%v), left %v", got, err, left(cs))
	}
	cs = mk()
	got, err = cluster.Cleanup(context.Background(), cs, "", 0)
	if err != nil || strings.Join(got, ",") != "proxybench-aaaaaa,proxybench-bbbbbb" || strings.Join(left(cs), ",") != "default,proxybench-cccccc" {
		t.Errorf("every run: deleted %v (%v), left %v (an unlabelled namespace must stay)", got, err, left(cs))
	}
}

// TestConnectBadKubeconfig: a kubeconfig that does not exist, or a
// context it does not have, is Unusable naming the flag, before any
// connection.
func TestConnectBadKubeconfig(t *testing.T) {
	missing := t.TempDir() + "/nope"
	if _, err := cluster.Connect(context.Background(), cluster.Options{Kubeconfig: missing}, nil); !cluster.IsUnusable(err) || !strings.Contains(err.Error(), "--kubeconfig "+missing) {
		t.Errorf("a missing kubeconfig: %v", err)
	}
	kc := t.TempDir() + "/kc"
	body := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://198.18.0.1:6443'}\nusers:\n- name: u\n  user: {token: x}\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\ncurrent-context: a\n"
	if err := os.WriteFile(kc, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.Connect(context.Background(), cluster.Options{Kubeconfig: kc, Context: "b"}, nil); !cluster.IsUnusable(err) || !strings.Contains(err.Error(), "--context b") {
		t.Errorf("a context the kubeconfig lacks: %v", err)
	}
	cfg, name, err := cluster.RestConfig(cluster.Options{Kubeconfig: kc, QPS: 7, Burst: 9})
	if err != nil || name != "a" || cfg.QPS != 7 || cfg.Burst != 9 || cfg.Host != "https://198.18.0.1:6443" {
		t.Errorf("RestConfig: %+v %q %v", cfg, name, err)
	}
}

// TestNoKubeconfig: with no kubeconfig at all (KUBECONFIG naming files
// that do not exist, or ~/.kube/config missing with KUBECONFIG unset) or
// an explicit one without a cluster, RestConfig is Unusable with our own
// cause naming --kubeconfig and KUBECONFIG and the fix (cluster up writes
// one), not client-go's hint about KUBERNETES_MASTER, which nothing here
// reads.
func TestNoKubeconfig(t *testing.T) {
	dir := t.TempDir()
	empty := dir + "/empty"
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, env, flag string
		want            []string
	}{
		{"KUBECONFIG of missing files", dir + "/a:" + dir + "/b", "", []string{"no kubeconfig: --kubeconfig is not given, and KUBECONFIG=" + dir + "/a:" + dir + "/b names none", dir + "/a does not exist"}},
		{"--kubeconfig of an empty file", "", empty, []string{"--kubeconfig " + empty + " holds no cluster"}},
	}
	if _, err := os.Stat(clientcmd.RecommendedHomeFile); err != nil {
		cases = append(cases, struct {
			name, env, flag string
			want            []string
		}{"nothing at all", "", "", []string{"no kubeconfig: --kubeconfig is not given, KUBECONFIG is not set, and " + clientcmd.RecommendedHomeFile + " does not exist"}})
	} else {
		t.Logf("%s exists: the case without any kubeconfig is not tried", clientcmd.RecommendedHomeFile)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", c.env)
			if c.env == "" {
				os.Unsetenv("KUBECONFIG")
			}
			_, _, err := cluster.RestConfig(cluster.Options{Kubeconfig: c.flag})
			if !cluster.IsUnusable(err) {
				t.Fatalf("err %v, want Unusable", err)
			}
			msg := err.Error()
			for _, w := range append(c.want, "fix: proxybench cluster up", "--kubeconfig PATH or KUBECONFIG=PATH") {
				if !strings.Contains(msg, w) {
					t.Errorf("%q does not say %q", msg, w)
				}
			}
			if strings.Contains(msg, "KUBERNETES_MASTER") {
				t.Errorf("%q passes on client-go's KUBERNETES_MASTER hint", msg)
			}
		})
	}
}
