//go:build linux

package nspool_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/proxybench/proxybench/internal/lib/nspool"
	"github.com/proxybench/proxybench/internal/testenv"
	"github.com/proxybench/proxybench/topology"
)

// TestWorkersPinned: every worker runs in the namespace it was given, for
// every job, and the caller's thread stays where it was.
func TestWorkersPinned(t *testing.T) {
	testenv.RequireKernel(t)
	a, b := testenv.NewNetns(t, "wa"), testenv.NewNetns(t, "wb")
	nss := []*topology.Netns{a, b}
	p, err := nspool.Start(5, func(w int) nspool.Namespace { return nss[w%2] })
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	in := func(want *topology.Netns) bool {
		h, err := netns.Get()
		if err != nil {
			return false
		}
		defer h.Close()
		return h.Equal(want.Handle())
	}
	var mu sync.Mutex
	wrong := 0
	for round := 0; round < 3; round++ {
		p.Each(func(w int) {
			if !in(nss[w%2]) {
				mu.Lock()
				wrong++
				mu.Unlock()
			}
		})
	}
	ok := false
	p.Do(3, func() { ok = in(b) })
	if wrong != 0 || !ok {
		t.Errorf("%d jobs ran outside their worker's namespace (Do on worker 3 in b: %v)", wrong, ok)
	}
	if in(a) || in(b) {
		t.Error("the caller's thread moved into a worker's namespace")
	}
}

// TestWorkersEnterFails: a namespace that cannot be entered fails Start
// with its name, and Run runs nothing.
func TestWorkersEnterFails(t *testing.T) {
	testenv.RequireKernel(t)
	good := testenv.NewNetns(t, "wg")
	bad, err := topology.OpenNetns(good.Name)
	if err != nil {
		t.Fatal(err)
	}
	bad.Close() // its handle is now invalid
	nsOf := func(w int) nspool.Namespace {
		if w == 1 {
			return bad
		}
		return good
	}
	if _, err := nspool.Start(3, nsOf); err == nil || !strings.Contains(err.Error(), good.Name) {
		t.Fatalf("err %v, want a failure naming %s", err, good.Name)
	}
	ran := false
	if err := nspool.Run(3, nsOf, func(int) { ran = true }); err == nil || ran {
		t.Errorf("Run: err %v, ran %v: want an error and nothing run", err, ran)
	}
}
