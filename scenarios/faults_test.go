package scenarios

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestOutOfBandDefaults: an empty outOfBand block gets every change the
// scenario's rows have (the canary only with kube-proxy rows of
// iptables, excludedVirtualServer only with ipvs.excludeCIDRs), a 1 m
// timeout and a 200 ms poll.
func TestOutOfBandDefaults(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string
	}{
		{"builtin iptables and nftables", "modes: [none, iptables, nftables]\n", []string{OOBServiceChain, OOBMapElement}},
		{"kube-proxy iptables", "modes: [iptables]\nimplementation: [builtin, kube-proxy]\n", []string{OOBServiceChain, OOBCanary}},
		{"ipvs without excludeCIDRs", "modes: [ipvs]\n", []string{OOBRealServer, OOBVirtualServer}},
		{"ipvs with excludeCIDRs", "modes: [ipvs]\nipvs: {excludeCIDRs: [198.19.250.0/24]}\n", []string{OOBRealServer, OOBVirtualServer, OOBExcludedVirtualServer}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc, err := Parse([]byte("services: {count: 10}\n"+tc.yaml+"faults: {outOfBand: {}}\n"), "o.yaml")
			if err != nil {
				t.Fatal(err)
			}
			o := sc.Faults.OutOfBand
			if !slices.Equal(o.Changes, tc.want) || o.Timeout.Duration != time.Minute || o.Poll.Duration != 200*time.Millisecond {
				t.Errorf("changes %v timeout %s poll %s, want %v 1m 200ms", o.Changes, o.Timeout.Duration, o.Poll.Duration, tc.want)
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
		{"real server on iptables", "modes: [iptables]\nfaults:\n  outOfBand:\n    changes: [serviceChain, realServer]\n", "faults.outOfBand.changes[1]", "change of mode ipvs", 5},
		{"unknown change", "modes: [iptables]\nfaults:\n  outOfBand:\n    changes: [flushAll]\n", "faults.outOfBand.changes[0]", "unknown out-of-band change", 5},
		{"twice", "modes: [iptables]\nfaults:\n  outOfBand:\n    changes: [serviceChain, serviceChain]\n", "faults.outOfBand.changes[1]", "listed twice", 5},
		{"canary on builtin", "modes: [iptables]\nfaults:\n  outOfBand:\n    changes: [canary]\n", "faults.outOfBand.changes[0]", "canary chain", 5},
		{"excluded without excludeCIDRs", "modes: [ipvs]\nfaults:\n  outOfBand:\n    changes: [excludedVirtualServer]\n", "faults.outOfBand.changes[0]", "ipvs.excludeCIDRs", 5},
		{"nothing for userspace", "modes: [userspace]\nfaults:\n  outOfBand: {}\n", "faults.outOfBand.changes", "no change", 4},
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
