//go:build linux

package runner

import (
	"testing"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/proxymodes/iptables"
	"github.com/proxybench/proxybench/proxymodes/userspace"
	"github.com/proxybench/proxybench/reports"
)

// TestFillTraits: rows without traits get their mode's (a kube-proxy row
// its base mode's variant's: unordered), rows with traits and rows of an
// unknown mode are kept.
func TestFillTraits(t *testing.T) {
	kept := measure.ModeTraits{Walk: "X"}
	r := &reports.Result{Modes: []reports.ModeResult{
		{Mode: "none"},
		{Mode: "iptables"},
		{Mode: "iptables (kube-proxy)", BaseMode: "iptables", Implementation: "kube-proxy"},
		{Mode: "nftables (kube-proxy)", BaseMode: "nftables", Implementation: "kube-proxy"},
		{Mode: "userspace"},
		{Mode: "iptables", Traits: kept},
		{Mode: "nosuchmode"},
	}}
	FillTraits(r)
	kp := iptables.Mode.Traits
	kp.Unordered = true
	for i, want := range []measure.ModeTraits{{}, iptables.Mode.Traits, kp, {}, userspace.Mode.Traits, kept, {}} {
		if got := r.Modes[i].Traits; got != want {
			t.Errorf("%s: traits %+v, want %+v", r.Modes[i].Mode, got, want)
		}
	}
	if iptables.Mode.Traits.Walk == "" || !userspace.Mode.Traits.Terminates {
		t.Errorf("iptables and userspace lost their traits: %+v, %+v", iptables.Mode.Traits, userspace.Mode.Traits)
	}
}
