package scenarios

import (
	"strings"
	"testing"
)

// TestPhaseChecks: validate asks the catalog's phase rules: a TCP phase
// over a UDP first port, a phase kube-proxy rows do not run, and a
// phase's own check are refused naming the field; a phase the scenario
// does not want is not checked; without a catalog none is.
func TestPhaseChecks(t *testing.T) {
	rules := []PhaseRule{
		{Name: "churn", Field: "churn", TCP: true, Wants: func(s *Scenario) bool { return s.Churn.Rate > 0 }},
		{Name: "lifecycle", Field: "lifecycle", NotWithKubeProxy: "restarts the proxier", Wants: func(s *Scenario) bool { return s.Lifecycle != nil }},
		{Name: "own", Field: "seed", Check: func(s *Scenario) []*FieldError {
			if s.Seed == 13 {
				return []*FieldError{{Field: "seed", Msg: "unlucky", Fix: "use another seed"}}
			}
			return nil
		}},
	}
	cat := Catalog{Modes: []string{"none", "iptables"}, Phases: rules}
	for _, tc := range []struct {
		name, yaml, field, want string
	}{
		{"udp first port with churn", "services:\n  count: 1\n  ports:\n  - {name: dns, port: 53, protocol: UDP}\n  - {name: dns-tcp, port: 53}\nchurn: {rate: 5}\n", "services.ports[0].protocol", "churn probes connect over TCP"},
		{"kube-proxy with lifecycle", "modes: [iptables]\nimplementation: [kube-proxy]\nservices: {count: 1}\nlifecycle: {}\n", "lifecycle", "not yet with implementation kube-proxy"},
		{"own check", "seed: 13\nservices: {count: 1}\n", "seed", "unlucky"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cat.Parse([]byte(tc.yaml), "p.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one at %s saying %q", err, tc.field, tc.want)
			}
			if _, err := Parse([]byte(tc.yaml), "p.yaml"); err != nil && strings.Contains(err.Error(), tc.want) {
				t.Errorf("without a catalog the phase rule was checked: %v", err)
			}
		})
	}
	if _, err := cat.Parse([]byte("services:\n  count: 1\n  protocol: UDP\n"), "p.yaml"); err != nil {
		t.Errorf("UDP without a TCP phase: %v", err)
	}
}

// TestRefuseUnmodelled: an engine refuses a phase it does not model that
// the scenario wants, naming the field, and accepts what it models.
func TestRefuseUnmodelled(t *testing.T) {
	rules := []PhaseRule{{Name: "traffic", Field: "traffic"}, {Name: "lifecycle", Field: "lifecycle", Wants: func(s *Scenario) bool { return s.Lifecycle != nil }}}
	sc, err := Parse([]byte("services: {count: 1}\nlifecycle: {}\n"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	err = RefuseUnmodelled(sc, rules, []string{"traffic"}, "sim")
	fe, ok := err.(*FieldError)
	if !ok || fe.Field != "lifecycle" || fe.Line != 2 || !strings.Contains(fe.Fix, "engine: real") {
		t.Fatalf("error %#v, want a FieldError at lifecycle (line 2) with a fix", err)
	}
	sc.Lifecycle = nil
	if err := RefuseUnmodelled(sc, rules, []string{"traffic"}, "sim"); err != nil {
		t.Errorf("modelled phases refused: %v", err)
	}
}
