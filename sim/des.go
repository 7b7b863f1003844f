package sim

import (
	"math"
	"math/rand"
	"runtime"
	"sort"
	"sync"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/proxybench/proxybench/proxymodes/syncloop"
	"github.com/proxybench/proxybench/reports"
)

// epoch is the simulated clock's origin (any fixed instant works: the
// sync loop only looks at differences).
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// SyncCost returns the wall and CPU time of one sync on a node: full or
// incremental, covering changed changes. rng is the node's own source
// (for noise).
type SyncCost func(full bool, changed int, rng *rand.Rand) (wall, cpu time.Duration)

// ClusterSpec is a control-plane simulation: Nodes kube-proxies, each
// running kube-proxy's sync loop (syncloop.State with MinSyncPeriod and
// SyncPeriod) over the same stream of changes at Arrivals (offsets from
// the start, ascending), syncing at Cost.
type ClusterSpec struct {
	Nodes                     int
	MinSyncPeriod, SyncPeriod time.Duration
	Arrivals                  []time.Duration
	// End bounds the simulation: no sync starts after it (the churn
	// duration plus its grace period).
	End  time.Duration
	Cost SyncCost
	// WatchDelay is the mean of each node's delay in seeing changes
	// (exponential, drawn once per node; node 0 has none): the per-node
	// jitter of the informer watch. Zero: every node sees a change at once.
	WatchDelay time.Duration
	// Delay is added to every node's delay, node 0's included: the time
	// from a change to any node's seeing it (kube-proxy rows: the API
	// write and watch delivery, ImplementationCost.DeliveryNs). Zero: a
	// node 0 that sees every change at once.
	Delay time.Duration
	// MinFromEnd holds each node's next sync until MinSyncPeriod after
	// the end of its previous one as well (syncloop.State.MinFromEnd:
	// kube-proxy's runner; the sim's kube-proxy rows).
	MinFromEnd bool
	// Phase gives every node but node 0 a random phase of its periodic
	// sync (its last sync before the start is uniform in [0, SyncPeriod)),
	// as kube-proxies that started at different times have.
	Phase bool
	Seed  int64
	// Workers bounds the goroutines (0: GOMAXPROCS).
	Workers int
}

// NodeSync is one sync of a node, at an offset from the start.
type NodeSync struct {
	At, Wall, CPU time.Duration
	Full          bool
	Changed       int
}

// ClusterResult pools what every node observed, as the SLI pools
// kube-proxy's network_programming_duration_seconds across nodes.
type ClusterResult struct {
	// Latency summarises programming latency (ns) over every node and
	// change; Buckets counts it in kube-proxy's buckets.
	Latency reports.Summary
	Buckets []reports.Bucket
	// Node0 holds node 0's latency per change (-1: not programmed before
	// End) and its syncs.
	Node0      []int64
	Node0Syncs []NodeSync
	// Unprogrammed counts (node, change) pairs not programmed before End.
	Unprogrammed int
	// SyncWall summarises sync wall times by kind over every node;
	// SyncBuckets in kube-proxy's sync_proxy_rules_duration_seconds
	// buckets; Syncs counts them.
	SyncWall    map[string]reports.Summary
	SyncBuckets map[string][]reports.Bucket
	Syncs       map[string]int
	// SyncCPUPerNode summarises each node's total sync CPU time (ns).
	SyncCPUPerNode reports.Summary
}

// SimulateNode runs one node's sync loop over arrivals (offsets,
// ascending) as syncloop.Runner would in real time, with syncs taking
// cost: the node is in sync at offset start (its last sync, full,
// started there; start <= 0), each change is recorded (State.Change) when
// it arrives, a sync starts whenever State.NextRun says so and covers
// every change that arrived before it, and takes wall time. covered is
// called per change with the offset at which the sync that includes it
// completes; onSync per sync. No sync starts after end.
func SimulateNode(st *syncloop.State, start time.Duration, arrivals []time.Duration, end time.Duration,
	cost func(full bool, changed int) (wall, cpu time.Duration), covered func(change int, at time.Duration), onSync func(NodeSync)) {
	st.Start(epoch.Add(start))
	st.Done(nil)
	st.Ended(epoch.Add(start))
	now := time.Duration(0)
	i, done := 0, 0
	for {
		next := st.NextRun(epoch.Add(now)).Sub(epoch)
		if i < len(arrivals) && arrivals[i] <= next {
			now = max(now, arrivals[i])
			st.Change(epoch.Add(now))
			i++
			continue
		}
		if next > end {
			return
		}
		if i == len(arrivals) && done == i && onSync == nil {
			return // nothing left to cover and no one records periodic syncs
		}
		now = next
		full := st.Start(epoch.Add(now))
		wall, cpu := cost(full, i-done)
		if covered != nil {
			for k := done; k < i; k++ {
				covered(k, now+wall)
			}
		}
		if onSync != nil {
			onSync(NodeSync{At: now, Wall: wall, CPU: cpu, Full: full, Changed: i - done})
		}
		done = i
		now += wall
		st.Done(nil)
		st.Ended(epoch.Add(now))
	}
}

type nodeAcc struct {
	lat      *hdrhistogram.Histogram
	sum, sq  float64
	n        int
	buckets  []int
	unprog   int
	syncH    map[string]*hdrhistogram.Histogram
	syncB    map[string][]int
	syncs    map[string]int
	cpuNodes []int64
}

func newAcc() *nodeAcc {
	return &nodeAcc{lat: hdrhistogram.New(1, int64(3600e9), 3), buckets: make([]int, len(programmingBounds)+1),
		syncH: map[string]*hdrhistogram.Histogram{}, syncB: map[string][]int{}, syncs: map[string]int{}}
}

var programmingBounds = reports.ProgrammingBuckets()
var syncBounds = reports.SyncBucketBounds()

// count adds v (ns) to the bucket of the first bound (seconds) >= v;
// b has len(bounds)+1 entries, the last for values above every bound.
// toBuckets makes the counts cumulative.
func count(b []int, bounds []float64, v int64) {
	b[sort.SearchFloat64s(bounds, float64(v)/1e9)]++
}

// SimulateCluster runs every node (in parallel, each on its own random
// source) and pools the results. Memory is O(nodes + changes): nodes
// share the change stream and keep no ruleset.
func SimulateCluster(spec ClusterSpec) *ClusterResult {
	workers := spec.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = max(1, min(workers, spec.Nodes))
	res := &ClusterResult{Node0: make([]int64, len(spec.Arrivals))}
	for i := range res.Node0 {
		res.Node0[i] = -1
	}
	accs := make([]*nodeAcc, workers)
	var wg sync.WaitGroup
	var next int64
	var mu sync.Mutex
	for w := 0; w < workers; w++ {
		acc := newAcc()
		accs[w] = acc
		wg.Add(1)
		go func() {
			defer wg.Done()
			arr := make([]time.Duration, len(spec.Arrivals))
			progressed := make([]bool, len(spec.Arrivals))
			for {
				mu.Lock()
				node := next
				next++
				mu.Unlock()
				if node >= int64(spec.Nodes) {
					return
				}
				rng := rand.New(rand.NewSource(spec.Seed*1_000_003 + node))
				delay, phase := spec.Delay, time.Duration(0)
				if node > 0 {
					if spec.WatchDelay > 0 {
						delay += time.Duration(rng.ExpFloat64() * float64(spec.WatchDelay))
					}
					if spec.Phase && spec.SyncPeriod > 0 {
						phase = time.Duration(rng.Int63n(int64(spec.SyncPeriod)))
					}
				}
				for i, a := range spec.Arrivals {
					arr[i] = a + delay
					progressed[i] = false
				}
				st := syncloop.New(spec.MinSyncPeriod, spec.SyncPeriod)
				st.MinFromEnd = spec.MinFromEnd
				var cpu time.Duration
				cost := func(full bool, changed int) (time.Duration, time.Duration) {
					return spec.Cost(full, changed, rng)
				}
				covered := func(k int, at time.Duration) {
					lat := int64(at - spec.Arrivals[k])
					progressed[k] = true
					_ = acc.lat.RecordValue(max(1, min(lat, int64(3600e9))))
					acc.sum += float64(lat)
					acc.sq += float64(lat) * float64(lat)
					acc.n++
					count(acc.buckets, programmingBounds, lat)
					if node == 0 {
						res.Node0[k] = lat
					}
				}
				onSync := func(s NodeSync) {
					kind := "incremental"
					if s.Full {
						kind = "full"
					}
					h := acc.syncH[kind]
					if h == nil {
						h = hdrhistogram.New(1, int64(3600e9), 3)
						acc.syncH[kind] = h
						acc.syncB[kind] = make([]int, len(syncBounds)+1)
					}
					_ = h.RecordValue(max(1, min(int64(s.Wall), int64(3600e9))))
					count(acc.syncB[kind], syncBounds, int64(s.Wall))
					acc.syncs[kind]++
					cpu += s.CPU
					if node == 0 {
						res.Node0Syncs = append(res.Node0Syncs, s)
					}
				}
				SimulateNode(st, -phase, arr, spec.End, cost, covered, onSync)
				for _, p := range progressed {
					if !p {
						acc.unprog++
					}
				}
				acc.cpuNodes = append(acc.cpuNodes, int64(cpu))
			}
		}()
	}
	wg.Wait()

	lat := hdrhistogram.New(1, int64(3600e9), 3)
	buckets := make([]int, len(programmingBounds)+1)
	var sum, sq float64
	n := 0
	syncH := map[string]*hdrhistogram.Histogram{}
	syncB := map[string][]int{}
	res.Syncs = map[string]int{}
	var cpus []int64
	for _, a := range accs {
		lat.Merge(a.lat)
		for i, c := range a.buckets {
			buckets[i] += c
		}
		sum, sq, n = sum+a.sum, sq+a.sq, n+a.n
		res.Unprogrammed += a.unprog
		for k, h := range a.syncH {
			if syncH[k] == nil {
				syncH[k] = hdrhistogram.New(1, int64(3600e9), 3)
				syncB[k] = make([]int, len(syncBounds)+1)
			}
			syncH[k].Merge(h)
			for i, c := range a.syncB[k] {
				syncB[k][i] += c
			}
			res.Syncs[k] += a.syncs[k]
		}
		cpus = append(cpus, a.cpuNodes...)
	}
	res.Latency = histSummary(lat, n, sum, sq)
	res.Buckets = toBuckets(buckets, programmingBounds, n)
	res.SyncWall, res.SyncBuckets = map[string]reports.Summary{}, map[string][]reports.Bucket{}
	for k, h := range syncH {
		res.SyncWall[k] = histSummary(h, int(h.TotalCount()), h.Mean()*float64(h.TotalCount()), 0)
		res.SyncWall[k] = withStd(res.SyncWall[k], h.StdDev())
		res.SyncBuckets[k] = toBuckets(syncB[k], syncBounds, res.Syncs[k])
	}
	res.SyncCPUPerNode = reports.Summarize(cpus)
	return res
}

// histSummary builds a reports.Summary from an HDR histogram (same
// precision as reports.Summarize) with the exact mean and standard
// deviation from the running sums.
func histSummary(h *hdrhistogram.Histogram, n int, sum, sq float64) reports.Summary {
	if n == 0 {
		return reports.Summary{}
	}
	mean := sum / float64(n)
	sd := 0.0
	if n > 1 && sq > 0 {
		sd = math.Sqrt(math.Max(0, (sq-float64(n)*mean*mean)/float64(n-1)))
	}
	return reports.Summary{Count: n, Min: h.Min(), Max: h.Max(), P50: h.ValueAtQuantile(50), P90: h.ValueAtQuantile(90),
		P99: h.ValueAtQuantile(99), P999: h.ValueAtQuantile(99.9), Mean: mean, StdDev: sd}
}

func withStd(s reports.Summary, sd float64) reports.Summary {
	s.StdDev = sd
	return s
}

// toBuckets turns per-bucket counts into cumulative Prometheus buckets.
func toBuckets(counts []int, bounds []float64, total int) []reports.Bucket {
	out := reports.BucketCounts(nil, bounds)
	c := 0
	for i := range bounds {
		c += counts[i]
		out[i].Count = c
	}
	out[len(bounds)].Count = total
	return out
}
