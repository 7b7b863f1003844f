#!/usr/bin/env bash
# build.sh VERSION BINDIR: build kube-proxy and kube-apiserver of
# k8s.io/kubernetes VERSION (e.g. v1.37.2) and etcd into BINDIR, as
# BINDIR/<name>-<version> plus a symlink BINDIR/<name> to the default version.
# Cached: a binary whose --version already says VERSION is not rebuilt.
# KUBE_TARGETS (default "kube-proxy kube-apiserver") narrows or widens what is
# built, e.g. only kube-proxy for a second version run beside the pinned one,
# or "kubelet kube-controller-manager kube-scheduler" for the local cluster
# (make kube-cluster).
# The pinned module is this directory (go.mod); another VERSION is built from a
# copy with every k8s.io staging module moved to the matching v0 tag.
set -euo pipefail
version=${1:?usage: build.sh VERSION BINDIR}
bindir=$(mkdir -p "${2:?usage: build.sh VERSION BINDIR}" && cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
GO=${GO:-go}
if ! [[ $version =~ ^v1\.([0-9]+)\.([0-9]+)(-[0-9A-Za-z.-]+)?$ ]]; then
	echo "KUBE_VERSION=$version: want a Kubernetes release tag like v1.37.2" >&2
	exit 2
fi
minor=${BASH_REMATCH[1]}
staging=v0.${version#v1.}
pinned=$(sed -n 's#^\tk8s.io/kubernetes \(v[^ ]*\)$#\1#p' "$here/go.mod")

# have NAME WANT: BINDIR/NAME-VERSION exists and its --version mentions WANT.
have() { [ -x "$bindir/$1" ] && "$bindir/$1" --version 2>/dev/null | grep -qF -- "$2"; }

src=$here
if [ "$version" != "$pinned" ]; then
	src=$bindir/.kubebuild/$version
	mkdir -p "$src"
	cp "$here/tools.go" "$src/"
	sed -e "s#^\(\tk8s.io/kubernetes\) v[^ ]*\$#\1 $version#" \
		-e "s#^\(\tk8s.io/[a-z0-9-]*\) => \(k8s.io/[a-z0-9-]*\) v0\.[^ ]*\$#\1 => \2 $staging#" \
		-e '/go.etcd.io\/etcd\/server/d' "$here/go.mod" >"$src/go.mod"
	rm -f "$src/go.sum"
	(cd "$src" && $GO mod tidy)
fi

ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
	ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
done

todo=()
for name in ${KUBE_TARGETS:-kube-proxy kube-apiserver}; do
	if have "$name-$version" "$version"; then
		echo "kube: $bindir/$name-$version is $version (cached)"
	else
		todo+=("k8s.io/kubernetes/cmd/$name")
	fi
done
if [ ${#todo[@]} -gt 0 ]; then
	echo "kube: building ${todo[*]} at $version (tens of minutes on a small machine)"
	out=$bindir/.kubebuild/out-$version
	mkdir -p "$out"
	start=$(date +%s)
	(cd "$src" && CGO_ENABLED=0 $GO build -trimpath -ldflags "-s -w $ldflags" -o "$out/" "${todo[@]}")
	for p in "${todo[@]}"; do mv -f "$out/${p##*/}" "$bindir/${p##*/}-$version"; done
	echo "kube: built ${todo[*]} in $(($(date +%s) - start)) s"
fi

# etcd comes from the pinned module only; its version is etcd's own.
etcdver=$(cd "$here" && $GO list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
if have "etcd-$etcdver" "${etcdver#v}"; then
	echo "kube: $bindir/etcd-$etcdver is ${etcdver} (cached)"
else
	start=$(date +%s)
	(cd "$here" && CGO_ENABLED=0 $GO build -trimpath -ldflags "-s -w" -o "$bindir/etcd-$etcdver" ./etcd)
	echo "kube: built etcd $etcdver in $(($(date +%s) - start)) s"
fi

# The unversioned names point at the pinned version (a second version is used
# through its versioned name, e.g. --kube-proxy bin/kube-proxy-v1.36.4).
# kubelet, kube-controller-manager and kube-scheduler (the local cluster,
# docs/cluster.md) get theirs once built.
if [ "$version" = "$pinned" ]; then
	ln -sfn "kube-proxy-$version" "$bindir/kube-proxy"
	ln -sfn "kube-apiserver-$version" "$bindir/kube-apiserver"
	for name in kubelet kube-controller-manager kube-scheduler; do
		if [ -x "$bindir/$name-$version" ]; then ln -sfn "$name-$version" "$bindir/$name"; fi
	done
fi
ln -sfn "etcd-$etcdver" "$bindir/etcd"
