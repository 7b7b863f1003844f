//go:build linux

package monitoring

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/proxybench/proxybench/topology"
)

// Binary is the Prometheus server (Debian 12's prometheus package, 2.42;
// make setup installs it).
const Binary = "prometheus"

// Port is the server's listener, on 127.0.0.1 of the namespace it runs in.
const Port = 9090

// Target is one scrape target: Addr (host:port, as reached from the
// server's namespace) and labels added to its series.
type Target struct {
	Addr   string
	Labels map[string]string
}

// ServerSpec is what Start runs.
type ServerSpec struct {
	RunID string
	// NS is the namespace the server runs in (the control plane's:
	// nothing listens in the root namespace).
	NS *topology.Netns
	// Binary is the prometheus program ("": Binary on PATH).
	Binary string
	// Dir holds prometheus.yml, rules.yaml, prometheus.log and the TSDB
	// (Dir/data); a second server on the same Dir (a row's next control
	// plane) continues the same TSDB.
	Dir string
	// Interval is the scrape and rule evaluation interval.
	Interval time.Duration
	// Job is the scrape job's name (the seeds' KubeProxyDown reads
	// up{job="kube-proxy"}) of Targets; no Targets: no such job.
	Job     string
	Targets []Target
	// Live, when set, is proxybench's own metrics endpoint (Live.Handler):
	// Start serves it on 127.0.0.1:LivePort of NS, from a socket opened
	// inside NS (never the root namespace), and scrapes it as job
	// LiveJob at Interval; Stop closes it.
	Live http.Handler
	// Rules are the rules the server evaluates (as run: scaled); nil:
	// none.
	Rules *RuleSet
	// ReadyTimeout bounds the wait for /-/ready (default 2 min).
	ReadyTimeout time.Duration
}

// Server is a running Prometheus.
type Server struct {
	Spec    ServerSpec
	Proc    *topology.Process
	Started time.Time
	// Client queries it, dialling from inside Spec.NS.
	Client *Client
	// live serves Spec.Live (nil without it).
	live *http.Server
}

// dirs are the TSDB folders a live server of this process holds: a
// second server on the same folder would fail on its lock file.
var dirs sync.Map

// LiveAddr is where a server's Prometheus scrapes proxybench's own
// metrics, in the server's namespace.
var LiveAddr = fmt.Sprintf("127.0.0.1:%d", LivePort)

// Config is the prometheus.yml of spec: job spec.Job scraping every
// target and, with spec.Live, job LiveJob scraping proxybench's own
// metrics at LiveAddr, both at the interval; the rule file when there
// are rules.
func Config(spec ServerSpec) ([]byte, error) {
	scrapeTimeout := min(spec.Interval, 10*time.Second)
	var static []map[string]any
	for _, t := range spec.Targets {
		static = append(static, map[string]any{"targets": []string{t.Addr}, "labels": t.Labels})
	}
	var jobs []map[string]any
	if len(static) > 0 {
		jobs = append(jobs, map[string]any{"job_name": spec.Job, "static_configs": static})
	}
	if spec.Live != nil {
		jobs = append(jobs, map[string]any{"job_name": LiveJob, "static_configs": []map[string]any{{"targets": []string{LiveAddr}}}})
	}
	cfg := map[string]any{
		"global": map[string]any{
			"scrape_interval":     FormatDuration(spec.Interval),
			"evaluation_interval": FormatDuration(spec.Interval),
			"scrape_timeout":      FormatDuration(scrapeTimeout),
		},
		"scrape_configs": jobs,
	}
	if spec.Rules != nil {
		cfg["rule_files"] = []string{filepath.Join(spec.Dir, "rules.yaml")}
	}
	return yaml.Marshal(cfg)
}

// Start writes spec's configuration and rules into spec.Dir, serves
// spec.Live at LiveAddr of spec.NS when set, and starts Prometheus inside
// spec.NS (topology.StartProcess: a child of the run, killed with
// proxybench), listening on 127.0.0.1:Port there, its TSDB in Dir/data;
// it returns once /-/ready answers. On error nothing is left running or
// listening.
func Start(ctx context.Context, spec ServerSpec) (*Server, error) {
	if spec.Binary == "" {
		spec.Binary = Binary
	}
	if spec.Job == "" {
		spec.Job = "kube-proxy"
	}
	if spec.Interval <= 0 {
		spec.Interval = 5 * time.Second
	}
	if spec.ReadyTimeout <= 0 {
		spec.ReadyTimeout = 2 * time.Minute
	}
	bin, err := exec.LookPath(spec.Binary)
	if err != nil {
		return nil, fmt.Errorf("prometheus: %w (make setup installs Debian's prometheus package)", err)
	}
	if err := os.MkdirAll(filepath.Join(spec.Dir, "data"), 0o755); err != nil {
		return nil, err
	}
	data := filepath.Join(spec.Dir, "data")
	if _, busy := dirs.LoadOrStore(data, true); busy {
		return nil, fmt.Errorf("prometheus: %s is the TSDB of a server still running", data)
	}
	ok := false
	defer func() {
		if !ok {
			dirs.Delete(data)
		}
	}()
	if spec.Rules != nil {
		if err := spec.Rules.WriteGroups(filepath.Join(spec.Dir, "rules.yaml")); err != nil {
			return nil, err
		}
	}
	cfg, err := Config(spec)
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(spec.Dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		return nil, err
	}
	log, err := os.OpenFile(filepath.Join(spec.Dir, "prometheus.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	var live *http.Server
	if spec.Live != nil {
		if live, err = serveLive(spec.NS, spec.Live); err != nil {
			return nil, err
		}
	}
	defer func() {
		if !ok && live != nil {
			_ = live.Close()
		}
	}()
	cmd := exec.Command(bin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+data,
		"--storage.tsdb.retention.time=30d",
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", Port),
		// The row's short windows: an alert restored after the row's
		// next control plane keeps its for: state.
		"--rules.alert.for-outage-tolerance=1h",
		"--log.level=info")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = spec.Dir
	p, err := topology.StartProcess(spec.NS, spec.RunID, "prometheus", cmd)
	log.Close()
	if err != nil {
		return nil, err
	}
	s := &Server{Spec: spec, Proc: p, live: live, Started: time.Now(), Client: &Client{Base: fmt.Sprintf("http://127.0.0.1:%d", Port), HTTP: nsHTTP(spec.NS)}}
	rctx, cancel := context.WithTimeout(ctx, spec.ReadyTimeout)
	defer cancel()
	for !s.Client.Ready(rctx) {
		if done, werr := p.Exited(); done {
			return nil, fmt.Errorf("prometheus exited (%v) before it was ready:\n%s", werr, s.LogTail(15))
		}
		select {
		case <-rctx.Done():
			_ = p.Stop(5 * time.Second)
			return nil, fmt.Errorf("prometheus not ready after %v:\n%s", spec.ReadyTimeout, s.LogTail(15))
		case <-time.After(100 * time.Millisecond):
		}
	}
	ok = true
	return s, nil
}

// serveLive serves h at LiveAddr of ns: the listening socket is opened
// on a thread inside ns (topology.Netns.Do), so it stays in ns; the
// server's goroutines accept on it from any thread.
func serveLive(ns *topology.Netns, h http.Handler) (*http.Server, error) {
	var l net.Listener
	err := ns.Do(func() error {
		var err error
		l, err = net.Listen("tcp", LiveAddr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("proxybench's metrics endpoint in %s: %w", ns.Name, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return srv, nil
}

// nsHTTP is an HTTP client whose connections are dialled from inside ns.
func nsHTTP(ns *topology.Netns) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := ns.Do(func() error {
			var err error
			c, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	return &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
}

// Stop stops the server (SIGTERM: it closes its TSDB; SIGKILL after 30 s)
// and frees its TSDB folder. Safe on a nil or stopped server.
func (s *Server) Stop() error {
	if s == nil || s.Proc == nil {
		return nil
	}
	err := s.Proc.Stop(30 * time.Second)
	s.Proc = nil
	if s.live != nil {
		_ = s.live.Close()
		s.live = nil
	}
	dirs.Delete(filepath.Join(s.Spec.Dir, "data"))
	if err != nil {
		return fmt.Errorf("prometheus: %w", err)
	}
	return nil
}

// ScrapeTargets is how many targets the server scrapes: Spec.Targets,
// and proxybench's own metrics with Spec.Live.
func (s *Server) ScrapeTargets() int {
	n := len(s.Spec.Targets)
	if s.Spec.Live != nil {
		n++
	}
	return n
}

// TSDB is the server's data folder.
func (s *Server) TSDB() string { return filepath.Join(s.Spec.Dir, "data") }

// LogTail is the last n lines of the server's log.
func (s *Server) LogTail(n int) string {
	b, _ := os.ReadFile(filepath.Join(s.Spec.Dir, "prometheus.log"))
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// CPU is the server's CPU time so far (0 once stopped).
func (s *Server) CPU() time.Duration {
	if s == nil || s.Proc == nil {
		return 0
	}
	return s.Proc.CPU()
}
