package cluster

import (
	"fmt"
	"net/netip"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/proxybench/proxybench/cluster/agent"
	pbimage "github.com/proxybench/proxybench/internal/image"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/apiobjects"
)

// runLabels are an object's labels: the run and its component.
func runLabels(runID, component string) map[string]string {
	return map[string]string{RunLabel: runID, ComponentLabel: component}
}

// NamespaceObject is the run's namespace, labelled with the run.
func NamespaceObject(runID string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace(runID), Labels: map[string]string{RunLabel: runID}}}
}

// unprivileged is the security context of every container of a run: no
// privilege, no capability, no escalation, a read-only root, nonroot
// (the image's user 65532).
func unprivileged() *corev1.SecurityContext {
	f, t := false, true
	return &corev1.SecurityContext{
		Privileged: &f, AllowPrivilegeEscalation: &f, ReadOnlyRootFilesystem: &t, RunAsNonRoot: &t,
		Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// PoolDeployment is the backend pool: replicas pods of `proxybench echo`
// on ports (the scenario's target ports). Ports below 1024 need no
// capability: the pod sets the namespaced, safe sysctl
// net.ipv4.ip_unprivileged_port_start=0 (Kubernetes' safe sysctls).
func PoolDeployment(runID, image, pull string, replicas int, ports []uint16) *appsv1.Deployment {
	n := int32(replicas)
	lab := runLabels(runID, ComponentPool)
	var list string
	var cports []corev1.ContainerPort
	for i, p := range ports {
		if i > 0 {
			list += ","
		}
		list += strconv.Itoa(int(p))
		cports = append(cports, corev1.ContainerPort{ContainerPort: int32(p), Protocol: corev1.ProtocolTCP})
	}
	zero := int64(0)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "pool", Namespace: Namespace(runID), Labels: lab},
		Spec: appsv1.DeploymentSpec{
			Replicas: &n,
			Selector: &metav1.LabelSelector{MatchLabels: lab},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lab},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &zero,
					AutomountServiceAccountToken:  new(bool),
					EnableServiceLinks:            new(bool),
					SecurityContext:               &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}}},
					Containers: []corev1.Container{{
						Name: "echo", Image: image, ImagePullPolicy: corev1.PullPolicy(pull),
						// The binary, not the image's entrypoint (proxybench
						// agent): the subcommand is the first argument.
						Command:         []string{pbimage.BinaryPath},
						Args:            []string{"echo", "--ports", list},
						Ports:           cports,
						SecurityContext: unprivileged(),
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(ports[0]))}},
							PeriodSeconds: 1},
					}},
				},
			},
		},
	}
}

// agentPodSpec is the agents' pod: `proxybench agent` on agent.Port,
// its node, name and address from the downward API, tolerating every
// taint (an agent per node, control-plane nodes too), unprivileged (no
// hostNetwork, no capability).
func agentPodSpec(image, pull string) corev1.PodSpec {
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	zero := int64(0)
	return corev1.PodSpec{
		TerminationGracePeriodSeconds: &zero,
		AutomountServiceAccountToken:  new(bool),
		EnableServiceLinks:            new(bool),
		Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		Containers: []corev1.Container{{
			Name: "agent", Image: image, ImagePullPolicy: corev1.PullPolicy(pull),
			Command:         []string{pbimage.BinaryPath},
			Args:            []string{"agent", "--port", strconv.Itoa(agent.Port)},
			Env:             []corev1.EnvVar{field("NODE_NAME", "spec.nodeName"), field("POD_NAME", "metadata.name"), field("POD_IP", "status.podIP")},
			Ports:           []corev1.ContainerPort{{Name: "agent", ContainerPort: agent.Port, Protocol: corev1.ProtocolTCP}},
			SecurityContext: unprivileged(),
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(agent.Port)}},
				PeriodSeconds: 1},
		}},
	}
}

// AgentDaemonSet runs one agent on every schedulable node.
func AgentDaemonSet(runID, image, pull string) *appsv1.DaemonSet {
	lab := runLabels(runID, ComponentAgent)
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: Namespace(runID), Labels: lab},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: lab},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lab}, Spec: agentPodSpec(image, pull)},
		},
	}
}

// AgentPod is an agent pinned to node (spec.nodeName: no scheduler).
func AgentPod(runID, image, pull, node string, i int) *corev1.Pod {
	spec := agentPodSpec(image, pull)
	spec.NodeName = node
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("agent-%d", i), Namespace: Namespace(runID), Labels: runLabels(runID, ComponentAgent)},
		Spec:       spec,
	}
}

// Placed is s placed in the run: its namespace the run's, its endpoints
// the pool's pod IPs (service i takes pool[(i+k) mod len(pool)] for k <
// min(its endpoint count, len(pool)), keeping each endpoint's
// conditions), and its ClusterIP cleared: the cluster allocates it
// from its own service range (Created fills it back).
func Placed(runID string, services []workload.Service, pool []netip.Addr) []workload.Service {
	out := make([]workload.Service, len(services))
	for i, s := range services {
		s.Namespace = Namespace(runID)
		s.ClusterIP = netip.Addr{}
		n := min(len(s.Endpoints), len(pool))
		eps := make([]workload.Endpoint, n)
		for k := range n {
			e := s.Endpoints[k]
			e.IP = pool[(i+k)%len(pool)]
			eps[k] = e
		}
		s.Endpoints = eps
		out[i] = s
	}
	return out
}

// ServiceObject is s as the run creates it: apiobjects' selector-less
// Service (its EndpointSlice is the run's), with the run's labels and
// no fixed ClusterIP unless s has one.
func ServiceObject(runID string, s workload.Service) *corev1.Service {
	svc := apiobjects.Service(s)
	svc.Labels = runLabels(runID, ComponentService)
	if !s.ClusterIP.IsValid() {
		svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "", nil
	}
	return svc
}
