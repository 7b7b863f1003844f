//go:build linux

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/proxybench/proxybench/topology"
)

// NetnsExtension names the kubeconfig cluster extension that says the API
// server is reached from inside a named network namespace
// (/run/netns/NAME) rather than the caller's: the local cluster's
// (proxybench cluster up) API server listens in its control-plane
// namespace only. Its value is {"netns": "NAME"}. kubectl ignores it
// (`ip netns exec NAME kubectl ...` reaches the server).
const NetnsExtension = "proxybench.io/netns"

// netnsOf returns the NetnsExtension of the context's cluster in raw
// ("" without one).
func netnsOf(raw clientcmdapi.Config, ctxName string) (string, error) {
	kctx, ok := raw.Contexts[ctxName]
	if !ok {
		return "", nil
	}
	cl, ok := raw.Clusters[kctx.Cluster]
	if !ok {
		return "", nil
	}
	ext, ok := cl.Extensions[NetnsExtension]
	if !ok || ext == nil {
		return "", nil
	}
	var b []byte
	switch e := ext.(type) {
	case *runtime.Unknown:
		b = e.Raw
	default:
		var err error
		if b, err = json.Marshal(e); err != nil {
			return "", err
		}
	}
	var v struct {
		Netns string `json:"netns"`
	}
	if err := json.Unmarshal(b, &v); err != nil || v.Netns == "" {
		return "", fmt.Errorf("kubeconfig cluster %q: extension %s %q: want {\"netns\": NAME}", kctx.Cluster, NetnsExtension, b)
	}
	return v.Netns, nil
}

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
