//go:build linux

package runner

import (
	"os"
	"strings"
	"testing"
)

// TestKubeProxyRefusalsDocumented: every phase still refused with
// kube-proxy rows (PhaseRule.NotWithKubeProxy, .NotWithKubeProxyNodes)
// has its row in docs/kube-proxy.md's "Still refused with kube-proxy
// rows" table, naming its field, on one node or several, with the
// reason validate gives (issue 24: a refusal stays only with its reason
// documented).
func TestKubeProxyRefusalsDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/kube-proxy.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n## Still refused with kube-proxy rows\n")
	if start < 0 {
		t.Fatal(`docs/kube-proxy.md has no "## Still refused with kube-proxy rows" section`)
	}
	section := doc[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	rows := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "| `") {
			field := strings.SplitN(strings.TrimPrefix(line, "| `"), "`", 2)[0]
			rows[field] = line
		}
	}
	n := 0
	for _, ph := range PhaseRules() {
		for _, c := range []struct{ reason, where string }{
			{ph.NotWithKubeProxy, "| kube-proxy rows |"},
			{ph.NotWithKubeProxyNodes, "| kube-proxy rows on several nodes |"},
		} {
			if c.reason == "" {
				continue
			}
			n++
			row, ok := rows[ph.Field]
			switch {
			case !ok:
				t.Errorf("phase %s: no row for `%s` in docs/kube-proxy.md's refusal table", ph.Name, ph.Field)
			case !strings.Contains(row, c.where):
				t.Errorf("phase %s: the row for `%s` does not say %q:\n%s", ph.Name, ph.Field, c.where, row)
			case !strings.Contains(row, c.reason):
				t.Errorf("phase %s: the row for `%s` does not give validate's reason %q:\n%s", ph.Name, ph.Field, c.reason, row)
			}
		}
	}
	if n == 0 {
		t.Fatal("no phase is refused with kube-proxy rows: drop the table and this test together")
	}
}
