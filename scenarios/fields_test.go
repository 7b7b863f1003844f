package scenarios

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// numericFields lists every numeric field of the schema (integers, numbers
// and durations) with a scenario that puts it in context (@ marks the
// value) and which of the probe values it accepts: z zero, n negative,
// f fraction, l too large. Wrong types are always refused. An accepted
// value must be kept exactly as written; a refused one must be reported
// at its own field and line with a fix.
var numericFields = []struct {
	path, yaml, accept string
}{
	{"seed", "services: {count: 10}\nseed: @\n", "znl"},
	{"repetitions", "services: {count: 10}\nrepetitions: @\n", ""},
	{"runs", "services: {count: 10}\nruns: @\n", ""},
	{"services.count", "services:\n  count: @\n", ""},
	{"services.portsPerService", "services:\n  count: 10\n  portsPerService: @\n", ""},
	{"services.ports[0].port", "services:\n  count: 10\n  ports:\n  - name: a\n    port: @\n", ""},
	{"services.ports[0].targetPort", "services:\n  count: 10\n  ports:\n  - port: 80\n    targetPort: @\n", ""},
	{"services.port", "services:\n  count: 10\n  port: @\n", ""},
	{"services.targetPort", "services:\n  count: 10\n  targetPort: @\n", ""},
	{"services.sessionAffinityTimeout", "services:\n  count: 10\n  sessionAffinity: ClientIP\n  sessionAffinityTimeout: @\n", ""},
	{"services.endpoints.count", "services:\n  count: 10\n  endpoints:\n    count: @\n", "z"},
	{"services.endpoints.min", "services:\n  count: 10\n  endpoints:\n    distribution: uniform\n    min: @\n    max: 20\n", ""},
	{"services.endpoints.max", "services:\n  count: 10\n  endpoints:\n    distribution: uniform\n    min: 1\n    max: @\n", ""},
	{"services.endpoints.s", "services:\n  count: 10\n  endpoints:\n    distribution: zipf\n    s: @\n    v: 1\n    max: 10\n", "f"},
	{"services.endpoints.v", "services:\n  count: 10\n  endpoints:\n    distribution: zipf\n    s: 1.5\n    v: @\n    max: 10\n", "f"},
	{"services.endpoints.withoutEndpoints", "services:\n  count: 10\n  endpoints:\n    withoutEndpoints: @\n", "z"},
	{"services.endpoints.weights.list[0]", "services:\n  count: 10\n  endpoints:\n    weights:\n      list: [@]\n", ""},
	{"services.endpoints.weights.min", "services:\n  count: 10\n  endpoints:\n    weights:\n      distribution: uniform\n      min: @\n      max: 10\n", ""},
	{"services.endpoints.weights.max", "services:\n  count: 10\n  endpoints:\n    weights:\n      distribution: uniform\n      min: 1\n      max: @\n", ""},
	{"services.nodePorts[0]", "services:\n  count: 10\n  type: NodePort\n  nodePorts: [@]\n", ""},
	{"services.healthCheckNodePorts[0]", "topology: {pods: isolated, nodes: 2}\nservices:\n  count: 10\n  type: LoadBalancer\n  externalTrafficPolicy: Local\n  healthCheckNodePorts: [@]\n", ""},
	{"services.groups[0].count", "services:\n  count: 10\n  groups:\n  - count: @\n", ""},
	{"services.groups[0].endpoints.count", "services:\n  count: 10\n  groups:\n  - count: 1\n    endpoints:\n      count: @\n", "z"},
	{"services.groups[0].nodePorts[0]", "services:\n  count: 10\n  groups:\n  - count: 1\n    type: NodePort\n    nodePorts: [@]\n", ""},
	{"services.groups[0].healthCheckNodePorts[0]", "topology: {pods: isolated, nodes: 2}\nservices:\n  count: 10\n  groups:\n  - count: 1\n    type: LoadBalancer\n    externalTrafficPolicy: Local\n    healthCheckNodePorts: [@]\n", ""},
	{"serviceTypes.connections", "topology: {pods: isolated, nodes: 2, externalClient: true}\nservices: {count: 10}\nserviceTypes:\n  connections: @\n", ""},
	{"serviceTypes.timeout", "topology: {pods: isolated, nodes: 2, externalClient: true}\nservices: {count: 10}\nserviceTypes:\n  timeout: @\n", "f"},
	{"kubeProxy.verbosity", "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\nkubeProxy:\n  verbosity: @\n", "z"},
	{"kubeProxy.firstSyncTimeout", "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\nkubeProxy:\n  firstSyncTimeout: @\n", "f"},
	{"sim.nodes", "engine: sim\nservices: {count: 10}\nsim:\n  nodes: @\n", ""},
	{"sim.watchDelay", "engine: sim\nservices: {count: 10}\nsim:\n  watchDelay: @\n", "zf"},
	{"sim.sharedCores", "engine: sim\nservices: {count: 10}\nsim:\n  sharedCores: @\n", "z"},
	{"connReuse.connections", "services: {count: 10}\nconnReuse:\n  connections: @\n", ""},
	{"connReuse.ports", "services: {count: 10}\nconnReuse:\n  ports: @\n", ""},
	{"connReuse.reuseModes[0]", "services: {count: 10}\nconnReuse:\n  reuseModes: [@]\n", "z"},
	{"lifecycle.held", "services: {count: 10}\nlifecycle:\n  held: @\n", ""},
	{"lifecycle.observe", "services: {count: 10}\nlifecycle:\n  observe: @\n", "f"},
	{"syncDisruption.services", "services: {count: 10}\nsyncDisruption:\n  services: @\n", ""},
	{"syncDisruption.probes", "services: {count: 10}\nsyncDisruption:\n  probes: @\n", ""},
	{"syncDisruption.timeout", "services: {count: 10}\nsyncDisruption:\n  timeout: @\n", "f"},
	{"syncDisruption.slow", "services: {count: 10}\nsyncDisruption:\n  slow: @\n", "f"},
	{"syncDisruption.settle", "services: {count: 10}\nsyncDisruption:\n  settle: @\n", "zf"},
	{"modeSwitch.services", "modes: [iptables, nftables]\nservices: {count: 10}\nmodeSwitch:\n  pairs: [{from: iptables, to: nftables}]\n  services: @\n", ""},
	{"modeSwitch.interval", "modes: [iptables, nftables]\nservices: {count: 10}\nmodeSwitch:\n  pairs: [{from: iptables, to: nftables}]\n  interval: @\n", "zf"},
	{"modeSwitch.timeout", "modes: [iptables, nftables]\nservices: {count: 10}\nmodeSwitch:\n  pairs: [{from: iptables, to: nftables}]\n  timeout: @\n", "f"},
	{"modeSwitch.slow", "modes: [iptables, nftables]\nservices: {count: 10}\nmodeSwitch:\n  pairs: [{from: iptables, to: nftables}]\n  timeout: 2s\n  slow: @\n", "f"},
	{"modeSwitch.settle", "modes: [iptables, nftables]\nservices: {count: 10}\nmodeSwitch:\n  pairs: [{from: iptables, to: nftables}]\n  settle: @\n", "zf"},
	{"modeSwitch.established", "modes: [iptables, nftables]\nservices: {count: 10}\nmodeSwitch:\n  pairs: [{from: iptables, to: nftables}]\n  established: @\n", "z"},
	{"soak.duration", "services: {count: 10}\nsoak:\n  interval: 100ms\n  duration: @\n", "f"},
	{"soak.interval", "services: {count: 10}\nsoak:\n  duration: 1h\n  interval: @\n", "f"},
	{"soak.rate", "services: {count: 10}\nsoak:\n  rate: @\n", "f"},
	{"soak.churn", "services: {count: 10}\nsoak:\n  churn: @\n", "zf"},
	{"soak.idle", "services: {count: 10}\nsoak:\n  idle: @\n", "z"},
	{"soak.quiet", "services: {count: 10}\nsoak:\n  quiet: @\n", "z"},
	{"soak.probes", "services: {count: 10}\nsoak:\n  probes: @\n", ""},
	{"soak.flatBound", "services: {count: 10}\nsoak:\n  flatBound: @\n", "f"},
	{"faults.apiOutage.duration", "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\nfaults:\n  apiOutage:\n    duration: @\n", "f"},
	{"faults.apiOutage.services", "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\nfaults:\n  apiOutage:\n    services: @\n", ""},
	{"faults.apiOutage.probes", "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\nfaults:\n  apiOutage:\n    probes: @\n", ""},
	{"faults.apiOutage.sample", "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\nfaults:\n  apiOutage:\n    sample: @\n", "f"},
	{"faults.apiOutage.settle", "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\nfaults:\n  apiOutage:\n    settle: @\n", "f"},
	{"faults.restart.services", "services: {count: 10}\nfaults:\n  restart:\n    services: @\n", ""},
	{"faults.restart.gap", "services: {count: 10}\nfaults:\n  restart:\n    gap: @\n", "zf"},
	{"faults.restart.sourcePort", "services: {count: 10}\nfaults:\n  restart:\n    sourcePort: @\n", ""},
	{"faults.restart.interval", "services: {count: 10}\nfaults:\n  restart:\n    interval: @\n", ""},
	{"faults.restart.timeout", "services: {count: 10}\nfaults:\n  restart:\n    timeout: @\n", "f"},
	{"faults.restart.observe", "services: {count: 10}\nfaults:\n  restart:\n    observe: @\n", "f"},
	{"faults.crash.crashes", "services: {count: 10}\nfaults:\n  crash:\n    crashes: @\n", ""},
	{"faults.crash.backoff", "services: {count: 10}\nfaults:\n  crash:\n    backoff: @\n", "zf"},
	{"faults.crash.maxBackoff", "services: {count: 10}\nfaults:\n  crash:\n    backoff: 0s\n    maxBackoff: @\n", "zf"},
	{"faults.crash.services", "services: {count: 10}\nfaults:\n  crash:\n    services: @\n", ""},
	{"faults.crash.probes", "services: {count: 10}\nfaults:\n  crash:\n    probes: @\n", ""},
	{"faults.crash.settle", "services: {count: 10}\nfaults:\n  crash:\n    settle: @\n", "f"},
	{"faults.outOfBand.timeout", "services: {count: 10}\nmodes: [iptables]\nfaults:\n  outOfBand:\n    timeout: @\n", "f"},
	{"faults.outOfBand.poll", "services: {count: 10}\nmodes: [iptables]\nfaults:\n  outOfBand:\n    poll: @\n", "f"},
	{"faults.sliceChurn.duration", "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\nfaults:\n  sliceChurn:\n    interval: 100ms\n    duration: @\n", "f"},
	{"faults.sliceChurn.interval", "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\nfaults:\n  sliceChurn:\n    duration: 1h\n    interval: @\n", "f"},
	{"faults.sliceChurn.rate", "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\nfaults:\n  sliceChurn:\n    rate: @\n", "f"},
	{"faults.sliceChurn.churn", "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\nfaults:\n  sliceChurn:\n    churn: @\n", "zf"},
	{"faults.sliceChurn.idle", "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\nfaults:\n  sliceChurn:\n    idle: @\n", "z"},
	{"faults.sliceChurn.quiet", "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\nfaults:\n  sliceChurn:\n    quiet: @\n", "z"},
	{"faults.sliceChurn.probes", "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\nfaults:\n  sliceChurn:\n    probes: @\n", ""},
	{"faults.sliceChurn.flatBound", "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\nfaults:\n  sliceChurn:\n    flatBound: @\n", "f"},
	{"transitions.sourcePort", "services: {count: 10}\ntransitions:\n  sourcePort: @\n", ""},
	{"transitions.interval", "services: {count: 10}\ntransitions:\n  interval: @\n", "f"},
	{"transitions.timeout", "services: {count: 10}\ntransitions:\n  timeout: @\n", "f"},
	{"transitions.observe", "services: {count: 10}\ntransitions:\n  observe: @\n", "f"},
	{"failure.downEndpointsPerService", "services: {count: 10}\nfailure:\n  downEndpointsPerService: @\n", "z"},
	{"failure.syncErrors.every", "services: {count: 10}\nchurn: {rate: 10}\nfailure:\n  syncErrors:\n    every: @\n", ""},
	{"failure.syncErrors.rate", "services: {count: 10}\nchurn: {rate: 10}\nfailure:\n  syncErrors:\n    rate: @\n", ""},
	{"churn.rate", "services: {count: 10}\nchurn:\n  rate: @\n", "f"},
	{"churn.duration", "services: {count: 10}\nchurn:\n  rate: 10\n  duration: @\n", "f"},
	{"churn.probes", "services: {count: 10}\nchurn:\n  rate: 10\n  probes: @\n", ""},
	{"churn.grace", "services: {count: 10}\nchurn:\n  rate: 10\n  grace: @\n", "zf"},
	{"churn.mix.endpointAdd", "services: {count: 10}\nchurn:\n  rate: 10\n  mix: {endpointRemove: 1, endpointAdd: @}\n", "zf"},
	{"churn.mix.endpointRemove", "services: {count: 10}\nchurn:\n  rate: 10\n  mix: {endpointAdd: 1, endpointRemove: @}\n", "zf"},
	{"churn.mix.readinessFlip", "services: {count: 10}\nchurn:\n  rate: 10\n  mix: {endpointAdd: 1, readinessFlip: @}\n", "zf"},
	{"churn.mix.serviceCreate", "services: {count: 10}\nchurn:\n  rate: 10\n  mix: {endpointAdd: 1, serviceCreate: @}\n", "zf"},
	{"churn.mix.serviceDelete", "services: {count: 10}\nchurn:\n  rate: 10\n  mix: {endpointAdd: 1, serviceDelete: @}\n", "zf"},
	{"sweep.services[0]", "services: {count: 10}\nsweep:\n  services: [@]\n", ""},
	{"sweep.minSyncPeriod[0]", "services: {count: 10}\nchurn: {rate: 10}\nsweep:\n  minSyncPeriod: [@]\n", "zf"},
	{"topology.clientPods", "services: {count: 10}\ntopology:\n  clientPods: @\n", ""},
	{"topology.nodes", "services: {count: 10}\ntopology:\n  nodes: @\n", ""},
	{"topology.clientAddresses", "services: {count: 10}\ntopology:\n  clientAddresses: @\n", ""},
	{"traffic.connections", "services: {count: 10}\ntraffic:\n  connections: @\n", ""},
	{"traffic.concurrency", "services: {count: 10}\ntraffic:\n  concurrency: @\n", ""},
	{"traffic.warmup", "services: {count: 10}\ntraffic:\n  warmup: @\n", "z"},
	{"traffic.timeout", "services: {count: 10}\ntraffic:\n  timeout: @\n", "f"},
	{"traffic.perService", "services: {count: 10}\ntraffic:\n  perService: @\n", "z"},
	{"traffic.udp.sourcePort", "services: {count: 10}\ntraffic:\n  concurrency: 1\n  udp:\n    sourcePort: @\n    sourcePorts: 1\n", ""},
	{"traffic.udp.sourcePorts", "services: {count: 10}\ntraffic:\n  concurrency: 1\n  udp:\n    sourcePort: 5300\n    sourcePorts: @\n", ""},
	{"traffic.longLived.connections", "services: {count: 10}\ntraffic:\n  longLived:\n    connections: @\n", ""},
	{"traffic.longLived.hold", "services: {count: 10}\ntraffic:\n  longLived:\n    connections: 2\n    hold: @\n", "zf"},
	{"iptables.syncPeriod", "services: {count: 10}\niptables:\n  syncPeriod: @\n", "f"},
	{"iptables.minSyncPeriod", "services: {count: 10}\niptables:\n  minSyncPeriod: @\n", "zf"},
	{"ipvs.tcpTimeout", "services: {count: 10}\nipvs:\n  tcpTimeout: @\n", "zf"},
	{"ipvs.tcpFinTimeout", "services: {count: 10}\nipvs:\n  tcpFinTimeout: @\n", "zf"},
	{"ipvs.udpTimeout", "services: {count: 10}\nipvs:\n  udpTimeout: @\n", "zf"},
	{"ipvs.syncPeriod", "services: {count: 10}\nipvs:\n  syncPeriod: @\n", "f"},
	{"ipvs.minSyncPeriod", "services: {count: 10}\nipvs:\n  minSyncPeriod: @\n", "zf"},
	{"nftables.syncPeriod", "services: {count: 10}\nnftables:\n  syncPeriod: @\n", "f"},
	{"nftables.minSyncPeriod", "services: {count: 10}\nnftables:\n  minSyncPeriod: @\n", "zf"},
	{"monitoring.interval", "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\nmonitoring:\n  prometheus: true\n  interval: @\n", "f"},
	{"monitoring.timeScale", "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\nmonitoring:\n  prometheus: true\n  timeScale: @\n", "f"},
	{"monitoring.hold", "services: {count: 10}\nmodes: [iptables]\nimplementation: [kube-proxy]\nmonitoring:\n  prometheus: true\n  hold: @\n", "zf"},
	{"uml.memoryMiB", "services: {count: 10}\numl:\n  memoryMiB: @\n", ""},
	{"uml.timeout", "services: {count: 10}\numl:\n  timeout: @\n", "f"},
	{"gates[0].services", "services: {count: 10}\ngates:\n  - figure: fairness.jain\n    op: \">\"\n    value: 0.9\n    services: @\n", ""},
	{"gates[0].value", "services: {count: 10}\ngates:\n  - figure: fairness.jain\n    op: \">\"\n    value: @\n", "znf"},
}

// probes are the values tried per kind of field.
var probes = map[string]map[byte]string{
	"int":      {'z': "0", 'n': "-1", 'f': "10.5", 'l': "4294967296000", 'w': "ten", 'o': "99999999999999999999"},
	"float":    {'z': "0", 'n': "-1", 'f': "1.5", 'l': "1e400", 'w': "ten", 'o': ".inf"},
	"duration": {'z': "0s", 'n': "-1s", 'f': "1.5s", 'l': "9999999999h", 'w': "ten", 'o': "2"},
	"gate":     {'z': "0", 'n': "-1", 'f': "0.5", 'l': "1e400", 'w': "ten", 'o': "Inf"},
}

var probeNames = map[byte]string{'z': "zero", 'n': "negative", 'f': "fraction", 'l': "too large", 'w': "wrong type", 'o': "overflow/non-finite"}

func TestNumericFields(t *testing.T) {
	for _, row := range numericFields {
		kind := kindOf(t, row.path)
		for _, p := range []byte("znflwo") {
			raw := probes[kind][p]
			t.Run(row.path+"/"+probeNames[p], func(t *testing.T) {
				text := strings.Replace(row.yaml, "@", raw, 1)
				line := 1 + strings.Count(text[:strings.Index(row.yaml, "@")], "\n")
				sc, err := Parse([]byte(text), "f.yaml")
				if strings.IndexByte(row.accept, p) >= 0 {
					if err != nil {
						t.Fatalf("%s: %s refused:\n%v", row.path, raw, err)
					}
					if got, want := valueAt(t, sc, row.path), exact(t, kind, raw); got != want {
						t.Errorf("%s: %s read as %v, want exactly %v", row.path, raw, got, want)
					}
					return
				}
				if err == nil {
					t.Fatalf("%s: %s accepted as %v, want refused", row.path, raw, valueAt(t, sc, row.path))
				}
				for _, fe := range fieldErrors(t, err) {
					if fe.Field == row.path && fe.Line == line && fe.Fix != "" &&
						strings.HasPrefix(fe.Error(), fmt.Sprintf("f.yaml:%d: %s: ", line, row.path)) {
						return
					}
				}
				t.Errorf("%s: %s: no error at f.yaml:%d naming the field with a fix; got:\n%v", row.path, raw, line, err)
			})
		}
	}
}

// TestNumericFieldsComplete fails when a numeric field of the schema has
// no row in numericFields.
func TestNumericFieldsComplete(t *testing.T) {
	listed := map[string]bool{}
	for _, r := range numericFields {
		listed[r.path] = true
	}
	var walk func(t2 reflect.Type, path string)
	walk = func(t2 reflect.Type, path string) {
		if t2.Kind() == reflect.Pointer {
			t2 = t2.Elem()
		}
		switch {
		case t2 == reflect.TypeFor[Duration](), t2 == reflect.TypeFor[GateValue](),
			t2.Kind() == reflect.Int, t2.Kind() == reflect.Int64, t2.Kind() == reflect.Float64:
			if !listed[path] {
				t.Errorf("numeric field %s has no row in numericFields", path)
			}
		case t2.Kind() == reflect.Slice:
			walk(t2.Elem(), path+"[0]")
		case t2.Kind() == reflect.Struct:
			fields, names := yamlFields(t2)
			for _, n := range names {
				p := n
				if path != "" {
					p = path + "." + n
				}
				walk(fields[n], p)
			}
		}
	}
	walk(reflect.TypeFor[Scenario](), "")
}

// kindOf is the probe kind of the field at path, from the schema's types
// (so that a new optional block needs no change here).
func kindOf(t *testing.T, path string) string {
	typ := reflect.TypeFor[Scenario]()
	for _, part := range strings.Split(path, ".") {
		list := false
		if m := indexRE.FindStringSubmatch(part); m != nil {
			part, list = m[1], true
		}
		if typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		fields, _ := yamlFields(typ)
		ft, ok := fields[part]
		if !ok {
			t.Fatalf("%s: no field %s", path, part)
		}
		typ = ft
		if list {
			typ = typ.Elem()
		}
	}
	switch {
	case typ == reflect.TypeFor[Duration]():
		return "duration"
	case typ == reflect.TypeFor[GateValue]():
		return "gate"
	case typ.Kind() == reflect.Float64:
		return "float"
	case typ.Kind() == reflect.Int, typ.Kind() == reflect.Int64:
		return "int"
	}
	t.Fatalf("%s: unknown kind %s", path, typ)
	return ""
}

// exact is what raw must be read as.
func exact(t *testing.T, kind, raw string) any {
	var v any
	var err error
	switch kind {
	case "int":
		v, err = strconv.ParseInt(raw, 10, 64)
	case "float":
		v, err = strconv.ParseFloat(raw, 64)
	case "duration":
		v, err = time.ParseDuration(raw)
	default:
		v = raw
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

var indexRE = regexp.MustCompile(`^(\w+)\[(\d+)\]$`)

// valueAt reads the field at a YAML path ("churn.mix.endpointAdd",
// "gates[0].value") as int64, float64, time.Duration or (gate values) the
// text as written.
func valueAt(t *testing.T, sc *Scenario, path string) any {
	t.Helper()
	v := reflect.ValueOf(sc).Elem()
	for _, part := range strings.Split(path, ".") {
		idx := -1
		if m := indexRE.FindStringSubmatch(part); m != nil {
			part = m[1]
			idx, _ = strconv.Atoi(m[2])
		}
		if v.Kind() == reflect.Pointer {
			v = v.Elem()
		}
		found := false
		for i := range v.NumField() {
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
			if name == part {
				v, found = v.Field(i), true
				break
			}
		}
		if !found {
			t.Fatalf("%s: no field %s", path, part)
		}
		if idx >= 0 {
			if v.Len() <= idx {
				t.Fatalf("%s: list shorter than %d", path, idx+1)
			}
			v = v.Index(idx)
		}
	}
	switch x := v.Interface().(type) {
	case Duration:
		return x.Duration
	case GateValue:
		return x.Text
	case float64:
		return x
	}
	return v.Int()
}

// TestScenarioPaths checks what Load says about paths that are not a
// scenario file.
func TestScenarioPaths(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty := write("empty.yaml", "")
	comments := write("comments.yaml", "# only a comment\n\n")
	null := write("null.yaml", "~\n")
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	write("sub/a.yaml", "services: {count: 1}\n")
	for _, tc := range []struct{ path, want string }{
		{empty, empty + ": the scenario file is empty"},
		{comments, comments + ": the scenario file is empty"},
		{null, null + ": the scenario file is empty"},
		{dir, dir + ": is a directory, not a scenario file; fix: name one scenario file in it: "},
		{sub, sub + ": is a directory, not a scenario file; fix: name one scenario file in it: " + filepath.Join(sub, "a.yaml")},
		{filepath.Join(dir, "missing.yaml"), "no such file"},
		{"/dev/null", "/dev/null: the scenario file is empty"},
	} {
		_, err := Load(tc.path)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Load(%s) = %v, want an error containing %q", tc.path, err, tc.want)
		}
		if err != nil && !strings.Contains(err.Error(), "fix: ") && !strings.Contains(err.Error(), "embedded:") {
			t.Errorf("Load(%s) = %v: no fix", tc.path, err)
		}
	}
}

// TestEmptyValues checks that a key without a value is refused rather
// than silently defaulted.
func TestEmptyValues(t *testing.T) {
	for _, tc := range []struct{ in, field string }{
		{"services:\n  count: 10\ntraffic:\n  concurrency:\n", "traffic.concurrency"},
		{"services:\n  count: 10\nmodes:\n", "modes"},
		{"services:\n  count: 10\ntraffic:\n  timeout: ~\n", "traffic.timeout"},
		{"services:\n  count: 10\nservices2: 1\n", "services2"},
	} {
		_, err := Parse([]byte(tc.in), "e.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.field+": ") {
			t.Errorf("Parse(%q) = %v, want an error naming %s", tc.in, err, tc.field)
		}
	}
	// An empty block is an empty mapping: its fields take their defaults.
	if _, err := Parse([]byte("services:\n  count: 10\ntraffic:\n"), "e.yaml"); err != nil {
		t.Errorf("empty traffic block: %v", err)
	}
}

// TestWithoutEndpoints: a share of services gets no endpoint, never a
// fixed traffic position, the same ones for the same seed.
func TestWithoutEndpoints(t *testing.T) {
	sc, err := Parse([]byte("seed: 4\nservices:\n  count: 100\n  endpoints: {count: 3, withoutEndpoints: 0.1}\n"), "w.yaml")
	if err != nil {
		t.Fatal(err)
	}
	empty := sc.EmptyServices()
	zeros := 0
	for i, c := range sc.EndpointCounts() {
		if c == 0 {
			zeros++
			if i == 0 || i == 50 || i == 99 {
				t.Errorf("service %d (a fixed position) has no endpoints", i)
			}
		} else if c != 3 {
			t.Errorf("service %d has %d endpoints", i, c)
		}
	}
	if len(empty) != 10 || zeros != 10 {
		t.Errorf("%d empty services listed, %d without endpoints; want 10", len(empty), zeros)
	}
	if again := sc.EmptyServices(); !slices.Equal(again, empty) {
		t.Errorf("not deterministic: %v then %v", empty, again)
	}
}

// TestNodeSysctlRanges: every node sysctl accepts its range's ends and
// its stock value, and refuses one past either end (below 0 is not a
// whole number), naming the field and the range; an unknown key is
// refused with the closest known one.
func TestNodeSysctlRanges(t *testing.T) {
	if len(NodeSysctlRanges) != len(NodeSysctlDefaults) {
		t.Fatalf("%d ranges for %d sysctls", len(NodeSysctlRanges), len(NodeSysctlDefaults))
	}
	for k, r := range NodeSysctlRanges {
		def, err := strconv.ParseInt(NodeSysctlDefaults[k], 10, 64)
		if err != nil || def < r[0] || def > r[1] {
			t.Errorf("%s: stock value %s outside [%d, %d]", k, NodeSysctlDefaults[k], r[0], r[1])
		}
		doc := func(v int64) string {
			return fmt.Sprintf("services: {count: 10}\nnode:\n  sysctls:\n    %s: %d\n", k, v)
		}
		for _, v := range []int64{r[0], r[1], def} {
			sc, err := Parse([]byte(doc(v)), "t.yaml")
			if err != nil {
				t.Errorf("%s: %d refused: %v", k, v, err)
				continue
			}
			if got := sc.Node.Sysctls[k]; got != strconv.FormatInt(v, 10) {
				t.Errorf("%s: %d kept as %q", k, v, got)
			}
		}
		for _, v := range []int64{r[0] - 1, r[1] + 1} {
			_, err := Parse([]byte(doc(v)), "t.yaml")
			if err == nil || !strings.Contains(err.Error(), "node.sysctls."+k) {
				t.Errorf("%s: %d: error %v, want one naming the field", k, v, err)
			} else if v >= 0 && !strings.Contains(err.Error(), fmt.Sprintf("from %d to %d", r[0], r[1])) {
				t.Errorf("%s: %d: error %v does not give the range", k, v, err)
			}
		}
	}
	_, err := Parse([]byte("services: {count: 10}\nnode:\n  sysctls:\n    net.ipv4.icmp_ratelimt: 0\n"), "t.yaml")
	if err == nil || !strings.Contains(err.Error(), `did you mean "net.ipv4.icmp_ratelimit"`) {
		t.Errorf("unknown key: %v", err)
	}
}
