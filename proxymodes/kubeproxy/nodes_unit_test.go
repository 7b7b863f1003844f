//go:build linux

package kubeproxy

import (
	"testing"
	"time"
)

// TestSettleBound: the wait for every node's sync after the watch
// delivery writes is 30 s, or twice the slowest node's first sync when
// that is longer.
func TestSettleBound(t *testing.T) {
	for _, tc := range []struct {
		firsts []time.Duration
		want   time.Duration
	}{
		{nil, 30 * time.Second},
		{[]time.Duration{5 * time.Second, 9 * time.Second}, 30 * time.Second},
		{[]time.Duration{20 * time.Second, 57 * time.Second, 3 * time.Second}, 114 * time.Second},
	} {
		p := &Proxier{}
		for _, f := range tc.firsts {
			p.nodes.others = append(p.nodes.others, &otherNode{first: f})
		}
		if got := p.settleBound(); got != tc.want {
			t.Errorf("first syncs %v: bound %v, want %v", tc.firsts, got, tc.want)
		}
	}
}
