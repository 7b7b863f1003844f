//go:build linux

package kubeproxy

import (
	"context"
	"errors"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/proxybench/proxybench/proxymodes"
)

// Go runtime metrics kube-proxy's metrics endpoint serves
// (k8s.io/component-base/metrics/legacyregistry registers Prometheus's
// Go collector).
const (
	// MetricHeap is the bytes of allocated heap objects
	// (runtime.MemStats.HeapAlloc).
	MetricHeap = "go_memstats_heap_alloc_bytes"
	// MetricGoroutines is the number of goroutines.
	MetricGoroutines = "go_goroutines"
)

// Resources is a running kube-proxy at one moment, for a long phase's
// samples (the soak): its CPU time and that of the rule programs it ran
// so far (user+system, /proc/<pid>/stat utime+stime, cutime+cstime),
// its resident set (VmRSS of the last 20 ms sample, bytes), and from one
// scrape of its metrics endpoint its Go heap (MetricHeap, bytes), its
// goroutines (MetricGoroutines) and its IPv4 syncs so far (MetricSync's
// count). Scraped is false when the scrape failed (ScrapeErr says why;
// the process figures stand).
type Resources struct {
	CPU, ChildCPU time.Duration
	RSS           int64
	Scraped       bool
	ScrapeErr     string
	Heap          uint64
	Goroutines    int
	Syncs         uint64
}

// Resources reads the running kube-proxy's Resources. Errors: no
// kube-proxy running, or it exited (proxymodes.Failed).
func (p *Proxier) Resources(ctx context.Context) (Resources, error) {
	if p.kp == nil {
		return Resources{}, errors.New("kubeproxy: no kube-proxy running")
	}
	if err := p.exited("the soak", proxymodes.SyncStats{}, 0); err != nil {
		return Resources{}, err
	}
	u := p.kp.Usage()
	r := Resources{CPU: u.CPU, ChildCPU: u.ChildCPU, RSS: u.RSS}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m, err := p.kp.Scrape(sctx)
	if err != nil {
		r.ScrapeErr = err.Error()
		return r, nil
	}
	r.Scraped = true
	if v, ok := gauge(m, MetricHeap); ok {
		r.Heap = uint64(v)
	}
	if v, ok := gauge(m, MetricGoroutines); ok {
		r.Goroutines = int(v)
	}
	if h, err := m.Histogram(MetricSync, "IPv4"); err == nil {
		r.Syncs = h.Count
	}
	return r, nil
}

// gauge is the value of family name's first series, a gauge or an
// untyped one (false: not in the scrape).
func gauge(m Metrics, name string) (float64, bool) {
	f, ok := m[name]
	if !ok || len(f.GetMetric()) == 0 {
		return 0, false
	}
	s := f.GetMetric()[0]
	switch f.GetType() {
	case dto.MetricType_GAUGE:
		return s.GetGauge().GetValue(), true
	case dto.MetricType_UNTYPED:
		return s.GetUntyped().GetValue(), true
	}
	return 0, false
}
