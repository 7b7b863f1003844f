# proxybench: see README.md. Every target runs on Debian 12 as root.
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
# System packages every mode and test needs (Debian 12 names; chromium
# renders the HTML report in the screenshot test; prometheus, 2.42 with its
# promtool, is the server a monitored kube-proxy row runs in its control
# plane's namespace: monitoring, alerts:; containerd 1.6.20, runc and the CNI
# plugins in /usr/lib/cni are the local cluster's node runtime, docs/cluster.md:
# installing them starts no daemon here).
APT_PACKAGES := iproute2 iptables nftables ipset ipvsadm conntrack procps kmod user-mode-linux chromium prometheus \
	containerd runc containernetworking-plugins

# The linter, pinned: honnef.co/go/tools v0.8.2 is staticcheck 2026.2.2.
STATICCHECK_VERSION := v0.8.2
STATICCHECK := bin/staticcheck

# The Kubernetes release whose kube-proxy and kube-apiserver `make kube` builds
# (internal/kubebin pins it; another version is built beside it as
# bin/kube-proxy-<version>, e.g. make kube KUBE_VERSION=v1.36.4).
KUBE_VERSION ?= v1.37.2
KUBE_TARGETS ?= kube-proxy kube-apiserver

.PHONY: setup deps build image tools kube kube-cluster kernels kernels-ci test test-short test-slow test-guest-kube bench bench-full bench-sim aa lint clean

## setup: install system packages (apt-get), fetch Go modules, build bin/proxybench, install the pinned linter,
## build the Kubernetes binaries (make kube; make kube-cluster: kubelet, kube-controller-manager, kube-scheduler for the
## local cluster the default suite starts), the guest kernel CI uses (make kernels-ci) and the images (make image:
## the local cluster's tests import them into containerd)
setup: deps build tools kube kube-cluster kernels-ci image

deps:
	@if [ "$$(id -u)" != 0 ]; then echo "make setup needs root (apt-get); run: sudo make setup" >&2; exit 2; fi
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
		case " $$missing " in *" prometheus "*) \
			echo "prometheus: the package's own service would listen on :9090 of the root namespace; proxybench starts its own servers inside the testbed, so it is disabled"; \
			systemctl disable --now prometheus.service >/dev/null 2>&1 || true;; \
		esac; \
	else echo "system packages present: $(APT_PACKAGES)"; fi
	$(GO) mod download

## build: bin/proxybench
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/proxybench ./cmd/proxybench

# The cluster engine's images (docs/cluster.md): one static proxybench
# (CGO_ENABLED=0, stripped) in an agent and a pause image, written with
# go-containerregistry as an OCI layout tarball; no Docker daemon.
IMAGE_TAR ?= bin/proxybench-image.tar
IMAGE_TAG ?= $(VERSION)

## image: $(IMAGE_TAR): the agent image proxybench.local/proxybench:$(IMAGE_TAG) and the pause image
## proxybench.local/pause:$(IMAGE_TAG) (ctr -n k8s.io images import reads it; proxybench image push REF pushes it)
image:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS) -s -w" -o bin/proxybench-static ./cmd/proxybench
	bin/proxybench-static image build --binary bin/proxybench-static --output $(IMAGE_TAR) --tag $(IMAGE_TAG)

# Guest kernels: user-mode-linux kernels built from Debian's linux-source-<v>
# with internal/uml/kconfig/proxybench.config (every mode's options built in),
# cached under $(PROXYBENCH_CACHE)/kernels/<package version>-<fragment hash>,
# so a second build is instant. About 25 min each on a busy 2-core machine.
KERNELS ?= 6.12 6.1
CI_KERNELS ?= 6.12
KERNEL_BUILD_PACKAGES := bc flex bison gcc make libc6-dev

## kernels: build the guest kernels $(KERNELS) (--kernel uml:6.12, uml:6.1); a missing option fails the build naming it
kernels:
	@if [ "$$(id -u)" != 0 ]; then echo "make kernels needs root (apt-get, $${PROXYBENCH_CACHE:-/var/cache/proxybench}); run: sudo make kernels" >&2; exit 2; fi
	@missing=""; for p in $(KERNEL_BUILD_PACKAGES) $(addprefix linux-source-,$(KERNELS)); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 $$missing; \
	fi
	@for v in $(KERNELS); do internal/uml/kconfig/build.sh $$v || exit 1; done

## kernels-ci: the guest kernel the test suite boots (uml:$(CI_KERNELS))
kernels-ci:
	$(MAKE) kernels KERNELS="$(CI_KERNELS)"

## kube-cluster: kubelet, kube-controller-manager and kube-scheduler ($(KUBE_VERSION)) for the local cluster
## (proxybench cluster up, docs/cluster.md) into bin/, cached as make kube; about 130 s with make kube's warm cache
kube-cluster:
	$(MAKE) kube KUBE_TARGETS="kubelet kube-controller-manager kube-scheduler"

## kube: build kube-proxy, kube-apiserver (k8s.io/kubernetes $(KUBE_VERSION)) and etcd into bin/ from the module
## internal/kubebin; cached (a bin/<name>-<version> that reports the version is kept). The first build takes
## about 20 min of CPU (40+ min of wall time on a busy 2-core machine).
## KUBE_TARGETS=kube-proxy builds only kube-proxy (e.g. a second version for --kube-proxy).
kube:
	GO=$(GO) KUBE_TARGETS="$(KUBE_TARGETS)" ./internal/kubebin/build.sh $(KUBE_VERSION) bin

## tools: bin/staticcheck at STATICCHECK_VERSION (no root; reinstalled when the pin changes)
tools:
	@if ! $(STATICCHECK) -version 2>/dev/null | grep -qF '($(STATICCHECK_VERSION:v%=%))'; then \
		echo "installing staticcheck $(STATICCHECK_VERSION) into bin/"; \
		GOBIN=$(CURDIR)/bin $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); \
	fi

## lint: go vet, gofmt and the pinned staticcheck (every default check); clean means no output
lint: tools
	$(GO) vet ./...
	@f=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$f" ]; then echo "gofmt needed: $$f" >&2; exit 1; fi
	$(STATICCHECK) ./...

## test: the whole suite (kernel tests need root; PROXYBENCH_REQUIRE_KERNEL=1 turns their skips into failures).
## go vet is make lint's (CI runs lint first; vet here took 40-60 s of the 10-minute budget a second time)
test:
	@f=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$f" ]; then echo "gofmt needed: $$f" >&2; exit 1; fi
	$(GO) test -count=1 -p 1 -timeout 15m ./...

## test-slow: make test plus the slow kernel tests (PROXYBENCH_SLOW=1, root; testenv.RequireSlow skips them otherwise):
## those whose coverage the default suite keeps more cheaply (TestKernelIPVSInGuest, TestKernelProxierReadBack) and
## those with a control plane in a guest, over its 10-minute budget (the fidelity test's IPVS cases, 60-130 s;
## TestKernelGuestCleanupAfterKill, 60-100 s; the guest kube-proxy tests of make test-guest-kube)
test-slow:
	$(GO) vet ./...
	@f=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$f" ]; then echo "gofmt needed: $$f" >&2; exit 1; fi
	PROXYBENCH_SLOW=1 $(GO) test -count=1 -p 1 -timeout 90m ./...

## test-short: the loop tier (go test -short): runs as any user, needs no root, touches no kernel state, boots no guest;
## kernel and guest tests skip (internal/testenv)
test-short:
	$(GO) test -short -count=1 ./...

## test-guest-kube: kube-proxy's IPVS mode with its control plane in a user-mode-linux guest (root, make kernels, make kube):
## ClusterIPs answer, the Proxier path of an ipvs (kube-proxy) row, cleanup after kill -9, a run's guest finding bin/; about 5 min
test-guest-kube:
	PROXYBENCH_SLOW=1 $(GO) test -count=1 -v -timeout 30m -run 'InGuest|GuestCleanupAfterKill' ./proxymodes/kubeproxy
	PROXYBENCH_SLOW=1 $(GO) test -count=1 -v -timeout 10m -run 'KubeBinInGuest' ./cmd/proxybench

## bench: every benchmark: render at 1k/5k/10k, partial render at 10k, full syncs against the raw tool on the same bytes
## (iptables-restore, nft -f) as ratio-vs-raw, userspace listeners, sim at scale; then nftables at 10k (about 2 min an iteration)
bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x -benchmem ./...
	PROXYBENCH_SLOW=1 $(GO) test -run '^$$' -bench 'FullSync/services=10000' -benchtime 1x ./proxymodes/nftables

## bench-full: also the iptables nft back end at 10k (iptables-nft-restore --noflush: about 70 s an iteration); PROXYBENCH_SLOW=1 enables such cases
bench-full:
	PROXYBENCH_SLOW=1 $(GO) test -run '^$$' -bench . -benchtime 3x -benchmem -timeout 60m ./...

## bench-sim: the sim engine at scale (100k services on one node; 10k services x 5000 nodes x 10 changes/s x 10 min): wall-s/op and sys-MiB (no root)
bench-sim:
	$(GO) test -run '^$$' -bench . -benchtime 1x -benchmem ./sim

AA_RUNS ?= 5
AA_SCENARIO ?= 1k-services
AA_MODES ?= none,iptables
AA_DIR ?= results/aa
AA_ORDER ?= interleaved
## aa: A/A self-check of this machine (root; about 4 min): two sets of AA_RUNS (5) runs of AA_SCENARIO (1k-services)
## --modes AA_MODES (none,iptables) with the same build, then compare --self-check --gate ratios: every flagged
## figure is a false alarm; prints the false-alarm rates (all figures, gated ratios) and the noise floor per figure.
## AA_ORDER=interleaved (default) alternates the sets run by run (a1 b1 a2 b2 ...), as a CI job comparing two builds
## should; AA_ORDER=sequential takes run --count AA_RUNS for one set, then for the other (a machine that changes
## between them shows in the raw figures)
# AA_RUN runs once (arguments appended); a failed run (e.g. another program
# holding the host's xtables lock for over 5 s) is retried twice, its
# partial result removed, so the sets hold complete runs only.
AA_RUN = sh -c 'for try in 1 2 3; do bin/proxybench run $(AA_SCENARIO) --modes $(AA_MODES) --quiet "$$@" >/dev/null && exit 0; \
	out=$$(echo "$$@" | sed "s/.*--output //"); echo "aa: run failed (try $$try), retrying" >&2; rm -f "$$out"; done; exit 1' aa-run
aa: build
	@mkdir -p $(AA_DIR) && rm -f $(AA_DIR)/a*.json $(AA_DIR)/b*.json
	@if [ "$(AA_ORDER)" = sequential ]; then \
		for set in a b; do echo "aa: set $$set, $(AA_RUNS) runs"; \
			$(AA_RUN) --count $(AA_RUNS) --output $(AA_DIR)/$$set.json || exit 1; done; \
	else \
		for i in $$(seq 1 $(AA_RUNS)); do for set in a b; do echo "aa: run $$set$$i"; \
			$(AA_RUN) --output $(AA_DIR)/$$set-$$i.json || exit 1; done; done; \
	fi
	bin/proxybench compare --self-check --gate ratios $(AA_DIR)/a*.json -- $(AA_DIR)/b*.json | tee $(AA_DIR)/self-check.txt

clean:
	rm -rf bin results
