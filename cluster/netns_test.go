//go:build linux

package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNetnsKubeconfig: the kubeconfig cluster up writes loads with
// client-go, and its NetnsExtension turns into a dialer that enters the
// named namespace; a kubeconfig without the extension dials as usual, and
// a malformed one is Unusable.
func TestNetnsKubeconfig(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "kc")
	if err := NetnsKubeconfig(p, "https://127.0.0.1:6443", "tok", "pb-abc123-kube"); err != nil {
		t.Fatal(err)
	}
	cfg, ctxName, err := RestConfig(Options{Kubeconfig: p})
	if err != nil {
		t.Fatal(err)
	}
	if ctxName != "proxybench" || cfg.Host != "https://127.0.0.1:6443" || cfg.BearerToken != "tok" || cfg.Dial == nil {
		t.Errorf("config: context %q host %q token %q dial %v; want the netns dialer", ctxName, cfg.Host, cfg.BearerToken, cfg.Dial != nil)
	}
	// The namespace does not exist: the dialer says so (it entered nothing).
	if _, err := cfg.Dial(t.Context(), "tcp", "127.0.0.1:6443"); err == nil || !strings.Contains(err.Error(), "pb-abc123-kube") {
		t.Errorf("dial in a missing namespace: %v, want an error naming it", err)
	}
	plain := filepath.Join(dir, "plain")
	if err := NetnsKubeconfig(plain, "https://127.0.0.1:6443", "tok", "x"); err != nil {
		t.Fatal(err)
	}
	// Without the extension (removed from the text), no dialer.
	b := strings.Replace(readFile(t, plain), "    extensions:\n    - name: proxybench.io/netns\n      extension:\n        netns: \"x\"\n", "", 1)
	writeFile(t, plain, b)
	if cfg, _, err := RestConfig(Options{Kubeconfig: plain}); err != nil || cfg.Dial != nil {
		t.Errorf("plain kubeconfig: err %v, dial set %v; want no dialer", err, cfg != nil && cfg.Dial != nil)
	}
	bad := strings.Replace(readFile(t, p), `netns: "pb-abc123-kube"`, `other: 1`, 1)
	writeFile(t, plain, bad)
	if _, _, err := RestConfig(Options{Kubeconfig: plain}); err == nil || !IsUnusable(err) {
		t.Errorf("extension without netns: err %v, want Unusable", err)
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
