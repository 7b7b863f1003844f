//go:build !linux

package cluster

import (
	"context"
	"fmt"
	"net"
)

// netnsDialer: network namespaces are Linux's; elsewhere every dial fails.
func netnsDialer(name string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(context.Context, string, string) (net.Conn, error) {
		return nil, fmt.Errorf("kubeconfig extension %s %q: network namespaces need Linux", NetnsExtension, name)
	}
}
