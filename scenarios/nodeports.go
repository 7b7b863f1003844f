package scenarios

import (
	"fmt"
	"slices"
	"strings"
)

// NodePortServices returns the indices of the generated services (main
// list, then groups, in order) whose type gives them node ports
// (NodePort, LoadBalancer): the services the nodePortLookup phase's
// positions run over.
func (s *Scenario) NodePortServices() []int {
	var out []int
	i := 0
	for _, sp := range s.ServiceSpecs() {
		n := min(max(sp.Count, 0), MaxServices)
		if sp.Type == TypeNodePort || sp.Type == TypeLoadBalancer {
			for k := 0; k < n; k++ {
				out = append(out, i+k)
			}
		}
		i += n
	}
	return out
}

// nodePortLookup checks traffic.nodePorts: some service has node ports
// to dial (services.type or a group's type NodePort or LoadBalancer).
func (c *checker) nodePortLookup() {
	s := c.s
	if !s.Traffic.NodePorts {
		return
	}
	for _, sp := range s.ServiceSpecs() {
		if sp.Type == TypeNodePort || sp.Type == TypeLoadBalancer {
			return
		}
	}
	c.add("traffic.nodePorts", "no service has node ports to dial (every service is type ClusterIP)",
		"set services.type (or a services.groups entry's type) to NodePort or LoadBalancer, or remove traffic.nodePorts")
}

// nodePortModes checks, with the build's catalog, that every builtin row
// of traffic.nodePorts programs node ports (Catalog.NodePorts): a row
// that does not would dial ports nothing answers.
func (c *checker) nodePortModes() {
	s := c.s
	if !s.Traffic.NodePorts || c.cat == nil || c.cat.NodePorts == nil {
		return
	}
	var lack []string
	for _, m := range s.builtinRows() {
		if slices.Contains(c.cat.Modes, m) && !slices.Contains(c.cat.NodePorts, m) {
			lack = append(lack, m)
		}
	}
	if len(lack) == 0 {
		return
	}
	why := fmt.Sprintf("builtin %s programs no node ports in this build (modes whose builtin does: %s), so its nodePortLookup would dial ports nothing answers",
		strings.Join(lack, ", "), strings.Join(c.cat.NodePorts, ", "))
	fix := "remove " + strings.Join(lack, ", ") + " from modes"
	if kp := kubeProxyOnly(lack); len(kp) > 0 {
		fix += ", or run the scenario with implementation: [kube-proxy] alone (kube-proxy's " + strings.Join(kp, ", ") + " programs node ports)"
	}
	c.add("traffic.nodePorts", why, fix)
}

// kubeProxyOnly are the modes of ms that kube-proxy has (KubeProxyModes).
func kubeProxyOnly(ms []string) []string {
	var out []string
	for _, m := range ms {
		if slices.Contains(KubeProxyModes, m) {
			out = append(out, m)
		}
	}
	return out
}
