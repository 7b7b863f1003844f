package scenarios

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// fieldErrors flattens an error from Parse or Validate.
func fieldErrors(t *testing.T, err error) []*FieldError {
	t.Helper()
	var out []*FieldError
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("error %q is not a *FieldError", e)
		}
		out = append(out, fe)
	}
	return out
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		field string // Field of one reported FieldError
		line  int    // its Line; 0 = not checked
		msg   string // substring of its Error()
	}{
		// decoding
		{"malformed yaml", "services:\n  count: 10\nseed: a: b\n", "", 3, "mapping values are not allowed"},
		{"malformed indentation", "services:\n  count: 10\n bad: [\n", "", 2, "did not find expected key"},
		{"unknown field with suggestion", "services:\n  count: 10\n  endpionts:\n    count: 3\n", "services.endpionts", 3, `did you mean "endpoints"`},
		{"unknown field without suggestion", "services:\n  count: 10\nzzzzzz: 1\n", "zzzzzz", 3, "known fields here: name,"},
		{"case-misspelt field", "services:\n  count: 10\nnetwork:\n  servicecidr: 10.0.0.0/16\n", "network.servicecidr", 4, `"serviceCIDR"`},
		{"wrong type int", "services:\n  count: ten\n", "services.count", 2, "want an integer"},
		{"wrong type list", "services:\n  count: 10\nmodes: none\n", "modes", 3, "want a list"},
		{"wrong type mapping", "services: 10\n", "services", 1, "want a mapping"},
		{"wrong type duration", "services:\n  count: 10\ntraffic:\n  timeout: 2\n", "traffic.timeout", 4, "not a duration"},
		{"duplicate key", "seed: 1\nseed: 2\nservices:\n  count: 1\n", "seed", 2, "duplicate key"},
		{"second document", "services:\n  count: 1\n---\nseed: 2\n", "", 3, "second YAML document"},
		{"top level not a mapping", "- a\n", "", 1, "want a mapping"},

		// network
		{"cidr not a prefix", "services:\n  count: 10\nnetwork:\n  serviceCIDR: 198.18.0.0\n", "network.serviceCIDR", 4, "not a CIDR"},
		{"cidr not ipv4", "services:\n  count: 10\nnetwork:\n  podCIDR: fd00::/64\n", "network.podCIDR", 4, "not IPv4"},
		{"cidr host bits", "services:\n  count: 10\nnetwork:\n  nodeCIDR: 198.19.255.1/24\n", "network.nodeCIDR", 4, "write 198.19.255.0/24"},
		{"loopback service cidr", "services:\n  count: 10\nnetwork:\n  serviceCIDR: 127.0.0.0/24\n", "network.serviceCIDR", 4, "overlaps the loopback range 127.0.0.0/8"},
		{"multicast service cidr", "services:\n  count: 10\nnetwork:\n  serviceCIDR: 224.0.0.0/24\n", "network.serviceCIDR", 4, "overlaps the multicast range 224.0.0.0/4"},
		{"link-local pod cidr", "services:\n  count: 10\nnetwork:\n  podCIDR: 169.254.0.0/17\n", "network.podCIDR", 4, "overlaps the link-local range"},
		{"reserved service cidr", "services:\n  count: 10\nnetwork:\n  serviceCIDR: 240.0.0.0/24\n", "network.serviceCIDR", 4, "overlaps the reserved range"},
		{"cidr holding this network", "services:\n  count: 10\nnetwork:\n  clusterCIDR: 0.0.0.0/1\n", "network.clusterCIDR", 4, "the unspecified"},
		{"cluster cidr invalid", "services:\n  count: 10\nnetwork:\n  clusterCIDR: x\n", "network.clusterCIDR", 4, "not a CIDR"},
		{"pod overlaps service", "services:\n  count: 10\nnetwork:\n  podCIDR: 198.18.0.0/17\n", "network.podCIDR", 4, "overlaps serviceCIDR"},
		{"node overlaps service", "services:\n  count: 10\nnetwork:\n  nodeCIDR: 198.18.255.0/24\n", "network.nodeCIDR", 4, "overlaps serviceCIDR"},
		{"node overlaps pod", "services:\n  count: 10\nnetwork:\n  nodeCIDR: 198.19.0.0/24\n", "network.nodeCIDR", 4, "overlaps podCIDR"},
		{"cluster overlaps service", "services:\n  count: 10\nnetwork:\n  clusterCIDR: 198.18.0.0/15\n", "network.clusterCIDR", 4, "overlaps serviceCIDR"},
		{"services do not fit", "services:\n  count: 300\nnetwork:\n  serviceCIDR: 10.0.0.0/24\n", "services.count", 2, "use fewer services or a /23"},
		{"endpoints do not fit", "services:\n  count: 100\n  endpoints:\n    count: 3\nnetwork:\n  podCIDR: 198.19.0.0/24\n", "network.podCIDR", 6, "need 300 pod addresses"},
		{"endpoints prefix hint", "services:\n  count: 100\n  endpoints:\n    count: 3\nnetwork:\n  podCIDR: 198.19.0.0/24\n", "network.podCIDR", 6, "/23 or larger"},
		{"node cidr too small", "services:\n  count: 10\nnetwork:\n  nodeCIDR: 198.19.255.0/29\ntopology:\n  clientPods: 2\n", "network.nodeCIDR", 4, "3 /30 links"},

		// services
		{"services count zero", "services:\n  count: 0\n", "services.count", 2, "out of range"},
		{"services missing", "seed: 1\n", "services.count", 0, "is missing"},
		{"services count too large", "services:\n  count: 2000000\n", "services.count", 2, "out of range"},
		{"port zero", "services:\n  count: 1\n  port: -1\n", "services.port", 3, "use 1..65535"},
		{"port too large", "services:\n  count: 1\n  port: 70000\n", "services.port", 3, "use 1..65535"},
		{"port range overflows", "services:\n  count: 1\n  port: 65535\n  portsPerService: 2\n", "services.port", 3, "exceeds 65535"},
		{"target port range overflows", "services:\n  count: 1\n  targetPort: 65535\n  portsPerService: 2\n", "services.targetPort", 3, "exceeds 65535"},
		{"portsPerService negative", "services:\n  count: 1\n  portsPerService: -1\n", "services.portsPerService", 3, "out of range"},
		{"protocol", "services:\n  count: 1\n  protocol: tcp\n", "services.protocol", 3, `did you mean "TCP"`},
		{"protocol sctp", "services:\n  count: 1\n  protocol: SCTP\n", "services.protocol", 3, "use one of TCP, UDP"},

		// services.ports
		{"ports duplicate name", "services:\n  count: 1\n  ports:\n  - {name: dns, port: 53}\n  - {name: dns, port: 54}\n", "services.ports[1].name", 5, "also the name of services.ports[0]"},
		{"ports name missing", "services:\n  count: 1\n  ports:\n  - port: 53\n  - name: dns\n    port: 54\n", "services.ports[0].name", 4, "names every port"},
		{"ports name not a label", "services:\n  count: 1\n  ports:\n  - name: DNS_tcp\n    port: 53\n", "services.ports[0].name", 4, "not a DNS label"},
		{"ports port zero", "services:\n  count: 1\n  ports:\n  - name: a\n    port: 0\n", "services.ports[0].port", 5, "use 1..65535"},
		{"ports port too large", "services:\n  count: 1\n  ports:\n  - name: a\n    port: 65536\n", "services.ports[0].port", 5, "use 1..65535"},
		{"ports targetPort too large", "services:\n  count: 1\n  ports:\n  - name: a\n    port: 53\n    targetPort: 70000\n", "services.ports[0].targetPort", 6, "use 1..65535"},
		{"ports port missing", "services:\n  count: 1\n  ports:\n  - name: a\n", "services.ports[0].port", 4, "use 1..65535"},
		{"ports unknown protocol", "services:\n  count: 1\n  ports:\n  - name: a\n    port: 53\n    protocol: ICMP\n", "services.ports[0].protocol", 6, "use one of TCP, UDP, SCTP"},
		{"ports lower-case protocol", "services:\n  count: 1\n  ports:\n  - name: a\n    port: 53\n    protocol: udp\n", "services.ports[0].protocol", 6, `did you mean "UDP"`},
		{"ports duplicate port and protocol", "services:\n  count: 1\n  ports:\n  - {name: a, port: 53, protocol: UDP}\n  - {name: b, port: 53, protocol: UDP}\n", "services.ports[1].port", 5, "53/UDP is also"},
		{"ports empty", "services:\n  count: 1\n  ports: []\n", "services.ports", 3, "is empty"},
		{"ports with port", "services:\n  count: 1\n  port: 80\n  ports:\n  - {name: a, port: 53}\n", "services.port", 3, "cannot be combined with services.ports"},
		{"ports with protocol", "services:\n  count: 1\n  protocol: UDP\n  ports:\n  - {name: a, port: 53}\n", "services.protocol", 3, "remove services.protocol"},
		{"ports sctp real engine", "services:\n  count: 1\n  ports:\n  - {name: a, port: 53, protocol: SCTP}\n", "services.ports[0].protocol", 4, "traffic driver sends"},
		{"ports sctp mode lacks it", "engine: sim\nmodes: [iptables, ipvs, userspace]\nservices:\n  count: 1\n  ports:\n  - {name: a, port: 53, protocol: SCTP}\n", "services.ports[0].protocol", 6, "mode ipvs, userspace does not proxy SCTP"},
		{"udp source ports fewer than workers", "services:\n  count: 1\ntraffic:\n  concurrency: 4\n  udp:\n    sourcePort: 5300\n", "traffic.udp.sourcePorts", 5, "cannot serve 4 workers"},
		{"udp source ports without first", "services:\n  count: 1\ntraffic:\n  udp:\n    sourcePorts: 4\n", "traffic.udp.sourcePorts", 5, "without traffic.udp.sourcePort"},
		{"udp source port range overflows", "services:\n  count: 1\ntraffic:\n  concurrency: 1\n  udp:\n    sourcePort: 65535\n    sourcePorts: 2\n", "traffic.udp.sourcePorts", 7, "use 1..1"},
		{"udp ports with longLived", "services:\n  count: 1\n  protocol: UDP\ntraffic:\n  longLived: {connections: 2}\n", "traffic.longLived", 5, "UDP ports have none to hold"},

		// endpoints distributions
		{"distribution unknown", "services:\n  count: 1\n  endpoints:\n    distribution: zipff\n", "services.endpoints.distribution", 4, `did you mean "zipf"`},
		{"fixed negative", "services:\n  count: 1\n  endpoints:\n    count: -1\n", "services.endpoints.count", 4, "negative"},
		{"fixed with min", "services:\n  count: 1\n  endpoints:\n    min: 2\n", "services.endpoints.min", 4, "not used by distribution fixed"},
		{"uniform min zero", "services:\n  count: 1\n  endpoints:\n    distribution: uniform\n    max: 3\n", "services.endpoints.min", 3, "below 1"},
		{"uniform max below min", "services:\n  count: 1\n  endpoints:\n    distribution: uniform\n    min: 4\n    max: 3\n", "services.endpoints.max", 6, "below min"},
		{"uniform with count", "services:\n  count: 1\n  endpoints:\n    distribution: uniform\n    min: 1\n    max: 3\n    count: 2\n", "services.endpoints.count", 7, "not used"},
		{"zipf s", "services:\n  count: 1\n  endpoints:\n    distribution: zipf\n    s: 1\n    v: 1\n    max: 10\n", "services.endpoints.s", 5, "not a finite number"},
		{"zipf s infinite", "services:\n  count: 1\n  endpoints:\n    distribution: zipf\n    s: .inf\n    v: 1\n    max: 10\n", "services.endpoints.s", 5, "finite"},
		{"zipf s nan", "services:\n  count: 1\n  endpoints:\n    distribution: zipf\n    s: .nan\n    v: 1\n    max: 10\n", "services.endpoints.s", 5, "not a finite number"},
		{"zipf v", "services:\n  count: 1\n  endpoints:\n    distribution: zipf\n    s: 2\n    v: 0.5\n    max: 10\n", "services.endpoints.v", 6, ">= 1"},
		{"zipf max", "services:\n  count: 1\n  endpoints:\n    distribution: zipf\n    s: 2\n    v: 1\n", "services.endpoints.max", 3, "below 1"},

		// modes
		{"unknown mode", "services:\n  count: 1\nmodes: [none, iptable]\n", "modes[1]", 3, `did you mean "iptables"`},
		{"duplicate mode", "services:\n  count: 1\nmodes:\n  - iptables\n  - iptables\n", "modes[1]", 5, "listed twice"},
		{"empty modes", "services:\n  count: 1\nmodes: []\n", "modes", 3, "is empty"},

		// traffic
		{"connections zero", "services:\n  count: 1\ntraffic:\n  connections: -5\n", "traffic.connections", 4, "out of range"},
		{"concurrency zero", "services:\n  count: 1\ntraffic:\n  concurrency: -1\n", "traffic.concurrency", 4, "use 1..1024"},
		{"concurrency too high", "services:\n  count: 1\ntraffic:\n  concurrency: 1025\n", "traffic.concurrency", 4, "use 1..1024"},
		{"position unknown", "services:\n  count: 1\ntraffic:\n  positions: [first, end]\n", "traffic.positions[1]", 4, "use one of first, middle, last, random"},
		{"position duplicate", "services:\n  count: 1\ntraffic:\n  positions: [first, first]\n", "traffic.positions[1]", 4, "listed twice"},
		{"positions empty", "services:\n  count: 1\ntraffic:\n  positions: []\n", "traffic.positions", 4, "is empty"},
		{"warmup negative", "services:\n  count: 1\ntraffic:\n  warmup: -1\n", "traffic.warmup", 4, "out of range"},
		{"timeout zero", "services:\n  count: 1\ntraffic:\n  timeout: 0s\n", "traffic.timeout", 4, "not positive"},
		{"timeout negative", "services:\n  count: 1\ntraffic:\n  timeout: -1s\n", "traffic.timeout", 4, "is negative"},

		// top level
		{"repetitions zero", "services:\n  count: 1\nrepetitions: -1\n", "repetitions", 3, "use 1..100"},
		{"repetitions too many", "services:\n  count: 1\nrepetitions: 101\n", "repetitions", 3, "use 1..100"},
		{"seed not int64", "services:\n  count: 1\nseed: 99999999999999999999\n", "seed", 3, "want an integer"},
		{"name unusable", "name: a/b\nservices:\n  count: 1\n", "name", 1, "file names"},
		{"clientPods negative", "services:\n  count: 1\ntopology:\n  clientPods: -1\n", "topology.clientPods", 4, "out of range"},
		{"iptables backend", "services:\n  count: 1\niptables:\n  backend: nftables\n", "iptables.backend", 4, "use one of legacy, nft"},
		{"unknown scheduler", "services:\n  count: 1\nipvs:\n  scheduler: wrrr\n", "ipvs.scheduler", 4, `did you mean "wrr"`},
		{"bad excludeCIDR", "services:\n  count: 1\nipvs:\n  excludeCIDRs: [10.0.0.0/33]\n", "ipvs.excludeCIDRs[0]", 4, "not a CIDR"},
		{"negative ipvs timeout", "services:\n  count: 1\nipvs:\n  tcpTimeout: -1s\n", "ipvs.tcpTimeout", 4, "is negative"},
		{"flag of another scheduler", "services:\n  count: 1\nipvs:\n  scheduler: sh\n  schedulerFlags: [mh-port]\n", "ipvs.schedulerFlags[0]", 0, `did you mean "sh-port"`},
		{"flags on rr", "services:\n  count: 1\nipvs:\n  schedulerFlags: [sh-port]\n", "ipvs.schedulerFlags[0]", 0, `scheduler "rr" takes no flags`},
		{"zero syncPeriod", "services:\n  count: 1\niptables:\n  syncPeriod: 0s\n", "iptables.syncPeriod", 4, "positive"},
		{"unknown kernel", "services:\n  count: 1\nkernel: kvm\n", "kernel", 3, "use one of auto, host, uml"},
		{"unknown fallback", "services:\n  count: 1\nfallback: userspace\n", "fallback", 3, "iptables"},
		// the catalog's Schedulers and Terminating (proxymodes.Mode facts)
		{"schedulers without ipvs", "services:\n  count: 1\nmodes: [none, iptables]\nsweep:\n  schedulers: [rr, wrr]\n", "sweep.schedulers", 0, "has no effect without mode ipvs"},
		{"transitions with userspace", "services:\n  count: 1\nmodes: [none, userspace]\ntransitions: {}\n", "modes", 0, "mode userspace's UDP proxy keeps its own client table"},
		{"session affinity", "services:\n  count: 1\n  sessionAffinity: clientip\n", "services.sessionAffinity", 3, `did you mean "ClientIP"`},
		{"affinity timeout", "services:\n  count: 1\n  sessionAffinity: ClientIP\n  sessionAffinityTimeout: 100000s\n", "services.sessionAffinityTimeout", 4, "86400s"},
		{"sweep too big", "services:\n  count: 1\nsweep:\n  services: [10, 70000]\n", "sweep.services", 0, "do not fit serviceCIDR"},
		{"sweep duplicate", "services:\n  count: 1\nsweep:\n  services: [10, 10]\n", "sweep.services[1]", 4, "listed twice"},
		{"uml memory", "services:\n  count: 1\numl:\n  memoryMiB: 100\n", "uml.memoryMiB", 4, "256..16384"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := testCatalog.Parse([]byte(tt.in), "t.yaml")
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "t.yaml") || !strings.Contains(line, "; fix: ") {
					t.Errorf("error line %q lacks source or fix", line)
				}
			}
			for _, fe := range fieldErrors(t, err) {
				if fe.Field == tt.field && (tt.line == 0 || fe.Line == tt.line) && strings.Contains(fe.Error(), tt.msg) {
					return
				}
			}
			t.Errorf("no error for field %q at line %d containing %q; got:\n%v", tt.field, tt.line, tt.msg, err)
		})
	}
}

func TestValidateReportsAll(t *testing.T) {
	_, err := Parse([]byte("services:\n  count: 0\nrepetitions: 0\ntraffic:\n  concurrency: -1\n"), "t.yaml")
	var fields []string
	for _, fe := range fieldErrors(t, err) {
		fields = append(fields, fe.Field)
	}
	want := []string{"repetitions", "services.count", "traffic.concurrency"}
	if !reflect.DeepEqual(fields, want) {
		t.Errorf("fields = %v, want %v", fields, want)
	}
}

func TestDefaults(t *testing.T) {
	sc, err := Parse([]byte("services:\n  count: 10\n"), "dir/my-test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := Scenario{
		Name:        "my-test",
		Repetitions: 3,
		Runs:        1,
		Modes:       []string{"none", "iptables"},
		Kernel:      "auto",
		Services: ServicesSpec{Count: 10, PortsPerService: 1, Protocol: "TCP", Port: 80, TargetPort: 8080,
			SessionAffinity: "None", SessionAffinityTimeout: Duration{10800 * time.Second},
			Endpoints: EndpointsSpec{Distribution: "fixed", Count: 3}},
		Network: NetworkSpec{ServiceCIDR: "198.18.0.0/16", PodCIDR: "198.19.0.0/17",
			NodeCIDR: "198.19.255.0/24", ClusterCIDR: "198.19.0.0/16"},
		Topology: TopologySpec{ClientPods: 1},
		Traffic: TrafficSpec{Connections: 2000, Concurrency: 4, Positions: []string{"first", "middle", "last", "random"},
			Warmup: 50, Timeout: Duration{2 * time.Second}},
		IPTables: IPTablesSpec{Backend: "legacy", SyncPeriod: Duration{30 * time.Second}, MinSyncPeriod: Duration{time.Second}},
		IPVS:     IPVSSpec{Scheduler: "rr", SyncPeriod: Duration{30 * time.Second}},
		NFTables: NFTablesSpec{SyncPeriod: Duration{30 * time.Second}, MinSyncPeriod: Duration{time.Second}},
		UML:      UMLSpec{MemoryMiB: 2048, Timeout: Duration{30 * time.Minute}},
	}
	want.Node.Sysctls = NodeSysctlDefaults
	want.source, want.lines = sc.source, sc.lines
	if !reflect.DeepEqual(*sc, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", *sc, want)
	}
}

func TestExplicitZerosKept(t *testing.T) {
	sc, err := Parse([]byte("services:\n  count: 10\n  endpoints:\n    count: 0\ntraffic:\n  warmup: 0\n"), "z.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if sc.Services.Endpoints.Count != 0 || sc.Traffic.Warmup != 0 {
		t.Errorf("endpoints.count = %d, warmup = %d, want 0, 0", sc.Services.Endpoints.Count, sc.Traffic.Warmup)
	}
	assertRoundTrip(t, sc)
}

func TestGoBuiltDefaults(t *testing.T) {
	sc := &Scenario{Services: ServicesSpec{Count: 5}}
	sc.SetDefaults()
	if err := sc.Validate(); err != nil {
		t.Fatal(err)
	}
	if sc.Name != "scenario" || sc.Traffic.Warmup != 50 || sc.Services.Endpoints.Count != 3 {
		t.Errorf("got name %q warmup %d count %d", sc.Name, sc.Traffic.Warmup, sc.Services.Endpoints.Count)
	}
}

// assertRoundTrip checks that YAML re-emits sc so that Parse reads it back equal.
func assertRoundTrip(t *testing.T, sc *Scenario) {
	t.Helper()
	out, err := sc.YAML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(out, sc.source)
	if err != nil {
		t.Fatalf("re-parse of YAML():\n%s\n%v", out, err)
	}
	back.lines, back.source = sc.lines, sc.source
	if !reflect.DeepEqual(back, sc) {
		t.Errorf("round trip changed the scenario:\n got %+v\nwant %+v", back, sc)
	}
}

// testCatalog names the build's modes (proxymodes/modes.Catalog gives the
// binary's; scenarios cannot import it).
var testCatalog = Catalog{Modes: []string{"none", "iptables", "ipvs", "nftables", "userspace"},
	Protocols: map[string][]string{"none": {"TCP", "UDP", "SCTP"}, "iptables": {"TCP", "UDP", "SCTP"}, "ipvs": {"TCP", "UDP"},
		"nftables": {"TCP", "UDP", "SCTP"}, "userspace": {"TCP", "UDP"}},
	Schedulers: []string{"ipvs"}, Terminating: []string{"userspace"}}

func TestShippedScenarios(t *testing.T) {
	want := map[string]int{"1k-services": 1000, "5k-services": 5000, "10k-services": 10000}
	got := Names()
	if !slices.IsSorted(got) {
		t.Errorf("Names() = %v, not sorted", got)
	}
	for name := range want {
		if !slices.Contains(got, name) {
			t.Errorf("Names() = %v lacks %s", got, name)
		}
	}
	// Every shipped scenario loads and validates.
	for _, name := range got {
		if _, err := testCatalog.Load(name); err != nil {
			t.Errorf("shipped scenario %s: %v", name, err)
		}
	}
	// The 1k/5k/10k scenarios compare modes against the baseline.
	for name, count := range want {
		sc, err := testCatalog.Load(name)
		if err != nil {
			t.Fatal(err)
		}
		if sc.Name != name || sc.Services.Count != count || sc.Seed != 1 || sc.Repetitions != 3 ||
			!slices.Contains(sc.Modes, "none") || !slices.Contains(sc.Modes, "iptables") || sc.Services.Endpoints != (EndpointsSpec{Distribution: "fixed", Count: 3}) ||
			sc.Traffic.Connections != 2000 || sc.Traffic.Concurrency != 4 {
			t.Errorf("%s: unexpected %+v", name, sc)
		}
		assertRoundTrip(t, sc)
	}
}

func TestLoad(t *testing.T) {
	for _, arg := range []string{"10k-services", "10k-services.yaml", "scenarios/10k-services.yaml", "../x/scenarios/10k-services"} {
		sc, err := Load(arg)
		if err != nil || sc.Name != "10k-services" {
			t.Errorf("Load(%q) = %v, %v", arg, sc, err)
		}
	}
	// A real file wins over the embedded name.
	dir := t.TempDir()
	path := filepath.Join(dir, "10k-services.yaml")
	if err := os.WriteFile(path, []byte("services:\n  count: 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if sc, err := Load(path); err != nil || sc.Services.Count != 7 {
		t.Errorf("Load(%q) = %v, %v", path, sc, err)
	}
	// A missing file in another folder is not silently the embedded one.
	if _, err := Load(filepath.Join(dir, "sub", "1k-services.yaml")); err == nil {
		t.Error("Load of a missing path succeeded")
	}
	_, err := Load("nope")
	if err == nil || !strings.Contains(err.Error(), "10k-services, 1k-services, 5k-services") {
		t.Errorf("Load(nope) error %v does not list the embedded names", err)
	}
	// File errors name the path.
	if err := os.WriteFile(path, []byte("services:\n  cont: 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.HasPrefix(err.Error(), path+":2: services.cont: ") {
		t.Errorf("Load(bad file) = %v", err)
	}
}

func TestDuration(t *testing.T) {
	for _, d := range []time.Duration{2 * time.Second, 150 * time.Millisecond, 90 * time.Second} {
		b, err := json.Marshal(Duration{d})
		if err != nil {
			t.Fatal(err)
		}
		if want := `"` + d.String() + `"`; string(b) != want {
			t.Errorf("MarshalJSON(%v) = %s, want %s", d, b, want)
		}
		var back Duration
		if err := json.Unmarshal(b, &back); err != nil || back.Duration != d {
			t.Errorf("UnmarshalJSON(%s) = %v, %v", b, back, err)
		}
	}
	var d Duration
	if err := json.Unmarshal([]byte(`"2"`), &d); err == nil {
		t.Error(`UnmarshalJSON("2") succeeded`)
	}
	if err := json.Unmarshal([]byte(`2`), &d); err == nil {
		t.Error(`UnmarshalJSON(2) succeeded`)
	}
	sc, err := Parse([]byte("services:\n  count: 1\ntraffic:\n  timeout: 1m30s\n"), "d.yaml")
	if err != nil || sc.Traffic.Timeout.Duration != 90*time.Second {
		t.Fatalf("timeout 1m30s: %v, %v", sc, err)
	}
	assertRoundTrip(t, sc)
}

func TestNonDefaultRoundTrip(t *testing.T) {
	in := `name: zipf
description: skewed
seed: -7
repetitions: 1
modes: [iptables]
engine: sim
services:
  count: 50
  portsPerService: 2
  protocol: UDP
  port: 53
  targetPort: 5353
  endpoints: {distribution: zipf, s: 1.5, v: 2, max: 20}
network: {serviceCIDR: 10.96.0.0/20, podCIDR: 10.244.0.0/16, nodeCIDR: 10.245.0.0/24, clusterCIDR: 10.244.0.0/15}
topology: {clientPods: 3}
traffic: {connections: 10, concurrency: 1, positions: [random], warmup: 0, timeout: 150ms}
iptables: {backend: nft}
`
	sc, err := Parse([]byte(in), "zipf.yaml")
	if err != nil {
		t.Fatal(err)
	}
	assertRoundTrip(t, sc)
}

func TestMergeKeys(t *testing.T) {
	in := "base: &b\n  count: 10\nservices:\n  <<: *b\n  port: 81\n"
	if _, err := Parse([]byte(in), "m.yaml"); err == nil || !strings.Contains(err.Error(), "m.yaml:1: base: unknown field") {
		t.Errorf("got %v", err)
	}
	in = "services: &s\n  count: 10\nx: *s\n"
	if _, err := Parse([]byte(in), "m.yaml"); err == nil {
		t.Error("unknown x accepted")
	}
}

func FuzzParse(f *testing.F) {
	for _, n := range Names() {
		data, _ := embedded.ReadFile(n + ".yaml")
		f.Add(data)
	}
	for _, s := range []string{
		"services:\n  count: 10\n  endpoints: {distribution: zipf, s: 1.1, v: 1, max: 5}\n",
		"services:\n  count: 10\n  endpoints: {distribution: uniform, min: 1, max: 5}\n",
		"a: &a [*a]\n",
		"services: &s {endpoints: *s}\n",
		"services:\n  <<: [{count: 1}]\n",
		"---\n---\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := Parse(data, "fuzz.yaml")
		if err != nil {
			return
		}
		out, err := sc.YAML()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(out, "fuzz.yaml"); err != nil {
			t.Fatalf("YAML() of a valid scenario does not parse:\n%s\n%v", out, err)
		}
	})
}

// TestDocExample keeps the full example in docs/scenario.md valid.
func TestDocExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/scenario.md")
	if err != nil {
		t.Skip("docs/scenario.md not found:", err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("no ```yaml block in docs/scenario.md")
	}
	sc, err := Parse([]byte(example), "skewed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	assertRoundTrip(t, sc)
}

// TestPortList: services.ports is taken as written, protocol and
// targetPort defaulted per port, the single-pattern fields left zero;
// without it PortList derives the ports from them.
func TestPortList(t *testing.T) {
	sc, err := testCatalog.Parse([]byte("engine: sim\nservices:\n  count: 2\n  ports:\n  - {name: dns-tcp, port: 53, targetPort: 5353}\n  - {name: dns, port: 53, protocol: UDP}\n"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []PortSpec{{Name: "dns-tcp", Protocol: "TCP", Port: 53, TargetPort: 5353}, {Name: "dns", Protocol: "UDP", Port: 53, TargetPort: 53}}
	if got := sc.Services.PortList(); !reflect.DeepEqual(got, want) {
		t.Errorf("PortList = %+v, want %+v", got, want)
	}
	if sv := sc.Services; sv.PortsPerService != 0 || sv.Protocol != "" || sv.Port != 0 || sv.TargetPort != 0 {
		t.Errorf("single-pattern fields filled beside ports: %+v", sv)
	}
	if got := sc.Services.PortsLabel(); got != "2 ports (dns-tcp 53/TCP, dns 53/UDP)" {
		t.Errorf("PortsLabel = %q", got)
	}
	if got := sc.Services.Protocols(); !reflect.DeepEqual(got, []string{"TCP", "UDP"}) {
		t.Errorf("Protocols = %v", got)
	}
	assertRoundTrip(t, sc)
	// One unnamed port is allowed, as in Kubernetes.
	sc, err = testCatalog.Parse([]byte("services:\n  count: 2\n  ports:\n  - port: 8080\n"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.Services.PortList(); !reflect.DeepEqual(got, []PortSpec{{Protocol: "TCP", Port: 8080, TargetPort: 8080}}) {
		t.Errorf("unnamed port: %+v", got)
	}
	sc, err = testCatalog.Parse([]byte("services:\n  count: 2\n  portsPerService: 2\n  port: 80\n  targetPort: 9000\n"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want = []PortSpec{{Name: "p80", Protocol: "TCP", Port: 80, TargetPort: 9000}, {Name: "p81", Protocol: "TCP", Port: 81, TargetPort: 9001}}
	if got := sc.Services.PortList(); !reflect.DeepEqual(got, want) {
		t.Errorf("derived PortList = %+v, want %+v", got, want)
	}
}
