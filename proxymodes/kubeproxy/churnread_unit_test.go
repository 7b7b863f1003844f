//go:build linux

package kubeproxy

import (
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestReadChurnLogAsItGrows: reading kube-proxy's log as it is written
// (the soak's per-interval match), cut anywhere, even inside a line,
// gives the lines and syncs of one read of the whole phase at its end
// (ParseChurnLog), each read ending with a whole IPv4 sync: a
// "Network programming" line is never read without its sync, an IPv6
// sync's end is no cut, and a line still being written waits.
func TestReadChurnLogAsItGrows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kp.log")
	wantP, wantS := ParseChurnLog([]byte(churnLog), time.Now(), time.Local)
	rng := rand.New(rand.NewSource(1))
	for try := 0; try < 200; try++ {
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		p := &Proxier{kp: &Proxy{LogPath: path}, churn: &churnState{}}
		var gotP []Programmed
		var gotS []LoggedSync
		for n := 0; ; {
			n = min(n+rng.Intn(400), len(churnLog))
			if err := os.WriteFile(path, []byte(churnLog[:n]), 0o644); err != nil {
				t.Fatal(err)
			}
			progs, syncs, err := p.ReadChurnLog()
			if err != nil {
				t.Fatal(err)
			}
			if len(progs) > 0 && (len(syncs) == 0 || progs[len(progs)-1].At.After(syncs[len(syncs)-1].End)) {
				t.Fatalf("try %d, %d bytes: a line read after its read's last sync: %+v, %+v", try, n, progs, syncs)
			}
			gotP, gotS = append(gotP, progs...), append(gotS, syncs...)
			if n == len(churnLog) {
				break
			}
		}
		// EndChurn's rest: the log after the last read.
		restP, restS := ParseChurnLog([]byte(churnLog[p.churn.logAt:]), time.Now(), time.Local)
		gotP, gotS = append(gotP, restP...), append(gotS, restS...)
		if !reflect.DeepEqual(gotP, wantP) || !reflect.DeepEqual(gotS, wantS) {
			t.Fatalf("try %d: read as it grew: %+v\n%+v\nread whole: %+v\n%+v", try, gotP, gotS, wantP, wantS)
		}
	}
	if _, _, err := (&Proxier{kp: &Proxy{LogPath: path}}).ReadChurnLog(); err == nil {
		t.Errorf("ReadChurnLog without BeginChurn: no error")
	}
}
