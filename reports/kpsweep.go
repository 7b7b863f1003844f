package reports

import "fmt"

// KubeProxySweepPoint is one size of sweep.services on a kube-proxy row.
// The row runs every size on one control plane and one kube-proxy: the
// first size is its first sync (the API objects created before
// kube-proxy starts), each later size a step from the size before
// through the API (a Service and its EndpointSlice created per new
// service, with endpoints.kubernetes.io/last-change-trigger-time,
// deleted per removed one, 64 writes in flight), programmed by the
// running kube-proxy. Durations in ns, sizes in bytes.
type KubeProxySweepPoint struct {
	// Services is the size; From the size before (0: the first size).
	Services int `json:"services"`
	From     int `json:"from"`
	// Created, Updated, Deleted count the Services the step wrote (the
	// first size: every one created).
	Created int `json:"created"`
	Updated int `json:"updated,omitempty"`
	Deleted int `json:"deleted,omitempty"`
	// WritesNs is the step's API writes, first sent to last returned
	// (the first size: the API objects' creation, before kube-proxy
	// started).
	WritesNs int64 `json:"writesNs"`
	// SyncNs is the sync after growth seen from the data plane: from the
	// last write returned (the first size: from the objects created) to
	// every probed new service answering (sync.full's wall).
	SyncNs int64 `json:"syncNs"`
	Probed int   `json:"probed"`
	// KubeProxySyncs counts kube-proxy's IPv4 syncs in the step by its
	// log (writes included; the first size: its first sync, 1), and
	// KubeProxySyncSumNs is the growth of its sync histogram's sum over
	// the step; LastSyncNs the last of those syncs' duration (the one
	// that finished the step; the first size: its first sync by its
	// metric).
	KubeProxySyncs     int   `json:"kubeProxySyncs"`
	KubeProxySyncSumNs int64 `json:"kubeProxySyncSumNs"`
	LastSyncNs         int64 `json:"lastSyncNs"`
	// Objects and Bytes are what kube-proxy had installed after the
	// step, read back (0: not read, IPVS).
	Objects int `json:"objects"`
	Bytes   int `json:"bytes"`
	// CPUNs and ChildCPUNs are kube-proxy's own CPU and its rule
	// programs' over the size's row (from the end of the size before:
	// the step and every phase at this size; the first size from
	// kube-proxy's start); RSSBytes its resident set at the row's end
	// and PeakRSSBytes its largest so far.
	CPUNs        int64 `json:"cpuNs"`
	ChildCPUNs   int64 `json:"childCpuNs"`
	RSSBytes     int64 `json:"rssBytes"`
	PeakRSSBytes int64 `json:"peakRssBytes"`
}

// PhaseKubeProxySweep is the kube-proxy sweep's name in Section.Phase.
const PhaseKubeProxySweep = "sweep.services"

// kubeProxySweepTitle is KubeProxySweepReport's section title.
const kubeProxySweepTitle = "kube-proxy across sweep.services: one control plane, the service count grown through the API"

// KubeProxySweepReport is the section of a kube-proxy row's size of
// sweep.services (none for other rows): one row per size, keyed by the
// service count, with the step's API writes, the sync after it by the
// data plane and by kube-proxy's own account (its syncs in the step,
// their summed duration, the last one), the rule objects read back, and
// kube-proxy's CPU and memory over the size. The lookup latency of each
// size is the core lookup table's (row label "<mode> @<size>").
func KubeProxySweepReport(label string, mr *ModeResult) []Section {
	k := mr.KubeProxySweep
	if k == nil {
		return nil
	}
	sec := Section{Phase: PhaseKubeProxySweep, Title: kubeProxySweepTitle, Scope: "row",
		Intro: "One control plane and one kube-proxy per row over every size: the first size is kube-proxy's first sync over API objects created before it started; each later size a step from the size before, its Services and EndpointSlices created (or deleted) through the API with 64 writes in flight while kube-proxy runs, as a cluster grows. `sync after growth` is from the last write's return (the first size: from the objects created) to every probed new service answering through kube-proxy's rules; kube-proxy's syncs are its own over the step (writes included), by its log and its sync histogram. CPU and RSS are kube-proxy's over the size (the step and every phase at that size).",
		Columns: []Column{{Name: "services", Unit: "count", Key: true}, {Name: "from", Unit: "count"},
			{Name: "created", Unit: "count"}, {Name: "deleted", Unit: "count"},
			{Name: "API writes", Unit: "s", Figure: "sweep.writes"}, {Name: "sync after growth (data plane)", Unit: "s", Figure: "sweep.sync"},
			{Name: "kube-proxy syncs in the step", Unit: "count", Figure: "sweep.kubeproxy.syncs"},
			{Name: "kube-proxy sync time in the step", Unit: "s", Figure: "sweep.kubeproxy.sum"},
			{Name: "kube-proxy last sync", Unit: "s", Figure: "sweep.kubeproxy.last"},
			{Name: "rule objects", Unit: "count", Figure: "sweep.objects"},
			{Name: "kube-proxy CPU", Unit: "s", Figure: "sweep.cpu"}, {Name: "rule programs CPU", Unit: "s", Figure: "sweep.programs.cpu"},
			{Name: "RSS at end", Unit: "MiB", Figure: "sweep.rss"}, {Name: "peak RSS", Unit: "MiB", Figure: "sweep.rss.peak"}}}
	sec3 := func(ns int64) Cell { return Num(float64(ns)/1e9, "%.3f") }
	mib := func(b int64) Cell {
		if b <= 0 {
			return Missing()
		}
		return Num(float64(b)/(1<<20), "%.1f")
	}
	objects := Missing()
	if k.Objects > 0 {
		objects = Int(k.Objects)
	}
	_ = sec.AddRow(label, Int(k.Services), Int(k.From), Int(k.Created), Int(k.Deleted),
		sec3(k.WritesNs), sec3(k.SyncNs), Int(k.KubeProxySyncs), sec3(k.KubeProxySyncSumNs), sec3(k.LastSyncNs), objects,
		Num(float64(k.CPUNs)/1e9, "%.2f"), Num(float64(k.ChildCPUNs)/1e9, "%.2f"), mib(k.RSSBytes), mib(k.PeakRSSBytes))
	if k.From == 0 {
		sec.Notes = appendNote(sec.Notes, fmt.Sprintf("%s: the first size (%d services) is kube-proxy's first sync; its API writes are the objects' creation before kube-proxy started", label, k.Services))
	}
	return []Section{sec}
}
