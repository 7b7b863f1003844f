package xtables

import (
	"errors"
	"fmt"
	"testing"
)

// TestLockHeld: the tools' lock message is recognised however it is
// wrapped; other errors and nil are not.
func TestLockHeld(t *testing.T) {
	held := errors.New("exit status 4: Can't lock /run/xtables.lock: Resource temporarily unavailable\nAnother app is currently holding the xtables lock. Stopped waiting after 5s.")
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{held, true},
		{fmt.Errorf("node1: sync: %w", held), true},
		{errors.New("iptables-restore: line 2 failed"), false},
		{nil, false},
	} {
		if got := LockHeld(tc.err); got != tc.want {
			t.Errorf("LockHeld(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
