// Package cluster is the cluster engine (`engine: cluster`,
// docs/cluster.md): the scenario's services on a real Kubernetes cluster
// the user points it at, measured from agent pods on its nodes.
//
// A run creates one namespace, proxybench-<runid>, and everything in it
// carries the label RunLabel=<runid>: a backend pool (a Deployment of
// `proxybench echo`), the scenario's Services without selectors and the
// EndpointSlices the run writes for them (pointing at the pool's pod IPs,
// so 10k services need no 30k pods), and the agents (`proxybench agent`,
// a DaemonSet or one pod pinned per chosen node). The operator reads the
// agents' raw samples through the API server's pods/proxy subresource:
// no network path to the pods is assumed. Nothing outside that
// namespace is written; the cluster's facts (node kernels, kube-proxy's
// mode, version and configuration) are read.
//
// Bad input and an unusable cluster (an unreachable or unreadable
// kubeconfig, missing RBAC, no Ready agent on a node after the timeout,
// an image the nodes cannot pull) are Unusable errors, which the CLI
// turns into exit 2; what the run created is deleted first.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RunLabel is the label every object of a run carries, valued with the
// run ID; `proxybench cleanup --engine cluster` deletes by it.
const RunLabel = "proxybench.io/run"

// ComponentLabel tells the run's objects apart: ComponentPool,
// ComponentAgent, ComponentService.
const ComponentLabel = "proxybench.io/component"

// Components (ComponentLabel values).
const (
	ComponentPool    = "pool"
	ComponentAgent   = "agent"
	ComponentService = "service"
)

// NamespacePrefix starts every run's namespace: NamespacePrefix+runID.
const NamespacePrefix = "proxybench-"

// Namespace is the namespace of run runID.
func Namespace(runID string) string { return NamespacePrefix + runID }

// Defaults of Options.
const (
	DefaultQPS           = 50
	DefaultBurst         = 100
	DefaultAgentTimeout  = 20 * time.Second
	DefaultCleanupWait   = time.Minute
	DefaultProbeDeadline = time.Minute
	// DefaultProgramWait bounds the wait for kube-proxy to program the
	// run's services on every node (after the creates, after a switch):
	// at 1k services on a 2-core machine at a load of 100, one
	// kube-proxy sync took 40 s.
	DefaultProgramWait = 5 * time.Minute
	// ConnectTimeout bounds the first contact with the API server.
	ConnectTimeout = 8 * time.Second
)

// Options configure a cluster-engine run.
type Options struct {
	// Kubeconfig is the kubeconfig file (empty: $KUBECONFIG, then
	// ~/.kube/config, as kubectl loads it); Context one of its contexts
	// (empty: its current context).
	Kubeconfig, Context string
	// QPS and Burst are client-go's client-side rate limit (defaults
	// DefaultQPS, DefaultBurst): explicit, so a run's load on a shared
	// API server is known.
	QPS   float32
	Burst int
	// Image is the agent image (the pool runs it too), e.g.
	// proxybench.local/proxybench:<version> imported from make image's
	// tarball, or what proxybench image push pushed.
	Image string
	// PullPolicy is the pods' imagePullPolicy (default IfNotPresent).
	PullPolicy string
	// RunID names the run (its namespace and labels).
	RunID string
	// Nodes, when set, pins one agent pod to each named node instead of
	// a DaemonSet over every schedulable node.
	Nodes []string
	// PoolSize is the number of backend pods (default: the scenario's
	// endpoints per service, at least 1).
	PoolSize int
	// AgentTimeout bounds the wait for the pool and every agent to be
	// Ready (default DefaultAgentTimeout).
	AgentTimeout time.Duration
	// CleanupWait bounds the wait for the run's namespace to be gone
	// after its deletion (default DefaultCleanupWait; negative: no wait,
	// for an API server without a namespace controller, where it never
	// finishes).
	CleanupWait time.Duration
	// ProbeDeadline bounds each programming-latency probe (default
	// DefaultProbeDeadline): a change no agent sees by then fails the run.
	ProbeDeadline time.Duration
	// ProgramWait bounds the wait, before the lookups, until the first
	// and the last service answer from every node (default
	// DefaultProgramWait): kube-proxy programming every service.
	ProgramWait time.Duration
	// Version is proxybench's version (recorded; the default image's tag).
	Version string
	// Log gets progress lines (nil: none).
	Log io.Writer
	// AllowModeSwitch lets the run switch kube-proxy's mode
	// (--allow-mode-switch): each kube-proxy mode of the scenario's modes
	// is measured in turn (the cluster's own first), by editing ConfigMap
	// kube-system/kube-proxy and rolling DaemonSet kube-system/kube-proxy
	// (SwitchMode), and the original configuration is restored at the
	// end, on SIGINT and on failure. Without it nothing outside the run's
	// namespace is written.
	AllowModeSwitch bool
	// Notice gets what the run prints before it changes anything outside
	// its namespace (the CLI: standard error; nil: Log).
	Notice io.Writer
	// SwitchWait bounds each switch's wait for every node to report the
	// new mode (default DefaultSwitchWait).
	SwitchWait time.Duration
}

func (o *Options) defaults() {
	if o.QPS == 0 {
		o.QPS = DefaultQPS
	}
	if o.Burst == 0 {
		o.Burst = DefaultBurst
	}
	if o.AgentTimeout == 0 {
		o.AgentTimeout = DefaultAgentTimeout
	}
	if o.ProbeDeadline == 0 {
		o.ProbeDeadline = DefaultProbeDeadline
	}
	if o.ProgramWait == 0 {
		o.ProgramWait = DefaultProgramWait
	}
	if o.CleanupWait == 0 {
		o.CleanupWait = DefaultCleanupWait
	}
	if o.PullPolicy == "" {
		o.PullPolicy = "IfNotPresent"
	}
	if o.SwitchWait == 0 {
		o.SwitchWait = DefaultSwitchWait
	}
	if o.Notice == nil {
		o.Notice = o.Log
	}
}

func (o *Options) logf(format string, args ...any) {
	if o.Log != nil {
		fmt.Fprintf(o.Log, format+"\n", args...)
	}
}

// Unusable is bad input or a cluster the run cannot use: Cause says what
// (naming the flag, object or node), Fix what to do. The CLI exits 2.
type Unusable struct {
	Cause string
	Fix   string
	Err   error
}

func (e *Unusable) Error() string {
	s := e.Cause
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	if e.Fix != "" {
		s += "; fix: " + e.Fix
	}
	return s
}

func (e *Unusable) Unwrap() error { return e.Err }

// IsUnusable reports whether err is (or wraps) an Unusable.
func IsUnusable(err error) bool {
	var u *Unusable
	return errors.As(err, &u)
}

// Cluster is a connection to a cluster's API server.
type Cluster struct {
	Client kubernetes.Interface
	Config *rest.Config
	// Host is the API server's URL, Context the kubeconfig context used.
	Host, Context string
	opts          Options
}

// RestConfig loads the kubeconfig of o (as kubectl does: o.Kubeconfig,
// else $KUBECONFIG, else ~/.kube/config; o.Context or the current one)
// with o's QPS and Burst. A file or context that does not load is
// Unusable naming it.
func RestConfig(o Options) (*rest.Config, string, error) {
	o.defaults()
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.Kubeconfig != "" {
		rules.ExplicitPath = o.Kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.Context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			// client-go's own text ("try setting KUBERNETES_MASTER
			// environment variable") names a variable nothing here reads.
			return nil, "", &Unusable{Cause: noKubeconfig(o.Kubeconfig, rules.GetLoadingPrecedence()), Fix: KubeconfigFix}
		}
		what := "--kubeconfig " + o.Kubeconfig
		if o.Kubeconfig == "" {
			what = "the kubeconfig (" + strings.Join(rules.GetLoadingPrecedence(), ", ") + ")"
		}
		if o.Context != "" {
			what += " --context " + o.Context
		}
		return nil, "", &Unusable{Cause: what + " does not load", Fix: "give --kubeconfig PATH (and --context NAME) of a cluster you can reach; " + KubeconfigFix, Err: err}
	}
	raw, _ := cc.RawConfig()
	ctxName := o.Context
	if ctxName == "" {
		ctxName = raw.CurrentContext
	}
	cfg.QPS, cfg.Burst = o.QPS, o.Burst
	if cfg.Timeout == 0 {
		cfg.Timeout = time.Minute
	}
	ns, err := netnsOf(raw, ctxName)
	if err != nil {
		return nil, "", &Unusable{Cause: "--kubeconfig " + o.Kubeconfig + ": " + err.Error(), Fix: "write the extension as proxybench cluster up does", Err: err}
	}
	if ns != "" {
		cfg.Dial = netnsDialer(ns)
	}
	return cfg, ctxName, nil
}

// KubeconfigFix is the fix of a run without a usable kubeconfig: the
// local cluster writes one.
const KubeconfigFix = "proxybench cluster up starts a local cluster and writes its kubeconfig (/tmp/pb-<id>-cluster/kubeconfig, printed when it is Ready): pass it as --kubeconfig PATH or KUBECONFIG=PATH"

// noKubeconfig says where RestConfig looked and found no cluster:
// explicit (--kubeconfig) names a file without one, else KUBECONFIG's
// files (or, with KUBECONFIG unset, ~/.kube/config) are missing or empty.
func noKubeconfig(explicit string, looked []string) string {
	if explicit != "" {
		return "--kubeconfig " + explicit + " holds no cluster (no contexts, or no current context)"
	}
	var where []string
	for _, p := range looked {
		if _, err := os.Stat(p); err != nil {
			where = append(where, p+" does not exist")
		} else {
			where = append(where, p+" holds no cluster")
		}
	}
	if env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar); env != "" {
		return "no kubeconfig: --kubeconfig is not given, and KUBECONFIG=" + env + " names none that holds a cluster (" + strings.Join(where, ", ") + ")"
	}
	return "no kubeconfig: --kubeconfig is not given, KUBECONFIG is not set, and " + strings.Join(where, ", ")
}

// Connect loads the kubeconfig (RestConfig), or takes cfg when it is
// not nil (a test's API server), and checks within ConnectTimeout that
// the API server answers; an API server that does not is Unusable naming
// its URL and the context.
func Connect(ctx context.Context, o Options, cfg *rest.Config) (*Cluster, error) {
	o.defaults()
	ctxName := o.Context
	if cfg == nil {
		var err error
		if cfg, ctxName, err = RestConfig(o); err != nil {
			return nil, err
		}
	} else {
		cfg = rest.CopyConfig(cfg)
		cfg.QPS, cfg.Burst = o.QPS, o.Burst
	}
	probe := rest.CopyConfig(cfg)
	probe.Timeout = ConnectTimeout
	pc, err := kubernetes.NewForConfig(probe)
	if err != nil {
		return nil, &Unusable{Cause: "kubeconfig context " + ctxName + ": bad client configuration", Err: err}
	}
	if _, err := pc.Discovery().ServerVersion(); err != nil {
		return nil, &Unusable{Cause: fmt.Sprintf("the API server %s (context %q) does not answer within %s", cfg.Host, ctxName, ConnectTimeout),
			Fix: "check that the cluster runs and --kubeconfig/--context name it", Err: err}
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Cluster{Client: c, Config: cfg, Host: cfg.Host, Context: ctxName, opts: o}, nil
}
