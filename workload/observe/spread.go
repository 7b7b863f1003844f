package observe

import (
	"sync"
	"time"

	"github.com/proxybench/proxybench/workload"
)

// Spread follows each change on several nodes at once, as a cluster's
// changes reach every node's proxy on their own: one Tracker per node
// (its probes come from client pods on that node), one Observation per
// change and node. A change is seen when every node has seen it; its
// latency is then the slowest node's, and each node's own is kept. With
// one node it is a Tracker.
type Spread struct {
	nodes    []int
	trackers []*Tracker
	mu       sync.Mutex
	changes  []*spreadChange
	of       map[*Observation]*spreadChange
}

type spreadChange struct {
	per  []*Observation // by node, in the order of Nodes
	left int
	all  *Observation
}

// NewSpread follows changes on nodes (node indexes, each once).
func NewSpread(nodes []int) *Spread {
	s := &Spread{nodes: append([]int(nil), nodes...), of: map[*Observation]*spreadChange{}}
	for range nodes {
		s.trackers = append(s.trackers, &Tracker{})
	}
	return s
}

// Nodes are the followed nodes, in order.
func (s *Spread) Nodes() []int { return s.nodes }

// Tracker is node's tracker (nil for a node not followed): its probe
// workers take its pending changes (Tracker.Next) and report to it.
func (s *Spread) Tracker(node int) *Tracker {
	for i, n := range s.nodes {
		if n == node {
			return s.trackers[i]
		}
	}
	return nil
}

// Add starts following change ch, applied at at, on every node.
func (s *Spread) Add(ch workload.Change, at time.Time) {
	c := &spreadChange{left: len(s.nodes)}
	for range s.nodes {
		c.per = append(c.per, New(ch, at))
	}
	if len(s.nodes) == 1 {
		c.all = c.per[0]
	} else {
		c.all = New(ch, at)
	}
	s.mu.Lock()
	s.changes = append(s.changes, c)
	for _, o := range c.per {
		s.of[o] = c
	}
	s.mu.Unlock()
	for i, o := range c.per {
		s.trackers[i].Add(o)
	}
}

// Seen tells s that node observation o (one a node's Tracker.See
// completed) is done. When it was the change's last node it returns the
// change's observation, Done, with the slowest node's latency; else nil.
func (s *Spread) Seen(o *Observation) *Observation {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.of[o]
	if c == nil {
		return nil
	}
	c.left--
	if c.left > 0 {
		return nil
	}
	if len(c.per) > 1 {
		c.all.Done = true
		for _, p := range c.per {
			c.all.Latency = max(c.all.Latency, p.Latency)
		}
	}
	return c.all
}

// Pending counts the changes some node has not seen yet.
func (s *Spread) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.changes {
		if c.left > 0 {
			n++
		}
	}
	return n
}

// All returns every change's observation in the order added (Done when
// every node saw it; the probe counts summed over the nodes) and, per
// change, each node's own (in the order of Nodes). Call it once the
// probes have stopped.
func (s *Spread) All() (all []*Observation, perNode [][]*Observation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.changes {
		if len(c.per) > 1 {
			c.all.Hits, c.all.Elsewhere, c.all.Failed = 0, 0, 0
			for _, p := range c.per {
				c.all.Hits += p.Hits
				c.all.Elsewhere += p.Elsewhere
				c.all.Failed += p.Failed
			}
		}
		all = append(all, c.all)
		perNode = append(perNode, append([]*Observation(nil), c.per...))
	}
	return all, perNode
}
