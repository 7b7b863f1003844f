package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/proxybench/proxybench/cluster/agent"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/apiobjects"
)

// Run is one run's objects on the cluster.
type Run struct {
	c     *Cluster
	ID    string
	NS    string
	Pool  []netip.Addr
	Nodes []string // the nodes with an agent, sorted
	// Agents maps a node to its agent pod's name.
	Agents map[string]string
	// Services are the scenario's services as created: the run's
	// namespace, the pool's endpoints, the ClusterIPs the cluster gave.
	Services []workload.Service
	// Created lists what Start created, for the log and the result.
	Created  []string
	stop     chan struct{}
	stopOnce sync.Once
	// probes counts programming phases, so each phase's probe IDs are new.
	probes int
	pods   cache.SharedIndexInformer
}

// Start creates the run on the cluster: its namespace, the pool (waited
// for until its pods are Ready, within Options.AgentTimeout), the
// services and their EndpointSlices on the pool, and the agents (waited
// for until one is Ready on every node, within the same timeout). On any
// error it deletes the namespace (and so everything in it) before
// returning; a pool or agent that is not Ready in time is Unusable
// naming the nodes and the pods' reasons (ErrImagePull, Pending, ...).
func (c *Cluster) Start(ctx context.Context, services []workload.Service, poolSize int) (r *Run, err error) {
	o := c.opts
	if o.RunID == "" {
		return nil, &Unusable{Cause: "no run ID"}
	}
	if o.Image == "" {
		return nil, &Unusable{Cause: "--image: empty", Fix: "give the agent image: make image, import or push it, then --image REF"}
	}
	if poolSize < 1 {
		poolSize = 1
	}
	r = &Run{c: c, ID: o.RunID, NS: Namespace(o.RunID), Agents: map[string]string{}, stop: make(chan struct{})}
	created := false // the namespace is this Start's: delete it on error
	defer func() {
		if err == nil {
			return
		}
		r.stopInformers()
		if created {
			if derr := r.Delete(context.WithoutCancel(ctx)); derr != nil {
				err = errors.Join(err, derr)
			}
		}
		r = nil
	}()
	nodes, err := c.targetNodes(ctx)
	if err != nil {
		return r, err
	}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, NamespaceObject(r.ID), metav1.CreateOptions{}); err != nil {
		return r, c.refusal("create namespace "+r.NS, err)
	}
	created = true
	r.Created = append(r.Created, "namespace/"+r.NS)
	o.logf("cluster: namespace %s on %s", r.NS, c.Host)
	r.startInformer()
	ports := workload.TargetPorts(services)
	if len(ports) == 0 {
		return r, &Unusable{Cause: "the scenario has no TCP service port"}
	}
	if _, err := c.Client.AppsV1().Deployments(r.NS).Create(ctx, PoolDeployment(r.ID, o.Image, o.PullPolicy, poolSize, ports), metav1.CreateOptions{}); err != nil {
		return r, c.refusal("create the pool Deployment", err)
	}
	r.Created = append(r.Created, "deployment/pool")
	if len(o.Nodes) > 0 {
		for i, n := range nodes {
			if _, err := c.Client.CoreV1().Pods(r.NS).Create(ctx, AgentPod(r.ID, o.Image, o.PullPolicy, n, i), metav1.CreateOptions{}); err != nil {
				return r, c.refusal("create agent pod on node "+n, err)
			}
			r.Created = append(r.Created, fmt.Sprintf("pod/agent-%d", i))
		}
	} else {
		if _, err := c.Client.AppsV1().DaemonSets(r.NS).Create(ctx, AgentDaemonSet(r.ID, o.Image, o.PullPolicy), metav1.CreateOptions{}); err != nil {
			return r, c.refusal("create the agent DaemonSet", err)
		}
		r.Created = append(r.Created, "daemonset/agent")
	}
	deadline := time.Now().Add(o.AgentTimeout)
	agentsDone := func(ready []*corev1.Pod) (bool, string) {
		have := map[string]bool{}
		for _, p := range ready {
			have[p.Spec.NodeName] = true
		}
		var without []string
		for _, n := range nodes {
			if !have[n] {
				without = append(without, n)
			}
		}
		return len(without) == 0, "no Ready agent on node(s) " + strings.Join(without, ", ")
	}
	pool, err := r.waitPods(ctx, ComponentPool, deadline, func(ready []*corev1.Pod) (bool, string) {
		return len(ready) >= poolSize, fmt.Sprintf("%d of %d pool pods Ready", len(ready), poolSize)
	})
	var u *Unusable
	if errors.As(err, &u) {
		// The agents had the same time: name those missing too (a node
		// without one is the cause as much as a slow pool).
		var ua *Unusable
		if _, aerr := r.waitPods(ctx, ComponentAgent, time.Now(), agentsDone); errors.As(aerr, &ua) {
			u.Cause += "; " + ua.Cause
		}
	}
	if err != nil {
		return r, err
	}
	for _, p := range pool[:poolSize] {
		a, perr := netip.ParseAddr(p.Status.PodIP)
		if perr != nil {
			return r, fmt.Errorf("cluster: pool pod %s has no IPv4 address (%q)", p.Name, p.Status.PodIP)
		}
		r.Pool = append(r.Pool, a)
	}
	slices.SortFunc(r.Pool, netip.Addr.Compare)
	agents, err := r.waitPods(ctx, ComponentAgent, deadline, agentsDone)
	if err != nil {
		return r, err
	}
	for _, p := range agents {
		if slices.Contains(nodes, p.Spec.NodeName) && r.Agents[p.Spec.NodeName] == "" {
			r.Agents[p.Spec.NodeName] = p.Name
		}
	}
	r.Nodes = nodes
	o.logf("cluster: pool %v, agents on %d nodes", r.Pool, len(r.Agents))
	if err := r.createServices(ctx, services); err != nil {
		return r, err
	}
	return r, nil
}

// targetNodes are the nodes that get an agent: Options.Nodes (each must
// exist), else every node that is not unschedulable, sorted. None is
// Unusable.
func (c *Cluster) targetNodes(ctx context.Context) ([]string, error) {
	list, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, c.refusal("list nodes", err)
	}
	all := map[string]bool{}
	var out []string
	for _, n := range list.Items {
		all[n.Name] = true
		if !n.Spec.Unschedulable {
			out = append(out, n.Name)
		}
	}
	if len(c.opts.Nodes) > 0 {
		for _, n := range c.opts.Nodes {
			if !all[n] {
				return nil, &Unusable{Cause: fmt.Sprintf("--nodes: node %q is not in the cluster", n), Fix: "name nodes kubectl get nodes lists"}
			}
		}
		out = slices.Clone(c.opts.Nodes)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return nil, &Unusable{Cause: "the cluster has no schedulable node", Fix: "add a node, or uncordon one"}
	}
	return out, nil
}

// refusal turns the API server's refusal of what the run does into an
// Unusable naming it (Forbidden: the RBAC fix).
func (c *Cluster) refusal(what string, err error) error {
	switch {
	case apierrors.IsForbidden(err):
		return &Unusable{Cause: "the API server refused to " + what, Fix: "bind the roles proxybench rbac prints", Err: err}
	case apierrors.IsAlreadyExists(err):
		return &Unusable{Cause: what + ": it exists already (a run with this ID?)", Fix: "proxybench cleanup --engine cluster --run " + c.opts.RunID, Err: err}
	}
	return fmt.Errorf("cluster: %s: %w", what, err)
}

// startInformer watches the run's pods (a shared informer on the run's
// namespace, resync 0).
func (r *Run) startInformer() {
	f := informers.NewSharedInformerFactoryWithOptions(r.c.Client, 0, informers.WithNamespace(r.NS),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = RunLabel + "=" + r.ID }))
	r.pods = f.Core().V1().Pods().Informer()
	f.Start(r.stop)
}

func (r *Run) stopInformers() { r.stopOnce.Do(func() { close(r.stop) }) }

// waitPods waits until done says the Ready pods of component are
// enough, or deadline: then it is Unusable with done's account and every
// not-Ready pod's reason.
func (r *Run) waitPods(ctx context.Context, component string, deadline time.Time, done func([]*corev1.Pod) (bool, string)) ([]*corev1.Pod, error) {
	sel := labels.SelectorFromSet(labels.Set{ComponentLabel: component})
	for {
		var ready, other []*corev1.Pod
		for _, o := range r.pods.GetStore().List() {
			p := o.(*corev1.Pod)
			if !sel.Matches(labels.Set(p.Labels)) || p.DeletionTimestamp != nil {
				continue
			}
			if podReady(p) {
				ready = append(ready, p)
			} else {
				other = append(other, p)
			}
		}
		sort.Slice(ready, func(i, j int) bool { return ready[i].Name < ready[j].Name })
		ok, account := done(ready)
		if ok {
			return ready, nil
		}
		if time.Now().After(deadline) {
			var why []string
			for _, p := range other {
				why = append(why, p.Name+" on "+orNone(p.Spec.NodeName)+": "+podWhy(p))
			}
			sort.Strings(why)
			fix := "check the image (--image " + r.c.opts.Image + ") is on or pullable by every node, and the nodes are Ready; --agent-timeout waits longer"
			cause := fmt.Sprintf("%s after %s", account, r.c.opts.AgentTimeout)
			if len(why) > 0 {
				cause += " (" + strings.Join(why, "; ") + ")"
			}
			return nil, &Unusable{Cause: cause, Fix: fix}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "no node"
	}
	return s
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podWhy is why p is not Ready: a container's waiting reason
// (ErrImagePull, ImagePullBackOff, CrashLoopBackOff) and message, else
// an unscheduled or pending phase.
func podWhy(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			if w.Message != "" {
				return w.Reason + ": " + w.Message
			}
			return w.Reason
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return "unscheduled: " + c.Message
		}
	}
	// A kubelet that took the pod sets its start time; before that the
	// phase is the API server's Pending (or empty, in a test's API).
	if p.Status.Phase == "" || (p.Spec.NodeName != "" && p.Status.StartTime == nil) {
		return "no kubelet has reported it"
	}
	return string(p.Status.Phase)
}

// createServices creates the services on the pool and reads back their
// ClusterIPs.
func (r *Run) createServices(ctx context.Context, services []workload.Service) error {
	placed := Placed(r.ID, services, r.Pool)
	trigger := time.Now()
	for i := range placed {
		s := &placed[i]
		got, err := r.c.Client.CoreV1().Services(r.NS).Create(ctx, ServiceObject(r.ID, *s), metav1.CreateOptions{})
		if err != nil {
			return r.c.refusal("create Service "+s.Name, err)
		}
		if s.ClusterIP, err = netip.ParseAddr(got.Spec.ClusterIP); err != nil {
			return fmt.Errorf("cluster: Service %s got ClusterIP %q: %w", s.Name, got.Spec.ClusterIP, err)
		}
		slice := apiobjects.EndpointSlice(*s, trigger)
		slice.Labels[RunLabel] = r.ID
		if _, err := r.c.Client.DiscoveryV1().EndpointSlices(r.NS).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			return r.c.refusal("create EndpointSlice "+slice.Name, err)
		}
	}
	r.Services = placed
	r.c.opts.logf("cluster: %d services on the pool", len(placed))
	return nil
}

// Agent is the client of node's agent, through the API server's
// pods/proxy subresource.
func (r *Run) Agent(node string) agent.Client {
	pod := r.Agents[node]
	rc := r.c.Client.CoreV1().RESTClient()
	return agent.Client{T: func(ctx context.Context, method, path string, body []byte) ([]byte, error) {
		req := rc.Verb(method).Namespace(r.NS).Resource("pods").Name(fmt.Sprintf("%s:%d", pod, agent.Port)).SubResource("proxy").
			Suffix(strings.TrimPrefix(path, "/"))
		if body != nil {
			req = req.Body(body).SetHeader("Content-Type", "application/json")
		}
		out, err := req.DoRaw(ctx)
		if err != nil {
			return nil, fmt.Errorf("agent %s on %s: %s %s: %w (%s)", pod, node, method, path, err, strings.TrimSpace(string(out)))
		}
		return out, nil
	}}
}

// Close stops the run's informers and deletes it (Delete).
func (r *Run) Close(ctx context.Context) error {
	r.stopInformers()
	return r.Delete(ctx)
}

// Delete deletes the run's objects and namespace (Cleanup), waiting up
// to Options.CleanupWait for the namespace to be gone.
func (r *Run) Delete(ctx context.Context) error {
	_, err := Cleanup(ctx, r.c.Client, r.ID, max(r.c.opts.CleanupWait, 0))
	return err
}
