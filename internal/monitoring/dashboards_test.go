package monitoring

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/internal/testenv"
)

// TestDashboardsParse: every query of the Grafana dashboards in
// docs/grafana (template variables filled) is PromQL Prometheus accepts:
// each is checked as a recording rule by promtool; the dashboards over a
// row's Prometheus read only metric names its targets export.
func TestDashboardsParse(t *testing.T) {
	testenv.RequireTool(t, Promtool)
	files, _ := filepath.Glob(filepath.Join("..", "..", "docs", "grafana", "*.json"))
	if len(files) < 3 {
		t.Fatalf("dashboards %v, want the OpenMetrics, the kube-proxy Prometheus and the live one", files)
	}
	fill := strings.NewReplacer("$window", "1m", "$row", ".*", "$scenario", ".*", "$run_id", ".*", "$mode", ".*", "$kernel", ".*")
	for _, f := range files {
		var d struct {
			UID    string `json:"uid"`
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &d); err != nil || d.UID == "" || len(d.Panels) == 0 {
			t.Fatalf("%s: %v (uid %q, %d panels)", f, err, d.UID, len(d.Panels))
		}
		var rules strings.Builder
		rules.WriteString("groups:\n- name: dashboard\n  rules:\n")
		n := 0
		for _, p := range d.Panels {
			for _, tg := range p.Targets {
				// A dashboard over a row's Prometheus reads only what
				// the row's targets export or a recording rule (a:b:c,
				// the seeds') records; the OpenMetrics one reads the
				// export's names.
				for _, m := range MetricNames(fill.Replace(tg.Expr)) {
					if d.UID != "proxybench-openmetrics" && !RowExports(m) && !slices.Contains(PrometheusOwn, m) && !strings.Contains(m, ":") {
						t.Errorf("%s: panel %q reads %s, which no row's Prometheus holds", f, p.Title, m)
					}
				}
				n++
				e, _ := json.Marshal(fill.Replace(tg.Expr))
				fmt.Fprintf(&rules, "  - record: panel:%d\n    expr: %s\n", n, e)
			}
		}
		rs, err := Parse(filepath.Base(f), []byte(rules.String()))
		if err != nil {
			t.Fatal(err)
		}
		if err := Check(context.Background(), "", rs); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}
