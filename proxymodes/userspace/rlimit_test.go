//go:build linux

package userspace

import (
	"errors"
	"strings"
	"syscall"
	"testing"
)

func TestEnsureFileLimit(t *testing.T) {
	type lim struct{ soft, hard uint64 }
	for _, tc := range []struct {
		name      string
		have      lim
		setErr    error
		listeners int
		wantSet   *lim
		wantErr   string
	}{
		{name: "enough already: untouched", have: lim{1 << 20, 1 << 20}, listeners: 10000},
		{name: "soft raised under hard", have: lim{1024, 1 << 20}, listeners: 10000, wantSet: &lim{10000 + FileReserve, 1 << 20}},
		{name: "hard raised too", have: lim{1024, 4096}, listeners: 10000, wantSet: &lim{10000 + FileReserve, 10000 + FileReserve}},
		{name: "not permitted: clear error", have: lim{1024, 4096}, listeners: 10000, setErr: syscall.EPERM,
			wantSet: &lim{10000 + FileReserve, 10000 + FileReserve}, wantErr: "10000 listeners need RLIMIT_NOFILE >= 18192 open files, but it is 1024 (hard limit 4096)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var set *lim
			got, err := ensureFileLimit(tc.listeners,
				func() (uint64, uint64, error) { return tc.have.soft, tc.have.hard, nil },
				func(s, h uint64) error { set = &lim{s, h}; return tc.setErr })
			if (set == nil) != (tc.wantSet == nil) || (set != nil && *set != *tc.wantSet) {
				t.Fatalf("setrlimit(%v), want %v", set, tc.wantSet)
			}
			if tc.wantErr == "" {
				if err != nil || got < uint64(tc.listeners)+FileReserve {
					t.Fatalf("got %d, %v", got, err)
				}
				return
			}
			var le *LimitError
			if !errors.As(err, &le) || !errors.Is(err, syscall.EPERM) || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "ulimit -n 18192") {
				t.Fatalf("err %v, want a LimitError with %q and the fix", err, tc.wantErr)
			}
		})
	}
}
