package reports

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/scenarios"
)

// TestMarkdownUnfinishedKubeProxyRow: a kube-proxy row whose first sync
// outlasted its bound shows, beside builtin, "not finished after" with
// how far it got instead of a sync time, no sync.full when the data plane
// never answered, the progress readings, and the finding that it stopped
// early; an IPVS row that finished shows its one sync metric.
func TestMarkdownUnfinishedKubeProxyRow(t *testing.T) {
	prog := []measure.SyncProgress{
		{AtNs: int64(time.Minute), VirtualServers: 10001, WantVirtualServers: 10001, RealServers: 30000, Addresses: 10001,
			WantClusterIP: 10001, WantIPVSIPs: 10001, IPSets: map[string]int{"KUBE-CLUSTER-IP": 0, "KUBE-IPVS-IPS": 4000}},
	}
	kp := &measure.KubeProxy{Version: "v1.37.2", Unfinished: &measure.Unfinished{BoundNs: int64(40 * time.Minute),
		Summary: "10001 of 10001 virtual servers, ipset entries: KUBE-CLUSTER-IP 0 of 10001, KUBE-IPVS-IPS 4000 of 10001"}, Progress: prog}
	done := &measure.KubeProxy{Version: "v1.37.2", AfterFullSync: []measure.Metric{{Name: kpSync, Family: "IPv4", Count: 1, Sum: 12.5}}}
	r := &Result{Scenario: &scenarios.Scenario{Name: "u"}, Modes: []ModeResult{
		{Mode: "ipvs", Services: 10000, SyncFullSummary: Summary{Count: 3, P50: int64(2 * time.Second)}},
		{Mode: "ipvs (kube-proxy)", Implementation: "kube-proxy", BaseMode: "ipvs", Services: 10000, KubeProxy: kp,
			Partial: "kube-proxy's first sync not finished after 40m0s"},
		{Mode: "ipvs (kube-proxy v1.36.3)", Implementation: "kube-proxy", BaseMode: "ipvs", Services: 10000, KubeProxy: done,
			SyncFullSummary: Summary{Count: 1, P50: int64(9 * time.Second)}},
	}}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	var row, doneRow string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "| ipvs (kube-proxy) | kube-proxy") {
			row = l
		}
		if strings.HasPrefix(l, "| ipvs (kube-proxy v1.36.3) | kube-proxy") {
			doneRow = l
		}
	}
	if !strings.Contains(row, "not finished after 2400.000 s") || !strings.Contains(row, "KUBE-CLUSTER-IP 0 of 10001") {
		t.Errorf("unfinished row %q: want \"not finished after 2400.000 s\" (40m) and its progress", row)
	}
	if cells := strings.Split(row, "|"); len(cells) < 4 || strings.TrimSpace(cells[3]) != "-" {
		t.Errorf("unfinished row %q: sync.full must be \"-\" when the data plane never answered", row)
	}
	if !strings.Contains(doneRow, "12.5") || !strings.Contains(doneRow, "sync_proxy_rules") {
		t.Errorf("finished IPVS row %q: want its sync_proxy_rules metric (12.5 s) as its full sync", doneRow)
	}
	for _, want := range []string{"First sync's progress, ipvs (kube-proxy)", "KUBE-IPVS-IPS 4000 of 10001 entries", "stopped early"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

// TestMarkdownFailedKubeProxyRow: a kube-proxy row whose kube-proxy was
// killed is shown as FAILED with why, its setup table says its first
// sync never came, and the details say how it exited with its log's
// tail; a row killed after its first sync keeps that sync's figures.
func TestMarkdownFailedKubeProxyRow(t *testing.T) {
	exit := &measure.KubeProxyExit{Status: "signal: killed", Code: -1, Signal: "SIGKILL", During: "its first sync", RanNs: int64(760 * time.Millisecond),
		LastScrapeNs: int64(650 * time.Millisecond), LogTail: []string{"I1201 Reloading service iptables data numServices=21"}}
	before := &measure.KubeProxy{Version: "v1.37.2", ControlPlaneNs: int64(3 * time.Second), Exit: exit}
	after := &measure.KubeProxy{Version: "v1.37.2", FirstSyncNs: int64(time.Second), Exit: &measure.KubeProxyExit{Status: "signal: killed", Code: -1, Signal: "SIGKILL", During: "a later sync"},
		AfterFullSync: []measure.Metric{{Name: kpSyncFull, Family: "IPv4", Count: 1, Sum: 0.25}}}
	r := &Result{Scenario: &scenarios.Scenario{Name: "f"}, Modes: []ModeResult{
		{Mode: "iptables", Services: 20, SyncFullSummary: Summary{Count: 1, P50: int64(time.Second)}},
		{Mode: "iptables (kube-proxy)", Implementation: "kube-proxy", BaseMode: "iptables", Services: 20, KubeProxy: before,
			Partial: "kube-proxy exited on its own during its first sync", Failed: "mode iptables (kube-proxy) at 20 services: kube-proxy exited on its own during its first sync"},
		{Mode: "nftables (kube-proxy)", Implementation: "kube-proxy", BaseMode: "nftables", Services: 20, KubeProxy: after,
			SyncFull: []measure.SyncStats{{Kind: "full", Wall: 2 * time.Second}}, SyncFullSummary: Summary{Count: 1, P50: int64(2 * time.Second)},
			Partial: "incremental sync: kube-proxy exited", Failed: "mode nftables (kube-proxy) at 20 services: incremental sync: kube-proxy exited on its own during a later sync"},
	}}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, r); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"iptables (kube-proxy): FAILED, its figures are what was measured before (mode iptables (kube-proxy) at 20 services: kube-proxy exited",
		"nftables (kube-proxy): FAILED",
		"kube-proxy exited before it (signal: killed)",
		"The kube-proxy of iptables (kube-proxy) exited on its own during its first sync: signal: killed (SIGKILL: another process, or the kernel's OOM killer)",
		"I1201 Reloading service iptables data numServices=21",
		"The kube-proxy of nftables (kube-proxy) exited on its own during a later sync",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	var h bytes.Buffer
	if err := WriteHTML(&h, r, DefaultBudgets); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FAILED", "The kube-proxy of iptables (kube-proxy) exited on its own during its first sync", "kube-proxy exited before it (signal: killed)"} {
		if !strings.Contains(h.String(), want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}
	if strings.Contains(out, "iptables (kube-proxy): stopped early") {
		t.Errorf("a failed row is shown as FAILED, not also as stopped early:\n%s", out)
	}
	seen := false
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "| nftables (kube-proxy) | kube-proxy") {
			seen = true
			if !strings.Contains(l, "0.250") {
				t.Errorf("row killed after its first sync %q: want that sync's metric (0.250 s) kept", l)
			}
		}
	}
	if !seen {
		t.Errorf("no side-by-side line for nftables (kube-proxy):\n%s", out)
	}
}
