package scenarios

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
