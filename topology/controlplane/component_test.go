//go:build linux

package controlplane

import (
	"context"
	"strings"
	"testing"
)

// TestComponentErrors: StopComponent and StartComponent refuse an
// unknown component, a stopped one, a running one and one never started,
// each saying which.
func TestComponentErrors(t *testing.T) {
	cp := &ControlPlane{}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{cp.StopComponent("kube-scheduler"), `unknown component "kube-scheduler"`},
		{cp.StopComponent("etcd"), "etcd is not running"},
		{func() error { _, err := cp.StartComponent(context.Background(), "kube-apiserver", 0); return err }(), "kube-apiserver was never started"},
		{func() error { _, err := cp.StartComponent(context.Background(), "etc", 0); return err }(), `unknown component "etc"`},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("error %v, want %q", tc.err, tc.want)
		}
	}
}
