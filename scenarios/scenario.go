// Package scenarios owns the scenario schema: the YAML files shipped in this
// folder (embedded in the binary), strict decoding, defaults and validation.
// It never touches the kernel.
package scenarios

import (
	"fmt"
	"math/rand"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Scenario is one validated benchmark description. Load returns it with
// every default filled and every field checked; the zero value is not valid.
type Scenario struct {
	// Name identifies the scenario in results and file names.
	Name string `yaml:"name" json:"name"`
	// Description is free text shown in reports.
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	// Seed seeds every random choice (endpoint counts, random positions).
	Seed int64 `yaml:"seed" json:"seed"`
	// Repetitions is how many times each full sync and each traffic phase is
	// repeated per mode (default 3).
	Repetitions int `yaml:"repetitions" json:"repetitions"`
	// Runs is how many times the whole measurement is repeated (default
	// 1; `run --count N` overrides it), run after run with every mode in
	// each, so drift between runs hits all modes alike. The result holds
	// every run, and compare judges each figure across them.
	Runs int `yaml:"runs,omitempty" json:"runs,omitempty"`
	// Modes lists the proxy modes to measure, in order (default none,
	// iptables): names of the build's modes (proxymodes/modes: none,
	// iptables, ipvs, nftables, userspace), checked by Catalog.Parse.
	Modes []string `yaml:"modes" json:"modes"`

	// Implementation lists who programs each mode's rules (default
	// [builtin]): builtin (proxybench's own re-implementation of
	// kube-proxy's rules, the reference the sim models) and kube-proxy (the
	// real kube-proxy binary, with a control plane of the run's own; modes
	// iptables, ipvs and nftables, kubeProxy.modes narrows them). Both: one
	// row each, reported side by side as "nftables" and "nftables
	// (kube-proxy)", always on one kernel.
	Implementation []string `yaml:"implementation,omitempty" json:"implementation,omitempty"`
	// KubeProxy configures implementation kube-proxy (KubeProxySpec).
	KubeProxy KubeProxySpec `yaml:"kubeProxy,omitempty" json:"kubeProxy,omitempty"`

	// Kernel picks where the modes run: auto (default: every mode the
	// host kernel supports on the host, the others in a user-mode-linux
	// kernel with none and a bridge mode the host ran too, iptables by
	// default, so the report gives the guest's factor against the host),
	// or a comma-separated list
	// of kernels the whole scenario runs on, each reported on its own:
	// host, uml (the default guest kernel: the one make kernels built from
	// linux-source-6.12 when present, else Debian's), uml:6.12, uml:6.1
	// (built by make kernels), uml:debian (the user-mode-linux package),
	// or a path to a user-mode-linux kernel binary.
	Kernel string `yaml:"kernel" json:"kernel"`
	// Fallback, when "iptables", reproduces kube-proxy's downgrade from
	// ipvs to iptables where the kernel lacks IP_VS; the result records
	// that it happened. Empty (default): never fall back.
	Fallback string `yaml:"fallback,omitempty" json:"fallback,omitempty"`
	// Engine is real (default, also when empty: network namespaces, the modes' real rules
	// and real traffic; needs root), sim (package sim: the same figures
	// from models of the rendered rulesets, calibrated on a real kernel;
	// no root, any scale) or cluster (EngineCluster: a real Kubernetes
	// cluster; the modes it measures are the cluster's).
	Engine string `yaml:"engine" json:"engine,omitempty"`
	// Sim configures the sim engine (ignored by the real one).
	Sim SimSpec `yaml:"sim,omitempty" json:"sim,omitempty"`

	Services ServicesSpec `yaml:"services" json:"services"`
	// Failure makes endpoints dead for the whole run: their pod IPs answer
	// TCP with RST (mode reset) or not at all (drop), as a pod whose
	// container died before its endpoint was removed.
	Failure FailureSpec `yaml:"failure,omitempty" json:"failure,omitempty"`
	// Churn, when Rate > 0, changes endpoints and services at Rate per
	// second for Duration after each mode's traffic phases, with the mode's
	// sync loop running, and measures programming latency.
	Churn ChurnSpec `yaml:"churn,omitempty" json:"churn,omitempty"`
	// Transitions, when set, runs each mode (but none) through endpoint
	// transitions of a DNS-like service (53/UDP + 53/TCP) while a UDP
	// client with a fixed source port keeps sending to it, and measures how
	// long until its datagrams reach a live endpoint after each change.
	Transitions *TransitionsSpec `yaml:"transitions,omitempty" json:"transitions,omitempty"`
	// SyncDisruption, when set, probes a fixed set of services while each
	// mode (but none) runs a cold full sync (a restarted proxier over the
	// rules already in place, as kube-proxy after a restart) and an
	// incremental sync, and reports failed and slow connections during
	// each sync's window (kubernetes PR#139546).
	SyncDisruption *SyncDisruptionSpec `yaml:"syncDisruption,omitempty" json:"syncDisruption,omitempty"`
	// ServiceTypes, when set, measures every entry path × client location
	// × policy of the services (ServiceTypesSpec; run-scoped).
	ServiceTypes *ServiceTypesSpec `yaml:"serviceTypes,omitempty" json:"serviceTypes,omitempty"`
	// ModeSwitch, when set, switches one node from one mode to another under probes (ModeSwitchSpec; run-scoped).
	ModeSwitch *ModeSwitchSpec `yaml:"modeSwitch,omitempty" json:"modeSwitch,omitempty"`
	// Soak, when set, runs each mode (but none) for a long time under
	// churn and open-loop traffic, one sample per interval streamed to
	// disk as measured (SoakSpec).
	Soak *SoakSpec `yaml:"soak,omitempty" json:"soak,omitempty"`
	// Faults, when set, injects the failures users meet (FaultsSpec):
	// each sub-block is a phase of its own.
	Faults *FaultsSpec `yaml:"faults,omitempty" json:"faults,omitempty"`
	// Lifecycle, when set, runs each mode (but none) through endpoint
	// lifecycle changes of a TCP service while clients hold connections:
	// removal, terminating, drain to 0 and refill, restart at a new address.
	Lifecycle *LifecycleSpec `yaml:"lifecycle,omitempty" json:"lifecycle,omitempty"`
	// ConnReuse, when set, makes each mode (but none) run a client that
	// closes with FIN from a narrow source-port range, so ports are reused
	// from TIME_WAIT (kubernetes#70747), and reports the share of connects
	// slower than 1 s; ipvs runs once per net.ipv4.vs.conn_reuse_mode value.
	ConnReuse *ConnReuseSpec `yaml:"connReuse,omitempty" json:"connReuse,omitempty"`
	// NoConntrackCleanup turns off the modes' stale UDP conntrack cleanup
	// (set by the transitions phase for its comparison; never from YAML).
	NoConntrackCleanup bool `yaml:"-" json:"-"`
	// Family is IPv6 in the view of the scenario an IPv6 proxier is
	// given (ForFamily); "" otherwise (never from YAML).
	Family string `yaml:"-" json:"-"`
	// Sweep, when set, runs every mode once per service count listed
	// (capacity planning): services.count is replaced by each in turn.
	Sweep SweepSpec `yaml:"sweep,omitempty" json:"sweep,omitempty"`
	// Node sets the node namespaces' sysctls (see NodeSpec).
	Node     NodeSpec     `yaml:"node,omitempty" json:"node,omitempty"`
	Network  NetworkSpec  `yaml:"network" json:"network"`
	Topology TopologySpec `yaml:"topology" json:"topology"`
	Traffic  TrafficSpec  `yaml:"traffic" json:"traffic"`
	IPTables IPTablesSpec `yaml:"iptables" json:"iptables"`
	IPVS     IPVSSpec     `yaml:"ipvs" json:"ipvs"`
	NFTables NFTablesSpec `yaml:"nftables" json:"nftables"`
	UML      UMLSpec      `yaml:"uml" json:"uml"`
	// Monitoring runs a real Prometheus server beside each kube-proxy row
	// (MonitoringSpec); Alerts is a rule file it evaluates.
	Monitoring MonitoringSpec `yaml:"monitoring,omitempty" json:"monitoring,omitempty"`
	// Alerts names a Prometheus rule file or a PrometheusRule object
	// (its spec.groups) that each kube-proxy row's Prometheus evaluates
	// (run --alerts overrides it; alerts/seeds.yaml ships the seeds'
	// rules, embedded): the report says per row which alerts fired, when
	// and at what value, and what the recording rules gave. It turns
	// monitoring.prometheus on. A file Prometheus's promtool refuses is
	// bad input (exit 2, its file, line and promtool's message).
	Alerts string `yaml:"alerts,omitempty" json:"alerts,omitempty"`
	// Gates are pass/fail checks `run` evaluates after measuring (exit 1
	// when one fails); see Gate.
	Gates []Gate `yaml:"gates,omitempty" json:"gates,omitempty"`

	// source names the file the scenario came from (for error messages);
	// lines maps each field path present in it ("services.count",
	// "modes[1]") to its 1-based line. Both are empty for a Scenario built
	// in Go.
	source string
	lines  map[string]int
}

// ServicesSpec describes the generated ClusterIP services.
type ServicesSpec struct {
	// Count is the number of services (>= 1).
	Count int `yaml:"count" json:"count"`
	// Ports, when given, lists every service's ServicePorts by name, as a
	// Service's spec.ports (a DNS-like service: dns-tcp 53/TCP and dns
	// 53/UDP). It replaces PortsPerService, Protocol, Port and TargetPort,
	// which must then be left out (and stay zero). See PortSpec.
	Ports []PortSpec `yaml:"ports,omitempty" json:"ports,omitempty"`
	// PortsPerService is the number of ServicePorts per service (default 1).
	PortsPerService int `yaml:"portsPerService,omitempty" json:"portsPerService,omitempty"`
	// Protocol of every ServicePort: TCP (default) or UDP.
	Protocol string `yaml:"protocol,omitempty" json:"protocol,omitempty"`
	// Port is the first ServicePort's port (default 80); port j is Port+j.
	Port int `yaml:"port,omitempty" json:"port,omitempty"`
	// TargetPort is the first endpoint port (default 8080); port j is TargetPort+j.
	TargetPort int `yaml:"targetPort,omitempty" json:"targetPort,omitempty"`
	// SessionAffinity is None (default) or ClientIP; with ClientIP a
	// client's connections stick to one endpoint for
	// SessionAffinityTimeout (default 10800s, Kubernetes' default).
	SessionAffinity        string   `yaml:"sessionAffinity" json:"sessionAffinity"`
	SessionAffinityTimeout Duration `yaml:"sessionAffinityTimeout" json:"sessionAffinityTimeout"`
	// Endpoints sets how many endpoints each service has.
	Endpoints EndpointsSpec `yaml:"endpoints" json:"endpoints"`

	// Type, ExternalTrafficPolicy, InternalTrafficPolicy, NodePorts,
	// HealthCheckNodePorts, ExternalIPs, LoadBalancerIPs and
	// EndpointNodes say how the services are reached beyond their
	// ClusterIP (core/v1 ServiceSpec; ExposureSpec documents each).
	Type                  string   `yaml:"type,omitempty" json:"type,omitempty"`
	ExternalTrafficPolicy string   `yaml:"externalTrafficPolicy,omitempty" json:"externalTrafficPolicy,omitempty"`
	InternalTrafficPolicy string   `yaml:"internalTrafficPolicy,omitempty" json:"internalTrafficPolicy,omitempty"`
	NodePorts             []int    `yaml:"nodePorts,omitempty" json:"nodePorts,omitempty"`
	HealthCheckNodePorts  []int    `yaml:"healthCheckNodePorts,omitempty" json:"healthCheckNodePorts,omitempty"`
	ExternalIPs           []string `yaml:"externalIPs,omitempty" json:"externalIPs,omitempty"`
	LoadBalancerIPs       []string `yaml:"loadBalancerIPs,omitempty" json:"loadBalancerIPs,omitempty"`
	EndpointNodes         []string `yaml:"endpointNodes,omitempty" json:"endpointNodes,omitempty"`
	// TrafficDistribution is core/v1 spec.trafficDistribution:
	// PreferClose, PreferSameZone or PreferSameNode ("" : none); the
	// testbed writes the EndpointSlice hints the EndpointSlice controller
	// would (topology.go in this package documents it).
	TrafficDistribution string `yaml:"trafficDistribution,omitempty" json:"trafficDistribution,omitempty"`
	// Groups are more services after these count ones, each group of its
	// own type and policies (ServiceGroup; it shares ports and session
	// affinity with the main list): the service-types scenario has one
	// group per type × policy.
	Groups []ServiceGroup `yaml:"groups,omitempty" json:"groups,omitempty"`
	// IPFamilyPolicy is SingleStack (default: the cluster's primary
	// family), PreferDualStack (every family the cluster has) or
	// RequireDualStack (both; a single-family cluster refuses it), as
	// core/v1's spec.ipFamilyPolicy.
	IPFamilyPolicy string `yaml:"ipFamilyPolicy,omitempty" json:"ipFamilyPolicy,omitempty"`
}

// ServiceGroup is one entry of services.groups: Count services with the
// exposure fields of ServicesSpec (same names and meaning) and
// Endpoints.Count endpoints each (default: the main list's fixed count,
// else 3).
type ServiceGroup struct {
	Count                 int                   `yaml:"count" json:"count"`
	Endpoints             ServiceGroupEndpoints `yaml:"endpoints,omitempty" json:"endpoints,omitempty"`
	Type                  string                `yaml:"type,omitempty" json:"type,omitempty"`
	ExternalTrafficPolicy string                `yaml:"externalTrafficPolicy,omitempty" json:"externalTrafficPolicy,omitempty"`
	InternalTrafficPolicy string                `yaml:"internalTrafficPolicy,omitempty" json:"internalTrafficPolicy,omitempty"`
	NodePorts             []int                 `yaml:"nodePorts,omitempty" json:"nodePorts,omitempty"`
	HealthCheckNodePorts  []int                 `yaml:"healthCheckNodePorts,omitempty" json:"healthCheckNodePorts,omitempty"`
	ExternalIPs           []string              `yaml:"externalIPs,omitempty" json:"externalIPs,omitempty"`
	LoadBalancerIPs       []string              `yaml:"loadBalancerIPs,omitempty" json:"loadBalancerIPs,omitempty"`
	EndpointNodes         []string              `yaml:"endpointNodes,omitempty" json:"endpointNodes,omitempty"`
	TrafficDistribution   string                `yaml:"trafficDistribution,omitempty" json:"trafficDistribution,omitempty"`
}

// ServiceGroupEndpoints is a group's endpoints block: a fixed count.
type ServiceGroupEndpoints struct {
	Count int `yaml:"count" json:"count"`
}

// PortSpec is one named ServicePort of services.ports (Kubernetes'
// core/v1 ServicePort, without nodePort): every generated service has it,
// and every endpoint serves it at TargetPort.
type PortSpec struct {
	// Name is the port's name: a DNS label (lower-case letters, digits and
	// '-', at most 63 characters), unique within the list, required when
	// the list has more than one port (Kubernetes' rules). It is the
	// ":name" of kube-proxy's ServicePortName "namespace/service:name",
	// which the modes hash into their chain names.
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// Protocol is TCP (default), UDP or SCTP. SCTP renders in the modes
	// that program it (iptables, nftables) with engine: sim; the real
	// engine's traffic driver sends TCP and UDP only.
	Protocol string `yaml:"protocol" json:"protocol"`
	// Port is the port on the ClusterIP (1..65535); each (port, protocol)
	// pair appears once.
	Port int `yaml:"port" json:"port"`
	// TargetPort is the endpoints' port (1..65535; default Port).
	TargetPort int `yaml:"targetPort" json:"targetPort"`
}

// PortList returns every service's ServicePorts: Ports when given, else
// PortsPerService ports named "p<port>" at Port+j -> TargetPort+j with
// Protocol. Valid on a validated Scenario.
func (sv ServicesSpec) PortList() []PortSpec {
	if len(sv.Ports) > 0 {
		return sv.Ports
	}
	if sv.PortsPerService < 1 || sv.PortsPerService > 65535 {
		return nil // invalid: Validate reports it
	}
	out := make([]PortSpec, sv.PortsPerService)
	for j := range out {
		out[j] = PortSpec{Name: "p" + strconv.Itoa(sv.Port+j), Protocol: sv.Protocol, Port: sv.Port + j, TargetPort: sv.TargetPort + j}
	}
	return out
}

// PortsLabel describes the ports for reports: "1 port (80/TCP)", "2
// ports (dns-tcp 53/TCP, dns 53/UDP)", or "100 ports" when there are more
// than 4.
func (sv ServicesSpec) PortsLabel() string {
	ps := sv.PortList()
	n := fmt.Sprintf("%d ports", len(ps))
	if len(ps) == 1 {
		n = "1 port"
	}
	if len(ps) > 4 {
		return n
	}
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		if len(sv.Ports) > 0 && p.Name != "" {
			parts[i] = p.Name + " " + parts[i]
		}
	}
	return n + " (" + strings.Join(parts, ", ") + ")"
}

// Protocols lists the distinct protocols of PortList, in order of first use.
func (sv ServicesSpec) Protocols() []string {
	var out []string
	for _, p := range sv.PortList() {
		if !slices.Contains(out, p.Protocol) {
			out = append(out, p.Protocol)
		}
	}
	return out
}

// EndpointsSpec is the distribution of endpoints per service.
type EndpointsSpec struct {
	// Distribution is fixed (default), uniform or zipf.
	Distribution string `yaml:"distribution" json:"distribution"`
	// Count is the endpoint count for fixed (default 3).
	Count int `yaml:"count,omitempty" json:"count,omitempty"`
	// Min and Max bound uniform (inclusive); Max also caps zipf.
	Min int `yaml:"min,omitempty" json:"min,omitempty"`
	Max int `yaml:"max,omitempty" json:"max,omitempty"`
	// S (> 1) and V (>= 1) are the zipf parameters of math/rand.NewZipf;
	// a service gets 1 + Zipf(S, V, Max-1) endpoints.
	S float64 `yaml:"s,omitempty" json:"s,omitempty"`
	V float64 `yaml:"v,omitempty" json:"v,omitempty"`
	// WithoutEndpoints is the share of services left without any
	// endpoint (0 <= share < 1, default 0): round(share × count) services,
	// never the first, middle or last (EmptyServices). Traffic to them is
	// answered by the mode's REJECT (or dropped), and its errors are
	// measured with their time to error next to the lookup latency of the
	// others, in the same run.
	WithoutEndpoints float64 `yaml:"withoutEndpoints,omitempty" json:"withoutEndpoints,omitempty"`
	// Weights sets each endpoint's weight (workload.Endpoint.Weight, the
	// IPVS real server weight); nil: every endpoint weighs 1.
	Weights *WeightsSpec `yaml:"weights,omitempty" json:"weights,omitempty"`
}

// WeightsSpec gives endpoint weights either as a fixed list (endpoint k of
// every service weighs List[k mod len(List)]) or drawn per endpoint,
// uniformly from [Min, Max], with the scenario's seed. Weights are 1..256
// (IPVS accepts 0..65535; 0 would drain the endpoint).
type WeightsSpec struct {
	List []int `yaml:"list,omitempty" json:"list,omitempty"`
	// Distribution is "uniform" (with Min and Max); empty with List.
	Distribution string `yaml:"distribution,omitempty" json:"distribution,omitempty"`
	Min          int    `yaml:"min,omitempty" json:"min,omitempty"`
	Max          int    `yaml:"max,omitempty" json:"max,omitempty"`
}

// Set reports whether any weight setting is present.
func (w *WeightsSpec) Set() bool { return w != nil && (len(w.List) > 0 || w.Distribution != "") }

// NetworkSpec is the address plan. Defaults come from 198.18.0.0/15
// (RFC 2544 benchmarking range).
type NetworkSpec struct {
	// ServiceCIDR holds the ClusterIPs (default 198.18.0.0/16).
	ServiceCIDR string `yaml:"serviceCIDR" json:"serviceCIDR"`
	// PodCIDR holds the endpoint (pod) IPs, answered by the backend host's
	// AnyIP route (default 198.19.0.0/17).
	PodCIDR string `yaml:"podCIDR" json:"podCIDR"`
	// NodeCIDR holds node, client pod and link addresses (default
	// 198.19.255.0/24); carved into /30 links.
	NodeCIDR string `yaml:"nodeCIDR" json:"nodeCIDR"`
	// ClusterCIDR is kube-proxy's clusterCIDR: traffic to a ClusterIP from
	// outside it is masqueraded (default 198.19.0.0/16, which holds both
	// pods and client pods).
	ClusterCIDR string `yaml:"clusterCIDR" json:"clusterCIDR"`
	// ClientCIDR holds the extra source addresses of client pods when
	// topology.clientAddresses > 1 (default 198.19.192.0/19): client pod i
	// owns the i-th aligned block of the next power of two >= clientAddresses.
	ClientCIDR string `yaml:"clientCIDR,omitempty" json:"clientCIDR,omitempty"`
	// LoadBalancerCIDR holds the LoadBalancer ingress IPs the testbed
	// allocates for type LoadBalancer services without loadBalancerIPs
	// (there is no cloud: the testbed writes them into the Service's
	// status.loadBalancer.ingress); default 198.18.128.0/24.
	LoadBalancerCIDR string `yaml:"loadBalancerCIDR,omitempty" json:"loadBalancerCIDR,omitempty"`
	// ExternalClientCIDR holds the addresses of the external client
	// namespace (topology.externalClient), outside clusterCIDR as a
	// client on the internet is; default 198.18.192.0/24.
	ExternalClientCIDR string `yaml:"externalClientCIDR,omitempty" json:"externalClientCIDR,omitempty"`
	// IPFamilies are the cluster's IP families, primary first: [IPv4]
	// (default), [IPv4, IPv6] (dual-stack; services.ipFamilyPolicy says
	// which services get both). IPv6 addresses are the IPv6 twins of the
	// IPv4 plan in IPv6Prefix (families.go, docs/architecture.md).
	IPFamilies []string `yaml:"ipFamilies,omitempty" json:"ipFamilies,omitempty"`
	// IPv6Prefix is the /96 whose last 32 bits embed each IPv4 address of
	// the plan to give its IPv6 twin (RFC 6052, section 2.2); default
	// 2001:2::/96, in the IPv6 benchmarking range 2001:2::/48 (RFC 5180).
	// Set only with IPv6 in IPFamilies.
	IPv6Prefix string `yaml:"ipv6Prefix,omitempty" json:"ipv6Prefix,omitempty"`
}

// TopologySpec sizes the testbed.
type TopologySpec struct {
	// ClientPods is the number of client pod namespaces driving traffic (default 1).
	ClientPods int `yaml:"clientPods" json:"clientPods"`
	// Nodes is the number of node namespaces (default 1), each running its
	// own proxier over the same services; with more than one they share a
	// bridge in a fabric namespace and client pod i sits on node i mod Nodes.
	Nodes int `yaml:"nodes,omitempty" json:"nodes,omitempty"`
	// EndpointOrder is the endpoint order each node's proxier is given:
	// sorted (default: as the API returns them, the same on every node) or
	// shuffled (a different seeded permutation per node and service).
	EndpointOrder string `yaml:"endpointOrder,omitempty" json:"endpointOrder,omitempty"`
	// Pods is shared (default: one backend host answers every pod IP
	// through an AnyIP route) or isolated (one namespace + veth per backend
	// pod, on node k mod Nodes; for a few thousand pods).
	Pods string `yaml:"pods,omitempty" json:"pods,omitempty"`
	// ClientAddresses is the number of source addresses of each client pod
	// (default 1: its link address); connections bind to them in turn.
	ClientAddresses int `yaml:"clientAddresses,omitempty" json:"clientAddresses,omitempty"`
	// ExternalClient adds a client namespace outside the cluster (no
	// route out of the testbed: it is one of its namespaces) on the
	// nodes' fabric, at network.externalClientCIDR, that reaches node
	// IPs, LoadBalancer IPs and external IPs as a client on the internet
	// does; it needs nodes >= 2 (the fabric bridge).
	ExternalClient bool `yaml:"externalClient,omitempty" json:"externalClient,omitempty"`
	// Zones, when given, is the zone of each node (entry i: node i's
	// topology.kubernetes.io/zone label, one entry per node): the zone
	// kube-proxy reads from its Node object and the EndpointSlice
	// controller writes into each endpoint's zone field.
	Zones []string `yaml:"zones,omitempty" json:"zones,omitempty"`
}

// TrafficSpec configures the closed-loop traffic driver.
type TrafficSpec struct {
	// Connections is the number of TCP connections per service position per
	// repetition (default 2000).
	Connections int `yaml:"connections" json:"connections"`
	// Concurrency is the number of connections in flight (default 4).
	Concurrency int `yaml:"concurrency" json:"concurrency"`
	// Positions lists the service positions measured: first, middle, last,
	// random (default all four).
	Positions []string `yaml:"positions" json:"positions"`
	// Warmup connections per position, not recorded (default 50).
	Warmup int `yaml:"warmup" json:"warmup"`
	// Timeout bounds one connection attempt (default 2s).
	Timeout Duration `yaml:"timeout" json:"timeout"`
	// PerService is the number of connections made to every service in
	// the fairness phase, spread over every client pod and source address
	// (0, the default: no fairness phase).
	PerService int `yaml:"perService,omitempty" json:"perService,omitempty"`
	// LongLived, when Connections > 0, opens that many connections per
	// service and holds them all open for Hold, then counts the active
	// connections per endpoint (the load lc, wlc, sed and nq balance).
	LongLived LongLivedSpec `yaml:"longLived,omitempty" json:"longLived,omitempty"`
	// UDP sets the source ports of the UDP exchanges (UDP ServicePorts):
	// kernel-chosen by default.
	UDP UDPTrafficSpec `yaml:"udp,omitempty" json:"udp,omitempty"`
	// KernelTime measures lookup.kernel in the traffic phase: the node
	// kernel's time per SYN in PREROUTING, by BPF (default true; false
	// turns it off, and the result says so where the figure would be).
	KernelTime *bool `yaml:"kernelTime,omitempty" json:"kernelTime,omitempty"`
	// NodePorts adds the nodePortLookup phase after the traffic phase:
	// the same positions and connections, dialled at node-0's address and
	// each service's node port, over the services that have node ports
	// (nodeports.go in this package).
	NodePorts bool `yaml:"nodePorts,omitempty" json:"nodePorts,omitempty"`
}

// KernelTimeOn says whether the traffic phase measures lookup.kernel
// (KernelTime, default true).
func (t TrafficSpec) KernelTimeOn() bool { return t.KernelTime == nil || *t.KernelTime }

// UDPTrafficSpec picks the source port of each UDP exchange of the
// traffic phase (one datagram each way, from a new socket). With
// SourcePort 0 (default) the kernel picks an ephemeral port per
// exchange, so each is a new conntrack entry. With SourcePort > 0 the
// exchanges use SourcePorts ports from SourcePort (default 1: a fixed
// port, as a DNS client reusing its socket), split among the workers
// (worker w takes ports SourcePort+j with j ≡ w mod concurrency, in
// turn), so SourcePorts must be >= traffic.concurrency; exchanges from
// one port to one service share one conntrack entry and so one endpoint
// while it lives (kubernetes#48370).
type UDPTrafficSpec struct {
	SourcePort  int `yaml:"sourcePort,omitempty" json:"sourcePort,omitempty"`
	SourcePorts int `yaml:"sourcePorts,omitempty" json:"sourcePorts,omitempty"`
}

// SourcePortLabel describes the UDP source ports for results and reports:
// "kernel-chosen", "fixed 5300" or "5300-5399".
func (u UDPTrafficSpec) SourcePortLabel() string {
	switch {
	case u.SourcePort == 0:
		return "kernel-chosen"
	case u.SourcePorts <= 1:
		return "fixed " + strconv.Itoa(u.SourcePort)
	}
	return strconv.Itoa(u.SourcePort) + "-" + strconv.Itoa(u.SourcePort+u.SourcePorts-1)
}

// NodeCount is Nodes, or 1 when unset.
func (t TopologySpec) NodeCount() int { return max(t.Nodes, 1) }

// Order is EndpointOrder, or "sorted" when unset.
func (t TopologySpec) Order() string {
	if t.EndpointOrder == "" {
		return "sorted"
	}
	return t.EndpointOrder
}

// PodModel is Pods, or "shared" when unset.
func (t TopologySpec) PodModel() string {
	if t.Pods == "" {
		return "shared"
	}
	return t.Pods
}

// Addresses is ClientAddresses, or 1 when unset.
func (t TopologySpec) Addresses() int { return max(t.ClientAddresses, 1) }

// ClientPrefix is network.clientCIDR parsed, or its default
// 198.19.192.0/19 when unset. Valid only on a validated Scenario.
func (s *Scenario) ClientPrefix() netip.Prefix {
	if s.Network.ClientCIDR == "" {
		return netip.MustParsePrefix(DefaultClientCIDR)
	}
	return netip.MustParsePrefix(s.Network.ClientCIDR)
}

// DefaultClientCIDR is network.clientCIDR's default: inside the default
// clusterCIDR, disjoint from the default pod, node and service CIDRs.
const DefaultClientCIDR = "198.19.192.0/19"

// HoldFor is LongLived.Hold (SetDefaults fills 1s when it is not given;
// an explicit 0s closes the connections as soon as the last one opened).
func (l LongLivedSpec) HoldFor() time.Duration { return l.Hold.Duration }

// LongLivedSpec configures the long-lived connection phase.
type LongLivedSpec struct {
	// Connections held open at once, per service (0: no phase).
	Connections int `yaml:"connections,omitempty" json:"connections,omitempty"`
	// Hold is how long they stay open after the last one opened (default 1s).
	Hold Duration `yaml:"hold" json:"hold,omitempty"`
}

// SweepSpec lists the sizes of a capacity sweep.
type SweepSpec struct {
	// Services are the service counts, each a point of the sweep.
	Services []int `yaml:"services,omitempty" json:"services,omitempty"`
	// MinSyncPeriod lists minSyncPeriod values for the churn phase: it is
	// repeated once per value, overriding every mode's minSyncPeriod.
	MinSyncPeriod []Duration `yaml:"minSyncPeriod,omitempty" json:"minSyncPeriod,omitempty"`
	// Schedulers runs mode ipvs once per IPVS scheduler listed, each
	// overriding ipvs.scheduler (other modes run once).
	Schedulers []string `yaml:"schedulers,omitempty" json:"schedulers,omitempty"`
}

// FailureSpec injects dead endpoints (scenarios/endpoint-failure.yaml).
type FailureSpec struct {
	// DownEndpointsPerService: the first N endpoints of every service are
	// down (0, the default: none).
	DownEndpointsPerService int `yaml:"downEndpointsPerService,omitempty" json:"downEndpointsPerService,omitempty"`
	// Mode is reset (default: REJECT --reject-with tcp-reset in the
	// backend host) or drop (no answer: connects time out).
	Mode string `yaml:"mode,omitempty" json:"mode,omitempty"`
	// SyncErrors makes rule-program calls fail during the churn phase, so
	// that recovery from failed syncs can be measured (see SyncErrorsSpec).
	SyncErrors *SyncErrorsSpec `yaml:"syncErrors,omitempty" json:"syncErrors,omitempty"`
}

// SyncErrorsSpec injects failed syncs: during the churn phase the mode's
// rule programs (iptables-*-restore, ipset, nft) are found on PATH as a
// wrapper script that runs the real tool, except on the calls it fails:
// those exit 1 without running it, as the real tool does when it fails
// (e.g. a lost xtables lock), so the proxier sees a real failed exec.
// Exactly one of Every and Rate is set.
type SyncErrorsSpec struct {
	// Every fails calls Every, 2×Every, ... (counted over all wrapped
	// programs from the start of each churn phase); 2 or more.
	Every int `yaml:"every,omitempty" json:"every,omitempty"`
	// Rate fails each call with this probability (0 < Rate < 1), drawn
	// with the scenario's seed.
	Rate float64 `yaml:"rate,omitempty" json:"rate,omitempty"`
}

// Set reports whether sync errors are injected.
func (e *SyncErrorsSpec) Set() bool { return e != nil && (e.Every != 0 || e.Rate != 0) }

// ChurnSpec is the open-loop churn generator (workload.Arrivals and
// workload.Cluster.Next).
type ChurnSpec struct {
	// Rate is changes per second (0, the default, disables churn).
	Rate float64 `yaml:"rate,omitempty" json:"rate,omitempty"`
	// Duration is how long changes are generated (default 60s).
	Duration Duration `yaml:"duration,omitempty" json:"duration,omitempty"`
	// Arrival is poisson (default: exponential gaps, mean 1/Rate) or
	// constant (gaps of exactly 1/Rate).
	Arrival string `yaml:"arrival,omitempty" json:"arrival,omitempty"`
	// Mix weighs the kinds of change (default: endpoint add, remove and
	// readiness flip 1 each, service create and delete 0).
	Mix ChurnMix `yaml:"mix,omitempty" json:"mix,omitempty"`
	// Probes is the number of probe workers observing the data plane (default 2).
	Probes int `yaml:"probes,omitempty" json:"probes,omitempty"`
	// Grace is how long, after the last change, unobserved changes are
	// still probed before they count as unobserved (default 30s).
	Grace Duration `yaml:"grace,omitempty" json:"grace,omitempty"`
}

// SimSpec configures the sim engine.
type SimSpec struct {
	// Nodes is the number of simulated nodes, each running its own
	// kube-proxy sync loop over the same services (unset: 1; 1..100000).
	Nodes int `yaml:"nodes" json:"nodes"`
	// Calibration is a file written by `proxybench calibrate`; empty uses
	// the calibration shipped in the binary (marked default in results).
	Calibration string `yaml:"calibration,omitempty" json:"calibration,omitempty"`
	// WatchDelay is the mean delay (exponential, one draw per node) with
	// which a node sees a change: informer watch jitter (default 0s).
	WatchDelay Duration `yaml:"watchDelay,omitempty" json:"watchDelay,omitempty"`
	// SharedCores, when > 0, is how many CPUs every simulated node's
	// kube-proxy shares (a testbed's nodes on one machine: sim validate
	// sets it to the real run's CPU count); each sync then stretches with
	// the nodes syncing at once (sim.SharedStretch). 0: each node is a
	// machine of its own (default).
	SharedCores int `yaml:"sharedCores,omitempty" json:"sharedCores,omitempty"`
}

// TransitionsSpec configures the transitions phase (the UDP figure of
// kubernetes#48370): a client sends one datagram every Interval from
// SourcePort to the DNS-like service and waits up to Timeout for the echo.
type TransitionsSpec struct {
	// SourcePort is the client's fixed UDP source port (default 5300), so
	// every datagram belongs to one conntrack entry, as a DNS client
	// reusing its socket.
	SourcePort int `yaml:"sourcePort" json:"sourcePort"`
	// Interval between datagrams (default 20ms); Timeout per datagram
	// (default 200ms); Observe is how long each change is watched after
	// the sync that made it (default 3s).
	Interval Duration `yaml:"interval" json:"interval"`
	Timeout  Duration `yaml:"timeout" json:"timeout"`
	Observe  Duration `yaml:"observe" json:"observe"`
	// WithoutCleanup also runs every transition with the mode's conntrack
	// cleanup turned off, to show what it prevents (default true).
	WithoutCleanup *bool `yaml:"withoutCleanup" json:"withoutCleanup"`
}

// ConnReuseSpec configures the conn-reuse phase.
type ConnReuseSpec struct {
	// Connections made one at a time (default 2000) from Ports source
	// ports (default 50: the client namespace's ip_local_port_range is
	// narrowed to 20000..20000+Ports-1 and tcp_tw_reuse set to 1 for the
	// phase), each closed by the client with FIN.
	Connections int `yaml:"connections" json:"connections"`
	Ports       int `yaml:"ports" json:"ports"`
	// ReuseModes are the net.ipv4.vs.conn_reuse_mode values the ipvs mode
	// runs with, one pass each, set in the node namespace (default [1, 0];
	// the kernel's default is 1).
	ReuseModes []int `yaml:"reuseModes" json:"reuseModes"`
}

// LifecycleSpec configures the lifecycle phase.
type LifecycleSpec struct {
	// Held is the number of connections held open across each change
	// (default 12); Observe how long new connections are made after each
	// change (default 2s).
	Held    int      `yaml:"held" json:"held"`
	Observe Duration `yaml:"observe" json:"observe"`
}

// SyncDisruptionSpec configures the sync-disruption phase.
type SyncDisruptionSpec struct {
	// Services is how many services the probes cycle over, spread evenly
	// over the service list (default 8).
	Services int `yaml:"services" json:"services"`
	// Probes is the number of probe workers (default 2), each making one
	// connection at a time with Timeout (default 1s).
	Probes  int      `yaml:"probes" json:"probes"`
	Timeout Duration `yaml:"timeout" json:"timeout"`
	// Slow is the connect time above which a connection counts as slow
	// (default 100ms).
	Slow Duration `yaml:"slow" json:"slow"`
	// Syncs are the syncs measured, in this order (default [restart,
	// incremental]):
	//   - cold: a node joins while the services exist. The node's rules
	//     are removed (proxier Cleanup; kube-proxy --cleanup), then a new
	//     proxier starts and makes its first, full sync; the window says
	//     when the first and the last probed service answered.
	//   - restart: a new proxier makes its first, full sync over the rules
	//     its predecessor left (kube-proxy restarted).
	//   - incremental: one endpoint moves.
	Syncs []string `yaml:"syncs" json:"syncs"`
	// Settle is how long the probes go on after a cold or restart sync
	// has returned, until every probed service has answered (default 10s).
	Settle Duration `yaml:"settle" json:"settle"`
}

// SyncKinds are the values of syncDisruption.syncs.
var SyncKinds = []string{"cold", "restart", "incremental"}

// ChurnMix weighs the kinds of change; weights are relative, >= 0.
type ChurnMix struct {
	EndpointAdd    float64 `yaml:"endpointAdd" json:"endpointAdd"`
	EndpointRemove float64 `yaml:"endpointRemove" json:"endpointRemove"`
	ReadinessFlip  float64 `yaml:"readinessFlip" json:"readinessFlip"`
	ServiceCreate  float64 `yaml:"serviceCreate" json:"serviceCreate"`
	ServiceDelete  float64 `yaml:"serviceDelete" json:"serviceDelete"`
}

// Sizes returns the service counts to run: Sweep.Services, or
// [Services.Count] when no sweep is set.
func (s *Scenario) Sizes() []int {
	if len(s.Sweep.Services) > 0 {
		return s.Sweep.Services
	}
	return []int{s.Services.Count}
}

// AtSize returns a copy of s with Services.Count = n and no size sweep.
func (s *Scenario) AtSize(n int) *Scenario {
	c := *s
	c.Services.Count = n
	c.Sweep.Services = nil
	return &c
}

// IPVSSpec is KubeProxyConfiguration's ipvs block, spelt as kube-proxy
// spells it.
type IPVSSpec struct {
	// Scheduler is the IPVS scheduler of every virtual server: rr
	// (default), wrr, lc, wlc, lblc, lblcr, dh, sh, sed, nq, mh.
	Scheduler string `yaml:"scheduler" json:"scheduler"`
	// SchedulerFlags are the scheduler's options (ipvsadm -b): sh-fallback
	// and sh-port for sh, mh-fallback and mh-port for mh. With sh-port or
	// mh-port the hash covers the source port too, so one client address
	// spreads over the endpoints. Not a KubeProxyConfiguration field.
	SchedulerFlags []string `yaml:"schedulerFlags,omitempty" json:"schedulerFlags,omitempty"`
	// ExcludeCIDRs are CIDRs whose IPVS virtual servers a sync must not
	// remove (kube-proxy leaves foreign virtual servers there alone).
	ExcludeCIDRs []string `yaml:"excludeCIDRs,omitempty" json:"excludeCIDRs,omitempty"`
	// TCPTimeout, TCPFinTimeout, UDPTimeout set the IPVS connection
	// timeouts (ipvsadm --set); 0 leaves the kernel's value.
	TCPTimeout    Duration `yaml:"tcpTimeout" json:"tcpTimeout"`
	TCPFinTimeout Duration `yaml:"tcpFinTimeout" json:"tcpFinTimeout"`
	UDPTimeout    Duration `yaml:"udpTimeout" json:"udpTimeout"`
	// SyncPeriod is the longest time between syncs (default 30s);
	// MinSyncPeriod the shortest (default 0s: sync on every change).
	SyncPeriod    Duration `yaml:"syncPeriod" json:"syncPeriod"`
	MinSyncPeriod Duration `yaml:"minSyncPeriod" json:"minSyncPeriod"`
}

// IPVSSchedulerFlags lists the flags each scheduler accepts
// (include/uapi/linux/ip_vs.h IP_VS_SVC_F_SCHED_{SH,MH}_{FALLBACK,PORT}).
var IPVSSchedulerFlags = map[string][]string{
	"sh": {"sh-fallback", "sh-port"},
	"mh": {"mh-fallback", "mh-port"},
}

// SchedulerLabel names the scheduler with its flags as results and
// reports show it: "sh", or "sh+sh-port" with flags.
func (v IPVSSpec) SchedulerLabel() string {
	if len(v.SchedulerFlags) == 0 {
		return v.Scheduler
	}
	return v.Scheduler + "+" + strings.Join(v.SchedulerFlags, "+")
}

// NFTablesSpec is KubeProxyConfiguration's nftables block.
type NFTablesSpec struct {
	// SyncPeriod (default 30s) and MinSyncPeriod (default 1s), as kube-proxy.
	SyncPeriod    Duration `yaml:"syncPeriod" json:"syncPeriod"`
	MinSyncPeriod Duration `yaml:"minSyncPeriod" json:"minSyncPeriod"`
}

// UMLSpec bounds the user-mode-linux guest used when kernel is uml.
type UMLSpec struct {
	// MemoryMiB is the guest's memory (default 2048).
	MemoryMiB int `yaml:"memoryMiB" json:"memoryMiB"`
	// Timeout bounds the whole guest run (default 30m); a guest that
	// exceeds it is killed and the run fails with a clear error.
	Timeout Duration `yaml:"timeout" json:"timeout"`
}

// IPTablesSpec configures mode iptables.
type IPTablesSpec struct {
	// Backend is legacy or nft (default legacy): the iptables-restore
	// binary used (iptables-legacy-restore or iptables-nft-restore).
	Backend string `yaml:"backend" json:"backend"`
	// SyncPeriod (default 30s) and MinSyncPeriod (default 1s), as
	// KubeProxyConfiguration's iptables block.
	SyncPeriod    Duration `yaml:"syncPeriod" json:"syncPeriod"`
	MinSyncPeriod Duration `yaml:"minSyncPeriod" json:"minSyncPeriod"`
}

// Duration is a time.Duration written as "2s", "150ms" in YAML and JSON.
type Duration struct{ time.Duration }

// EndpointWeights returns the weight of every endpoint of every service
// (out[i][k] for endpoint k of service i, counts as EndpointCounts), from
// Services.Endpoints.Weights: List cycled, or uniform draws on [Min, Max]
// from a generator seeded by Seed+1; all 1 when unset.
func (s *Scenario) EndpointWeights() [][]int {
	counts := s.EndpointCounts()
	w := s.Services.Endpoints.Weights
	if w == nil {
		w = &WeightsSpec{}
	}
	rng := rand.New(rand.NewSource(s.Seed + 1))
	out := make([][]int, len(counts))
	for i, c := range counts {
		out[i] = make([]int, c)
		for k := range out[i] {
			switch {
			case len(w.List) > 0:
				out[i][k] = w.List[k%len(w.List)]
			case w.Distribution == "uniform" && w.Max >= w.Min && w.Min >= 1:
				out[i][k] = w.Min + rng.Intn(w.Max-w.Min+1)
			default:
				out[i][k] = 1
			}
		}
	}
	return out
}

// Prefixes returns the parsed address plan. It is valid only on a Scenario
// returned by Load or Parse.
func (s *Scenario) Prefixes() (service, pod, node, cluster netip.Prefix) {
	return netip.MustParsePrefix(s.Network.ServiceCIDR), netip.MustParsePrefix(s.Network.PodCIDR),
		netip.MustParsePrefix(s.Network.NodeCIDR), netip.MustParsePrefix(s.Network.ClusterCIDR)
}

// NodeSpec configures the node namespaces.
type NodeSpec struct {
	// Sysctls are written in every node namespace (never the root one)
	// after it is built, before any mode runs; keys are those of
	// NodeSysctlDefaults, values whole numbers. SetDefaults fills each key
	// not given with a stock node's value; a key whose file does not exist
	// in the namespace (IPVS ones without ip_vs) is skipped when it was
	// not given. The result records what was read back.
	Sysctls map[string]string `yaml:"sysctls,omitempty" json:"sysctls,omitempty"`
}

// NodeSysctlDefaults are the node sysctls a scenario may set, with the
// value of a stock node (the kernel's defaults for a new network
// namespace): the two ICMP rate limits that throttle the port-unreachable
// answers of a mode's REJECT (net/ipv4/icmp.c: per destination 1000 ms
// per message with a burst of 6, for the types in mask 6168 = destination
// unreachable, source quench, time exceeded, parameter problem; and per
// namespace 1000 messages/s with a burst of 50), the IPVS connection reuse and expiry switches
// (net/netfilter/ipvs/ip_vs_ctl.c) and the conntrack established and UDP
// timeouts (net/netfilter/nf_conntrack_proto_{tcp,udp}.c).
var NodeSysctlDefaults = map[string]string{
	"net.ipv4.icmp_ratelimit":                            "1000",
	"net.ipv4.icmp_ratemask":                             "6168",
	"net.ipv4.icmp_msgs_per_sec":                         "1000",
	"net.ipv4.icmp_msgs_burst":                           "50",
	"net.ipv4.vs.conn_reuse_mode":                        "1",
	"net.ipv4.vs.expire_nodest_conn":                     "0",
	"net.ipv4.vs.expire_quiescent_template":              "0",
	"net.netfilter.nf_conntrack_tcp_timeout_established": "432000",
	"net.netfilter.nf_conntrack_udp_timeout":             "30",
	"net.netfilter.nf_conntrack_tcp_be_liberal":          "0",
}

// EngineCluster is Scenario.Engine of a run on a real Kubernetes cluster
// (package cluster, docs/cluster.md): the mode the cluster runs,
// measured from agent pods on its nodes.
const EngineCluster = "cluster"

// Implementations of a mode (Scenario.Implementation).
const (
	// ImplBuiltin is proxybench's own proxier (proxymodes/<mode>).
	ImplBuiltin = "builtin"
	// ImplKubeProxy is the real kube-proxy (proxymodes/kubeproxy).
	ImplKubeProxy = "kube-proxy"
)

// KubeProxyModes are the modes kube-proxy has (its --proxy-mode values on
// Linux); userspace was removed in v1.26, none is no proxy at all. It is
// the one list of them: validation, proxymodes/kubeproxy's
// configuration, dump and proxymodes/fidelity read it, and
// proxymodes/modes tests that each is a mode of the build.
var KubeProxyModes = []string{"iptables", "ipvs", "nftables"}

// BaselineMode names the baseline mode (proxymodes/none, whose Mode
// takes its name from here: no rules, traffic dials the pods directly):
// the vsnone figures divide by its figures, the reports compare every
// row with its row of the same kernel and size, and a scenario that runs
// only kube-proxy still runs it as builtin.
const BaselineMode = "none"

// KubeProxySpec configures implementation kube-proxy.
type KubeProxySpec struct {
	// Binaries are the kube-proxy programs to run (run --kube-proxy
	// overrides them); default [bin/kube-proxy], the one beside
	// proxybench's own binary. Each is its own row; with more than one the
	// rows carry the version, e.g. "nftables (kube-proxy v1.36.3)".
	Binaries []string `yaml:"binaries,omitempty" json:"binaries,omitempty"`
	// Modes are the modes run by kube-proxy as well (default: every mode of
	// modes that kube-proxy has, KubeProxyModes).
	Modes []string `yaml:"modes,omitempty" json:"modes,omitempty"`
	// Config holds KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1)
	// fields passed to kube-proxy verbatim, e.g. {featureGates:
	// {NFTablesProxyMode: true}}; they override what the scenario's
	// iptables, ipvs and nftables blocks give. The fields the testbed owns
	// (kubeproxy.Owned: addresses, kubeconfig, global conntrack sysctls)
	// are refused; the rest is checked against kube-proxy's own type and
	// validation by Catalog.KubeProxyConfig (kubeproxy.CheckConfig).
	Config FreeForm `yaml:"config,omitempty" json:"config,omitempty"`
	// Verbosity is kube-proxy's -v (default 2: a line per sync with its
	// duration; 4 adds the steps of each sync).
	Verbosity int `yaml:"verbosity,omitempty" json:"verbosity,omitempty"`
	// FirstSyncTimeout bounds the wait for kube-proxy's first sync (and
	// for every probed service answering), from the API objects created
	// (default 10m). When it passes the row is kept as it is: the data
	// plane's sync.full if every probed service answered, what kube-proxy
	// had programmed by then (IPVS mode: virtual servers and ipset
	// entries, read about once a minute), its CPU and memory; the row's
	// later phases are not run and the run goes on. kube-proxy's IPVS
	// mode in a user-mode-linux guest needs it at 10k services (one
	// `ipset` process per entry, kubernetes#133773).
	FirstSyncTimeout Duration `yaml:"firstSyncTimeout,omitempty" json:"firstSyncTimeout,omitempty"`
}

// FreeForm is a YAML mapping of any shape, decoded as is (strict field
// checks do not apply inside it; its owner checks it).
type FreeForm map[string]any

// Implementations returns the implementations mode runs with, in row
// order: builtin first, then kube-proxy when the scenario asks for it and
// kube-proxy has the mode (KubeProxySpec.Modes narrowing it).
func (s *Scenario) Implementations(mode string) []string {
	impls := s.Implementation
	if len(impls) == 0 {
		impls = []string{ImplBuiltin}
	}
	var out []string
	for _, i := range []string{ImplBuiltin, ImplKubeProxy} {
		if !contains(impls, i) {
			continue
		}
		if i == ImplKubeProxy && !s.KubeProxyRuns(mode) {
			continue
		}
		out = append(out, i)
	}
	if len(out) == 0 && !s.KubeProxyRuns(mode) {
		// implementation: [kube-proxy] and a mode kube-proxy lacks (none,
		// the baseline): builtin.
		out = []string{ImplBuiltin}
	}
	return out
}

// KubeProxyRuns reports whether mode runs with implementation kube-proxy.
func (s *Scenario) KubeProxyRuns(mode string) bool {
	if !contains(s.Implementation, ImplKubeProxy) || !contains(KubeProxyModes, mode) {
		return false
	}
	return len(s.KubeProxy.Modes) == 0 || contains(s.KubeProxy.Modes, mode)
}

// UsesKubeProxy reports whether any mode runs with kube-proxy.
func (s *Scenario) UsesKubeProxy() bool {
	for _, m := range s.Modes {
		if s.KubeProxyRuns(m) {
			return true
		}
	}
	return false
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// NodeSysctlRanges are the values validate accepts per node sysctl,
// inclusive: what the kernel takes and means (ip-sysctl.rst,
// ipvs-sysctl.rst, nf_conntrack-sysctl.rst). The ICMP rate limit is in ms
// (up to a day), the mask has a bit per ICMP type 0..18; conn_reuse_mode
// is a bitmap of two bits; the expire and be_liberal switches are 0 or 1;
// the conntrack timeouts are seconds (at least 1, at most INT_MAX/1000
// so they fit in jiffies at HZ=1000).
var NodeSysctlRanges = map[string][2]int64{
	"net.ipv4.icmp_ratelimit":                            {0, 86_400_000},
	"net.ipv4.icmp_ratemask":                             {0, 1<<19 - 1},
	"net.ipv4.icmp_msgs_per_sec":                         {0, 2_147_483_647},
	"net.ipv4.icmp_msgs_burst":                           {0, 2_147_483_647},
	"net.ipv4.vs.conn_reuse_mode":                        {0, 3},
	"net.ipv4.vs.expire_nodest_conn":                     {0, 1},
	"net.ipv4.vs.expire_quiescent_template":              {0, 1},
	"net.netfilter.nf_conntrack_tcp_timeout_established": {1, 2_147_483},
	"net.netfilter.nf_conntrack_udp_timeout":             {1, 2_147_483},
	"net.netfilter.nf_conntrack_tcp_be_liberal":          {0, 1},
}
