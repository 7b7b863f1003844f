//go:build linux

// Package controlplane runs a real Kubernetes control plane (etcd and
// kube-apiserver) for one testbed run, inside a namespace of its own
// (pb-<runid>-kube) that is joined to each node namespace by a veth pair,
// so kube-proxy in a node reaches the API server and nothing listens in the
// host's root namespace. proxybench itself talks to the API server through
// sockets created inside that namespace (rest.Config.Dial).
//
//	node netns pb<id>-cp 169.254.a.b+1/30 ──veth── 169.254.a.b/30 pb<id>-n<i> control-plane netns
//	                                                etcd 127.0.0.1:2379, kube-apiserver :6443
//
// Credentials (a bearer token, the service-account key pair, the
// self-signed serving certificate) live in a temporary folder
// os.TempDir()/pb-<runid>-kube-*, etcd's data in a memory-backed one
// /dev/shm/pb-<runid>-etcd-* (in the first folder when there is no
// /dev/shm); both are removed by Stop (and by `proxybench cleanup` after a
// kill -9, with the processes, which carry topology.ChildEnv).
package controlplane

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/proxybench/proxybench/topology"
)

// SecurePort is the API server's port inside the control-plane namespace.
const SecurePort = 6443

// RestrictedUser is the user of ControlPlane.RestrictedToken (Spec.RBAC).
const RestrictedUser = "restricted"

// Binaries are the programs the control plane runs.
type Binaries struct {
	Etcd      string // etcd (internal/kubebin: make kube)
	APIServer string // kube-apiserver
}

// Spec is what Start builds.
type Spec struct {
	RunID string
	// Nodes each get a veth pair to the control-plane namespace; node i
	// reaches the API server at NodeServer(i).
	Nodes []*topology.Netns
	// Avoid are the scenario's address ranges (service, pod, node, client
	// CIDRs): the control plane's own addresses (its service range for the
	// `kubernetes` Service and its advertise address) are taken from the
	// first candidate block that overlaps none of them.
	Avoid []netip.Prefix
	// DualStack gives the API server an IPv6 service range beside the
	// IPv4 one (--service-cluster-ip-range v4,v6: a dual-stack cluster,
	// which kube-apiserver needs before it takes a Service of
	// ipFamilyPolicy RequireDualStack or gives PreferDualStack one both
	// families): the first of Candidates6 overlapping no prefix of Avoid.
	DualStack bool
	Bin       Binaries
	// Profiling turns on kube-apiserver's /debug/pprof (--profiling) and
	// etcd's (--enable-pprof on its client port), to see where a slow
	// control plane spends its time (Profile).
	Profiling bool
	// RBAC authorizes with RBAC (--authorization-mode RBAC) instead of
	// allowing everything, and adds a second user, RestrictedUser with
	// ControlPlane.RestrictedToken, who belongs to no group and so may do
	// only what a test binds to it (the cluster engine's RBAC checks).
	// Token's user stays in system:masters, which RBAC never refuses.
	RBAC bool
	// StartTimeout bounds Start's wait for /readyz (default 3 min).
	StartTimeout time.Duration
	// LowMemory keeps etcd's and kube-apiserver's resident memory small
	// (lowMemoryEnv, and kube-apiserver --watch-cache=false), for a
	// user-mode-linux guest: there every resident page of a guest process
	// is a mapping in a host process, and the host's vm.max_map_count
	// (65530 here, a global sysctl the testbed may not change) caps them.
	// At the default settings kube-apiserver died there at 865 of 10k
	// Services with 60k mappings at 430 MB resident ("UML ran out of
	// memory on the host side").
	LowMemory bool
	// ServiceRange is kube-apiserver's --service-cluster-ip-range, the
	// range the cluster allocates ClusterIPs from (the local cluster,
	// cluster/local). Default: the first /28 of the control-plane block,
	// room for the `kubernetes` Service alone.
	ServiceRange netip.Prefix
}

// ControlPlane is a running etcd + kube-apiserver.
type ControlPlane struct {
	RunID string
	NS    *topology.Netns
	// lowMemory is Spec.LowMemory.
	lowMemory bool
	// Dir is the temporary folder: pki/, token.csv, sa.key, logs.
	Dir string
	// EtcdDir is etcd's data folder, on tmpfs (topology.ShmDir) when
	// there is one, else Dir/etcd.
	EtcdDir   string
	Etcd      *topology.Process
	APIServer *topology.Process
	// Token is the bearer token of the (system:masters) user proxybench.
	Token string
	// RestrictedToken is RestrictedUser's token (Spec.RBAC; else empty).
	RestrictedToken string
	rbac            bool
	// Block is the control-plane address block; ServiceRange (its first
	// /28, the `kubernetes` Service's range) and Advertise (on lo) come
	// from it.
	Block        netip.Prefix
	ServiceRange netip.Prefix
	// ServiceRange6 is the IPv6 service range of a dual-stack control
	// plane (Spec.DualStack; the zero Prefix otherwise).
	ServiceRange6 netip.Prefix
	Advertise     netip.Addr
	// Ready is the time from Start to the API server's /readyz answering ok.
	Ready time.Duration
	// Client talks to the API server as Token's user, at a high QPS.
	Client kubernetes.Interface
	nodes  []netip.Addr // node i's address of its control-plane link
	ns     []string     // namespaces to delete
	links  []string     // the control-plane ends of the node veths
	// cmds are the programs' command lines (binary first) by name, for
	// StartComponent.
	cmds map[string][]string
	// extra are the programs StartProgram started, stopped first by Stop.
	extra []*topology.Process
}

// Candidates are the control-plane blocks tried in order (see Spec.Avoid).
var Candidates = []netip.Prefix{
	netip.MustParsePrefix("198.19.254.0/24"),
	netip.MustParsePrefix("100.64.254.0/24"),
	netip.MustParsePrefix("10.254.254.0/24"),
	netip.MustParsePrefix("172.31.254.0/24"),
}

// Candidates6 are the IPv6 service ranges a dual-stack control plane
// tries in order (Spec.DualStack), /120s of the benchmarking range
// 2001:2::/48 (RFC 5180) outside the default plan's 2001:2::/96.
// kube-apiserver takes an IPv6 range of at most 20 bits (/108).
var Candidates6 = []netip.Prefix{
	netip.MustParsePrefix("2001:2:0:fffe::/120"),
	netip.MustParsePrefix("2001:2:0:fffd::/120"),
}

// linkNet holds the /30 control-plane links, one per node.
var linkNet = netip.MustParsePrefix("169.254.0.0/16")

// chooseBlock returns the first of Candidates overlapping no prefix of
// avoid.
func chooseBlock(avoid []netip.Prefix) (netip.Prefix, error) {
	return choose(Candidates, avoid)
}

// choose returns the first of candidates overlapping no prefix of avoid.
func choose(candidates, avoid []netip.Prefix) (netip.Prefix, error) {
	for _, c := range candidates {
		ok := true
		for _, a := range avoid {
			if a.IsValid() && a.Overlaps(c) {
				ok = false
				break
			}
		}
		if ok {
			return c, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("controlplane: every candidate block %v overlaps the scenario's ranges %v", candidates, avoid)
}

// linkAddrs returns the control-plane and node side of node i's link.
func linkAddrs(i int) (cp, node netip.Addr) {
	cp = addrAt(linkNet.Addr(), 4*i+1)
	return cp, cp.Next()
}

// addrAt is the IPv4 address off places after a.
func addrAt(a netip.Addr, off int) netip.Addr {
	b := a.As4()
	v := (uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])) + uint32(off)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// Start creates the control-plane namespace and its links to spec.Nodes,
// starts etcd and kube-apiserver in it, and waits until /readyz answers.
// On error everything it created is removed; the error carries the tail of
// the failing program's log.
func Start(ctx context.Context, spec Spec) (cp *ControlPlane, err error) {
	t0 := time.Now()
	if len(spec.Nodes) > 1<<14 {
		return nil, fmt.Errorf("controlplane: at most %d nodes, got %d", 1<<14, len(spec.Nodes))
	}
	for _, b := range []string{spec.Bin.Etcd, spec.Bin.APIServer} {
		if st, err := os.Stat(b); err != nil || st.IsDir() {
			return nil, fmt.Errorf("controlplane: binary %q not found (make kube builds it into bin/)", b)
		}
	}
	block, err := chooseBlock(append(spec.Avoid, linkNet))
	if err != nil {
		return nil, err
	}
	cp = &ControlPlane{RunID: spec.RunID, Block: block, lowMemory: spec.LowMemory, rbac: spec.RBAC,
		ServiceRange: netip.PrefixFrom(block.Addr(), 28),
		Advertise:    addrAt(block.Addr(), 17)}
	if spec.DualStack {
		if cp.ServiceRange6, err = choose(Candidates6, spec.Avoid); err != nil {
			return nil, err
		}
	}
	if spec.ServiceRange.IsValid() {
		cp.ServiceRange = spec.ServiceRange.Masked()
	}
	defer func() {
		if err != nil {
			_ = cp.Stop()
			cp = nil
		}
	}()
	name := topology.NetnsName(spec.RunID, "kube")
	cp.ns = append(cp.ns, name)
	if cp.NS, err = topology.CreateNetns(name); err != nil {
		return cp, err
	}
	// The folder is created after the namespace: cleanup removes the
	// folders of runs with no live namespace.
	if cp.Dir, err = os.MkdirTemp("", topology.Prefix+spec.RunID+"-kube-"); err != nil {
		return cp, err
	}
	if cp.EtcdDir, err = etcdDir(cp.Dir, spec.RunID); err != nil {
		return cp, err
	}
	if err = cp.NS.AddAddr("lo", netip.PrefixFrom(cp.Advertise, 32)); err != nil {
		return cp, err
	}
	for i, n := range spec.Nodes {
		a, b := linkAddrs(i)
		link := fmt.Sprintf("pb%s-n%d", spec.RunID, i)
		if err = topology.Veth(cp.NS, link, n, fmt.Sprintf("pb%s-cp", spec.RunID), a, b); err != nil {
			return cp, err
		}
		cp.links = append(cp.links, link)
		cp.nodes = append(cp.nodes, a)
	}
	if err = cp.writeCredentials(); err != nil {
		return cp, err
	}
	if err = cp.startEtcd(spec.Bin.Etcd, spec.Profiling); err != nil {
		return cp, err
	}
	if err = cp.startAPIServer(spec.Bin.APIServer, spec.Profiling); err != nil {
		return cp, err
	}
	cfg := cp.RestConfig()
	if cp.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return cp, err
	}
	timeout := spec.StartTimeout
	if timeout == 0 {
		timeout = 3 * time.Minute
	}
	if err = cp.waitReady(ctx, timeout); err != nil {
		return cp, err
	}
	cp.Ready = time.Since(t0)
	return cp, nil
}

// etcdDir creates etcd's data folder: topology.ShmDir/pb-<runID>-etcd-*
// (memory-backed: a throwaway store that never waits on a disk) when
// ShmDir exists, else dir/etcd.
func etcdDir(dir, runID string) (string, error) {
	if st, err := os.Stat(topology.ShmDir); err == nil && st.IsDir() {
		if d, err := os.MkdirTemp(topology.ShmDir, topology.Prefix+runID+"-etcd-"); err == nil {
			return d, nil
		}
	}
	d := filepath.Join(dir, "etcd")
	return d, os.Mkdir(d, 0o700)
}

func (cp *ControlPlane) writeCredentials() error {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	cp.Token = hex.EncodeToString(b)
	// token,user,uid,"group1,group2": the static token file format.
	tok := fmt.Sprintf("%s,proxybench,proxybench,\"system:masters\"\n", cp.Token)
	if cp.rbac {
		if _, err := rand.Read(b); err != nil {
			return err
		}
		cp.RestrictedToken = hex.EncodeToString(b)
		tok += fmt.Sprintf("%s,%s,%s\n", cp.RestrictedToken, RestrictedUser, RestrictedUser)
	}
	if err := os.WriteFile(filepath.Join(cp.Dir, "token.csv"), []byte(tok), 0o600); err != nil {
		return err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cp.Dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(cp.Dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600)
}

// gcEnv is the Go garbage collector setting of etcd and kube-apiserver:
// collect at 5x the live heap rather than 2x (GOGC=400), but never let
// the heap pass 2 GiB (GOMEMLIMIT). Creating 10k Services spent about a
// tenth of the API server's CPU in the collector at the default.
var gcEnv = []string{"GOGC=400", "GOMEMLIMIT=2GiB"}

// lowMemoryEnv replaces gcEnv with Spec.LowMemory: collect at 1.5x the
// live heap.
var lowMemoryEnv = []string{"GOGC=50"}

// start runs bin with args in the control-plane namespace, its output
// going to Dir/<name>.log.
func (cp *ControlPlane) start(name, bin string, args ...string) (*topology.Process, error) {
	// Appended to: a component started again (StartComponent) keeps
	// its earlier log above.
	log, err := os.OpenFile(filepath.Join(cp.Dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if cp.cmds == nil {
		cp.cmds = map[string][]string{}
	}
	cp.cmds[name] = append([]string{bin}, args...)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = cp.Dir
	cmd.Env = append(os.Environ(), gcEnv...)
	if cp.lowMemory {
		cmd.Env = append(os.Environ(), lowMemoryEnv...)
	}
	p, err := topology.StartProcess(cp.NS, cp.RunID, name, cmd)
	log.Close() // the child holds its own descriptor
	return p, err
}

func (cp *ControlPlane) startEtcd(bin string, profiling bool) error {
	name := topology.Prefix + cp.RunID + "-etcd"
	var err error
	cp.Etcd, err = cp.start("etcd", bin,
		fmt.Sprintf("--enable-pprof=%t", profiling),
		"--name", name,
		"--data-dir", cp.EtcdDir,
		"--listen-client-urls", "http://127.0.0.1:2379",
		"--advertise-client-urls", "http://127.0.0.1:2379",
		"--listen-peer-urls", "http://127.0.0.1:2380",
		"--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", name+"=http://127.0.0.1:2380",
		"--initial-cluster-token", name,
		// A benchmark's throwaway store: no fsync per write.
		"--unsafe-no-fsync",
		"--quota-backend-bytes", fmt.Sprint(8<<30),
		"--log-level", "warn")
	return err
}

func (cp *ControlPlane) startAPIServer(bin string, profiling bool) error {
	pki := filepath.Join(cp.Dir, "pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return err
	}
	var err error
	cp.APIServer, err = cp.start("kube-apiserver", bin,
		"--etcd-servers", "http://127.0.0.1:2379",
		"--etcd-prefix", "/registry-"+cp.RunID,
		"--bind-address", "0.0.0.0",
		"--secure-port", fmt.Sprint(SecurePort),
		"--advertise-address", cp.Advertise.String(),
		"--cert-dir", pki,
		"--service-account-key-file", filepath.Join(cp.Dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(cp.Dir, "sa.key"),
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--token-auth-file", filepath.Join(cp.Dir, "token.csv"),
		"--authorization-mode", cp.authorization(),
		"--service-cluster-ip-range", cp.serviceRanges(),
		// No Endpoints for the `kubernetes` Service (its address is not
		// routed anywhere in the testbed).
		"--endpoint-reconciler-type", "none",
		// A node is reached (node proxy, logs) at its InternalIP first, as
		// kubeadm configures it: the default order starts with Hostname,
		// which no DNS in the testbed resolves (the cluster engine's
		// /api/v1/nodes/http:node-0:10249/proxy/proxyMode failed with
		// "lookup node-0 ... network is unreachable").
		"--kubelet-preferred-address-types", "InternalIP,ExternalIP,Hostname",
		// One client creates thousands of objects in parallel: no
		// priority-and-fairness queueing, generous in-flight limits.
		"--enable-priority-and-fairness=false",
		"--max-requests-inflight", "4000",
		"--max-mutating-requests-inflight", "2000",
		// Every default admission plugin is off: proxybench is the only
		// writer, creates no Pods, quotas, webhooks or policies, and
		// ResourceQuota alone queues every create of a namespace through
		// its evaluator.
		"--disable-admission-plugins", strings.Join(defaultAdmission, ","),
		// No periodic object counting and size polling against etcd.
		"--etcd-count-metric-poll-period", "0",
		"--etcd-db-metric-poll-interval", "0",
		// No snapshot of the watch cache at every revision (kept for
		// LISTs at an old resourceVersion, which nobody here makes).
		"--feature-gates", "ListFromCacheSnapshot=false",
		fmt.Sprintf("--profiling=%t", profiling),
		fmt.Sprintf("--watch-cache=%t", !cp.lowMemory),
		"--v", "1")
	return err
}

// serviceRanges is kube-apiserver's --service-cluster-ip-range: the
// IPv4 range, then the IPv6 one of a dual-stack control plane (the first
// is the primary family, the `kubernetes` Service's).
func (cp *ControlPlane) serviceRanges() string {
	if cp.ServiceRange6.IsValid() {
		return cp.ServiceRange.String() + "," + cp.ServiceRange6.String()
	}
	return cp.ServiceRange.String()
}

// authorization is kube-apiserver's --authorization-mode (Spec.RBAC).
func (cp *ControlPlane) authorization() string {
	if cp.rbac {
		return "RBAC"
	}
	return "AlwaysAllow"
}

// defaultAdmission are kube-apiserver v1.37's default admission plugins
// (kube-apiserver --help, --disable-admission-plugins).
var defaultAdmission = []string{"NamespaceLifecycle", "LimitRanger", "ServiceAccount", "TaintNodesByCondition",
	"PodSecurity", "Priority", "DefaultTolerationSeconds", "DefaultStorageClass", "StorageObjectInUseProtection",
	"PodGroupProtection", "PersistentVolumeClaimResize", "RuntimeClass", "CertificateApproval", "CertificateSigning",
	"ClusterTrustBundleAttest", "CertificateSubjectRestriction", "DefaultIngressClass", "PodTopologyLabels",
	"NodeDeclaredFeatureValidator", "PodResizeValidator", "MutatingAdmissionPolicy", "MutatingAdmissionWebhook",
	"ValidatingAdmissionPolicy", "ValidatingAdmissionWebhook", "ResourceQuota"}

// RestConfig returns a client configuration for the API server whose
// connections are dialled from inside the control-plane namespace (the
// host's root namespace has no route to it). QPS and Burst are high
// enough that client-go never throttles (its defaults, 5 and 10, would
// take over half an hour for 10k Services and their EndpointSlices).
func (cp *ControlPlane) RestConfig() *rest.Config {
	return &rest.Config{
		Host:            fmt.Sprintf("https://127.0.0.1:%d", SecurePort),
		BearerToken:     cp.Token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		// Protobuf both ways: cheaper to encode and decode than JSON on
		// both ends of every create.
		ContentConfig: rest.ContentConfig{
			ContentType:        "application/vnd.kubernetes.protobuf",
			AcceptContentTypes: "application/vnd.kubernetes.protobuf,application/json",
		},
		QPS:     -1, // no client-side rate limit
		Burst:   100000,
		Timeout: time.Minute,
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := cp.NS.Do(func() error {
				var err error
				c, err = (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
	}
}

// NodeServer is the API server URL node i reaches over its link.
func (cp *ControlPlane) NodeServer(i int) string {
	return fmt.Sprintf("https://%s", net.JoinHostPort(cp.nodes[i].String(), fmt.Sprint(SecurePort)))
}

// LinkAddr is the control-plane namespace's address on node i's link:
// the node's next hop to the control plane (and, in the local cluster,
// to other nodes' pods).
func (cp *ControlPlane) LinkAddr(i int) netip.Addr { return cp.nodes[i] }

// LinkName is the control-plane end of node i's link.
func (cp *ControlPlane) LinkName(i int) string { return cp.links[i] }

// StartProgram starts another long-lived program (kube-controller-manager,
// kube-scheduler) in the control-plane namespace, as etcd and
// kube-apiserver are (its log Dir/<name>.log, its working folder Dir);
// Stop stops it first.
func (cp *ControlPlane) StartProgram(name, bin string, args ...string) (*topology.Process, error) {
	p, err := cp.start(name, bin, args...)
	if err != nil {
		return nil, err
	}
	cp.extra = append(cp.extra, p)
	return p, nil
}

// WriteLocalKubeconfig writes a kubeconfig for a program inside the
// control-plane namespace (the API server at 127.0.0.1:SecurePort, the
// bearer token, TLS verification off) to path.
func (cp *ControlPlane) WriteLocalKubeconfig(path string) error {
	return cp.writeKubeconfig(fmt.Sprintf("https://127.0.0.1:%d", SecurePort), path)
}

// NodeAddr is node i's own address on its control-plane link.
func (cp *ControlPlane) NodeAddr(i int) netip.Addr { return cp.nodes[i].Next() }

// WriteKubeconfig writes a kubeconfig for node i (its NodeServer, the
// bearer token, TLS verification off: the serving certificate is
// self-signed and the link is private to the testbed) to path.
func (cp *ControlPlane) WriteKubeconfig(i int, path string) error {
	return cp.writeKubeconfig(cp.NodeServer(i), path)
}

func (cp *ControlPlane) writeKubeconfig(server, path string) error {
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: testbed
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: proxybench
  user:
    token: %s
contexts:
- name: testbed
  context: {cluster: testbed, user: proxybench}
current-context: testbed
`, server, cp.Token)
	return os.WriteFile(path, []byte(kc), 0o600)
}

func (cp *ControlPlane) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		for _, p := range []*topology.Process{cp.Etcd, cp.APIServer} {
			if done, werr := p.Exited(); done {
				return fmt.Errorf("controlplane: %s exited (%v) before the API server was ready:\n%s", p.Name, werr, cp.LogTail(p.Name, 20))
			}
		}
		body, err := cp.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && bytes.Equal(bytes.TrimSpace(body), []byte("ok")) {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("controlplane: API server not ready after %v (last: %v):\n%s", timeout, last, cp.LogTail("kube-apiserver", 20))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// LogTail returns the last n lines of program name's log ("etcd",
// "kube-apiserver").
func (cp *ControlPlane) LogTail(name string, n int) string {
	b, _ := os.ReadFile(filepath.Join(cp.Dir, name+".log"))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Stop stops kube-apiserver then etcd (SIGTERM, then SIGKILL after 5 s),
// deletes the control-plane namespace (and with it the node links) and
// removes Dir. It is safe to call more than once, and on a partly started
// control plane.
func (cp *ControlPlane) Stop() error {
	if cp == nil {
		return nil
	}
	var errs []error
	for i := len(cp.extra) - 1; i >= 0; i-- {
		errs = append(errs, cp.extra[i].Stop(5*time.Second))
	}
	cp.extra = nil
	for _, p := range []*topology.Process{cp.APIServer, cp.Etcd} {
		if p != nil {
			errs = append(errs, p.Stop(5*time.Second))
		}
	}
	cp.APIServer, cp.Etcd = nil, nil
	if cp.NS != nil {
		// Delete the veths now: the kernel removes a deleted namespace's
		// devices later, asynchronously, and a control plane started right
		// after this one (a Proxier's Cleanup then Sync) would find the
		// node end pb<id>-cp still there (file exists).
		for _, l := range cp.links {
			if out, err := cp.NS.Run(context.Background(), nil, "ip", "link", "del", l); err != nil {
				errs = append(errs, fmt.Errorf("controlplane: ip link del %s: %w: %s", l, err, out))
			}
		}
		cp.links = nil
		cp.NS.Close()
		cp.NS = nil
	}
	for _, n := range cp.ns {
		errs = append(errs, topology.DeleteNetns(n))
	}
	cp.ns = nil
	for _, d := range []string{cp.EtcdDir, cp.Dir} {
		if d != "" {
			errs = append(errs, os.RemoveAll(d))
		}
	}
	cp.Dir, cp.EtcdDir = "", ""
	return errors.Join(errs...)
}

// Components are the programs StopComponent and StartComponent take.
var Components = []string{"kube-apiserver", "etcd"}

// component returns the process slot of name (Components).
func (cp *ControlPlane) component(name string) (**topology.Process, error) {
	switch name {
	case "kube-apiserver":
		return &cp.APIServer, nil
	case "etcd":
		return &cp.Etcd, nil
	}
	return nil, fmt.Errorf("controlplane: unknown component %q (want one of %v)", name, Components)
}

// StopComponent stops one program of the control plane, name one of
// Components (SIGTERM, SIGKILL after 5 s), and leaves the rest running:
// an API server outage (kube-apiserver), or its store's (etcd: the API
// server stays up and answers its clients with errors). Its data and
// credentials stay for StartComponent. Errors: an unknown name, the
// program stopped already, a failed stop.
func (cp *ControlPlane) StopComponent(name string) error {
	slot, err := cp.component(name)
	if err != nil {
		return err
	}
	if *slot == nil {
		return fmt.Errorf("controlplane: %s is not running", name)
	}
	err = (*slot).Stop(5 * time.Second)
	*slot = nil
	if err != nil {
		return fmt.Errorf("controlplane: stop %s: %w", name, err)
	}
	return nil
}

// StartComponent starts a program StopComponent stopped, with the
// command line it first ran with (etcd on its data folder, so it comes
// back with every object), its log appended to, and waits (bounded by
// timeout, 0: 3 min) until the API server's /readyz answers ok. It
// returns the time from its fork to that answer. Errors: an unknown
// name, the program running, a failed start, not ready in time (with
// the log's tail).
func (cp *ControlPlane) StartComponent(ctx context.Context, name string, timeout time.Duration) (time.Duration, error) {
	slot, err := cp.component(name)
	if err != nil {
		return 0, err
	}
	if *slot != nil {
		return 0, fmt.Errorf("controlplane: %s is running", name)
	}
	cmd := cp.cmds[name]
	if len(cmd) == 0 {
		return 0, fmt.Errorf("controlplane: %s was never started", name)
	}
	t0 := time.Now()
	if *slot, err = cp.start(name, cmd[0], cmd[1:]...); err != nil {
		return 0, fmt.Errorf("controlplane: start %s: %w", name, err)
	}
	if timeout <= 0 {
		timeout = 3 * time.Minute
	}
	if err := cp.waitReady(ctx, timeout); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// Profile writes a CPU profile of kube-apiserver and of etcd, each taken
// over d at the same time, to apiserverOut and etcdOut (pprof format; read
// with `go tool pprof`). It needs Spec.Profiling.
func (cp *ControlPlane) Profile(ctx context.Context, d time.Duration, apiserverOut, etcdOut string) error {
	secs := fmt.Sprint(int(d.Seconds()))
	errc := make(chan error, 1)
	go func() {
		hc := &http.Client{Transport: &http.Transport{DialContext: cp.RestConfig().Dial}}
		resp, err := hc.Get("http://127.0.0.1:2379/debug/pprof/profile?seconds=" + secs)
		if err != nil {
			errc <- fmt.Errorf("controlplane: etcd profile: %w", err)
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %s", resp.Status)
		}
		if err != nil {
			errc <- fmt.Errorf("controlplane: etcd profile: %w", err)
			return
		}
		errc <- os.WriteFile(etcdOut, b, 0o644)
	}()
	cfg := cp.RestConfig()
	cfg.Timeout = d + time.Minute
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	b, err := c.Discovery().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", secs).DoRaw(ctx)
	if err != nil {
		return errors.Join(fmt.Errorf("controlplane: kube-apiserver profile: %w", err), <-errc)
	}
	return errors.Join(os.WriteFile(apiserverOut, b, 0o644), <-errc)
}
