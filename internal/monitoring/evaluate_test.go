package monitoring

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/reports"
)

// fakeAPI answers Prometheus 2.42's /api/v1 as a server that ran the
// seeds' rules for 60 s from t0 at a 5 s interval: KubeProxyHighSyncLatency
// active at +10 s, firing +20..+40 s (resolved), its expression 0.5 then
// 0.7; KubeProxyDown pending at +0 and +5 s only (before the first
// scrape), ServiceEndpointsDown never active; the 0.99 and
// 0.50 network programming quantiles recorded (0.50 with a NaN), the 0.90
// one never. failing names paths that answer with an API error.
func fakeAPI(t *testing.T, t0 time.Time, failing ...string) *httptest.Server {
	ts := func(off int) float64 { return float64(t0.Unix() + int64(off)) }
	matrix := func(series ...string) string {
		return `{"status":"success","data":{"resultType":"matrix","result":[` + strings.Join(series, ",") + `]}}`
	}
	vals := func(pairs ...any) string {
		var out []string
		for i := 0; i+1 < len(pairs); i += 2 {
			out = append(out, fmt.Sprintf(`[%v,"%v"]`, ts(pairs[i].(int)), pairs[i+1]))
		}
		return "[" + strings.Join(out, ",") + "]"
	}
	high := `{"alertname":"KubeProxyHighSyncLatency","job":"kube-proxy","severity":"warning"`
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, f := range failing {
			if strings.HasPrefix(r.URL.Path, f) {
				fmt.Fprint(w, `{"status":"error","errorType":"bad_data","error":"invalid parameter"}`)
				return
			}
		}
		q := r.URL.Query().Get("query")
		switch r.URL.Path {
		case "/api/v1/status/buildinfo":
			fmt.Fprint(w, `{"status":"success","data":{"version":"2.42.0+ds"}}`)
		case "/api/v1/label/__name__/values":
			fmt.Fprint(w, `{"status":"success","data":["up","ALERTS","ALERTS_FOR_STATE","kubeproxy_sync_proxy_rules_duration_seconds_bucket","kubeproxy_network_programming_duration_seconds_bucket","kubeproxy:kubeproxy_network_programming_duration:histogram_quantile"]}`)
		case "/api/v1/rules":
			fmt.Fprint(w, `{"status":"success","data":{"groups":[{"name":"kubernetes-service","rules":[
				{"name":"KubeProxyDown","query":"absent(up{job=\"kube-proxy\"} == 1)","type":"alerting","health":"ok","state":"inactive","alerts":[]},
				{"name":"ServiceEndpointsDown","query":"kube_endpoint_address_available == 0","type":"alerting","health":"err","lastError":"many-to-many matching not allowed","state":"inactive","alerts":[]}]}]}}`)
		case "/api/v1/query_range":
			if r.URL.Query().Get("step") != "5" {
				t.Errorf("query_range step %q, want 5", r.URL.Query().Get("step"))
			}
			switch {
			case q == "up":
				fmt.Fprint(w, matrix(`{"metric":{"__name__":"up","job":"kube-proxy","instance":"169.254.0.2:10249","node":"pb-x-node0"},"values":`+vals(0, 0, 5, 1, 10, 1, 15, 1)+`}`))
			case q == "ALERTS":
				fmt.Fprint(w, matrix(
					`{"metric":`+high+`,"__name__":"ALERTS","alertstate":"pending"},"values":`+vals(10, 1, 15, 1)+`}`,
					`{"metric":`+high+`,"__name__":"ALERTS","alertstate":"firing"},"values":`+vals(20, 1, 25, 1, 30, 1, 35, 1, 40, 1)+`}`,
					`{"metric":{"alertname":"KubeProxyDown","severity":"critical","__name__":"ALERTS","alertstate":"pending"},"values":`+vals(0, 1, 5, 1)+`}`))
			case q == `absent(up{job="kube-proxy"} == 1)`:
				fmt.Fprint(w, matrix(`{"metric":{},"values":`+vals(0, 1, 5, 1)+`}`))
			case q == "ALERTS_FOR_STATE":
				fmt.Fprint(w, matrix(`{"metric":`+high+`,"__name__":"ALERTS_FOR_STATE"},"values":`+vals(10, ts(8), 15, ts(8), 20, ts(8))+`}`))
			case strings.HasPrefix(q, "histogram_quantile(0.99, sum(rate(kubeproxy_sync_proxy_rules_duration_seconds_bucket"):
				fmt.Fprint(w, matrix(`{"metric":{"job":"kube-proxy"},"values":`+vals(10, 0.3, 15, 0.4, 20, 0.5, 25, 0.7, 30, 0.6)+`}`))
			case q == `{__name__="kubeproxy:kubeproxy_network_programming_duration:histogram_quantile"}`:
				name := `"__name__":"kubeproxy:kubeproxy_network_programming_duration:histogram_quantile"`
				fmt.Fprint(w, matrix(
					`{"metric":{`+name+`,"quantile":"0.99"},"values":`+vals(20, 1.2, 25, 2.5, 30, 1.9)+`}`,
					`{"metric":{`+name+`,"quantile":"0.50"},"values":`+vals(20, "NaN", 25, 0.4)+`}`))
			default:
				fmt.Fprint(w, matrix())
			}
		default:
			http.NotFound(w, r)
		}
	}))
}

func seeds(t *testing.T) *RuleSet {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "scenarios", "alerts", "seeds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Parse("seeds.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestEvaluate: ALERTS and ALERTS_FOR_STATE give each alert's active,
// firing and resolved times; the expression's range query its value when
// it fired and its peak; the recording rule's series go to the rule of
// their quantile label; up gives the scrapes; unhealthy rules and metric
// names without series are listed.
func TestEvaluate(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0).UTC()
	srv := fakeAPI(t, t0)
	defer srv.Close()
	c := &Client{Base: srv.URL, HTTP: srv.Client()}
	var m reports.Monitoring
	w := Window{Start: t0, End: t0.Add(60 * time.Second), Step: 5 * time.Second}
	if err := Evaluate(context.Background(), c, seeds(t), w, &m); err != nil {
		t.Fatal(err)
	}
	if m.Prometheus != "2.42.0+ds" {
		t.Errorf("version %q", m.Prometheus)
	}
	if len(m.Targets) != 1 || m.Targets[0].Scrapes != 4 || m.Targets[0].Up != 3 || m.Targets[0].Node != "pb-x-node0" {
		t.Errorf("targets %+v, want one with 3 of 4 scrapes up", m.Targets)
	}
	byName := map[string]reports.AlertOutcome{}
	for _, a := range m.Alerts {
		byName[a.Alert] = a
	}
	if len(m.Alerts) != 3 {
		t.Fatalf("alerts %+v, want one per rule (none had two label sets)", m.Alerts)
	}
	h := byName["KubeProxyHighSyncLatency"]
	at := func(off int) time.Time { return t0.Add(time.Duration(off) * time.Second) }
	switch {
	case h.State != "firing":
		t.Errorf("KubeProxyHighSyncLatency state %q, want firing", h.State)
	case h.PendingAt == nil || !h.PendingAt.Equal(at(8)):
		t.Errorf("active at %v, want +8 s (ALERTS_FOR_STATE)", h.PendingAt)
	case h.FiredAt == nil || !h.FiredAt.Equal(at(20)):
		t.Errorf("fired at %v, want +20 s", h.FiredAt)
	case h.ResolvedAt == nil || !h.ResolvedAt.Equal(at(45)):
		t.Errorf("resolved at %v, want +45 s (last firing sample +40 s, one step)", h.ResolvedAt)
	case h.Value == nil || *h.Value != 0.5 || h.Peak == nil || *h.Peak != 0.7:
		t.Errorf("value %v peak %v, want 0.5 when it fired and 0.7", deref(h.Value), deref(h.Peak))
	case h.FiringSeconds != 25:
		t.Errorf("firing %v s, want 25 (5 samples × 5 s)", h.FiringSeconds)
	case h.Labels["job"] != "kube-proxy" || h.Labels["severity"] != "warning" || h.Labels["__name__"] != "" || h.Labels["alertstate"] != "":
		t.Errorf("labels %v", h.Labels)
	}
	if d := byName["KubeProxyDown"]; d.State != "pending" || d.FiredAt != nil || d.ResolvedAt == nil || !d.ResolvedAt.Equal(at(10)) || d.For != "15m" || d.Value == nil || *d.Value != 1 {
		t.Errorf("KubeProxyDown %+v, want pending at +0 s, inactive again from +10 s, never fired, value 1, for 15m", d)
	}
	if e := byName["ServiceEndpointsDown"]; e.State != "inactive" || e.PendingAt != nil {
		t.Errorf("ServiceEndpointsDown %+v, want inactive", e)
	}
	recs := map[string]reports.RecordOutcome{}
	for _, r := range m.Records {
		recs[r.Labels["quantile"]] = r
	}
	if len(m.Records) != 3 {
		t.Fatalf("records %+v, want the three quantiles", m.Records)
	}
	if r := recs["0.99"]; r.Samples != 3 || r.Values != 3 || *r.Last != 1.9 || *r.Max != 2.5 || *r.Min != 1.2 || r.Line == 0 {
		t.Errorf("0.99: %+v", r)
	}
	if r := recs["0.50"]; r.Samples != 2 || r.Values != 1 || *r.Last != 0.4 {
		t.Errorf("0.50: %+v, want the NaN counted as a sample, not a value", r)
	}
	if r := recs["0.90"]; r.Samples != 0 || r.Last != nil {
		t.Errorf("0.90: %+v, want no samples", r)
	}
	if len(m.Unhealthy) != 1 || !strings.Contains(m.Unhealthy[0], "ServiceEndpointsDown (err): many-to-many") {
		t.Errorf("unhealthy %v", m.Unhealthy)
	}
	if len(m.Missing) != 1 || !strings.Contains(m.Missing[0], "kube_endpoint_address_available") {
		t.Errorf("missing %v", m.Missing)
	}
	// The report section: a row per alert and per record series.
	secs := reports.MonitoringSection("iptables (kube-proxy)", &m)
	if len(secs) != 1 || len(secs[0].Rows) != 6 {
		t.Fatalf("section %+v", secs)
	}
	row := secs[0].Rows[2] // KubeProxyHighSyncLatency, in file order
	if row.Cells[0].Text != "KubeProxyHighSyncLatency" || row.Cells[3].Text != "firing" || row.Cells[5].Text != "20" || row.Cells[6].Text != "0.5" {
		t.Errorf("row %+v", row)
	}
}

// TestEvaluateAPIErrors: a query the API refuses is named in the error,
// the rest is still read.
func TestEvaluateAPIErrors(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0).UTC()
	srv := fakeAPI(t, t0, "/api/v1/rules")
	defer srv.Close()
	c := &Client{Base: srv.URL, HTTP: srv.Client()}
	var m reports.Monitoring
	err := Evaluate(context.Background(), c, seeds(t), Window{Start: t0, End: t0.Add(time.Minute), Step: 5 * time.Second}, &m)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Path != "/api/v1/rules" || ae.Type != "bad_data" {
		t.Fatalf("Evaluate: %v, want the /api/v1/rules APIError", err)
	}
	if len(m.Alerts) != 3 || len(m.Records) != 3 || m.Prometheus == "" {
		t.Errorf("after one failed query: %d alerts, %d records, version %q; want the rest read", len(m.Alerts), len(m.Records), m.Prometheus)
	}
	// Not an API answer at all.
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<html>") }))
	defer bad.Close()
	if _, err := (&Client{Base: bad.URL}).QueryRange(context.Background(), "up", t0, t0, time.Second); err == nil || !strings.Contains(err.Error(), "not an API answer") {
		t.Errorf("QueryRange of a non-API answer: %v", err)
	}
}

func deref(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}

// TestAlertValueNearest: the value of an alert whose expression has no
// sample at or after its first firing evaluation (the range query's grid
// is not the rule's instants) is the sample nearest to it.
func TestAlertValueNearest(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0).UTC()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	r := Rule{Alert: "A", Expr: "x > 1", Labels: map[string]string{"severity": "warning"}}
	pending := Series{Labels: map[string]string{"alertname": "A", "severity": "warning", "job": "kube-proxy", "alertstate": "pending"}, Samples: []Sample{{at(5), 1}, {at(10), 1}}}
	firing := Series{Labels: map[string]string{"alertname": "A", "severity": "warning", "job": "kube-proxy", "alertstate": "firing"}, Samples: []Sample{{at(20), 1}}}
	expr := Series{Labels: map[string]string{"job": "kube-proxy"}, Samples: []Sample{{at(5), 2}, {at(10), 3}, {at(15), 2.5}}}
	got := alertOutcomes(r, []Series{pending, firing}, nil, []Series{expr}, Window{Start: t0, End: at(60), Step: 5 * time.Second})
	if len(got) != 1 || got[0].Value == nil || *got[0].Value != 2.5 || *got[0].Peak != 3 || got[0].State != "firing" || !got[0].ResolvedAt.Equal(at(25)) {
		t.Fatalf("outcome %+v (value %v), want firing, value 2.5 (the sample nearest +20 s), peak 3, inactive from +25 s", got, deref(got[0].Value))
	}
}
