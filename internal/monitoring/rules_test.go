package monitoring

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
)

const ruleFile = `groups:
- name: g
  rules:
  - alert: High
    expr: histogram_quantile(0.99, sum(rate(kubeproxy_sync_proxy_rules_duration_seconds_bucket[5m])) by (job, le)) > 0.1
    for: 5m
  - record: r:x
    expr: sum(rate(kubeproxy_network_programming_duration_seconds_count[1m]))
`

const promRule = `apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: x
spec:
  groups:
  - name: g
    rules:
    - alert: Down
      expr: absent(up{job="kube-proxy"} == 1)
      for: 15m
    - alert: Endpoints
      expr: kube_endpoint_address_available == 0
`

// TestParseRuleFileAndPrometheusRule: both shapes decode to the same
// groups, each rule at its own line, and a PrometheusRule's spec.groups
// is handed to promtool at the object's own lines.
func TestParseRuleFileAndPrometheusRule(t *testing.T) {
	rs, err := Parse("r.yaml", []byte(ruleFile))
	if err != nil {
		t.Fatal(err)
	}
	if rs.Kind != "rule file" || len(rs.Alerts()) != 1 || len(rs.Records()) != 1 {
		t.Fatalf("kind %q, %d alerts, %d records", rs.Kind, len(rs.Alerts()), len(rs.Records()))
	}
	if a := rs.Alerts()[0]; a.Alert != "High" || a.For != "5m" || a.Line != 4 {
		t.Errorf("alert %+v, want High for 5m at line 4", a)
	}
	if r := rs.Records()[0]; r.Record != "r:x" || r.Line != 7 {
		t.Errorf("record %+v, want r:x at line 7", r)
	}
	pr, err := Parse("p.yaml", []byte(promRule))
	if err != nil {
		t.Fatal(err)
	}
	if pr.Kind != "PrometheusRule" || len(pr.Alerts()) != 2 || pr.Alerts()[0].Line != 9 || pr.Alerts()[1].Line != 12 {
		t.Fatalf("PrometheusRule: %q %+v", pr.Kind, pr.Alerts())
	}
	lines := strings.Split(string(pr.groups), "\n")
	if lines[5] != "groups:" || lines[8] != "  - alert: Down" || strings.TrimSpace(lines[0]) != "" || strings.TrimSpace(lines[4]) != "" {
		t.Errorf("extracted groups not line-preserving:\n%s", pr.groups)
	}
}

// TestParseRefuses: what is not a rule file is a *RuleError at its line.
func TestParseRefuses(t *testing.T) {
	for _, c := range []struct{ name, text, want string }{
		{"not yaml", "groups:\n  - name: [\n", "r.yaml:"},
		{"no groups", "rules: []\n", "no groups:"},
		{"other kind", "apiVersion: v1\nkind: ConfigMap\n", `r.yaml:2: kind "ConfigMap"`},
		{"no spec.groups", "kind: PrometheusRule\nspec: {}\n", "r.yaml:2: PrometheusRule without spec.groups"},
		{"a list", "- a\n", "not a Prometheus rule file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("r.yaml", []byte(c.text))
			var re *RuleError
			if !errors.As(err, &re) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Parse: %v, want a *RuleError containing %q", err, c.want)
			}
		})
	}
}

// TestCheckWithPromtool: promtool (Debian's prometheus package) accepts
// the good files and refuses bad ones; each problem is at the file's own
// line (a PrometheusRule's too) with promtool's message.
func TestCheckWithPromtool(t *testing.T) {
	testenv.RequireTool(t, Promtool)
	ctx := context.Background()
	for _, c := range []struct {
		name, text string
		want       []string // nil: accepted
	}{
		{"rule file", ruleFile, nil},
		{"PrometheusRule", promRule, nil},
		{"bad expression", "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up ==\n  - record: b\n    expr: rate(x[5m]\n",
			[]string{`r.yaml:5:11: group "g", rule 1, "A": could not parse expression: 1:6: parse error: unexpected end of input`,
				`r.yaml:7:11: group "g", rule 2, "b": could not parse expression: 1:11: parse error: unclosed left parenthesis`}},
		{"unknown field", "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up\n    forr: 5m\n",
			[]string{"r.yaml:6: yaml: unmarshal errors: field forr not found in type rulefmt.RuleNode"}},
		{"PrometheusRule bad expression", strings.Replace(promRule, "== 0", "== ", 1),
			[]string{`r.yaml:13:13: group "g", rule 2, "Endpoints": could not parse expression`}},
		{"bad duration", "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: up\n    for: 5 minutes\n",
			[]string{"r.yaml:6"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			rs, err := Parse("r.yaml", []byte(c.text))
			if err != nil {
				t.Fatal(err)
			}
			err = Check(ctx, "", rs)
			if c.want == nil {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Check accepted it")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Check: %v\nwant it to contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), os.TempDir()) {
				t.Errorf("Check names its temporary file: %v", err)
			}
		})
	}
}

// TestParsePromtool: promtool's output forms, read without promtool.
func TestParsePromtool(t *testing.T) {
	out := `Checking /tmp/x/rules.yaml
  FAILED:
/tmp/x/rules.yaml: 5:11: group "g", rule 1, "A": could not parse expression: 1:6: parse error: unexpected end of input
/tmp/x/rules.yaml: yaml: unmarshal errors:
  line 6: field forr not found in type rulefmt.RuleNode
  line 9: field x not found in type rulefmt.RuleNode
/tmp/x/rules.yaml: 3:3: groupname: "g" is repeated in the same file
`
	got := parsePromtool(out, "/tmp/x/rules.yaml", "mine.yaml")
	want := []string{
		`mine.yaml:5:11: group "g", rule 1, "A": could not parse expression: 1:6: parse error: unexpected end of input`,
		"mine.yaml:6: yaml: unmarshal errors: field forr not found in type rulefmt.RuleNode",
		"mine.yaml:9: yaml: unmarshal errors: field x not found in type rulefmt.RuleNode",
		`mine.yaml:3:3: groupname: "g" is repeated in the same file`,
	}
	var texts []string
	for _, e := range got {
		texts = append(texts, e.Error())
	}
	if !reflect.DeepEqual(texts, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(texts, "\n"), strings.Join(want, "\n"))
	}
}

// TestScale: for: and every range window scale, at least the minimum
// window; strings, subquery steps and offsets stay; a bad range is an
// error at the rule's line.
func TestScale(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`rate(x[5m])`, `rate(x[30s])`},
		{`histogram_quantile(0.99, sum(rate(a_bucket{job="k[5m]"}[5m])) by (le)) > 0.1`, `histogram_quantile(0.99, sum(rate(a_bucket{job="k[5m]"}[30s])) by (le)) > 0.1`},
		{`max_over_time(rate(x[1m])[10m:1m])`, `max_over_time(rate(x[20s])[1m:1m])`},
		{`rate(x[1h30m] offset 5m)`, `rate(x[9m] offset 5m)`},
		{`rate(x[30s])`, `rate(x[20s])`}, // 3s, raised to the 20s minimum
	} {
		got, err := ScaleExpr(c.in, 0.1, 20*time.Second)
		if err != nil || got != c.want {
			t.Errorf("ScaleExpr(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	rs, err := Parse("r.yaml", []byte(ruleFile))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := rs.Scale(0.2, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if a := sc.Alerts()[0]; a.For != "1m" || !strings.Contains(a.Expr, "[1m]") || a.Line != 4 {
		t.Errorf("scaled alert %+v", a)
	}
	if !strings.Contains(string(sc.groups), "for: 1m") {
		t.Errorf("scaled file:\n%s", sc.groups)
	}
	if same, _ := rs.Scale(1, time.Minute); same != rs {
		t.Error("Scale(1) is not the rule set itself")
	}
	bad, _ := Parse("r.yaml", []byte("groups:\n- name: g\n  rules:\n  - alert: A\n    expr: rate(x[5 m])\n"))
	if _, err := bad.Scale(0.5, 0); err == nil || !strings.HasPrefix(err.Error(), "r.yaml:4: A: scaling its windows") {
		t.Errorf("Scale of a bad range: %v", err)
	}
	for d, want := range map[string]time.Duration{"5m": 5 * time.Minute, "1h30m": 90 * time.Minute, "1d": 24 * time.Hour, "500ms": 500 * time.Millisecond, "1w": 7 * 24 * time.Hour} {
		if got, err := ParseDuration(d); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v", d, got, err)
		}
	}
	for _, d := range []string{"", "5", "m5", "5m1h", "1.5m"} {
		if _, err := ParseDuration(d); err == nil {
			t.Errorf("ParseDuration(%q) accepted", d)
		}
	}
}

// TestMetricNames: the names an expression selects, not its functions,
// keywords, label names, label lists or strings.
func TestMetricNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`histogram_quantile(0.99, sum(rate(kubeproxy_sync_proxy_rules_duration_seconds_bucket[5m])) by (job, le)) > 0.1`,
			[]string{"kubeproxy_sync_proxy_rules_duration_seconds_bucket"}},
		{`absent(up{job="kube-proxy"} == 1)`, []string{"up"}},
		{`kube_endpoint_address_available == 0`, []string{"kube_endpoint_address_available"}},
		{`a / on(instance) group_left(node) b unless c offset 5m`, []string{"a", "b", "c"}},
		{`{__name__="x:y", job="z"} and sum without (le) (w)`, []string{"x:y", "w"}},
		{`vector(1) > bool 0 or 1e3`, nil},
		{`label_replace(up, "dst", "$1", "src", "(.*)")`, []string{"up"}},
	} {
		if got := MetricNames(c.expr); !reflect.DeepEqual(got, c.want) {
			t.Errorf("MetricNames(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
}

// TestUnexported: the seeds' ServiceEndpointsDown reads a metric only
// kube-state-metrics exports; everything else is kube-proxy's or
// Prometheus's own, or recorded by the file.
func TestUnexported(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "scenarios", "alerts", "seeds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Parse("seeds.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	got := rs.Unexported(KubeProxyExports)
	if len(got) != 1 || got[0].Rule != "ServiceEndpointsDown" || got[0].Metric != "kube_endpoint_address_available" || got[0].Line == 0 {
		t.Fatalf("Unexported = %+v, want ServiceEndpointsDown's kube_endpoint_address_available only", got)
	}
	if len(rs.Alerts()) != 3 || len(rs.Records()) != 3 {
		t.Errorf("seeds: %d alerts, %d records; want KubeProxyDown, ServiceEndpointsDown, KubeProxyHighSyncLatency and ClusterLoader2's three quantiles", len(rs.Alerts()), len(rs.Records()))
	}
}
