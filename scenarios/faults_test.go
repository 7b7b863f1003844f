package scenarios

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestOutOfBandDefaults: an empty outOfBand block makes every change
// each row has (the canary only on kube-proxy rows of iptables,
// excludedVirtualServer only with ipvs.excludeCIDRs), with a 1 m timeout
// and a 200 ms poll; a mode's list narrows its rows' changes.
func TestOutOfBandDefaults(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       map[string][]string // row "mode/impl" -> changes
	}{
		{"builtin iptables and nftables", "modes: [none, iptables, nftables]\nfaults: {outOfBand: {}}\n",
			map[string][]string{"iptables/builtin": {OOBServiceChain}, "nftables/builtin": {OOBMapElement}, "none/builtin": nil}},
		{"kube-proxy iptables", "modes: [iptables]\nimplementation: [builtin, kube-proxy]\nfaults: {outOfBand: {}}\n",
			map[string][]string{"iptables/builtin": {OOBServiceChain}, "iptables/kube-proxy": {OOBServiceChain, OOBCanary}}},
		{"ipvs without excludeCIDRs", "modes: [ipvs]\nfaults: {outOfBand: {}}\n", map[string][]string{"ipvs/builtin": {OOBRealServer, OOBVirtualServer}}},
		{"ipvs with excludeCIDRs", "modes: [ipvs]\nipvs: {excludeCIDRs: [198.19.250.0/24]}\nfaults: {outOfBand: {}}\n",
			map[string][]string{"ipvs/builtin": {OOBRealServer, OOBVirtualServer, OOBExcludedVirtualServer}}},
		{"a list narrows", "modes: [iptables, ipvs]\nimplementation: [kube-proxy]\nfaults: {outOfBand: {iptables: [canary], ipvs: []}}\n",
			map[string][]string{"iptables/kube-proxy": {OOBCanary}, "ipvs/kube-proxy": nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := Parse([]byte("services: {count: 10}\n"+tc.yaml), "o.yaml")
			if err != nil {
				t.Fatal(err)
			}
			o := sc.Faults.OutOfBand
			if o.Timeout.Duration != time.Minute || o.Poll.Duration != 200*time.Millisecond {
				t.Errorf("timeout %s poll %s, want 1m 200ms", o.Timeout.Duration, o.Poll.Duration)
			}
			for row, want := range tc.want {
				mode, impl, _ := strings.Cut(row, "/")
				var got []string
				for _, c := range OOBChanges {
					if o.Wants(c, mode, impl) {
						got = append(got, c.Name)
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s: %v, want %v", row, got, want)
				}
			}
		})
	}
}

// TestFaultProblems: a fault on a mode or implementation that cannot have
// it is refused at its own field and line with a fix, and so is a bad
// slice-churn block.
func TestFaultProblems(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, field, msg string
		line                   int
	}{
		{"real server on iptables", "modes: [iptables]\nfaults:\n  outOfBand:\n    iptables: [serviceChain, realServer]\n", "faults.outOfBand.iptables[1]", "change of mode ipvs", 5},
		{"real server on iptables, ipvs not run", "modes: [ipvs]\nfaults:\n  outOfBand:\n    iptables: [realServer]\n", "faults.outOfBand.iptables[0]", "change of mode ipvs", 5},
		{"unknown change", "modes: [iptables]\nfaults:\n  outOfBand:\n    iptables: [flushAll]\n", "faults.outOfBand.iptables[0]", "unknown out-of-band change", 5},
		{"twice", "modes: [iptables]\nfaults:\n  outOfBand:\n    iptables: [serviceChain, serviceChain]\n", "faults.outOfBand.iptables[1]", "listed twice", 5},
		{"canary on builtin", "modes: [iptables]\nfaults:\n  outOfBand:\n    iptables: [canary]\n", "faults.outOfBand.iptables[0]", "canary chain", 5},
		{"excluded without excludeCIDRs", "modes: [ipvs]\nfaults:\n  outOfBand:\n    ipvs: [excludedVirtualServer]\n", "faults.outOfBand.ipvs[0]", "ipvs.excludeCIDRs", 5},
		{"nothing for userspace", "modes: [userspace]\nfaults:\n  outOfBand: {}\n", "faults.outOfBand", "no row", 4},
		{"timeout", "modes: [iptables]\nfaults:\n  outOfBand:\n    timeout: 500ms\n", "faults.outOfBand.timeout", "out of range", 5},
		{"slice churn on builtin", "modes: [iptables]\nimplementation: [builtin, kube-proxy]\nfaults:\n  sliceChurn: {duration: 1m}\n", "faults.sliceChurn", "no EndpointSlices", 5},
		{"slice churn too short", "modes: [iptables]\nimplementation: [kube-proxy]\nfaults:\n  sliceChurn:\n    duration: 15s\n", "faults.sliceChurn.duration", "shorter than two intervals", 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte("services: {count: 10}\n"+tc.yaml), "f.yaml")
			var fe *FieldError
			for _, e := range fieldErrs(err) {
				if e.Field == tc.field && strings.Contains(e.Msg, tc.msg) && e.Fix != "" && e.Line == tc.line {
					fe = e
				}
			}
			if fe == nil {
				t.Errorf("got %v; want an error at f.yaml:%d naming %s (%q) with a fix", err, tc.line, tc.field, tc.msg)
			}
		})
	}
	// Accepted: a slice churn on kube-proxy rows beside the baseline.
	if _, err := Parse([]byte("services: {count: 10}\nmodes: [none, nftables]\nimplementation: [kube-proxy]\nfaults: {sliceChurn: {duration: 1m}}\n"), "f.yaml"); err != nil {
		t.Errorf("slice churn on kube-proxy rows refused: %v", err)
	}
}

func fieldErrs(err error) []*FieldError {
	var out []*FieldError
	var fe *FieldError
	if errors.As(err, &fe) {
		out = append(out, fe)
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			out = append(out, fieldErrs(e)...)
		}
	}
	return out
}
