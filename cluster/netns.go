//go:build linux

package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/proxybench/proxybench/topology"
)

// netnsDialer dials from inside network namespace name, opened anew for
// each connection (so a namespace deleted and made again is followed).
func netnsDialer(name string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		ns, err := topology.OpenNetns(name)
		if err != nil {
			return nil, err
		}
		defer ns.Close()
		var c net.Conn
		err = ns.Do(func() error {
			var err error
			c, err = (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// NetnsKubeconfig is a kubeconfig for a server reached inside network
// namespace netns (NetnsExtension), with a bearer token and TLS
// verification off (the local cluster's self-signed server).
func NetnsKubeconfig(path, server, token, netns string) error {
	if strings.ContainsAny(netns, "\"\\\n") {
		return fmt.Errorf("netns name %q", netns)
	}
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: proxybench
  cluster:
    server: %s
    insecure-skip-tls-verify: true
    extensions:
    - name: %s
      extension:
        netns: %q
users:
- name: proxybench
  user:
    token: %s
contexts:
- name: proxybench
  context: {cluster: proxybench, user: proxybench}
current-context: proxybench
`, server, NetnsExtension, netns, token)
	return os.WriteFile(path, []byte(kc), 0o600)
}
