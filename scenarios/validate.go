package scenarios

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Catalog is what a scenario may name that is defined above this
// package: the proxy modes of this build, in list order. Package
// proxymodes/modes builds it from its list (modes.Catalog); scenarios
// imports no mode (docs/architecture.md, "Layers").
type Catalog struct {
	Modes []string
	// Phases are the build's phases (internal/runner.Phases' rules):
	// validate checks what each phase a scenario wants needs (TCP first
	// ports, runs with kube-proxy, its own Check). Nil: not checked.
	Phases []PhaseRule
	// Protocols lists, per mode name, the ServicePort protocols the mode
	// proxies (proxymodes.Mode.Protocols); a ServicePort of another
	// protocol is refused at its protocol field. Nil: not checked.
	Protocols map[string][]string
	// Schedulers lists the modes whose endpoint choice is the scheduler
	// of the ipvs block (proxymodes.Mode.HasScheduler: ipvs), the modes
	// sweep.schedulers applies to; with none of them in modes, it is
	// refused. Nil: not checked.
	Schedulers []string
	// Terminating lists the modes whose proxy terminates the client's
	// connections itself (proxymodes.Mode.Traits.Terminates: the
	// userspace proxy's listeners and its UDP client table), which the
	// transitions phase, measuring the kernel DNAT's stale conntrack
	// entries, does not measure; transitions refuse them. Nil: not
	// checked.
	Terminating []string
	// KubeProxyConfig checks the kube-proxy configuration a scenario that
	// runs kube-proxy gives (kubeProxy.config, over each mode's block):
	// each problem's Field, Msg and Fix (Source and Line are filled from
	// the scenario). proxymodes/kubeproxy.CheckConfig; nil: not checked.
	KubeProxyConfig func(s *Scenario) []*FieldError
	// MemAvailable returns the bytes of memory free for a run
	// (/proc/meminfo MemAvailable): a scenario running kube-proxy on more
	// nodes than MaxKubeProxyNodes allows is refused. Nil: not checked.
	MemAvailable func() (int64, error)
	// IPv6 lists the modes that program IPv6 (a dual-stack run's IPv6
	// proxier); a dual-stack scenario naming another is refused at
	// modes. Nil: not checked.
	IPv6 []string
	// NodePorts lists the modes whose builtin proxier programs node ports
	// (proxymodes.Mode.NodePorts); traffic.nodePorts with a builtin row of
	// another mode (none, the baseline, aside) is refused at
	// traffic.nodePorts. Nil: not checked.
	NodePorts []string
	// TopologyHints lists the modes whose builtin proxier follows the
	// EndpointSlice hints (proxymodes.Mode.TopologyHints); a
	// trafficDistribution with a builtin row or builtin serviceTypes pass
	// of another mode (none aside) is refused at that field. Nil: not
	// checked.
	TopologyHints []string
}

// Parse is the package-level Parse that also checks every entry of modes
// against c (unknown names are a *FieldError with the closest known name).
func (c Catalog) Parse(data []byte, source string) (*Scenario, error) {
	return parse(data, source, &c)
}

// Load is the package-level Load that also checks modes against c.
func (c Catalog) Load(nameOrPath string) (*Scenario, error) {
	return load(nameOrPath, &c)
}

// ValidateWith is Validate that also checks modes against c.
func (s *Scenario) ValidateWith(c Catalog) error { return s.validate(&c) }

// KnownPositions lists the service positions traffic.positions may name.
var KnownPositions = []string{"first", "middle", "last", "random"}

// MaxEndpointsPerService bounds services.endpoints.count, min and max.
const MaxEndpointsPerService = 1 << 16

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

// SetDefaults fills every unset field with its documented default. A field
// is unset when the parsed file does not name it; a value the file gives
// (0 included) is never replaced, so Validate sees it and refuses it when it
// is out of range. For a scenario built in Go (no source lines), zero means
// unset.
func (s *Scenario) SetDefaults() {
	num := func(path string, p *int, v int) {
		if *p == 0 && !s.has(path) {
			*p = v
		}
	}
	str := func(path string, p *string, v string) {
		if *p == "" && !s.has(path) {
			*p = v
		}
	}
	dur := func(path string, d *Duration, v time.Duration) {
		if d.Duration == 0 && !s.has(path) {
			d.Duration = v
		}
	}
	str("name", &s.Name, nameOf(s.source))
	num("repetitions", &s.Repetitions, 3)
	num("runs", &s.Runs, 1)
	if s.Modes == nil && !s.has("modes") {
		s.Modes = []string{"none", "iptables"}
	}
	sv := &s.Services
	if len(sv.Ports) == 0 && !s.has("services.ports") {
		num("services.portsPerService", &sv.PortsPerService, 1)
		str("services.protocol", &sv.Protocol, "TCP")
		num("services.port", &sv.Port, 80)
		num("services.targetPort", &sv.TargetPort, 8080)
	}
	for j := range sv.Ports {
		p := &sv.Ports[j]
		f := fmt.Sprintf("services.ports[%d].", j)
		str(f+"protocol", &p.Protocol, "TCP")
		if p.TargetPort == 0 && !s.has(f+"targetPort") {
			p.TargetPort = p.Port
		}
	}
	str("services.endpoints.distribution", &sv.Endpoints.Distribution, "fixed")
	if sv.Endpoints.Distribution == "fixed" {
		num("services.endpoints.count", &sv.Endpoints.Count, 3)
	}
	s.exposureDefaults()
	s.familiesDefaults()
	n := &s.Network
	str("network.serviceCIDR", &n.ServiceCIDR, "198.18.0.0/16")
	str("network.podCIDR", &n.PodCIDR, "198.19.0.0/17")
	str("network.nodeCIDR", &n.NodeCIDR, "198.19.255.0/24")
	str("network.clusterCIDR", &n.ClusterCIDR, "198.19.0.0/16")
	num("topology.clientPods", &s.Topology.ClientPods, 1)
	t := &s.Traffic
	num("traffic.connections", &t.Connections, 2000)
	num("traffic.concurrency", &t.Concurrency, 4)
	if t.Positions == nil && !s.has("traffic.positions") {
		t.Positions = slices.Clone(KnownPositions)
	}
	num("traffic.warmup", &t.Warmup, 50)
	dur("traffic.timeout", &t.Timeout, 2*time.Second)
	if t.UDP.SourcePort != 0 || s.has("traffic.udp.sourcePort") {
		num("traffic.udp.sourcePorts", &t.UDP.SourcePorts, 1)
	}
	if t.LongLived.Connections > 0 {
		dur("traffic.longLived.hold", &t.LongLived.Hold, time.Second)
	}
	str("iptables.backend", &s.IPTables.Backend, "legacy")
	str("kernel", &s.Kernel, "auto")
	str("services.sessionAffinity", &sv.SessionAffinity, "None")
	dur("services.sessionAffinityTimeout", &sv.SessionAffinityTimeout, 10800*time.Second)
	dur("iptables.syncPeriod", &s.IPTables.SyncPeriod, 30*time.Second)
	dur("iptables.minSyncPeriod", &s.IPTables.MinSyncPeriod, time.Second)
	str("ipvs.scheduler", &s.IPVS.Scheduler, "rr")
	dur("ipvs.syncPeriod", &s.IPVS.SyncPeriod, 30*time.Second)
	dur("nftables.syncPeriod", &s.NFTables.SyncPeriod, 30*time.Second)
	dur("nftables.minSyncPeriod", &s.NFTables.MinSyncPeriod, time.Second)
	num("uml.memoryMiB", &s.UML.MemoryMiB, 2048)
	if s.Failure.DownEndpointsPerService > 0 {
		str("failure.mode", &s.Failure.Mode, "reset")
	}
	if c := &s.Churn; c.Rate > 0 {
		dur("churn.duration", &c.Duration, 60*time.Second)
		dur("churn.grace", &c.Grace, 30*time.Second)
		str("churn.arrival", &c.Arrival, "poisson")
		num("churn.probes", &c.Probes, 2)
		if c.Mix == (ChurnMix{}) && !s.has("churn.mix") {
			c.Mix = ChurnMix{EndpointAdd: 1, EndpointRemove: 1, ReadinessFlip: 1}
		}
	}
	dur("uml.timeout", &s.UML.Timeout, 30*time.Minute)
	if s.Node.Sysctls == nil {
		s.Node.Sysctls = map[string]string{}
	}
	for k, v := range NodeSysctlDefaults {
		if _, ok := s.Node.Sysctls[k]; !ok {
			s.Node.Sysctls[k] = v
		}
	}
	if cr := s.ConnReuse; cr != nil {
		num("connReuse.connections", &cr.Connections, 2000)
		num("connReuse.ports", &cr.Ports, 50)
		if cr.ReuseModes == nil && !s.has("connReuse.reuseModes") {
			cr.ReuseModes = []int{1, 0}
		}
	}
	if lc := s.Lifecycle; lc != nil {
		num("lifecycle.held", &lc.Held, 12)
		dur("lifecycle.observe", &lc.Observe, 2*time.Second)
	}
	if sd := s.SyncDisruption; sd != nil {
		num("syncDisruption.services", &sd.Services, 8)
		num("syncDisruption.probes", &sd.Probes, 2)
		dur("syncDisruption.timeout", &sd.Timeout, time.Second)
		dur("syncDisruption.slow", &sd.Slow, 100*time.Millisecond)
		dur("syncDisruption.settle", &sd.Settle, 10*time.Second)
		if sd.Syncs == nil && !s.has("syncDisruption.syncs") {
			sd.Syncs = []string{"restart", "incremental"}
		}
	}
	s.setModeSwitchDefaults()
	s.setServiceTypesDefaults()
	s.setSoakDefaults()
	s.setProcessFaultsDefaults()
	s.setFaultsDefaults()
	s.monitoringDefaults()
	if tr := s.Transitions; tr != nil {
		num("transitions.sourcePort", &tr.SourcePort, 5300)
		dur("transitions.interval", &tr.Interval, 20*time.Millisecond)
		dur("transitions.timeout", &tr.Timeout, 200*time.Millisecond)
		dur("transitions.observe", &tr.Observe, 3*time.Second)
		if tr.WithoutCleanup == nil {
			yes := true
			tr.WithoutCleanup = &yes
		}
	}
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

// Given reports whether the scenario's source sets the field at path
// ("sim.watchDelay"), so a default that depends on other fields can tell
// an explicit zero from an absent field. False for a scenario not parsed
// from a file (decoded from a result's JSON, built in code).
func (s *Scenario) Given(path string) bool { return s.has(path) }

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

// At returns a *FieldError for field (a path such as
// "kubeProxy.binaries[1]") at its place in the scenario's source: the line
// of field, or of its nearest enclosing field the source names; Line 0
// when the scenario has no source lines (built in Go, or the field comes
// from a default). For errors found after validation (runner.Preflight).
func (s *Scenario) At(field, msg, fix string) *FieldError {
	src := s.source
	if src == "" {
		src = "scenario"
	}
	return &FieldError{Source: src, Line: s.line(field), Field: field, Msg: msg, Fix: fix}
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Validate checks every field (run SetDefaults first) and returns nil, one
// *FieldError, or several joined with errors.Join (one per line), in field
// order. Each section has its own check (checker's methods, listed in
// Validate's body): CIDRs are IPv4 prefixes without host bits; service,
// pod and node CIDRs are disjoint and clusterCIDR is disjoint from
// serviceCIDR; services, all endpoints (EndpointCounts) and (clientPods+1)
// /30 links fit their CIDRs; ports, distribution parameters, modes,
// traffic, sync periods, churn, failure and gate settings are in range.
//
// Validate checks that modes is a non-empty list without duplicates but
// not the names: they are defined above this package, so a caller checks
// them with ValidateWith and the build's Catalog.
func (s *Scenario) Validate() error { return s.validate(nil) }

func (s *Scenario) validate(cat *Catalog) error {
	c := &checker{s: s, cat: cat}
	for _, check := range []func(*checker){
		(*checker).top,
		(*checker).services,
		(*checker).network,
		(*checker).families,
		(*checker).exposure,
		(*checker).trafficDistribution,
		(*checker).nodePortLookup,
		(*checker).nodePortModes,
		(*checker).sweep,
		(*checker).capacity,
		(*checker).topology,
		(*checker).weights,
		(*checker).traffic,
		(*checker).engine,
		(*checker).implementation,
		(*checker).affinity,
		(*checker).ipvs,
		(*checker).periods,
		(*checker).churn,
		(*checker).transitions,
		(*checker).syncDisruption,
		(*checker).modeSwitch,
		(*checker).serviceTypes,
		(*checker).soak,
		(*checker).processFaults,
		(*checker).faults,
		(*checker).lifecycle,
		(*checker).connReuse,
		(*checker).failure,
		(*checker).sweepPeriods,
		(*checker).sweepSchedulers,
		(*checker).gates,
		(*checker).nodeSysctls,
		(*checker).monitoring,
	} {
		check(c)
	}
	if len(c.errs) == 1 {
		return c.errs[0]
	}
	return errors.Join(c.errs...)
}

// checker collects one Validate call's errors and what later sections need
// from earlier ones (parsed CIDRs, whether the endpoint distribution may be
// drawn).
type checker struct {
	s    *Scenario
	cat  *Catalog // nil: mode names are not checked
	errs []error

	countOK, distOK            bool
	svc, pod, node, cluster    netip.Prefix
	svcOK, podOK, nodeOK, clOK bool
}

func (c *checker) add(field, msg, fix string) {
	src := c.s.source
	if src == "" {
		src = "scenario"
	}
	c.errs = append(c.errs, &FieldError{Source: src, Line: c.s.line(field), Field: field, Msg: msg, Fix: fix})
}

// between checks lo <= v <= hi.
func (c *checker) between(field string, v, lo, hi int) bool {
	if v < lo || v > hi {
		c.add(field, fmt.Sprintf("%d is out of range", v), fmt.Sprintf("use %d..%d", lo, hi))
		return false
	}
	return true
}

// oneOf checks that v is one of known, suggesting the closest.
func (c *checker) oneOf(field, v string, known []string) bool {
	if slices.Contains(known, v) {
		return true
	}
	fix := "use one of " + strings.Join(known, ", ")
	if n := closest(v, known); n != "" {
		fix = fmt.Sprintf("did you mean %q?", n)
	}
	c.add(field, fmt.Sprintf("unknown value %q", v), fix)
	return false
}

// list checks a non-empty list of distinct known values.
// With known nil, list checks only emptiness and duplicates.
func (c *checker) list(field string, vs, known []string) {
	if len(vs) == 0 {
		fix := "list at least one"
		if known != nil {
			fix += " of " + strings.Join(known, ", ")
		}
		c.add(field, "is empty", fix)
	}
	for i, v := range vs {
		f := fmt.Sprintf("%s[%d]", field, i)
		if j := slices.Index(vs, v); j < i {
			c.add(f, fmt.Sprintf("%q is listed twice (also %s[%d])", v, field, j), "remove the duplicate")
		} else if known != nil {
			c.oneOf(f, v, known)
		}
	}
}

// prefix parses an IPv4 CIDR without host bits.
func (c *checker) prefix(field, v string) (netip.Prefix, bool) {
	p, err := netip.ParsePrefix(v)
	switch {
	case err != nil:
		c.add(field, fmt.Sprintf("%q is not a CIDR prefix", v), "write an IPv4 prefix such as 198.18.0.0/16")
	case !p.Addr().Is4():
		c.add(field, fmt.Sprintf("%s is not IPv4", p), "write an IPv4 prefix such as 198.18.0.0/16")
	case p.Masked() != p:
		c.add(field, fmt.Sprintf("%s has host bits set", p), "write "+p.Masked().String())
	default:
		if sp, what := SpecialOverlap(p); what != "" {
			c.add(field, fmt.Sprintf("%s overlaps %s %s, which no cluster can use for its addresses", p, what, sp),
				"use addresses from the benchmarking range 198.18.0.0/15 (RFC 2544), such as the default")
			return p, false
		}
		return p, true
	}
	return p, false
}

// specialRanges are the IPv4 and IPv6 ranges a cluster cannot address
// pods, nodes or services from (RFC 6890's special-purpose registry:
// "this network" and unspecified, loopback, link-local, multicast, and
// the reserved 240.0.0.0/4 with the limited broadcast address).
var specialRanges = []struct {
	p    netip.Prefix
	what string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "the unspecified (\"this network\") range"},
	{netip.MustParsePrefix("127.0.0.0/8"), "the loopback range"},
	{netip.MustParsePrefix("169.254.0.0/16"), "the link-local range"},
	{netip.MustParsePrefix("224.0.0.0/4"), "the multicast range"},
	{netip.MustParsePrefix("240.0.0.0/4"), "the reserved range (with the limited broadcast address 255.255.255.255)"},
	{netip.MustParsePrefix("::/128"), "the unspecified address"},
	{netip.MustParsePrefix("::1/128"), "the loopback address"},
	{netip.MustParsePrefix("fe80::/10"), "the link-local range"},
	{netip.MustParsePrefix("ff00::/8"), "the multicast range"},
}

// SpecialOverlap returns the special-purpose range p overlaps and its
// name (loopback, multicast, link-local, unspecified; RFC 6890), or an
// empty name.
func SpecialOverlap(p netip.Prefix) (netip.Prefix, string) {
	for _, r := range specialRanges {
		if r.p.Addr().Is4() == p.Addr().Is4() && r.p.Overlaps(p) {
			return r.p, r.what
		}
	}
	return netip.Prefix{}, ""
}

// duration checks d >= 0, and d > 0 when positive.
func (c *checker) duration(field string, d time.Duration, positive bool, example string) {
	switch {
	case d < 0:
		c.add(field, fmt.Sprintf("%s is negative", d), fmt.Sprintf("use a duration such as %q", example))
	case positive && d == 0:
		c.add(field, "0s is not positive", fmt.Sprintf("use a duration such as %q", example))
	}
}

// top checks name, repetitions, runs and modes.
func (c *checker) top() {
	s := c.s
	if !nameRE.MatchString(s.Name) {
		c.add("name", fmt.Sprintf("%q is not usable in file names", s.Name), "use letters, digits, '.', '_' and '-' only, such as \"10k-services\"")
	}
	c.between("repetitions", s.Repetitions, 1, 100)
	c.between("runs", s.Runs, 1, 100)
	var known []string
	if c.cat != nil {
		known = c.cat.Modes
	}
	c.list("modes", s.Modes, known)
}

// services checks services.count, its ports and protocol, and the endpoint
// distribution.
func (c *checker) services() {
	s, sv := c.s, c.s.Services
	if s.lines != nil && !s.has("services.count") && len(s.Sweep.Services) == 0 {
		c.add("services.count", "is missing", "set services.count, such as services: {count: 1000}")
	} else {
		c.countOK = c.between("services.count", sv.Count, 1, MaxServices)
	}
	if len(sv.Ports) > 0 || s.has("services.ports") {
		c.portList()
	} else {
		for _, p := range []struct {
			field string
			v     int
		}{{"services.port", sv.Port}, {"services.targetPort", sv.TargetPort}} {
			if c.between(p.field, p.v, 1, 65535) && sv.PortsPerService >= 1 && sv.PortsPerService <= 65535 && p.v > 65536-sv.PortsPerService {
				c.add(p.field, fmt.Sprintf("%d+portsPerService-1 = %d exceeds 65535", p.v, p.v+sv.PortsPerService-1),
					fmt.Sprintf("use a %s <= %d or fewer portsPerService", p.field[len("services."):], 65536-sv.PortsPerService))
			}
		}
		c.between("services.portsPerService", sv.PortsPerService, 1, 65535)
		if c.oneOf("services.protocol", sv.Protocol, []string{"TCP", "UDP"}) {
			c.protocolModes("services.protocol", sv.Protocol)
		}
	}
	c.distOK = s.validateEndpoints(c.add)
}

// portLabelRE is a DNS label (RFC 1123), the form Kubernetes requires of a
// ServicePort's name.
var portLabelRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// ServiceProtocols are the protocols a ServicePort may name (core/v1
// Protocol).
var ServiceProtocols = []string{"TCP", "UDP", "SCTP"}

// DriverProtocols are the protocols the real engine's traffic driver
// sends (workload/traffic: TCP connections, UDP request/response
// exchanges).
var DriverProtocols = []string{"TCP", "UDP"}

// portList checks services.ports as Kubernetes validates a Service's
// spec.ports (pkg/apis/core/validation: a name on every port of a
// multi-port service, DNS-label names, unique names, unique (port,
// protocol) pairs, ports 1..65535) and that it is not mixed with the
// single-pattern fields it replaces.
func (c *checker) portList() {
	s, sv := c.s, c.s.Services
	for _, f := range []string{"portsPerService", "protocol", "port", "targetPort"} {
		if s.has("services."+f) || (s.lines == nil && ((f == "portsPerService" && sv.PortsPerService != 0) || (f == "protocol" && sv.Protocol != "") ||
			(f == "port" && sv.Port != 0) || (f == "targetPort" && sv.TargetPort != 0))) {
			c.add("services."+f, "cannot be combined with services.ports, which lists every port", "remove services."+f+" and give it in each entry of services.ports")
		}
	}
	if len(sv.Ports) == 0 {
		c.add("services.ports", "is empty", "list at least one port, such as ports: [{name: http, port: 80, targetPort: 8080}], or remove services.ports")
		return
	}
	if len(sv.Ports) > MaxPortsPerService {
		c.add("services.ports", fmt.Sprintf("%d ports", len(sv.Ports)), fmt.Sprintf("list at most %d", MaxPortsPerService))
	}
	names := map[string]int{}
	pairs := map[string]int{}
	for j, p := range sv.Ports {
		f := fmt.Sprintf("services.ports[%d]", j)
		switch {
		case p.Name == "" && len(sv.Ports) > 1:
			c.add(f+".name", "is missing: a service with more than one port names every port", fmt.Sprintf("add name: such as name: port-%d", p.Port))
		case p.Name != "" && (len(p.Name) > 63 || !portLabelRE.MatchString(p.Name)):
			c.add(f+".name", fmt.Sprintf("%q is not a DNS label", p.Name), "use at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit, such as dns-tcp")
		case p.Name != "":
			if k, dup := names[p.Name]; dup {
				c.add(f+".name", fmt.Sprintf("%q is also the name of services.ports[%d]", p.Name, k), "give every port its own name")
			} else {
				names[p.Name] = j
			}
		}
		protoOK := c.oneOf(f+".protocol", p.Protocol, ServiceProtocols)
		portOK := c.between(f+".port", p.Port, 1, 65535)
		if portOK || p.TargetPort != p.Port || s.has(f+".targetPort") {
			// (a defaulted targetPort repeats a bad port: said once)
			c.between(f+".targetPort", p.TargetPort, 1, 65535)
		}
		if protoOK && portOK {
			key := fmt.Sprintf("%d/%s", p.Port, p.Protocol)
			if k, dup := pairs[key]; dup {
				c.add(f+".port", fmt.Sprintf("%s is also the port and protocol of services.ports[%d]", key, k), "use another port or protocol: each (port, protocol) pair appears once")
			} else {
				pairs[key] = j
			}
		}
		if protoOK {
			c.protocolModes(f+".protocol", p.Protocol)
		}
	}
}

// MaxPortsPerService bounds services.ports.
const MaxPortsPerService = 1024

// protocolModes checks that every listed mode proxies protocol (the
// Catalog says which do) and, with the real engine, that the traffic
// driver sends it.
func (c *checker) protocolModes(field, protocol string) {
	if c.s.Engine != "sim" && !slices.Contains(DriverProtocols, protocol) {
		c.add(field, fmt.Sprintf("%s ports render, but the real engine's traffic driver sends %s only", protocol, strings.Join(DriverProtocols, " and ")),
			"use "+strings.Join(DriverProtocols, " or ")+", or engine: sim to compare the modes' rules for "+protocol)
		return
	}
	if c.cat == nil || c.cat.Protocols == nil {
		return
	}
	var lack []string
	for _, m := range c.s.Modes {
		if ps, known := c.cat.Protocols[m]; known && !slices.Contains(ps, protocol) {
			lack = append(lack, m)
		}
	}
	if len(lack) > 0 {
		c.add(field, fmt.Sprintf("mode %s does not proxy %s in this build", strings.Join(lack, ", "), protocol),
			fmt.Sprintf("remove %s from modes, or use a protocol it proxies", strings.Join(lack, ", ")))
	}
}

// network parses the four CIDRs and checks they do not overlap.
func (c *checker) network() {
	n := c.s.Network
	c.svc, c.svcOK = c.prefix("network.serviceCIDR", n.ServiceCIDR)
	c.pod, c.podOK = c.prefix("network.podCIDR", n.PodCIDR)
	c.node, c.nodeOK = c.prefix("network.nodeCIDR", n.NodeCIDR)
	c.cluster, c.clOK = c.prefix("network.clusterCIDR", n.ClusterCIDR)
	for _, o := range []struct {
		a, b     string
		p, q     netip.Prefix
		aOK, bOK bool
	}{
		{"podCIDR", "serviceCIDR", c.pod, c.svc, c.podOK, c.svcOK},
		{"nodeCIDR", "serviceCIDR", c.node, c.svc, c.nodeOK, c.svcOK},
		{"nodeCIDR", "podCIDR", c.node, c.pod, c.nodeOK, c.podOK},
		{"clusterCIDR", "serviceCIDR", c.cluster, c.svc, c.clOK, c.svcOK},
	} {
		if o.aOK && o.bOK && o.p.Overlaps(o.q) {
			c.add("network."+o.a, fmt.Sprintf("%s overlaps %s %s", o.p, o.b, o.q), "pick a range disjoint from "+o.b)
		}
	}
}

// sweep checks sweep.services and that its largest point fits the address plan.
func (c *checker) sweep() {
	s, sv := c.s, c.s.Services
	for i, n := range s.Sweep.Services {
		f := fmt.Sprintf("sweep.services[%d]", i)
		if c.between(f, n, 1, MaxServices) {
			if j := slices.Index(s.Sweep.Services, n); j < i {
				c.add(f, fmt.Sprintf("%d is listed twice", n), "remove the duplicate")
			}
		}
	}
	m := slices.Max(append([]int{sv.Count}, s.Sweep.Services...))
	if m == sv.Count || m < 1 || m > MaxServices {
		return
	}
	big := s.AtSize(m)
	big.source, big.lines = s.source, s.lines
	if c.svcOK && int64(m) > usable(c.svc) {
		c.add("sweep.services", fmt.Sprintf("%d services do not fit serviceCIDR %s (%d usable addresses)", m, c.svc, usable(c.svc)),
			fmt.Sprintf("use fewer services or a /%d or larger network.serviceCIDR", fitting(int64(m)+2)))
	}
	if c.podOK && c.distOK {
		if need := endpointTotal(big); need > usable(c.pod) {
			c.add("sweep.services", fmt.Sprintf("at %d services the endpoints need %d pod addresses but %s has %d usable", m, need, c.pod, usable(c.pod)),
				"use a larger network.podCIDR or fewer services in the sweep")
		}
	}
}

// endpointTotal is the sum of EndpointCounts, saturating.
func endpointTotal(s *Scenario) int64 {
	var need int64
	for _, c := range s.EndpointCounts() {
		need = min(need+int64(c), math.MaxInt64/2)
	}
	return need
}

// capacity checks that services.count fits serviceCIDR, its endpoints
// podCIDR, and (one node) the /30 links nodeCIDR.
func (c *checker) capacity() {
	s := c.s
	if n := s.ServiceTotal(); c.svcOK && c.countOK && int64(n) > usable(c.svc) {
		c.add("services.count", fmt.Sprintf("%d services do not fit serviceCIDR %s (%d usable addresses)", n, c.svc, usable(c.svc)),
			fmt.Sprintf("use fewer services or a /%d or larger network.serviceCIDR", fitting(int64(n)+2)))
	}
	if c.podOK && c.countOK && c.distOK {
		if need := endpointTotal(s); need > usable(c.pod) {
			fix := "use fewer endpoints per service"
			if b := fitting(need + 2); b >= 0 {
				fix = fmt.Sprintf("use a /%d or larger network.podCIDR (disjoint from serviceCIDR and nodeCIDR), or fewer endpoints", b)
			}
			c.add("network.podCIDR", fmt.Sprintf("services.endpoints need %d pod addresses but %s has %d usable", need, c.pod, usable(c.pod)), fix)
		}
	}
	if c.between("topology.clientPods", s.Topology.ClientPods, 1, math.MaxInt32) && c.nodeOK && s.Topology.Nodes <= 1 {
		if links := int64(s.Topology.ClientPods) + 1; links*4 > size(c.node) {
			c.add("network.nodeCIDR", fmt.Sprintf("%d /30 links (clientPods+1) need %d addresses but %s has %d", links, links*4, c.node, size(c.node)),
				fmt.Sprintf("use a /%d or larger nodeCIDR, or fewer topology.clientPods", fitting(links*4)))
		}
	}
}

// traffic checks the traffic block.
func (c *checker) traffic() {
	tr := c.s.Traffic
	c.between("traffic.connections", tr.Connections, 1, math.MaxInt32)
	c.between("traffic.concurrency", tr.Concurrency, 1, 1024)
	c.list("traffic.positions", tr.Positions, KnownPositions)
	c.between("traffic.warmup", tr.Warmup, 0, math.MaxInt32)
	c.duration("traffic.timeout", tr.Timeout.Duration, true, "2s")
	c.between("traffic.perService", tr.PerService, 0, 1<<24)
	if l := tr.LongLived; l.Connections != 0 || l.Hold.Duration != 0 || c.s.has("traffic.longLived") {
		c.between("traffic.longLived.connections", l.Connections, 1, 4096)
		c.duration("traffic.longLived.hold", l.Hold.Duration, false, "2s")
	}
	if u := tr.UDP; u.SourcePort != 0 || c.s.has("traffic.udp.sourcePort") {
		if c.between("traffic.udp.sourcePort", u.SourcePort, 1, 65535) && c.between("traffic.udp.sourcePorts", u.SourcePorts, 1, 65536-u.SourcePort) &&
			u.SourcePorts < tr.Concurrency {
			c.add("traffic.udp.sourcePorts", fmt.Sprintf("%d source ports cannot serve %d workers (traffic.concurrency): each worker needs its own", u.SourcePorts, tr.Concurrency),
				fmt.Sprintf("set sourcePorts: %d or more, or traffic.concurrency: %d", tr.Concurrency, u.SourcePorts))
		}
	} else if u.SourcePorts != 0 || c.s.has("traffic.udp.sourcePorts") {
		c.add("traffic.udp.sourcePorts", "is set without traffic.udp.sourcePort", "set sourcePort (the first port), or remove sourcePorts for kernel-chosen ports")
	}
	c.tcpOnly()
	c.phaseChecks()
}

// tcpOnly refuses UDP ServicePorts where traffic holds TCP connections
// on every port (longLived) or down endpoints are reached over TCP only;
// the phases whose probes connect over TCP say so in their rule
// (PhaseRule.TCP, checked by phaseChecks).
func (c *checker) tcpOnly() {
	s := c.s
	if s.Traffic.LongLived.Connections > 0 && slices.Contains(s.Services.Protocols(), "UDP") {
		c.add("traffic.longLived", "holds TCP connections on every ServicePort, and UDP ports have none to hold", "remove traffic.longLived, or use TCP ports only")
	}
	if s.Failure.DownEndpointsPerService > 0 && slices.Contains(s.Services.Protocols(), "UDP") {
		c.add("failure.downEndpointsPerService", "down endpoints are unreachable over TCP only, so UDP ports would still reach them", "remove failure, or use TCP ports only")
	}
}

// engine checks iptables.backend, kernel, engine, sim and fallback.
func (c *checker) engine() {
	s := c.s
	c.oneOf("iptables.backend", s.IPTables.Backend, []string{"legacy", "nft"})
	s.validateKernel(c.add)
	// engine and sim.nodes stay unset by default: "" is real, unset is 1 node.
	if s.Engine == "" || c.oneOf("engine", s.Engine, []string{"real", "sim", EngineCluster}) {
		if s.Engine != "sim" && s.Sim.Nodes > 1 {
			c.add("sim.nodes", fmt.Sprintf("%d nodes need the sim engine (a real run has one node)", s.Sim.Nodes), "set engine: sim, or sim.nodes: 1")
		}
	}
	if s.Sim.Nodes != 0 || s.has("sim.nodes") {
		c.between("sim.nodes", s.Sim.Nodes, 1, 100000)
	}
	c.duration("sim.watchDelay", s.Sim.WatchDelay.Duration, false, "100ms")
	if s.has("sim.sharedCores") {
		c.between("sim.sharedCores", s.Sim.SharedCores, 0, 4096)
	}
	if s.Fallback != "" || s.has("fallback") {
		c.oneOf("fallback", s.Fallback, []string{"iptables"})
	}
}

// affinity checks services.sessionAffinity and its timeout.
func (c *checker) affinity() {
	sv := c.s.Services
	c.oneOf("services.sessionAffinity", sv.SessionAffinity, []string{"None", "ClientIP"})
	d := sv.SessionAffinityTimeout.Duration
	if d < 0 || (sv.SessionAffinity == "ClientIP" && (d <= 0 || d > 86400*time.Second || d%time.Second != 0)) {
		c.add("services.sessionAffinityTimeout", fmt.Sprintf("%s is not a whole number of seconds in 1s..86400s", d), `use a value such as "10800s" (Kubernetes' limit is 86400s)`)
	}
}

// ipvs checks the ipvs block's scheduler, excludeCIDRs and timeouts.
func (c *checker) ipvs() {
	v := c.s.IPVS
	c.oneOf("ipvs.scheduler", v.Scheduler, IPVSSchedulers)
	for i, f := range v.SchedulerFlags {
		field := fmt.Sprintf("ipvs.schedulerFlags[%d]", i)
		known := IPVSSchedulerFlags[v.Scheduler]
		switch {
		case len(known) == 0:
			c.add(field, fmt.Sprintf("scheduler %q takes no flags", v.Scheduler), "remove ipvs.schedulerFlags, or use scheduler sh or mh")
		case slices.Contains(v.SchedulerFlags[:i], f):
			c.add(field, fmt.Sprintf("%q is listed twice", f), "list each flag once")
		default:
			c.oneOf(field, f, known)
		}
	}
	if len(v.SchedulerFlags) > 0 && len(c.s.Sweep.Schedulers) > 0 {
		c.add("ipvs.schedulerFlags", "cannot be combined with sweep.schedulers (flags belong to one scheduler)", "remove one of the two")
	}
	for i, cidr := range v.ExcludeCIDRs {
		c.prefix(fmt.Sprintf("ipvs.excludeCIDRs[%d]", i), cidr)
	}
	c.duration("ipvs.tcpTimeout", v.TCPTimeout.Duration, false, "900s")
	c.duration("ipvs.tcpFinTimeout", v.TCPFinTimeout.Duration, false, "120s")
	c.duration("ipvs.udpTimeout", v.UDPTimeout.Duration, false, "300s")
}

// periods checks every mode's sync periods and the guest's bounds.
func (c *checker) periods() {
	s := c.s
	c.duration("ipvs.minSyncPeriod", s.IPVS.MinSyncPeriod.Duration, false, "1s")
	c.duration("iptables.minSyncPeriod", s.IPTables.MinSyncPeriod.Duration, false, "1s")
	c.duration("nftables.minSyncPeriod", s.NFTables.MinSyncPeriod.Duration, false, "1s")
	c.duration("ipvs.syncPeriod", s.IPVS.SyncPeriod.Duration, true, "30s")
	c.duration("iptables.syncPeriod", s.IPTables.SyncPeriod.Duration, true, "30s")
	c.duration("nftables.syncPeriod", s.NFTables.SyncPeriod.Duration, true, "30s")
	c.duration("uml.timeout", s.UML.Timeout.Duration, true, "30m")
	c.between("uml.memoryMiB", s.UML.MemoryMiB, 256, 16384)
}

// churn checks the churn block when it is present or enabled.
// transitions checks the transitions block: a source port outside the
// ephemeral range, positive durations, and modes that proxy UDP.
func (c *checker) transitions() {
	tr := c.s.Transitions
	if tr == nil {
		return
	}
	c.between("transitions.sourcePort", tr.SourcePort, 1, 65535)
	c.duration("transitions.interval", tr.Interval.Duration, true, "20ms")
	c.duration("transitions.timeout", tr.Timeout.Duration, true, "200ms")
	c.duration("transitions.observe", tr.Observe.Duration, true, "3s")
	if c.cat != nil && c.cat.Protocols != nil {
		for _, m := range c.s.Modes {
			if ps, known := c.cat.Protocols[m]; known && !slices.Contains(ps, "UDP") {
				c.add("modes", "transitions send UDP, which mode "+m+" does not proxy in this build", "remove "+m+" from modes in this scenario")
			}
		}
	}
	if c.cat != nil {
		for _, m := range c.s.Modes {
			if slices.Contains(c.cat.Terminating, m) {
				c.add("modes", "transitions measure the stale conntrack entries of the kernel modes' DNAT; mode "+m+"'s UDP proxy keeps its own client table and is not measured by them in this build",
					"remove "+m+" from modes in this scenario")
			}
		}
	}
	if c.s.Topology.Pods == "isolated" {
		c.add("transitions", "transitions add endpoints at new pod IPs, which need pods: shared (AnyIP)", "use pods: shared")
	}
}

// connReuse checks the connReuse block.
func (c *checker) connReuse() {
	cr := c.s.ConnReuse
	if cr == nil {
		return
	}
	c.between("connReuse.connections", cr.Connections, 1, 1000000)
	c.between("connReuse.ports", cr.Ports, 1, 10000)
	if len(cr.ReuseModes) == 0 {
		c.add("connReuse.reuseModes", "is empty", "list net.ipv4.vs.conn_reuse_mode values, such as [1, 0]")
	}
	for i, m := range cr.ReuseModes {
		c.between(fmt.Sprintf("connReuse.reuseModes[%d]", i), m, 0, 3)
	}
}

// lifecycle checks the lifecycle block.
func (c *checker) lifecycle() {
	lc := c.s.Lifecycle
	if lc == nil {
		return
	}
	c.between("lifecycle.held", lc.Held, 1, 1000)
	c.duration("lifecycle.observe", lc.Observe.Duration, true, "2s")
	if c.s.Topology.Pods == "isolated" {
		c.add("lifecycle", "lifecycle adds endpoints at new pod IPs, which need pods: shared (AnyIP)", "use pods: shared")
	}
}

// syncDisruption checks the syncDisruption block.
func (c *checker) syncDisruption() {
	sd := c.s.SyncDisruption
	if sd == nil {
		return
	}
	c.between("syncDisruption.services", sd.Services, 1, 1000)
	c.between("syncDisruption.probes", sd.Probes, 1, 64)
	c.duration("syncDisruption.timeout", sd.Timeout.Duration, true, "1s")
	c.duration("syncDisruption.slow", sd.Slow.Duration, true, "100ms")
	c.duration("syncDisruption.settle", sd.Settle.Duration, false, "10s")
	c.list("syncDisruption.syncs", sd.Syncs, SyncKinds)
}

func (c *checker) churn() {
	s, ch := c.s, c.s.Churn
	if ch.Rate == 0 && !s.has("churn") {
		return
	}
	if !(ch.Rate > 0 && ch.Rate <= 10000) {
		c.add("churn.rate", fmt.Sprintf("%v is not in (0, 10000] changes per second", ch.Rate), "use a rate such as 10")
	}
	c.duration("churn.duration", ch.Duration.Duration, true, "60s")
	c.duration("churn.grace", ch.Grace.Duration, false, "30s")
	c.oneOf("churn.arrival", ch.Arrival, []string{"poisson", "constant"})
	c.between("churn.probes", ch.Probes, 1, 64)
	m := ch.Mix
	negative := false
	for _, w := range []struct {
		name string
		v    float64
	}{{"endpointAdd", m.EndpointAdd}, {"endpointRemove", m.EndpointRemove}, {"readinessFlip", m.ReadinessFlip},
		{"serviceCreate", m.ServiceCreate}, {"serviceDelete", m.ServiceDelete}} {
		if w.v < 0 {
			c.add("churn.mix."+w.name, fmt.Sprintf("%v is negative", w.v), "use a weight >= 0 (weights are relative)")
			negative = true
		}
	}
	if !negative && m.EndpointAdd+m.EndpointRemove+m.ReadinessFlip+m.ServiceCreate+m.ServiceDelete <= 0 {
		c.add("churn.mix", "weights are all zero", "set for example endpointAdd: 1, endpointRemove: 1, readinessFlip: 1")
	}
}

// failure checks the failure block: down endpoints leave one up.
func (c *checker) failure() {
	s, f, e := c.s, c.s.Failure, c.s.Services.Endpoints
	if f.DownEndpointsPerService == 0 && f.Mode == "" && !s.has("failure") {
		return
	}
	smallest := e.Count
	switch e.Distribution {
	case "uniform":
		smallest = e.Min
	case "zipf":
		smallest = 1
	}
	if f.DownEndpointsPerService < 0 || (f.DownEndpointsPerService > 0 && f.DownEndpointsPerService >= smallest) {
		c.add("failure.downEndpointsPerService", fmt.Sprintf("%d is not in 0..%d (services may have only %d endpoints; one must stay up)", f.DownEndpointsPerService, max(smallest-1, 0), smallest),
			"use fewer down endpoints than the smallest endpoint count")
	}
	c.syncErrors()
	if f.Mode == "" && f.DownEndpointsPerService == 0 {
		return
	}
	if c.oneOf("failure.mode", f.Mode, []string{"reset", "drop"}) && f.Mode == "drop" && s.Traffic.Timeout.Duration <= 250*time.Millisecond {
		c.add("traffic.timeout", fmt.Sprintf("%s is too short for failure mode drop: the userspace proxy's first retry waits 250ms", s.Traffic.Timeout.Duration), `use "2s"`)
	}
}

// syncErrors checks failure.syncErrors: every >= 2 or 0 < rate < 1, not
// both, and churn to run them in.
func (c *checker) syncErrors() {
	s, e := c.s, c.s.Failure.SyncErrors
	const f = "failure.syncErrors"
	if !e.Set() && !s.has(f) {
		return
	}
	if e == nil {
		e = &SyncErrorsSpec{}
	}
	switch {
	case (e.Every != 0 || s.has(f+".every")) && (e.Rate != 0 || s.has(f+".rate")):
		c.add(f, "sets both every and rate", "keep one: every: 20 (every 20th rule-program call fails) or rate: 0.05")
	case e.Every != 0 || s.has(f+".every"):
		c.between(f+".every", e.Every, 2, math.MaxInt32)
	case e.Rate != 0 || s.has(f+".rate"):
		if !(e.Rate > 0 && e.Rate < 1) {
			c.add(f+".rate", fmt.Sprintf("%v is not a probability in (0, 1)", e.Rate), "use a rate such as 0.05")
		}
	default:
		c.add(f, "is empty", "set every: 20 or rate: 0.05")
	}
	if s.Churn.Rate == 0 {
		c.add(f, "has no effect without churn (errors are injected in the churn phase)", "set churn.rate, or remove failure.syncErrors")
	}
}

// sweepPeriods checks sweep.minSyncPeriod.
func (c *checker) sweepPeriods() {
	s := c.s
	for i, d := range s.Sweep.MinSyncPeriod {
		c.duration(fmt.Sprintf("sweep.minSyncPeriod[%d]", i), d.Duration, false, "1s")
	}
	if len(s.Sweep.MinSyncPeriod) > 0 && s.Churn.Rate == 0 {
		c.add("sweep.minSyncPeriod", "has no effect without churn", "set churn.rate (the minSyncPeriod sweep repeats the churn phase)")
	}
}

// gates checks gates (gates.go).
func (c *checker) gates() { c.s.validateGates(c.add) }

// nodeSysctls checks node.sysctls: known keys, whole-number values.
func (c *checker) nodeSysctls() {
	keys := make([]string, 0, len(c.s.Node.Sysctls))
	for k := range c.s.Node.Sysctls {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	known := make([]string, 0, len(NodeSysctlDefaults))
	for k := range NodeSysctlDefaults {
		known = append(known, k)
	}
	slices.Sort(known)
	for _, k := range keys {
		f := "node.sysctls." + k
		if _, ok := NodeSysctlDefaults[k]; !ok {
			fix := "use one of " + strings.Join(known, ", ")
			if n := closest(k, known); n != "" {
				fix = fmt.Sprintf("did you mean %q?", n)
			}
			c.add(f, "is not a node sysctl proxybench sets", fix)
			continue
		}
		v := c.s.Node.Sysctls[k]
		if !wholeRE.MatchString(v) {
			c.add(f, fmt.Sprintf("%q is not a whole number", v), "write a value such as "+NodeSysctlDefaults[k])
			continue
		}
		r := NodeSysctlRanges[k]
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < r[0] || n > r[1] {
			c.add(f, fmt.Sprintf("%s is out of range", v), fmt.Sprintf("use a value from %d to %d (a stock node has %s)", r[0], r[1], NodeSysctlDefaults[k]))
		}
	}
}

var wholeRE = regexp.MustCompile(`^[0-9]{1,10}$`)

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
	if w := e.WithoutEndpoints; w != 0 || s.has(f+"withoutEndpoints") {
		need("withoutEndpoints", w >= 0 && w < 1, fmt.Sprintf("%v is not a share in [0, 1)", w), "use a share such as 0.1 (10% of the services without endpoints)")
	}
	upTo := func(field string, v int) {
		need(field, v <= MaxEndpointsPerService, fmt.Sprintf("%d is more than %d endpoints per service", v, MaxEndpointsPerService), fmt.Sprintf("use at most %d", MaxEndpointsPerService))
	}
	switch e.Distribution {
	case "fixed":
		need("count", e.Count >= 0, fmt.Sprintf("%d is negative", e.Count), "use 0 or more")
		upTo("count", e.Count)
		unused("min", e.Min != 0 || s.has(f+"min"))
		unused("max", e.Max != 0 || s.has(f+"max"))
		unused("s", e.S != 0 || s.has(f+"s"))
		unused("v", e.V != 0 || s.has(f+"v"))
	case "uniform":
		need("min", e.Min >= 1, fmt.Sprintf("%d is below 1", e.Min), "use 1 or more")
		need("max", e.Max >= e.Min, fmt.Sprintf("%d is below min %d", e.Max, e.Min), "use max >= min")
		upTo("min", e.Min)
		upTo("max", e.Max)
		unused("count", e.Count != 0 || s.has(f+"count"))
		unused("s", e.S != 0 || s.has(f+"s"))
		unused("v", e.V != 0 || s.has(f+"v"))
	case "zipf":
		need("s", e.S > 1 && !math.IsInf(e.S, 1), fmt.Sprintf("%v is not a finite number > 1", e.S), "use s > 1, such as 1.5")
		need("v", e.V >= 1 && !math.IsInf(e.V, 1), fmt.Sprintf("%v is not a finite number >= 1", e.V), "use v >= 1, such as 1")
		need("max", e.Max >= 1, fmt.Sprintf("%d is below 1", e.Max), "set max, the largest endpoint count, to 1 or more")
		upTo("max", e.Max)
		unused("count", e.Count != 0 || s.has(f+"count"))
		unused("min", e.Min != 0 || s.has(f+"min"))
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

// topology checks topology.nodes (1..64; the fabric block plus one /30
// per client pod must fit nodeCIDR), endpointOrder, pods (isolated: at
// most MaxIsolatedPods endpoints, no failure injection or churn) and
// clientAddresses (1..4096; the blocks must fit network.clientCIDR,
// disjoint from the other CIDRs).
func (c *checker) topology() {
	s, t := c.s, c.s.Topology
	if s.has("topology.nodes") || t.Nodes != 0 {
		if c.between("topology.nodes", t.Nodes, 1, MaxNodes) && c.nodeOK && t.Nodes > 1 {
			if need := FabricSize(t.Nodes) + 4*int64(t.ClientPods); need > size(c.node) {
				c.add("network.nodeCIDR", fmt.Sprintf("%d nodes and %d client pods need %d addresses (a /%d fabric block and one /30 per client pod) but %s has %d",
					t.Nodes, t.ClientPods, need, 32-bitsFor(FabricSize(t.Nodes)), c.node, size(c.node)),
					fmt.Sprintf("use a /%d or larger nodeCIDR, or fewer nodes or client pods", fitting(need)))
			}
		}
	}
	if t.EndpointOrder != "" || s.has("topology.endpointOrder") {
		c.oneOf("topology.endpointOrder", t.EndpointOrder, []string{"sorted", "shuffled"})
	}
	if (t.Pods != "" || s.has("topology.pods")) && c.oneOf("topology.pods", t.Pods, []string{"shared", "isolated"}) && t.Pods == "isolated" {
		c.isolated()
	}
	if s.has("topology.clientAddresses") || t.ClientAddresses != 0 {
		if c.between("topology.clientAddresses", t.ClientAddresses, 1, 4096) && t.ClientAddresses > 1 {
			c.clientCIDR()
		}
	} else if s.Network.ClientCIDR != "" || s.has("network.clientCIDR") {
		c.prefix("network.clientCIDR", s.Network.ClientCIDR)
	}
}

// isolated checks what pods: isolated excludes.
func (c *checker) isolated() {
	s := c.s
	var n int64
	if s.Services.Count >= 1 && s.Services.Count <= MaxServices && c.distOK {
		n = endpointTotal(s)
	}
	if n > MaxIsolatedPods {
		c.add("topology.pods", fmt.Sprintf("isolated gives each of the %d endpoints a namespace and veth; at most %d are supported", n, MaxIsolatedPods),
			"use pods: shared (AnyIP) for this many endpoints, or fewer services or endpoints")
	}
	if s.Failure.DownEndpointsPerService > 0 {
		c.add("failure.downEndpointsPerService", "failure injection needs pods: shared (it acts in the backend host)", "remove failure or use pods: shared")
	}
	if s.Churn.Rate > 0 {
		c.add("churn.rate", "churn adds endpoints at new pod IPs, which need pods: shared (AnyIP)", "remove churn or use pods: shared")
	}
}

// clientCIDR checks that every client pod's address block fits
// network.clientCIDR, disjoint from the other CIDRs.
func (c *checker) clientCIDR() {
	s, t := c.s, c.s.Topology
	cl, ok := c.prefix("network.clientCIDR", s.ClientPrefixString())
	if !ok {
		return
	}
	need := int64(nextPow2(t.ClientAddresses)) * int64(t.ClientPods)
	if need > size(cl) {
		c.add("network.clientCIDR", fmt.Sprintf("%d client pods × %d addresses (blocks of %d) need %d addresses but %s has %d",
			t.ClientPods, t.ClientAddresses, nextPow2(t.ClientAddresses), need, cl, size(cl)),
			fmt.Sprintf("use a /%d or larger clientCIDR, or fewer addresses", fitting(need)))
	}
	for _, o := range []struct{ name, v string }{{"serviceCIDR", s.Network.ServiceCIDR}, {"podCIDR", s.Network.PodCIDR}, {"nodeCIDR", s.Network.NodeCIDR}} {
		if q, err := netip.ParsePrefix(o.v); err == nil && q.Overlaps(cl) {
			c.add("network.clientCIDR", fmt.Sprintf("%s overlaps %s %s", cl, o.name, q), "pick a range disjoint from "+o.name)
		}
	}
}

// weights checks services.endpoints.weights: a list of 1..256, or a
// uniform distribution on [min, max] within 1..256.
func (c *checker) weights() {
	w := c.s.Services.Endpoints.Weights
	if w == nil {
		return
	}
	const f = "services.endpoints.weights"
	switch {
	case !w.Set():
		c.add(f, "is empty", "set list: [1, 2, 3] or distribution: uniform with min and max")
	case len(w.List) > 0 && (w.Distribution != "" || w.Min != 0 || w.Max != 0):
		c.add(f, "sets both list and a distribution", "keep either list or distribution/min/max")
	case len(w.List) > 0:
		for i, v := range w.List {
			c.between(fmt.Sprintf("%s.list[%d]", f, i), v, 1, 256)
		}
	default:
		if c.oneOf(f+".distribution", w.Distribution, []string{"uniform"}) {
			if c.between(f+".min", w.Min, 1, 256) && c.between(f+".max", w.Max, 1, 256) && w.Max < w.Min {
				c.add(f+".max", fmt.Sprintf("%d is below min %d", w.Max, w.Min), "use max >= min")
			}
		}
	}
}

// sweepSchedulers checks sweep.schedulers: distinct IPVS schedulers, with
// mode ipvs measured.
func (c *checker) sweepSchedulers() {
	s := c.s
	for i, sch := range s.Sweep.Schedulers {
		f := fmt.Sprintf("sweep.schedulers[%d]", i)
		if j := slices.Index(s.Sweep.Schedulers, sch); j < i {
			c.add(f, fmt.Sprintf("%q is listed twice", sch), "remove the duplicate")
		} else {
			c.oneOf(f, sch, IPVSSchedulers)
		}
	}
	if sched := c.schedulerModes(); len(s.Sweep.Schedulers) > 0 && len(sched) > 0 && !slices.ContainsFunc(s.Modes, func(m string) bool { return slices.Contains(sched, m) }) {
		c.add("sweep.schedulers", "has no effect without mode "+strings.Join(sched, " or "), "add "+strings.Join(sched, " or ")+" to modes or remove sweep.schedulers")
	}
}

// schedulerModes is the catalog's Schedulers (nil without a catalog).
func (c *checker) schedulerModes() []string {
	if c.cat == nil {
		return nil
	}
	return c.cat.Schedulers
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

// implementation checks implementation and kubeProxy: known names, modes
// kube-proxy has, and what implementation kube-proxy does not run yet
// (the sim, several nodes, the phases that drive a proxier directly).
func (c *checker) implementation() {
	s := c.s
	if len(s.Implementation) == 0 && !s.has("implementation") {
		if s.has("kubeProxy") {
			c.add("kubeProxy", "is set but no mode runs with kube-proxy", "add implementation: [builtin, kube-proxy] (or --implementation builtin,kube-proxy), or remove kubeProxy")
		}
		return
	}
	c.list("implementation", s.Implementation, []string{ImplBuiltin, ImplKubeProxy})
	if !contains(s.Implementation, ImplKubeProxy) {
		if s.has("kubeProxy") {
			c.add("kubeProxy", "is set but implementation does not list kube-proxy", "add kube-proxy to implementation, or remove kubeProxy")
		}
		return
	}
	before := len(c.errs)
	for i, m := range s.KubeProxy.Modes {
		f := fmt.Sprintf("kubeProxy.modes[%d]", i)
		switch {
		case !contains(KubeProxyModes, m):
			c.add(f, fmt.Sprintf("kube-proxy has no mode %q", m), "use one of "+strings.Join(KubeProxyModes, ", "))
		case !contains(s.Modes, m):
			c.add(f, fmt.Sprintf("mode %q is not in modes", m), "add it to modes, or remove it here")
		case slices.Index(s.KubeProxy.Modes, m) < i:
			c.add(f, fmt.Sprintf("%q is listed twice", m), "remove the duplicate")
		}
	}
	if !s.UsesKubeProxy() {
		if len(c.errs) > before {
			return // kubeProxy.modes named no mode kube-proxy can run: said above
		}
		c.add("implementation", "lists kube-proxy, but no mode of modes runs with it (kube-proxy has "+strings.Join(KubeProxyModes, ", ")+")", "add one of them to modes (and kubeProxy.modes), or remove kube-proxy")
		return
	}
	if !contains(s.Implementation, ImplBuiltin) {
		for i, m := range s.Modes {
			switch {
			case m == BaselineMode: // the baseline runs as builtin
			case !contains(KubeProxyModes, m):
				c.add(fmt.Sprintf("modes[%d]", i), fmt.Sprintf("mode %s has no kube-proxy implementation (kube-proxy has %s) and implementation lists only kube-proxy", m, strings.Join(KubeProxyModes, ", ")),
					"add builtin to implementation, or remove the mode")
			case !s.KubeProxyRuns(m):
				c.add(fmt.Sprintf("modes[%d]", i), fmt.Sprintf("mode %s is not in kubeProxy.modes, so it would run with builtin, which implementation (only kube-proxy) does not list", m),
					"add it to kubeProxy.modes, add builtin to implementation, or remove the mode")
			}
		}
	}
	if s.has("kubeProxy.binaries") && len(s.KubeProxy.Binaries) == 0 {
		c.add("kubeProxy.binaries", "is an empty list", "list kube-proxy binaries, e.g. [bin/kube-proxy], or remove the line to use bin/kube-proxy")
	}
	for i, b := range s.KubeProxy.Binaries {
		f := fmt.Sprintf("kubeProxy.binaries[%d]", i)
		if b == "" {
			c.add(f, "is empty", "give the path of a kube-proxy binary")
		} else if slices.Index(s.KubeProxy.Binaries, b) < i {
			c.add(f, fmt.Sprintf("%q is listed twice", b), "remove the duplicate")
		}
	}
	if s.KubeProxy.Verbosity != 0 || s.has("kubeProxy.verbosity") {
		c.between("kubeProxy.verbosity", s.KubeProxy.Verbosity, 0, 10)
	}
	if c.cat != nil && c.cat.KubeProxyConfig != nil {
		for _, e := range c.cat.KubeProxyConfig(s) {
			c.add(e.Field, e.Msg, e.Fix)
		}
	}
	if s.has("kubeProxy.firstSyncTimeout") {
		c.duration("kubeProxy.firstSyncTimeout", s.KubeProxy.FirstSyncTimeout.Duration, true, "30m")
	}
	if s.Topology.NodeCount() > 1 {
		if len(s.Sweep.MinSyncPeriod) > 0 {
			c.add("sweep.minSyncPeriod", "not yet with implementation kube-proxy on several nodes (topology.nodes > 1): a swept minSyncPeriod restarts node-0's kube-proxy only", "run the sweep on one node, or drop it here")
		}
		// Two pieces that landed apart (session 8) and were not run
		// together: a kube-proxy sweep grows and waits on node-0's
		// kube-proxy, and the syncErrors wrappers are counted on node-0's.
		if len(s.Sweep.Services) > 0 {
			c.add("sweep.services", "not yet with implementation kube-proxy on several nodes (topology.nodes > 1): a kube-proxy sweep waits for node-0's kube-proxy only", "run the sweep on one node, or drop it here")
		}
		if s.Failure.SyncErrors.Set() {
			c.add("failure.syncErrors", "not yet with implementation kube-proxy on several nodes (topology.nodes > 1): the wrappers' calls are counted on node-0's kube-proxy only", "inject sync errors on one node, or drop it here")
		}
		c.kubeProxyNodesCheck()
	}
}
