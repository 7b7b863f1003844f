package scenarios

import (
	"strings"
	"testing"
)

// TestGates: valid gates parse with their values in the figure's unit;
// each kind of mistake is one error naming gates[i].field and its line.
func TestGates(t *testing.T) {
	sc, err := Parse([]byte("services:\n  count: 10\ngates:\n  - {figure: lookup.latency.p99, mode: iptables, position: last, op: \"<\", value: 2ms}\n  - {figure: fairness.jain, op: \">\", value: 0.95}\n"), "g.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if g := sc.Gates[0]; g.Value.V != 2e6 || !g.Value.IsDuration || !g.Holds(1.9e6) || g.Holds(2e6) {
		t.Errorf("gate 0: %+v", g)
	}
	if g := sc.Gates[1]; g.Value.V != 0.95 || g.Value.IsDuration || g.String() != "fairness.jain > 0.95" {
		t.Errorf("gate 1: %+v %s", g, g)
	}
	for _, c := range []struct{ gate, field, msg string }{
		{`{figure: sync.full, op: "<", value: 5}`, "gates[0].value", "has no unit"},
		{`{figure: fairness.jain, op: ">", value: 1s}`, "gates[0].value", "is a duration"},
		{`{figure: fairness.jian, op: ">", value: 1}`, "gates[0].figure", `did you mean "fairness.jain"`},
		{`{figure: sync.full, op: "=", value: 1s}`, "gates[0].op", "unknown operator"},
		{`{figure: sync.full, op: "<", value: soon}`, "gates[0].value", "neither a duration nor a number"},
		{`{figure: sync.full, op: "<"}`, "gates[0].value", "is missing"},
		{`{figure: sync.full, position: last, op: "<", value: 1s}`, "gates[0].position", "has no service position"},
		{`{figure: lookup.errors, position: lsat, op: "<", value: 1}`, "gates[0].position", `did you mean "last"`},
		{`{figure: sync.full, mode: ipvs, op: "<", value: 1s}`, "gates[0].mode", "not measured"},
		{`{figure: sync.full, services: 7, op: "<", value: 1s}`, "gates[0].services", "not a measured size"},
		{`{figure: sync.full, op: "<", value: 1s, bogus: 1}`, "gates[0].bogus", "unknown field"},
	} {
		_, err := Parse([]byte("services:\n  count: 10\ngates:\n  - "+c.gate+"\n"), "g.yaml")
		if err == nil {
			t.Errorf("%s: no error", c.gate)
			continue
		}
		found := false
		for _, fe := range fieldErrors(t, err) {
			if fe.Field == c.field && fe.Line == 4 && strings.Contains(fe.Error(), c.msg) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: want %s at line 4 with %q, got %v", c.gate, c.field, c.msg, err)
		}
	}
	// A gate on lookup.kernel when it is turned off could never pass.
	_, err = Parse([]byte("services:\n  count: 10\ntraffic: {kernelTime: false}\ngates:\n  - {figure: lookup.kernel.p50, op: \"<\", value: 1ms}\n"), "g.yaml")
	if err == nil || !strings.Contains(err.Error(), "gates[0].figure: lookup.kernel.p50 is not measured: traffic.kernelTime is false") {
		t.Errorf("a lookup.kernel gate with kernelTime off: %v", err)
	}
}
