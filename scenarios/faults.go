package scenarios

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"time"
)

// FaultsSpec holds the fault phases users meet in production (issue 27),
// each a phase of its own that runs when its block is set. This file
// defines the out-of-band and slice-churn faults; the process faults
// (API outage, restart, crash) are in faults_process.go.
type FaultsSpec struct {
	// APIOutage stops a control-plane component while endpoints change
	// (APIOutageSpec; kube-proxy rows only; faults_process.go).
	APIOutage *APIOutageSpec `yaml:"apiOutage,omitempty" json:"apiOutage,omitempty"`
	// Restart restarts the proxy (as a DaemonSet rolls) while TCP
	// connections are held and UDP clients send (RestartSpec).
	Restart *RestartSpec `yaml:"restart,omitempty" json:"restart,omitempty"`
	// Crash kills the proxy with SIGKILL and restarts it after a
	// CrashLoopBackOff back-off (CrashSpec).
	Crash *CrashSpec `yaml:"crash,omitempty" json:"crash,omitempty"`
	// OutOfBand, when set, changes each row's rules behind the proxy's
	// back (OutOfBandSpec) and times the proxy's repair.
	OutOfBand *OutOfBandSpec `yaml:"outOfBand,omitempty" json:"outOfBand,omitempty"`
	// SliceChurn, when set, deletes each kube-proxy row's EndpointSlices
	// and re-creates them under new names (endpoints unchanged) at
	// SliceChurn.Churn slices/s for SliceChurn.Duration (default 30m),
	// sampled and streamed like the soak (its fields and defaults, the
	// duration's aside), for kube-proxy's memory slope under slice churn.
	// kube-proxy rows only: a builtin proxier has no EndpointSlices.
	SliceChurn *SoakSpec `yaml:"sliceChurn,omitempty" json:"sliceChurn,omitempty"`
}

// The out-of-band changes (OutOfBandSpec.Changes).
const (
	// OOBServiceChain deletes one service's KUBE-SVC-* chain of the nat
	// table (its KUBE-SERVICES jump first, as the kernel refuses to
	// delete a chain still jumped to): iptables.
	OOBServiceChain = "serviceChain"
	// OOBCanary deletes a service's chain as OOBServiceChain and, as a
	// firewall reload does, kube-proxy's KUBE-PROXY-CANARY chain of the
	// mangle table, which kube-proxy's iptables monitor polls every
	// syncPeriod (pkg/util/iptables Monitor) and answers with a full
	// sync: iptables, kube-proxy rows (builtin keeps no canary).
	OOBCanary = "canary"
	// OOBMapElement deletes one service's element of the service-ips
	// verdict map (nft delete element): nftables.
	OOBMapElement = "mapElement"
	// OOBRealServer deletes one real server of one service's IPVS
	// virtual server: ipvs.
	OOBRealServer = "realServer"
	// OOBVirtualServer adds a virtual server at an unused address inside
	// network.serviceCIDR, which the proxy owns and removes: ipvs.
	OOBVirtualServer = "virtualServer"
	// OOBExcludedVirtualServer adds a virtual server inside the first of
	// ipvs.excludeCIDRs, which a sync must leave alone (kube-proxy's
	// cleanLegacyService skips excluded addresses), with a witness inside
	// the service CIDR whose removal shows a sync ran: ipvs, with
	// ipvs.excludeCIDRs set.
	OOBExcludedVirtualServer = "excludedVirtualServer"
)

// OOBChange is what one out-of-band change needs: the mode whose objects
// it touches and the implementations that have them.
type OOBChange struct {
	Name string
	Mode string
	// KubeProxyOnly: builtin rows do not have the object (the canary).
	KubeProxyOnly bool
	// What says in a phrase what the change does (reports, errors).
	What string
}

// OOBChanges lists every out-of-band change, in the order a row runs them.
var OOBChanges = []OOBChange{
	{Name: OOBServiceChain, Mode: "iptables", What: "delete a service's KUBE-SVC chain (and its KUBE-SERVICES jump)"},
	{Name: OOBCanary, Mode: "iptables", KubeProxyOnly: true, What: "delete a service's KUBE-SVC chain and the mangle KUBE-PROXY-CANARY chain (a firewall reload)"},
	{Name: OOBMapElement, Mode: "nftables", What: "delete a service's element of the service-ips verdict map"},
	{Name: OOBRealServer, Mode: "ipvs", What: "delete a real server of a service's IPVS virtual server"},
	{Name: OOBVirtualServer, Mode: "ipvs", What: "add an IPVS virtual server inside the service CIDR"},
	{Name: OOBExcludedVirtualServer, Mode: "ipvs", What: "add an IPVS virtual server inside ipvs.excludeCIDRs"},
}

// OOBChangeOf returns the change named name.
func OOBChangeOf(name string) (OOBChange, bool) {
	for _, c := range OOBChanges {
		if c.Name == name {
			return c, true
		}
	}
	return OOBChange{}, false
}

// OutOfBandSpec configures the out-of-band phase: each change a row's
// mode and implementation have (its mode's list) is made once, on its
// own service, after the proxy is in sync; the phase polls the kernel
// object every Poll and probes the service, until the proxy has
// repaired it (a deletion put back, a foreign virtual server removed) or
// Timeout has passed. The repair comes from the proxy's own resync: a
// builtin row's sync loop (the mode's syncPeriod) and kube-proxy's (its
// syncPeriod, canary monitor and FullSyncPeriod), so the scenario's
// syncPeriod sets how long the phase takes. A change not repaired within
// Timeout is put back by the phase (the kernel object as the proxy wrote
// it), so the next one starts from a programmed node.
type OutOfBandSpec struct {
	// IPTables, NFTables and IPVS are the changes of each mode's rows
	// (OOBChanges' names of that mode). Unset: every change of the mode
	// the row has (canary on kube-proxy rows only; excludedVirtualServer
	// only with ipvs.excludeCIDRs); [] : none. A mode the scenario does
	// not run ignores its list.
	IPTables []string `yaml:"iptables,omitempty" json:"iptables,omitempty"`
	NFTables []string `yaml:"nftables,omitempty" json:"nftables,omitempty"`
	IPVS     []string `yaml:"ipvs,omitempty" json:"ipvs,omitempty"`
	// Timeout bounds the wait for each repair (default 1m): 1s..2h.
	Timeout Duration `yaml:"timeout" json:"timeout"`
	// Poll is the time between two reads of the kernel object and two
	// probes (default 200ms): 10ms..10s.
	Poll Duration `yaml:"poll" json:"poll"`
	// ExcludeCIDRs says whether the scenario sets ipvs.excludeCIDRs (the
	// IPVS default list), set by SetDefaults; never from YAML.
	ExcludeCIDRs bool `yaml:"-" json:"-"`
}

// list is mode's list and its field: the field whose YAML name is the
// mode's name (faults.outOfBand.<mode>); nil and "" for a mode without
// one.
func (o *OutOfBandSpec) list(mode string) ([]string, string) {
	v := reflect.ValueOf(o).Elem()
	for i := range v.NumField() {
		tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
		if l, ok := v.Field(i).Interface().([]string); ok && tag == mode {
			return l, "faults.outOfBand." + tag
		}
	}
	return []string{}, ""
}

// Wants reports whether row (mode, impl) makes change c.
func (o *OutOfBandSpec) Wants(c OOBChange, mode, impl string) bool {
	if c.Mode != mode || (c.KubeProxyOnly && impl != ImplKubeProxy) {
		return false
	}
	l, _ := o.list(mode)
	if l == nil {
		return c.Name != OOBExcludedVirtualServer || o.ExcludeCIDRs
	}
	return slices.Contains(l, c.Name)
}

// setFaultsDefaults fills the faults blocks' unset fields (SetDefaults).
func (s *Scenario) setFaultsDefaults() {
	f := s.Faults
	if f == nil {
		return
	}
	if o := f.OutOfBand; o != nil {
		if o.Timeout.Duration == 0 && !s.has("faults.outOfBand.timeout") {
			o.Timeout.Duration = time.Minute
		}
		if o.Poll.Duration == 0 && !s.has("faults.outOfBand.poll") {
			o.Poll.Duration = 200 * time.Millisecond
		}
		o.ExcludeCIDRs = len(s.IPVS.ExcludeCIDRs) > 0
	}
	s.soakDefaults("faults.sliceChurn", f.SliceChurn, 30*time.Minute)
}

// OutOfBandProblems checks faults.outOfBand: every change listed is
// known and a change of the list's mode (an IPVS real-server deletion
// under iptables is refused), listed once; the canary needs kube-proxy
// rows of iptables, excludedVirtualServer ipvs.excludeCIDRs; some row of
// the scenario has a change; timeout and poll are in range.
func OutOfBandProblems(s *Scenario) []*FieldError {
	if s.Faults == nil || s.Faults.OutOfBand == nil {
		return nil
	}
	o := s.Faults.OutOfBand
	var out []*FieldError
	add := func(field, msg, fix string) { out = append(out, &FieldError{Field: field, Msg: msg, Fix: fix}) }
	names := make([]string, len(OOBChanges))
	for i, c := range OOBChanges {
		names[i] = c.Name
	}
	for _, mode := range []string{"iptables", "nftables", "ipvs"} {
		l, path := o.list(mode)
		seen := map[string]bool{}
		for i, name := range l {
			field := fmt.Sprintf("%s[%d]", path, i)
			c, ok := OOBChangeOf(name)
			switch {
			case !ok:
				add(field, fmt.Sprintf("unknown out-of-band change %q", name), "use one of "+strings.Join(names, ", "))
			case c.Mode != mode:
				add(field, fmt.Sprintf("%s (%s) is a change of mode %s: mode %s has no such object", name, c.What, c.Mode, mode),
					fmt.Sprintf("list it under faults.outOfBand.%s, or remove it", c.Mode))
			case seen[name]:
				add(field, fmt.Sprintf("%s is listed twice", name), "list each change once")
			case c.KubeProxyOnly && slices.Contains(s.Modes, mode) && !s.KubeProxyRuns(mode):
				add(field, fmt.Sprintf("%s needs kube-proxy's iptables canary chain, which a builtin row does not keep, and no %s row runs with implementation kube-proxy", name, mode),
					"add kube-proxy to implementation, or remove "+name)
			case name == OOBExcludedVirtualServer && len(s.IPVS.ExcludeCIDRs) == 0:
				add(field, "excludedVirtualServer adds a virtual server inside ipvs.excludeCIDRs, which is empty",
					"set ipvs.excludeCIDRs (such as [198.19.250.0/24], outside the service and pod CIDRs), or remove "+name)
			case name == OOBExcludedVirtualServer:
				if p, err := netip.ParsePrefix(s.IPVS.ExcludeCIDRs[0]); err == nil && p.Bits() > 30 {
					add("ipvs.excludeCIDRs[0]", fmt.Sprintf("%s holds no usable address for excludedVirtualServer's virtual server", p), "use a prefix of /30 or shorter")
				}
			}
			seen[name] = true
		}
	}
	some := false
	for _, m := range s.Modes {
		for _, impl := range s.Implementations(m) {
			for _, c := range OOBChanges {
				some = some || o.Wants(c, m, impl)
			}
		}
	}
	if !some && len(out) == 0 { // a bad entry above says it already
		add("faults.outOfBand", fmt.Sprintf("no row of the scenario (modes: %s) has an out-of-band change to make", strings.Join(s.Modes, ", ")),
			"run iptables, nftables or ipvs (each has its changes), or remove faults.outOfBand")
	}
	if t := o.Timeout.Duration; t < time.Second || t > 2*time.Hour {
		add("faults.outOfBand.timeout", fmt.Sprintf("%s is out of range", t), "use 1s..2h, longer than the proxy's syncPeriod (such as 1m)")
	}
	if p := o.Poll.Duration; p < 10*time.Millisecond || p > 10*time.Second {
		add("faults.outOfBand.poll", fmt.Sprintf("%s is out of range", p), "use 10ms..10s, such as 200ms")
	}
	return out
}

// SliceChurnProblems checks faults.sliceChurn: the soak block's checks
// at its own path, and kube-proxy rows only (a builtin proxier has no
// EndpointSlices to rename).
func SliceChurnProblems(s *Scenario) []*FieldError {
	if s.Faults == nil || s.Faults.SliceChurn == nil {
		return nil
	}
	out := soakProblems("faults.sliceChurn", s.Faults.SliceChurn)
	for _, m := range s.Modes {
		if m == BaselineMode {
			continue
		}
		if slices.Contains(s.Implementations(m), ImplBuiltin) {
			out = append(out, &FieldError{Field: "faults.sliceChurn",
				Msg: fmt.Sprintf("mode %s runs a builtin row, which has no EndpointSlices to delete and re-create (it takes services, not API objects)", m),
				Fix: "set implementation: [kube-proxy] in a scenario of its own (scenarios/slice-churn.yaml), or drop faults.sliceChurn here"})
			break
		}
	}
	return out
}

// faults checks the faults blocks (OutOfBandProblems, SliceChurnProblems).
func (c *checker) faults() {
	for _, e := range append(OutOfBandProblems(c.s), SliceChurnProblems(c.s)...) {
		c.add(e.Field, e.Msg, e.Fix)
	}
}
