//go:build linux

package cluster_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/proxybench/proxybench/cluster"
	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/topology/controlplane"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/apiobjects"
)

// TestKernelClusterAgainstAPIServer runs the cluster engine's checks and
// objects against a real kube-apiserver + etcd (RBAC on, no kubelet, no
// controller manager), inside the testbed's control-plane namespace:
//   - an API server that does not answer is Unusable naming it, within
//     the connect timeout;
//   - a user without the roles is refused before anything is created,
//     every missing permission named; bound to the roles proxybench rbac
//     prints (applied here through the API), the same user passes;
//   - Start creates the namespace, pool and agents labelled with the run,
//     and with no kubelet to run them times out Unusable within its
//     timeout naming the pool, then deletes what it created (the
//     labelled objects gone, the namespace deleted);
//   - cleanup by label leaves an unlabelled namespace alone.
//
// About 30 s at a load of 25 on 2 cores, most of it the API server's
// start: behind RequireSlow (the default suite is near its budget).
func TestKernelClusterAgainstAPIServer(t *testing.T) {
	testenv.RequireKernel(t)
	bins := testenv.RequireKube(t)
	testenv.RequireSlow(t, "a control plane of its own (about 30 s on a loaded machine)")
	before := testenv.RootSnapshot(t)
	ctx := context.Background()
	cp, err := controlplane.Start(ctx, controlplane.Spec{RunID: topology.NewRunID(), RBAC: true,
		Bin: controlplane.Binaries{Etcd: bins.Etcd, APIServer: bins.APIServer}})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	admin := cp.RestConfig()
	run := topology.NewRunID()
	o := cluster.Options{RunID: run, Image: "proxybench.local/proxybench:test", AgentTimeout: 2 * time.Second, CleanupWait: -1}

	dead := rest.CopyConfig(admin)
	dead.Host = "https://127.0.0.1:1" // inside the control-plane namespace: nothing listens there
	t0 := time.Now()
	if _, err := cluster.Connect(ctx, o, dead); !cluster.IsUnusable(err) || !strings.Contains(err.Error(), "127.0.0.1:1") || time.Since(t0) > 30*time.Second {
		t.Errorf("a dead API server: %v after %s, want Unusable naming it within 30 s", err, time.Since(t0))
	}

	restricted := rest.CopyConfig(admin)
	restricted.BearerToken = cp.RestrictedToken
	rc, err := cluster.Connect(ctx, o, restricted)
	if err != nil {
		t.Fatal(err)
	}
	err = rc.Access(ctx, run)
	if !cluster.IsUnusable(err) || !strings.Contains(err.Error(), "create namespaces cluster-wide") || !strings.Contains(err.Error(), "create pods/proxy in "+cluster.Namespace(run)) {
		t.Errorf("a user without roles: %v, want Unusable naming create namespaces and pods/proxy", err)
	}
	if err := applyRBAC(ctx, cp.Client); err != nil {
		t.Fatal(err)
	}
	// RBAC's authorizer sees new bindings through its informers: a moment.
	deadline := time.Now().Add(10 * time.Second)
	for err = rc.Access(ctx, run); err != nil && time.Now().Before(deadline); err = rc.Access(ctx, run) {
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("bound to the printed roles, the user is still refused: %v", err)
	}

	if _, err := cp.Client.CoreV1().Nodes().Create(ctx, apiobjects.NodeObject(apiobjects.Node{Name: "node-a", InternalIP: netip.MustParseAddr("198.19.0.10")}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, cluster.NamespaceObject(run), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A namespace of the same prefix, not labelled: never touched.
	if _, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "proxybench-other"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A namespace of this run exists: Start refuses, naming cleanup.
	svcs := []workload.Service{{Name: "s0", Ports: []workload.ServicePort{{Port: 80, TargetPort: 8080, Protocol: "TCP"}},
		Endpoints: []workload.Endpoint{workload.NewEndpoint(netip.MustParseAddr("198.19.1.1"))}}}
	if _, err := rc.Start(ctx, svcs, 2); !cluster.IsUnusable(err) || !strings.Contains(err.Error(), "proxybench cleanup --engine cluster --run "+run) {
		t.Errorf("a run whose namespace exists: %v", err)
	}
	if _, err := cluster.Cleanup(ctx, cp.Client, run, 0); err != nil {
		t.Fatal(err)
	}
	// The namespace is Terminating for good here (no namespace
	// controller): the next attempt takes a new run ID.
	run2 := topology.NewRunID()
	o.RunID = run2
	rc2, err := cluster.Connect(ctx, o, restricted)
	if err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	_, err = rc2.Start(ctx, svcs, 2)
	took := time.Since(t0)
	if !cluster.IsUnusable(err) || !strings.Contains(err.Error(), "0 of 2 pool pods Ready after 2s") || took > 30*time.Second {
		t.Errorf("no kubelet: %v after %s, want Unusable \"0 of 2 pool pods Ready after 2s\" within 30 s", err, took)
	}
	ns, gerr := cp.Client.CoreV1().Namespaces().Get(ctx, cluster.Namespace(run2), metav1.GetOptions{})
	if gerr == nil && ns.DeletionTimestamp == nil {
		t.Errorf("namespace %s left after a failed start", ns.Name)
	}
	if gerr == nil && ns.Labels[cluster.RunLabel] != run2 {
		t.Errorf("namespace labels %v", ns.Labels)
	}
	if d, err := cp.Client.AppsV1().Deployments(cluster.Namespace(run2)).List(ctx, metav1.ListOptions{}); err != nil || len(d.Items) != 0 {
		t.Errorf("deployments left: %v, %v", d, err)
	}
	if d, err := cp.Client.AppsV1().DaemonSets(cluster.Namespace(run2)).List(ctx, metav1.ListOptions{}); err != nil || len(d.Items) != 0 {
		t.Errorf("daemonsets left: %v, %v", d, err)
	}
	if _, err := cluster.Cleanup(ctx, cp.Client, "", 0); err != nil {
		t.Fatal(err)
	}
	if o, err := cp.Client.CoreV1().Namespaces().Get(ctx, "proxybench-other", metav1.GetOptions{}); apierrors.IsNotFound(err) || (err == nil && o.DeletionTimestamp != nil) {
		t.Error("cleanup of every run deleted the unlabelled namespace proxybench-other")
	}
	cp.Stop()
	testenv.CompareRoot(t, before, testenv.RootSnapshot(t))
}

// applyRBAC creates the roles proxybench rbac --user restricted prints,
// through the API (as kubectl apply -f - would).
func applyRBAC(ctx context.Context, c kubernetes.Interface) error {
	return cluster.ApplyRBAC(ctx, c, "User", controlplane.RestrictedUser)
}
