package kubeproxy

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-proxy/config/v1alpha1"
	sjson "sigs.k8s.io/json"

	"github.com/proxybench/proxybench/scenarios"
)

// CheckConfig checks, before anything is created, the kube-proxy
// configuration sc gives (scenarios.Catalog.KubeProxyConfig): every
// kubeProxy.config field must be a KubeProxyConfiguration field of
// kubeproxy.config.k8s.io/v1alpha1 (k8s.io/kube-proxy/config/v1alpha1, the
// version kube-proxy reads) with a value of its type, decoded strictly
// (sigs.k8s.io/json, the decoder behind apimachinery's strict decoding:
// case-sensitive, no unknown or duplicate field). kube-proxy itself
// accepts an unknown field with only a warning in its log ("Using lenient
// decoding as strict decoding failed", cmd/kube-proxy/app/options.go), so
// a misspelt field would silently do nothing; a bad duration fails its
// start. No Owned field may be set. Then the values kube-proxy's
// validation (pkg/proxy/apis/config/validation) refuses at start, for
// every mode kube-proxy runs: sync periods (after kube-proxy's defaults:
// syncPeriod 0 means 30s, minSyncPeriod 0 means 1s for iptables and
// nftables) with syncPeriod > 0, 0 ≤ minSyncPeriod ≤ syncPeriod;
// masqueradeBit in 0..31; oomScoreAdj in -1000..1000; IPVS timeouts ≥ 0;
// excludeCIDRs and nodePortAddresses CIDRs (or primary, localhost, all);
// detectLocalMode and the detectLocal field it needs;
// clientConnection.burst ≥ 0; configSyncPeriod ≥ 0; and ipvs.scheduler one
// the kernel ships (scenarios.IPVSSchedulers; kube-proxy passes it to the
// kernel, which refuses every virtual server of an unknown one).
//
// Each problem is a *scenarios.FieldError with Field (the scenario path,
// "kubeProxy.config.iptables.minSyncPeriod"), Msg and Fix set; the caller
// adds Source and Line. Nil when sc runs no kube-proxy.
func CheckConfig(sc *scenarios.Scenario) []*scenarios.FieldError {
	if !sc.UsesKubeProxy() {
		return nil
	}
	const prefix = "kubeProxy.config."
	var out []*scenarios.FieldError
	add := func(path, msg, fix string) {
		for _, e := range out {
			if e.Field == path && e.Msg == msg {
				return
			}
		}
		out = append(out, &scenarios.FieldError{Field: path, Msg: msg, Fix: fix})
	}
	cfg := map[string]any(sc.KubeProxy.Config)
	for _, f := range Owned {
		if has(cfg, strings.Split(f, ".")) {
			fix := "remove it from kubeProxy.config; the result lists the value the testbed set"
			if f == "clusterCIDR" {
				fix += " (to change it, set network.clusterCIDR: the testbed passes that to kube-proxy)"
			}
			add(prefix+f, "is set by the testbed (it ties kube-proxy to the fake node, its API server and listeners, or keeps it from writing a global sysctl; docs/kube-proxy.md, \"Testbed-owned kube-proxy fields\")", fix)
		}
	}
	decoded := true
	for _, l := range leaves(cfg, nil) {
		if isOwned(l.path) {
			continue
		}
		if p, msg, fix := decodeLeaf(l); msg != "" {
			add(prefix+p, msg, fix)
			decoded = false
		}
	}
	if !decoded {
		return out
	}
	// Every leaf decodes on its own, so the whole does.
	var kc v1alpha1.KubeProxyConfiguration
	b, err := json.Marshal(cfg)
	if err == nil {
		_, err = sjson.UnmarshalStrict(b, &kc)
	}
	if err != nil {
		add("kubeProxy.config", "cannot be read as a KubeProxyConfiguration: "+err.Error(), "correct the field it names")
		return out
	}
	for _, p := range checkValues(sc, cfg, &kc) {
		add(p.Field, p.Msg, p.Fix)
	}
	return out
}

func isOwned(path []string) bool {
	for i := range path {
		if slices.Contains(Owned, strings.Join(path[:i+1], ".")) {
			return true
		}
	}
	return false
}

type leaf struct {
	path []string
	v    any
}

// leaves lists the values of m that are not mappings (and the empty
// mappings), with their paths, in key order.
func leaves(m map[string]any, path []string) []leaf {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []leaf
	for _, k := range keys {
		p := append(slices.Clone(path), k)
		if sub, ok := m[k].(map[string]any); ok && len(sub) > 0 {
			out = append(out, leaves(sub, p)...)
			continue
		}
		out = append(out, leaf{p, m[k]})
	}
	return out
}

// decodeLeaf decodes the one field l alone into a KubeProxyConfiguration,
// so that an error names its field (a bad duration's error does not). It
// returns the dotted path of the field at fault (an unknown field may be
// a parent of l), the message and the fix; msg is "" when l decodes.
func decodeLeaf(l leaf) (path, msg, fix string) {
	path = strings.Join(l.path, ".")
	doc := any(l.v)
	for i := len(l.path) - 1; i >= 0; i-- {
		doc = map[string]any{l.path[i]: doc}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return path, fmt.Sprintf("cannot be read (%v)", err), "write it as key: value lines with string keys"
	}
	var kc v1alpha1.KubeProxyConfiguration
	strict, err := sjson.UnmarshalStrict(b, &kc)
	if err != nil {
		want, example := describeField(l.path)
		return path, fmt.Sprintf("want %s, got %s (kube-proxy would not start: %v)", want, describeValue(l.v), err), "write " + example
	}
	// The first strict error is reported (one field is checked at a time).
	if len(strict) > 0 {
		s := strict[0]
		p := path
		if fe, ok := s.(sjson.FieldError); ok && fe.FieldPath() != "" {
			p = fe.FieldPath()
		}
		parts := strings.Split(p, ".")
		names := fieldNames(parts[:len(parts)-1])
		where := "KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1)"
		if len(parts) > 1 {
			where += " block " + strings.Join(parts[:len(parts)-1], ".")
		}
		if strings.Contains(s.Error(), "duplicate field") {
			return p, "duplicate field", "keep one of them"
		}
		if c := scenarios.Closest(parts[len(parts)-1], names); c != "" {
			return p, fmt.Sprintf("unknown field of %s (did you mean %q? kube-proxy would ignore it with a warning)", where, c), fmt.Sprintf("rename it to %q", c)
		}
		return p, fmt.Sprintf("unknown field of %s (kube-proxy would ignore it with a warning)", where), "remove it; fields there: " + strings.Join(names, ", ")
	}
	return "", "", ""
}

var kubeProxyConfigType = reflect.TypeFor[v1alpha1.KubeProxyConfiguration]()

// fieldType follows path (JSON names) from KubeProxyConfiguration; nil
// when a step is not a field.
func fieldType(path []string) reflect.Type {
	t := kubeProxyConfigType
	for _, p := range path {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Map:
			t = t.Elem()
			continue
		case reflect.Struct:
		default:
			return nil
		}
		f, ok := jsonField(t, p)
		if !ok {
			return nil
		}
		t = f.Type
	}
	return t
}

// jsonField finds the field named name in JSON (embedded structs
// included).
func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && tag == "" {
			if sf, ok := jsonField(f.Type, name); ok {
				return sf, true
			}
			continue
		}
		if tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// fieldNames lists the JSON field names of the struct at path.
func fieldNames(path []string) []string {
	t := fieldType(path)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case f.Anonymous && tag == "":
				walk(f.Type)
			case tag != "" && tag != "-":
				out = append(out, tag)
			}
		}
	}
	walk(t)
	sort.Strings(out)
	return out
}

var durationType = reflect.TypeFor[metav1.Duration]()

// describeField says what the field at path holds, and an example.
func describeField(path []string) (want, example string) {
	t := fieldType(path)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	name := path[len(path)-1]
	switch {
	case t == nil:
		return "a valid value", "a value of the field's type (see KubeProxyConfiguration in k8s.io/kube-proxy/config/v1alpha1)"
	case t == durationType:
		return "a duration", name + ": 1s (a Go duration: 500ms, 1s, 2m30s)"
	case t.Kind() == reflect.Bool:
		return "true or false", name + ": true"
	case t.Kind() == reflect.Int32 || t.Kind() == reflect.Int64 || t.Kind() == reflect.Int:
		return "an integer", name + ": 1"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "a number", name + ": 5"
	case t.Kind() == reflect.String:
		return "a string", name + ": \"...\""
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.String:
		return "a list of strings", name + ": [a, b]"
	case t.Kind() == reflect.Slice:
		return "a list of " + t.Elem().String(), name + ": [...]"
	case t.Kind() == reflect.Map:
		return "a mapping", name + ": {key: value}"
	case t.Kind() == reflect.Struct:
		return "a mapping of fields", name + ": {field: value} (fields: " + strings.Join(fieldNames(path), ", ") + ")"
	}
	return "a value of type " + t.String(), "a value of that type"
}

func describeValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "no value"
	case string:
		return fmt.Sprintf("%q", v)
	case map[string]any:
		return "a mapping"
	case []any:
		for _, e := range v {
			switch e.(type) {
			case []any:
				return "a list holding a list"
			case map[string]any:
				return "a list holding a mapping"
			}
		}
		return "a list"
	}
	return fmt.Sprint(v)
}

// checkValues checks the decoded kc (and the mode blocks merged over
// sc's own) for the values kube-proxy refuses at start.
func checkValues(sc *scenarios.Scenario, cfg map[string]any, kc *v1alpha1.KubeProxyConfiguration) []*scenarios.FieldError {
	const prefix = "kubeProxy.config."
	var out []*scenarios.FieldError
	add := func(field, msg, fix string) {
		out = append(out, &scenarios.FieldError{Field: prefix + field, Msg: msg, Fix: fix})
	}
	set := func(path string) bool { return has(cfg, strings.Split(path, ".")) }

	// Sync periods of each mode kube-proxy runs, after its defaults.
	for _, m := range scenarios.KubeProxyModes {
		if !sc.KubeProxyRuns(m) {
			continue
		}
		var own scenarios.Duration
		var ownMin scenarios.Duration
		var sync, minSync metav1.Duration
		defMin := time.Second
		switch m {
		case "iptables":
			own, ownMin, sync, minSync = sc.IPTables.SyncPeriod, sc.IPTables.MinSyncPeriod, kc.IPTables.SyncPeriod, kc.IPTables.MinSyncPeriod
		case "nftables":
			own, ownMin, sync, minSync = sc.NFTables.SyncPeriod, sc.NFTables.MinSyncPeriod, kc.NFTables.SyncPeriod, kc.NFTables.MinSyncPeriod
		case "ipvs":
			own, ownMin, sync, minSync = sc.IPVS.SyncPeriod, sc.IPVS.MinSyncPeriod, kc.IPVS.SyncPeriod, kc.IPVS.MinSyncPeriod
			defMin = 0
		}
		s, mn := own.Duration, ownMin.Duration
		sField, mField := m+".syncPeriod", m+".minSyncPeriod"
		sBlame, mBlame := "", ""
		if set(sField) {
			s, sBlame = sync.Duration, prefix+sField
		}
		if set(mField) {
			mn, mBlame = minSync.Duration, prefix+mField
		}
		if s == 0 {
			s = 30 * time.Second
		}
		if mn == 0 {
			mn = defMin
		}
		switch {
		case sBlame != "" && s < 0:
			add(sField, fmt.Sprintf("%s is negative (kube-proxy wants syncPeriod > 0)", s), "use a positive duration such as 30s, or remove it")
		case mBlame != "" && mn < 0:
			add(mField, fmt.Sprintf("%s is negative (kube-proxy wants minSyncPeriod ≥ 0)", mn), "use 0s or more, e.g. 1s, or remove it")
		case mn > s && (sBlame != "" || mBlame != ""):
			f := mField
			if mBlame == "" {
				f = sField
			}
			add(f, fmt.Sprintf("mode %s would sync with minSyncPeriod %s > syncPeriod %s (the scenario's %s block with kubeProxy.config over it; kube-proxy refuses it)", m, mn, s, m),
				"make minSyncPeriod at most syncPeriod")
		case mn > s:
			// The scenario's own block, which kube-proxy gets too.
			out = append(out, &scenarios.FieldError{Field: mField, Msg: fmt.Sprintf("%s is above %s.syncPeriod %s, which kube-proxy refuses (it runs mode %s here)", mn, m, s, m),
				Fix: "make minSyncPeriod at most syncPeriod"})
		}
		// The churn phase restarts kube-proxy with each swept value
		// (UseMinSyncPeriod), which kube-proxy validates as its own.
		if sc.Churn.Rate > 0 && s > 0 {
			for i, v := range sc.Sweep.MinSyncPeriod {
				if eff := KubeProxyMinSync(m, v.Duration); eff > s {
					out = append(out, &scenarios.FieldError{Field: fmt.Sprintf("sweep.minSyncPeriod[%d]", i),
						Msg: fmt.Sprintf("%s is above syncPeriod %s of mode %s, which kube-proxy refuses (its churn phase restarts kube-proxy with each value)", v.Duration, s, m),
						Fix: fmt.Sprintf("use at most %s, or raise %s.syncPeriod", s, m)})
				}
			}
		}
	}
	bit := func(field string, b *int32) {
		if b != nil && (*b < 0 || *b > 31) {
			add(field, fmt.Sprintf("%d is out of range (a bit of the 32-bit packet mark)", *b), "use 0..31 (default 14)")
		}
	}
	bit("iptables.masqueradeBit", kc.IPTables.MasqueradeBit)
	bit("nftables.masqueradeBit", kc.NFTables.MasqueradeBit)
	if v := kc.OOMScoreAdj; v != nil && (*v < -1000 || *v > 1000) {
		add("oomScoreAdj", fmt.Sprintf("%d is out of range", *v), "use -1000..1000 (default -999)")
	}
	for _, d := range []struct {
		f string
		v time.Duration
	}{{"ipvs.tcpTimeout", kc.IPVS.TCPTimeout.Duration}, {"ipvs.tcpFinTimeout", kc.IPVS.TCPFinTimeout.Duration}, {"ipvs.udpTimeout", kc.IPVS.UDPTimeout.Duration}, {"configSyncPeriod", kc.ConfigSyncPeriod.Duration}} {
		if d.v < 0 {
			add(d.f, fmt.Sprintf("%s is negative", d.v), "use 0s (leave as is / kube-proxy's default) or a positive duration")
		}
	}
	if kc.IPVS.Scheduler != "" && !slices.Contains(scenarios.IPVSSchedulers, kc.IPVS.Scheduler) {
		fix := "use one of " + strings.Join(scenarios.IPVSSchedulers, ", ")
		if c := scenarios.Closest(kc.IPVS.Scheduler, scenarios.IPVSSchedulers); c != "" {
			fix = fmt.Sprintf("did you mean %q? (schedulers: %s)", c, strings.Join(scenarios.IPVSSchedulers, ", "))
		}
		add("ipvs.scheduler", fmt.Sprintf("no IPVS scheduler %q in the kernel (kube-proxy passes it on; every virtual server would be refused)", kc.IPVS.Scheduler), fix)
	}
	for i, c := range kc.IPVS.ExcludeCIDRs {
		if _, err := netip.ParsePrefix(c); err != nil {
			add(fmt.Sprintf("ipvs.excludeCIDRs[%d]", i), fmt.Sprintf("%q is not a CIDR", c), "write a CIDR such as 10.0.0.0/8")
		}
	}
	keywords := []string{"primary", "localhost", "all"}
	for i, a := range kc.NodePortAddresses {
		f := fmt.Sprintf("nodePortAddresses[%d]", i)
		if slices.Contains(keywords, a) {
			if slices.Index(kc.NodePortAddresses, a) < i {
				add(f, fmt.Sprintf("%q is listed twice", a), "remove the duplicate")
			}
			continue
		}
		if _, err := netip.ParsePrefix(a); err != nil {
			add(f, fmt.Sprintf("%q is neither a CIDR nor one of %s", a, strings.Join(keywords, ", ")), "write a CIDR such as 198.18.0.0/15, or primary")
		}
	}
	localModes := []string{"ClusterCIDR", "NodeCIDR", "BridgeInterface", "InterfaceNamePrefix"}
	switch lm := string(kc.DetectLocalMode); {
	case lm == "":
	case !slices.Contains(localModes, lm):
		fix := "use one of " + strings.Join(localModes, ", ")
		if c := scenarios.Closest(lm, localModes); c != "" {
			fix = fmt.Sprintf("did you mean %q? (modes: %s)", c, strings.Join(localModes, ", "))
		}
		add("detectLocalMode", fmt.Sprintf("kube-proxy has no local-traffic detector %q", lm), fix)
	case lm == "BridgeInterface" && kc.DetectLocal.BridgeInterface == "":
		add("detectLocalMode", "BridgeInterface needs detectLocal.bridgeInterface", "set kubeProxy.config.detectLocal.bridgeInterface, or use another detectLocalMode")
	case lm == "InterfaceNamePrefix" && kc.DetectLocal.InterfaceNamePrefix == "":
		add("detectLocalMode", "InterfaceNamePrefix needs detectLocal.interfaceNamePrefix", "set kubeProxy.config.detectLocal.interfaceNamePrefix, or use another detectLocalMode")
	}
	if kc.ClientConnection.Burst < 0 {
		add("clientConnection.burst", fmt.Sprintf("%d is negative", kc.ClientConnection.Burst), "use 0 (kube-proxy's default, 10) or more")
	}
	return out
}
