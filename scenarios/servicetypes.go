package scenarios

import "time"

// ServiceTypesSpec configures the serviceTypes phase: after every row, for
// each mode with rules and for builtin and (KubeProxy) the real
// kube-proxy on every node, it connects through every entry path of
// every service (ClusterIP, node ports on each node, localhost node
// ports, LoadBalancer and external IPs entering at each node) from every
// client location (a pod on each node, each node itself, the external
// client) and checks reachability and the source address the backend saw
// against the outcome the Kubernetes documentation gives (run-scoped).
type ServiceTypesSpec struct {
	// Connections per cell (default 10); a cell whose first 3 fail stops
	// there.
	Connections int `yaml:"connections" json:"connections"`
	// Timeout bounds one connection (default 500ms).
	Timeout Duration `yaml:"timeout" json:"timeout"`
	// KubeProxy also runs the cells with the real kube-proxy on every
	// node (one control plane, the same Services and EndpointSlices
	// through the API), for the modes it has; the scenario's rows stay
	// builtin (implementation kube-proxy runs on one node).
	KubeProxy bool `yaml:"kubeProxy,omitempty" json:"kubeProxy,omitempty"`
}

// setServiceTypesDefaults fills serviceTypes' unset fields (SetDefaults).
func (s *Scenario) setServiceTypesDefaults() {
	st := s.ServiceTypes
	if st == nil {
		return
	}
	if st.Connections == 0 && !s.has("serviceTypes.connections") {
		st.Connections = 10
	}
	if st.Timeout.Duration == 0 && !s.has("serviceTypes.timeout") {
		st.Timeout.Duration = 500 * time.Millisecond
	}
}

// serviceTypes checks the serviceTypes block: what its cells need of the
// testbed (two or more nodes, isolated pods, the external client).
func (c *checker) serviceTypes() {
	s := c.s
	st := s.ServiceTypes
	if st == nil {
		return
	}
	c.between("serviceTypes.connections", st.Connections, 1, 10000)
	c.duration("serviceTypes.timeout", st.Timeout.Duration, true, "500ms")
	if !s.Topology.ExternalClient {
		c.add("serviceTypes", "its cells include the external client", "set topology.externalClient: true (with topology.nodes: 2 or more)")
	}
	if s.Topology.PodModel() != "isolated" {
		c.add("serviceTypes", "its cells place endpoints on nodes and read the source address each pod saw, which needs topology.pods: isolated", "set topology.pods: isolated")
	}
	if st.KubeProxy && s.Engine == "sim" {
		c.add("serviceTypes.kubeProxy", "kube-proxy runs only on the real engine", "use engine: real, or remove serviceTypes.kubeProxy")
	}
}

// ServiceTypesKubeScenario is s as the serviceTypes phase's kube-proxy
// cells need it checked (implementation kube-proxy for s's modes), or nil
// when the phase runs no kube-proxy.
func (s *Scenario) ServiceTypesKubeScenario() *Scenario {
	if s.ServiceTypes == nil || !s.ServiceTypes.KubeProxy {
		return nil
	}
	c := *s
	c.Implementation = []string{ImplBuiltin, ImplKubeProxy}
	return &c
}
