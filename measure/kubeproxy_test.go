package measure

import (
	"reflect"
	"testing"
)

// TestAddMetricsAndPrograms: series and programs merge by their key in
// order of first appearance, counts and times added, the larger peak
// kept, and neither input is changed.
func TestAddMetricsAndPrograms(t *testing.T) {
	a := []Metric{{Name: "sync", Family: "IPv4", Count: 1, Sum: 2}, {Name: "sync", Family: "IPv6", Count: 1, Sum: 0.5}}
	b := []Metric{{Name: "partial", Family: "IPv4", Count: 3, Sum: 0.3}, {Name: "sync", Family: "IPv4", Count: 2, Sum: 1}}
	got := AddMetrics(a, b)
	want := []Metric{{Name: "sync", Family: "IPv4", Count: 3, Sum: 3}, {Name: "sync", Family: "IPv6", Count: 1, Sum: 0.5}, {Name: "partial", Family: "IPv4", Count: 3, Sum: 0.3}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("AddMetrics = %+v, want %+v", got, want)
	}
	if a[0].Count != 1 {
		t.Errorf("AddMetrics changed its input: %+v", a)
	}
	p := AddPrograms([]ProgramUse{{Command: "nft -f -", Runs: 1, CPUNs: 10, WallNs: 20, PeakRSSBytes: 5}},
		[]ProgramUse{{Command: "ipset add", Runs: 4, CPUNs: 1, WallNs: 2, PeakRSSBytes: 1}, {Command: "nft -f -", Runs: 2, CPUNs: 5, WallNs: 5, PeakRSSBytes: 9}})
	wantP := []ProgramUse{{Command: "nft -f -", Runs: 3, CPUNs: 15, WallNs: 25, PeakRSSBytes: 9}, {Command: "ipset add", Runs: 4, CPUNs: 1, WallNs: 2, PeakRSSBytes: 1}}
	if !reflect.DeepEqual(p, wantP) {
		t.Errorf("AddPrograms = %+v, want %+v", p, wantP)
	}
}
