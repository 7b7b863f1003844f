package cluster

import (
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
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
