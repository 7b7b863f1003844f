package fidelity

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
)

// fakeNode answers Run with canned outputs by command line (an error
// for a line it does not know) and records what was run.
type fakeNode struct {
	out map[string]string
	ran []string
}

func (n *fakeNode) Do(fn func() error) error { return fn() }

func (n *fakeNode) Run(_ context.Context, _ []byte, name string, args ...string) ([]byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	n.ran = append(n.ran, line)
	if o, ok := n.out[line]; ok {
		return []byte(o), nil
	}
	return nil, errors.New("exit status 1")
}

// TestReadBackCommands: Read reads iptables and nft for every mode and a
// mode's own read-back commands (Mode.ReadBack) after them, in order: ipvs
// adds ipvsadm, ipset and kube-ipvs0's addresses, the last left out when
// it fails; a mode kube-proxy does not have is refused.
func TestReadBackCommands(t *testing.T) {
	out := map[string]string{
		"iptables-legacy-save": "*nat\n:KUBE-SERVICES - [0:0]\nCOMMIT\n", "iptables-nft-save": "", "ip6tables-legacy-save": "", "ip6tables-nft-save": "",
		"nft list tables": "", "ipvsadm -Sn": "-A -t 198.18.0.1:80 -s rr\n", "ipset save": "create KUBE-CLUSTER-IP hash:ip,port\n",
	}
	for mode, want := range map[string][]string{
		"iptables": {"iptables-legacy-save"},
		"nftables": {"iptables-legacy-save"},
		"ipvs":     {"iptables-legacy-save", "ipvsadm -Sn", "ipset save"},
	} {
		n := &fakeNode{out: out}
		r, err := Read(context.Background(), n, mode, Backends)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		var got []string
		for _, s := range r.Sections {
			got = append(got, s.Tool)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: sections %q, want %q", mode, got, want)
		}
		if ip := slices.Contains(n.ran, "ip -4 -o addr show dev kube-ipvs0"); ip != (mode == "ipvs") {
			t.Errorf("%s: ran %q", mode, n.ran)
		}
	}
	n := &fakeNode{out: out}
	delete(n.out, "ipset save")
	if _, err := Read(context.Background(), n, "ipvs", Backends); err == nil || !strings.Contains(err.Error(), "ipset save") {
		t.Errorf("ipvs without ipset: %v, want an error naming ipset save", err)
	}
	if _, err := Read(context.Background(), n, "userspace", Backends); err == nil || !strings.Contains(err.Error(), "want iptables, ipvs or nftables") {
		t.Errorf("userspace: %v, want refused", err)
	}
}
