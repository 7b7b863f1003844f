//go:build tools

// Package kubebin pins the Kubernetes and etcd binaries proxybench runs
// (kube-proxy, kube-apiserver, etcd; and for the local cluster, docs/cluster.md,
// kubelet, kube-controller-manager and kube-scheduler). It is a module of its own so the main
// module never depends on k8s.io/kubernetes; build with `make kube`.
package kubebin

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
