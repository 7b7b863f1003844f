package nspool

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeNS runs Do's fn on a new goroutine (standing in for a thread in
// the namespace) and counts entries; fail makes entering fail.
type fakeNS struct {
	name    string
	fail    bool
	entered atomic.Int32
}

func (f *fakeNS) Do(fn func() error) error {
	if f.fail {
		return errors.New("enter netns " + f.name + ": bad file descriptor")
	}
	f.entered.Add(1)
	errc := make(chan error, 1)
	go func() { errc <- fn() }()
	return <-errc
}

func TestEachDoAny(t *testing.T) {
	a, b := &fakeNS{name: "a"}, &fakeNS{name: "b"}
	p, err := Start(4, func(w int) Namespace {
		if w%2 == 0 {
			return a
		}
		return b
	})
	if err != nil {
		t.Fatal(err)
	}
	if a.entered.Load() != 2 || b.entered.Load() != 2 || p.Len() != 4 {
		t.Fatalf("entries a=%d b=%d len %d: every worker enters once, when started", a.entered.Load(), b.entered.Load(), p.Len())
	}
	var mu sync.Mutex
	seen := map[int]int{}
	for i := 0; i < 3; i++ {
		p.Each(func(w int) { mu.Lock(); seen[w]++; mu.Unlock() })
	}
	if len(seen) != 4 || seen[0] != 3 || seen[3] != 3 {
		t.Errorf("Each ran %v, want every worker 3 times", seen)
	}
	ran := false
	p.Do(2, func() { ran = true })
	var n atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.Any(context.Background(), func() { n.Add(1) }); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if !ran || n.Load() != 20 {
		t.Errorf("Do ran %v, Any ran %d of 20", ran, n.Load())
	}
	if a.entered.Load() != 2 || b.entered.Load() != 2 {
		t.Error("jobs entered the namespace again: workers must keep their thread")
	}
	p.Close()
	p.Close() // twice is fine
	if err := p.Any(context.Background(), func() { t.Error("ran after Close") }); !errors.Is(err, ErrClosed) {
		t.Errorf("Any after Close: %v, want ErrClosed", err)
	}
	p.Each(func(int) { t.Error("Each ran after Close") })
}

// TestAnyWaitsForAFreeWorker: with every worker busy, Any waits, and
// gives up with the context.
func TestAnyWaitsForAFreeWorker(t *testing.T) {
	p, err := Start(1, func(int) Namespace { return &fakeNS{} })
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	release := make(chan struct{})
	go p.Do(0, func() { <-release })
	time.Sleep(10 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := p.Any(ctx, func() { t.Error("ran on a busy worker") }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Any on a busy pool: %v, want the context's deadline", err)
	}
	close(release)
	if err := p.Any(context.Background(), func() {}); err != nil {
		t.Error(err)
	}
}

// TestStartFails: a worker that cannot enter fails Start with its error,
// ends the workers that did, and Run runs nothing.
func TestStartFails(t *testing.T) {
	good, bad := &fakeNS{name: "good"}, &fakeNS{name: "pb-x-c1", fail: true}
	nsOf := func(w int) Namespace {
		if w == 1 {
			return bad
		}
		return good
	}
	if _, err := Start(3, nsOf); err == nil || err.Error() != "enter netns pb-x-c1: bad file descriptor" {
		t.Fatalf("err %v, want the failed entry", err)
	}
	if err := Run(3, nsOf, func(int) { t.Error("Run ran with a worker outside its namespace") }); err == nil {
		t.Error("Run: no error")
	}
	if _, err := Start(0, nsOf); err == nil {
		t.Error("Start(0) accepted")
	}
}
