package scenarios

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

// KnownModes lists the proxy modes a scenario may name, in the order they
// were implemented. proxymodes.Register adds each mode through RegisterMode.
var KnownModes = []string{"none", "iptables"}

// RegisterMode makes name a valid entry of modes (idempotent). Called by
// proxymodes.Register at init, before any scenario is parsed.
func RegisterMode(name string) {
	if !slices.Contains(KnownModes, name) {
		KnownModes = append(KnownModes, name)
	}
}

// KnownPositions lists the service positions traffic.positions may name.
var KnownPositions = []string{"first", "middle", "last", "random"}

// MaxServices bounds services.count, so that validation (which draws every
// endpoint count) stays cheap.
const MaxServices = 1 << 20

// FieldError is one problem with one scenario field. Error() is a single
// line: "<source>:<line>: <field>: <msg>; fix: <fix>".
type FieldError struct {
	Source string // file or embedded scenario name; "scenario" when unnamed
	Line   int    // 1-based line in Source; 0 when unknown
	Field  string // YAML path such as "services.endpoints.count" or "modes[1]"; empty for YAML syntax errors
	Msg    string // what is wrong
	Fix    string // what to change
}

func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.Source)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	if e.Fix != "" {
		b.WriteString("; fix: " + e.Fix)
	}
	return b.String()
}

// SetDefaults fills every unset field with its documented default. For a
// parsed scenario, explicit zeros (warmup: 0, a fixed endpoints count: 0)
// are kept; for one built in Go, zero means unset.
func (s *Scenario) SetDefaults() {
	setIf := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	setStr := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	setStr(&s.Name, nameOf(s.source))
	setIf(&s.Repetitions, 3)
	if s.Modes == nil {
		s.Modes = []string{"none", "iptables"}
	}
	sv := &s.Services
	setIf(&sv.PortsPerService, 1)
	setStr(&sv.Protocol, "TCP")
	setIf(&sv.Port, 80)
	setIf(&sv.TargetPort, 8080)
	setStr(&sv.Endpoints.Distribution, "fixed")
	if sv.Endpoints.Distribution == "fixed" && !s.has("services.endpoints.count") {
		setIf(&sv.Endpoints.Count, 3)
	}
	n := &s.Network
	setStr(&n.ServiceCIDR, "198.18.0.0/16")
	setStr(&n.PodCIDR, "198.19.0.0/17")
	setStr(&n.NodeCIDR, "198.19.255.0/24")
	setStr(&n.ClusterCIDR, "198.19.0.0/16")
	setIf(&s.Topology.ClientPods, 1)
	t := &s.Traffic
	setIf(&t.Connections, 2000)
	setIf(&t.Concurrency, 4)
	if t.Positions == nil {
		t.Positions = slices.Clone(KnownPositions)
	}
	if !s.has("traffic.warmup") {
		setIf(&t.Warmup, 50)
	}
	if t.Timeout.Duration == 0 && !s.has("traffic.timeout") {
		t.Timeout.Duration = 2 * time.Second
	}
	setStr(&s.IPTables.Backend, "legacy")
	setStr(&s.Kernel, "auto")
	setStr(&sv.SessionAffinity, "None")
	dur := func(path string, d *Duration, v time.Duration) {
		if d.Duration == 0 && !s.has(path) {
			d.Duration = v
		}
	}
	dur("services.sessionAffinityTimeout", &sv.SessionAffinityTimeout, 10800*time.Second)
	dur("iptables.syncPeriod", &s.IPTables.SyncPeriod, 30*time.Second)
	dur("iptables.minSyncPeriod", &s.IPTables.MinSyncPeriod, time.Second)
	setStr(&s.IPVS.Scheduler, "rr")
	dur("ipvs.syncPeriod", &s.IPVS.SyncPeriod, 30*time.Second)
	dur("nftables.syncPeriod", &s.NFTables.SyncPeriod, 30*time.Second)
	dur("nftables.minSyncPeriod", &s.NFTables.MinSyncPeriod, time.Second)
	setIf(&s.UML.MemoryMiB, 2048)
	if s.Failure.DownEndpointsPerService > 0 {
		setStr(&s.Failure.Mode, "reset")
	}
	if c := &s.Churn; c.Rate > 0 {
		dur("churn.duration", &c.Duration, 60*time.Second)
		dur("churn.grace", &c.Grace, 30*time.Second)
		setStr(&c.Arrival, "poisson")
		setIf(&c.Probes, 2)
		if c.Mix == (ChurnMix{}) && !s.has("churn.mix") {
			c.Mix = ChurnMix{EndpointAdd: 1, EndpointRemove: 1, ReadinessFlip: 1}
		}
	}
	dur("uml.timeout", &s.UML.Timeout, 30*time.Minute)
}

// IPVSSchedulers are the IPVS schedulers the kernel ships (net/netfilter/ipvs/ip_vs_*.c).
var IPVSSchedulers = []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "mh"}

// nameOf is a source's base name without .yaml or .yml.
func nameOf(source string) string {
	base := filepath.Base(source)
	for _, ext := range []string{".yaml", ".yml"} {
		base = strings.TrimSuffix(base, ext)
	}
	if base == "" || base == "." || base == "/" {
		return "scenario"
	}
	return base
}

func (s *Scenario) has(path string) bool {
	_, ok := s.lines[path]
	return ok
}

// line is the line of path, or of its nearest enclosing field present in
// the source, or 0.
func (s *Scenario) line(path string) int {
	for path != "" {
		if l, ok := s.lines[path]; ok {
			return l
		}
		path = path[:max(strings.LastIndexAny(path, ".["), 0)]
	}
	return 0
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Validate checks every field (run SetDefaults first) and returns nil, one
// *FieldError, or several joined with errors.Join (one per line), in field
// order. Checks: CIDRs are IPv4 prefixes without host bits; service, pod and
// node CIDRs are disjoint and clusterCIDR is disjoint from serviceCIDR;
// services, all endpoints (EndpointCounts) and (clientPods+1) /30 links fit
// their CIDRs; ports, distribution parameters, modes, traffic and iptables
// settings are in range.
func (s *Scenario) Validate() error {
	var errs []error
	add := func(field, msg, fix string) {
		src := s.source
		if src == "" {
			src = "scenario"
		}
		errs = append(errs, &FieldError{Source: src, Line: s.line(field), Field: field, Msg: msg, Fix: fix})
	}
	between := func(field string, v, lo, hi int) bool {
		if v < lo || v > hi {
			add(field, fmt.Sprintf("%d is out of range", v), fmt.Sprintf("use %d..%d", lo, hi))
			return false
		}
		return true
	}
	oneOf := func(field, v string, known []string) bool {
		if slices.Contains(known, v) {
			return true
		}
		fix := "use one of " + strings.Join(known, ", ")
		if c := closest(v, known); c != "" {
			fix = fmt.Sprintf("did you mean %q?", c)
		}
		add(field, fmt.Sprintf("unknown value %q", v), fix)
		return false
	}
	list := func(field string, vs, known []string) {
		if len(vs) == 0 {
			add(field, "is empty", "list at least one of "+strings.Join(known, ", "))
		}
		for i, v := range vs {
			f := fmt.Sprintf("%s[%d]", field, i)
			if j := slices.Index(vs, v); j < i {
				add(f, fmt.Sprintf("%q is listed twice (also %s[%d])", v, field, j), "remove the duplicate")
			} else {
				oneOf(f, v, known)
			}
		}
	}

	if !nameRE.MatchString(s.Name) {
		add("name", fmt.Sprintf("%q is not usable in file names", s.Name), "use letters, digits, '.', '_' and '-' only, such as \"10k-services\"")
	}
	between("repetitions", s.Repetitions, 1, 100)
	list("modes", s.Modes, KnownModes)

	sv := s.Services
	countOK := between("services.count", sv.Count, 1, MaxServices)
	for _, p := range []struct {
		field string
		v     int
	}{{"services.port", sv.Port}, {"services.targetPort", sv.TargetPort}} {
		if between(p.field, p.v, 1, 65535) && sv.PortsPerService >= 1 && sv.PortsPerService <= 65535 && p.v > 65536-sv.PortsPerService {
			add(p.field, fmt.Sprintf("%d+portsPerService-1 = %d exceeds 65535", p.v, p.v+sv.PortsPerService-1),
				fmt.Sprintf("use a %s <= %d or fewer portsPerService", p.field[len("services."):], 65536-sv.PortsPerService))
		}
	}
	between("services.portsPerService", sv.PortsPerService, 1, 65535)
	oneOf("services.protocol", sv.Protocol, []string{"TCP", "UDP"})
	distOK := s.validateEndpoints(add)

	prefix := func(field, v string) (netip.Prefix, bool) {
		p, err := netip.ParsePrefix(v)
		switch {
		case err != nil:
			add(field, fmt.Sprintf("%q is not a CIDR prefix", v), "write an IPv4 prefix such as 198.18.0.0/16")
		case !p.Addr().Is4():
			add(field, fmt.Sprintf("%s is not IPv4", p), "write an IPv4 prefix such as 198.18.0.0/16")
		case p.Masked() != p:
			add(field, fmt.Sprintf("%s has host bits set", p), "write "+p.Masked().String())
		default:
			return p, true
		}
		return p, false
	}
	svc, svcOK := prefix("network.serviceCIDR", s.Network.ServiceCIDR)
	pod, podOK := prefix("network.podCIDR", s.Network.PodCIDR)
	node, nodeOK := prefix("network.nodeCIDR", s.Network.NodeCIDR)
	cluster, clusterOK := prefix("network.clusterCIDR", s.Network.ClusterCIDR)
	for _, o := range []struct {
		a, b     string
		p, q     netip.Prefix
		aOK, bOK bool
	}{
		{"podCIDR", "serviceCIDR", pod, svc, podOK, svcOK},
		{"nodeCIDR", "serviceCIDR", node, svc, nodeOK, svcOK},
		{"nodeCIDR", "podCIDR", node, pod, nodeOK, podOK},
		{"clusterCIDR", "serviceCIDR", cluster, svc, clusterOK, svcOK},
	} {
		if o.aOK && o.bOK && o.p.Overlaps(o.q) {
			add("network."+o.a, fmt.Sprintf("%s overlaps %s %s", o.p, o.b, o.q), "pick a range disjoint from "+o.b)
		}
	}
	for i, n := range s.Sweep.Services {
		f := fmt.Sprintf("sweep.services[%d]", i)
		if between(f, n, 1, MaxServices) {
			if j := slices.Index(s.Sweep.Services, n); j < i {
				add(f, fmt.Sprintf("%d is listed twice", n), "remove the duplicate")
			}
		}
	}
	if m := slices.Max(append([]int{sv.Count}, s.Sweep.Services...)); m != sv.Count && m >= 1 && m <= MaxServices {
		// The address plan must hold the largest point of the sweep.
		big := s.AtSize(m)
		big.source, big.lines = s.source, s.lines
		if svcOK && int64(m) > usable(svc) {
			add("sweep.services", fmt.Sprintf("%d services do not fit serviceCIDR %s (%d usable addresses)", m, svc, usable(svc)),
				fmt.Sprintf("use fewer services or a /%d or larger network.serviceCIDR", fitting(int64(m)+2)))
		}
		if podOK && distOK {
			var need int64
			for _, c := range big.EndpointCounts() {
				need += int64(c)
			}
			if need > usable(pod) {
				add("sweep.services", fmt.Sprintf("at %d services the endpoints need %d pod addresses but %s has %d usable", m, need, pod, usable(pod)),
					"use a larger network.podCIDR or fewer services in the sweep")
			}
		}
	}
	if svcOK && countOK && int64(sv.Count) > usable(svc) {
		add("services.count", fmt.Sprintf("%d services do not fit serviceCIDR %s (%d usable addresses)", sv.Count, svc, usable(svc)),
			fmt.Sprintf("use fewer services or a /%d or larger network.serviceCIDR", fitting(int64(sv.Count)+2)))
	}
	if podOK && countOK && distOK {
		var need int64
		for _, c := range s.EndpointCounts() {
			need = min(need+int64(c), math.MaxInt64/2)
		}
		if need > usable(pod) {
			fix := "use fewer endpoints per service"
			if b := fitting(need + 2); b >= 0 {
				fix = fmt.Sprintf("use a /%d or larger network.podCIDR (disjoint from serviceCIDR and nodeCIDR), or fewer endpoints", b)
			}
			add("network.podCIDR", fmt.Sprintf("services.endpoints need %d pod addresses but %s has %d usable", need, pod, usable(pod)), fix)
		}
	}
	if between("topology.clientPods", s.Topology.ClientPods, 1, math.MaxInt32) && nodeOK && s.Topology.Nodes <= 1 {
		if links := int64(s.Topology.ClientPods) + 1; links*4 > size(node) {
			add("network.nodeCIDR", fmt.Sprintf("%d /30 links (clientPods+1) need %d addresses but %s has %d", links, links*4, node, size(node)),
				fmt.Sprintf("use a /%d or larger nodeCIDR, or fewer topology.clientPods", fitting(links*4)))
		}
	}

	s.validateFairness(add, between, oneOf, prefix, node, nodeOK)

	tr := s.Traffic
	between("traffic.connections", tr.Connections, 1, math.MaxInt32)
	between("traffic.concurrency", tr.Concurrency, 1, 1024)
	list("traffic.positions", tr.Positions, KnownPositions)
	between("traffic.warmup", tr.Warmup, 0, math.MaxInt32)
	if tr.Timeout.Duration <= 0 {
		add("traffic.timeout", fmt.Sprintf("%s is not positive", tr.Timeout.Duration), `use a positive duration such as "2s"`)
	}
	oneOf("iptables.backend", s.IPTables.Backend, []string{"legacy", "nft"})
	s.validateKernel(add)
	// engine and sim.nodes stay unset by default: "" is real, 0 is 1 node.
	if s.Engine == "" || oneOf("engine", s.Engine, []string{"real", "sim"}) {
		if s.Engine != "sim" && s.Sim.Nodes > 1 {
			add("sim.nodes", fmt.Sprintf("%d nodes need the sim engine (a real run has one node)", s.Sim.Nodes), "set engine: sim, or sim.nodes: 1")
		}
	}
	if s.Sim.Nodes != 0 || s.has("sim.nodes") {
		between("sim.nodes", s.Sim.Nodes, 1, 100000)
	}
	if s.Sim.WatchDelay.Duration < 0 {
		add("sim.watchDelay", fmt.Sprintf("%s is negative", s.Sim.WatchDelay.Duration), `use a duration such as "0s" or "100ms"`)
	}
	if s.Fallback != "" {
		oneOf("fallback", s.Fallback, []string{"iptables"})
	}
	oneOf("services.sessionAffinity", sv.SessionAffinity, []string{"None", "ClientIP"})
	if sv.SessionAffinity == "ClientIP" {
		if d := sv.SessionAffinityTimeout.Duration; d <= 0 || d > 86400*time.Second || d%time.Second != 0 {
			add("services.sessionAffinityTimeout", fmt.Sprintf("%s is not a whole number of seconds in 1s..86400s", d), `use a value such as "10800s" (Kubernetes' limit is 86400s)`)
		}
	}
	oneOf("ipvs.scheduler", s.IPVS.Scheduler, IPVSSchedulers)
	for i, c := range s.IPVS.ExcludeCIDRs {
		prefix(fmt.Sprintf("ipvs.excludeCIDRs[%d]", i), c)
	}
	for _, d := range []struct {
		field string
		v     time.Duration
		pos   bool
	}{
		{"ipvs.tcpTimeout", s.IPVS.TCPTimeout.Duration, false}, {"ipvs.tcpFinTimeout", s.IPVS.TCPFinTimeout.Duration, false},
		{"ipvs.udpTimeout", s.IPVS.UDPTimeout.Duration, false}, {"ipvs.minSyncPeriod", s.IPVS.MinSyncPeriod.Duration, false},
		{"iptables.minSyncPeriod", s.IPTables.MinSyncPeriod.Duration, false}, {"nftables.minSyncPeriod", s.NFTables.MinSyncPeriod.Duration, false},
		{"ipvs.syncPeriod", s.IPVS.SyncPeriod.Duration, true}, {"iptables.syncPeriod", s.IPTables.SyncPeriod.Duration, true},
		{"nftables.syncPeriod", s.NFTables.SyncPeriod.Duration, true}, {"uml.timeout", s.UML.Timeout.Duration, true},
	} {
		if d.v < 0 || (d.pos && d.v == 0) {
			add(d.field, fmt.Sprintf("%s is not %s", d.v, map[bool]string{true: "positive", false: "zero or positive"}[d.pos]), `use a duration such as "30s"`)
		}
	}
	between("uml.memoryMiB", s.UML.MemoryMiB, 256, 16384)
	if c := s.Churn; c.Rate != 0 || s.has("churn") {
		if !(c.Rate > 0 && c.Rate <= 10000) {
			add("churn.rate", fmt.Sprintf("%v is not in (0, 10000] changes per second", c.Rate), "use a rate such as 10")
		}
		if c.Duration.Duration <= 0 {
			add("churn.duration", fmt.Sprintf("%s is not positive", c.Duration.Duration), `use a duration such as "60s"`)
		}
		if c.Grace.Duration < 0 {
			add("churn.grace", fmt.Sprintf("%s is negative", c.Grace.Duration), `use a duration such as "30s"`)
		}
		oneOf("churn.arrival", c.Arrival, []string{"poisson", "constant"})
		between("churn.probes", c.Probes, 1, 64)
		m := c.Mix
		if m.EndpointAdd < 0 || m.EndpointRemove < 0 || m.ReadinessFlip < 0 || m.ServiceCreate < 0 || m.ServiceDelete < 0 ||
			m.EndpointAdd+m.EndpointRemove+m.ReadinessFlip+m.ServiceCreate+m.ServiceDelete <= 0 {
			add("churn.mix", "weights must be >= 0 and not all zero", "set for example endpointAdd: 1, endpointRemove: 1, readinessFlip: 1")
		}
	}
	if f := s.Failure; f.DownEndpointsPerService != 0 || f.Mode != "" {
		smallest := sv.Endpoints.Count
		switch sv.Endpoints.Distribution {
		case "uniform":
			smallest = sv.Endpoints.Min
		case "zipf":
			smallest = 1
		}
		if f.DownEndpointsPerService < 0 || f.DownEndpointsPerService >= smallest {
			add("failure.downEndpointsPerService", fmt.Sprintf("%d is not in 0..%d (services may have only %d endpoints; one must stay up)", f.DownEndpointsPerService, max(smallest-1, 0), smallest),
				"use fewer down endpoints than the smallest endpoint count")
		}
		if oneOf("failure.mode", f.Mode, []string{"reset", "drop"}) && f.Mode == "drop" && s.Traffic.Timeout.Duration <= 250*time.Millisecond {
			add("traffic.timeout", fmt.Sprintf("%s is too short for failure mode drop: the userspace proxy's first retry waits 250ms", s.Traffic.Timeout.Duration), `use "2s"`)
		}
	}
	for i, d := range s.Sweep.MinSyncPeriod {
		if d.Duration < 0 {
			add(fmt.Sprintf("sweep.minSyncPeriod[%d]", i), fmt.Sprintf("%s is negative", d.Duration), `use values such as "0s", "1s", "10s"`)
		}
	}
	if len(s.Sweep.MinSyncPeriod) > 0 && s.Churn.Rate == 0 {
		add("sweep.minSyncPeriod", "has no effect without churn", "set churn.rate (the minSyncPeriod sweep repeats the churn phase)")
	}
	s.validateGates(add)

	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// validateEndpoints checks services.endpoints and reports whether
// EndpointCounts may be called.
func (s *Scenario) validateEndpoints(add func(field, msg, fix string)) bool {
	const f = "services.endpoints."
	e := s.Services.Endpoints
	ok := true
	need := func(field string, good bool, msg, fix string) {
		if !good {
			add(f+field, msg, fix)
			ok = false
		}
	}
	unused := func(field string, set bool) {
		need(field, !set, "is not used by distribution "+e.Distribution, "remove it")
	}
	switch e.Distribution {
	case "fixed":
		need("count", e.Count >= 0, fmt.Sprintf("%d is negative", e.Count), "use 0 or more")
		unused("min", e.Min != 0)
		unused("max", e.Max != 0)
		unused("s", e.S != 0)
		unused("v", e.V != 0)
	case "uniform":
		need("min", e.Min >= 1, fmt.Sprintf("%d is below 1", e.Min), "use 1 or more")
		need("max", e.Max >= e.Min, fmt.Sprintf("%d is below min %d", e.Max, e.Min), "use max >= min")
		unused("count", e.Count != 0)
		unused("s", e.S != 0)
		unused("v", e.V != 0)
	case "zipf":
		need("s", e.S > 1 && !math.IsInf(e.S, 1), fmt.Sprintf("%v is not a finite number > 1", e.S), "use s > 1, such as 1.5")
		need("v", e.V >= 1 && !math.IsInf(e.V, 1), fmt.Sprintf("%v is not a finite number >= 1", e.V), "use v >= 1, such as 1")
		need("max", e.Max >= 1, fmt.Sprintf("%d is below 1", e.Max), "set max, the largest endpoint count, to 1 or more")
		unused("count", e.Count != 0)
		unused("min", e.Min != 0)
	default:
		fix := "use fixed, uniform or zipf"
		if c := closest(e.Distribution, []string{"fixed", "uniform", "zipf"}); c != "" {
			fix = fmt.Sprintf("did you mean %q?", c)
		}
		add(f+"distribution", fmt.Sprintf("unknown distribution %q", e.Distribution), fix)
		ok = false
	}
	return ok
}

// size is the number of addresses in IPv4 prefix p.
func size(p netip.Prefix) int64 { return 1 << (32 - p.Bits()) }

// usable is size(p) minus the network and broadcast addresses.
func usable(p netip.Prefix) int64 { return max(size(p)-2, 0) }

// fitting is the longest IPv4 prefix length holding n addresses, or -1.
func fitting(n int64) int {
	for b := 32; b >= 0; b-- {
		if int64(1)<<(32-b) >= n {
			return b
		}
	}
	return -1
}

// validateFairness checks the fields of scheduler-fairness runs:
// topology.nodes (1..64; the fabric block plus one /30 per client pod must
// fit nodeCIDR), endpointOrder, pods (isolated: at most MaxIsolatedPods
// endpoints, no failure injection or churn), clientAddresses (1..4096;
// the blocks must fit network.clientCIDR, disjoint from the other CIDRs),
// services.endpoints.weights, traffic.perService, traffic.longLived and
// sweep.schedulers.
func (s *Scenario) validateFairness(add func(field, msg, fix string), between func(string, int, int, int) bool,
	oneOf func(string, string, []string) bool, prefix func(string, string) (netip.Prefix, bool), node netip.Prefix, nodeOK bool) {
	t := s.Topology
	if s.has("topology.nodes") || t.Nodes != 0 {
		if between("topology.nodes", t.Nodes, 1, 64) && nodeOK && t.Nodes > 1 {
			if need := FabricSize(t.Nodes) + 4*int64(t.ClientPods); need > size(node) {
				add("network.nodeCIDR", fmt.Sprintf("%d nodes and %d client pods need %d addresses (a /%d fabric block and one /30 per client pod) but %s has %d",
					t.Nodes, t.ClientPods, need, 32-bitsFor(FabricSize(t.Nodes)), node, size(node)),
					fmt.Sprintf("use a /%d or larger nodeCIDR, or fewer nodes or client pods", fitting(need)))
			}
		}
	}
	if t.EndpointOrder != "" {
		oneOf("topology.endpointOrder", t.EndpointOrder, []string{"sorted", "shuffled"})
	}
	if t.Pods != "" && oneOf("topology.pods", t.Pods, []string{"shared", "isolated"}) && t.Pods == "isolated" {
		var n int64
		if s.Services.Count >= 1 && s.Services.Count <= MaxServices {
			for _, c := range s.EndpointCounts() {
				n += int64(c)
			}
		}
		if n > MaxIsolatedPods {
			add("topology.pods", fmt.Sprintf("isolated gives each of the %d endpoints a namespace and veth; at most %d are supported", n, MaxIsolatedPods),
				"use pods: shared (AnyIP) for this many endpoints, or fewer services or endpoints")
		}
		if s.Failure.DownEndpointsPerService > 0 {
			add("failure.downEndpointsPerService", "failure injection needs pods: shared (it acts in the backend host)", "remove failure or use pods: shared")
		}
		if s.Churn.Rate > 0 {
			add("churn.rate", "churn adds endpoints at new pod IPs, which need pods: shared (AnyIP)", "remove churn or use pods: shared")
		}
	}
	if s.has("topology.clientAddresses") || t.ClientAddresses != 0 {
		if between("topology.clientAddresses", t.ClientAddresses, 1, 4096) && t.ClientAddresses > 1 {
			if c, ok := prefix("network.clientCIDR", s.ClientPrefixString()); ok {
				need := int64(nextPow2(t.ClientAddresses)) * int64(t.ClientPods)
				if need > size(c) {
					add("network.clientCIDR", fmt.Sprintf("%d client pods × %d addresses (blocks of %d) need %d addresses but %s has %d",
						t.ClientPods, t.ClientAddresses, nextPow2(t.ClientAddresses), need, c, size(c)),
						fmt.Sprintf("use a /%d or larger clientCIDR, or fewer addresses", fitting(need)))
				}
				for _, o := range []struct{ name, v string }{{"serviceCIDR", s.Network.ServiceCIDR}, {"podCIDR", s.Network.PodCIDR}, {"nodeCIDR", s.Network.NodeCIDR}} {
					if q, err := netip.ParsePrefix(o.v); err == nil && q.Overlaps(c) {
						add("network.clientCIDR", fmt.Sprintf("%s overlaps %s %s", c, o.name, q), "pick a range disjoint from "+o.name)
					}
				}
			}
		}
	} else if s.Network.ClientCIDR != "" {
		prefix("network.clientCIDR", s.Network.ClientCIDR)
	}
	if w := s.Services.Endpoints.Weights; w != nil {
		const f = "services.endpoints.weights"
		switch {
		case !w.Set():
			add(f, "is empty", "set list: [1, 2, 3] or distribution: uniform with min and max")
		case len(w.List) > 0 && (w.Distribution != "" || w.Min != 0 || w.Max != 0):
			add(f, "sets both list and a distribution", "keep either list or distribution/min/max")
		case len(w.List) > 0:
			for i, v := range w.List {
				between(fmt.Sprintf("%s.list[%d]", f, i), v, 1, 256)
			}
		default:
			if oneOf(f+".distribution", w.Distribution, []string{"uniform"}) {
				if between(f+".min", w.Min, 1, 256) && between(f+".max", w.Max, 1, 256) && w.Max < w.Min {
					add(f+".max", fmt.Sprintf("%d is below min %d", w.Max, w.Min), "use max >= min")
				}
			}
		}
	}
	between("traffic.perService", s.Traffic.PerService, 0, 1<<24)
	if l := s.Traffic.LongLived; l.Connections != 0 || l.Hold.Duration != 0 {
		between("traffic.longLived.connections", l.Connections, 1, 4096)
		if l.Hold.Duration < 0 {
			add("traffic.longLived.hold", fmt.Sprintf("%s is negative", l.Hold.Duration), `use a duration such as "2s"`)
		}
	}
	for i, sch := range s.Sweep.Schedulers {
		f := fmt.Sprintf("sweep.schedulers[%d]", i)
		if j := slices.Index(s.Sweep.Schedulers, sch); j < i {
			add(f, fmt.Sprintf("%q is listed twice", sch), "remove the duplicate")
		} else {
			oneOf(f, sch, IPVSSchedulers)
		}
	}
	if len(s.Sweep.Schedulers) > 0 && !slices.Contains(s.Modes, "ipvs") {
		add("sweep.schedulers", "has no effect without mode ipvs", "add ipvs to modes or remove sweep.schedulers")
	}
}

// MaxIsolatedPods bounds the endpoints of a pods: isolated testbed (one
// namespace and veth each).
const MaxIsolatedPods = 8192

// ClientPrefixString is network.clientCIDR or its default.
func (s *Scenario) ClientPrefixString() string {
	if s.Network.ClientCIDR == "" {
		return DefaultClientCIDR
	}
	return s.Network.ClientCIDR
}

// FabricSize is the number of nodeCIDR addresses of the fabric block for n
// nodes: the smallest power of two >= n+3 (network, n nodes, the backend
// host, broadcast), at least 4. With one node it is the /30 node-backend
// link; client pod links (/30 each) follow it.
func FabricSize(n int) int64 { return int64(nextPow2(max(n+3, 4))) }

func nextPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// bitsFor is log2 of a power of two.
func bitsFor(n int64) int {
	b := 0
	for int64(1)<<b < n {
		b++
	}
	return b
}

// KernelNames splits a kernel value ("host,uml:6.12") into its names,
// trimmed, empty ones dropped.
func KernelNames(v string) []string {
	var out []string
	for _, n := range strings.Split(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// kernelName matches uml:<series> (uml:6.12) and uml:debian.
var kernelName = regexp.MustCompile(`^uml:([0-9]+\.[0-9]+|debian)$`)

// validateKernel checks kernel: auto alone, or a list of host, uml,
// uml:<series>, uml:debian and paths (containing a /), each once.
func (s *Scenario) validateKernel(add func(field, msg, fix string)) {
	const fix = "use one of auto, host, uml, uml:6.12, uml:6.1, uml:debian, or a path to a user-mode-linux kernel binary; several (not auto) as a comma-separated list, e.g. host,uml:6.12"
	names := KernelNames(s.Kernel)
	if len(names) == 0 {
		add("kernel", "is empty", fix)
		return
	}
	for i, n := range names {
		switch {
		case n == "auto" && len(names) > 1:
			add("kernel", "auto cannot be combined with other kernels", "give auto alone, or list the kernels to run on")
		case n == "auto", n == "host", n == "uml", kernelName.MatchString(n), strings.Contains(n, "/"):
		default:
			add("kernel", fmt.Sprintf("unknown value %q", n), fix)
		}
		if j := slices.Index(names, n); j < i {
			add("kernel", fmt.Sprintf("%q is listed twice", n), "remove the duplicate")
		}
	}
}
