//go:build linux

package runner

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/monitoring"
	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

// monitoredProxier is a fake kube-proxy row with a Prometheus (a fake
// API: one alert firing from the window's start).
type monitoredProxier struct {
	recordingProxier
	srv *monitoring.Server
	t0  time.Time
}

func (p monitoredProxier) Prometheus() (*monitoring.Server, time.Time, int) { return p.srv, p.t0, 0 }
func (p monitoredProxier) PrometheusCPU() time.Duration                     { return time.Second }

// TestAlertsPhaseIsFinal: the alerts phase reads the row's Prometheus
// back after the row's other phases, also when one of them stopped the
// row: the row keeps its Monitoring (the firing alert, its value) and
// its report section, beside the failing phase's error.
func TestAlertsPhaseIsFinal(t *testing.T) {
	t0 := time.Now().Add(-time.Minute)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query().Get("query")
		switch {
		case r.URL.Path == "/api/v1/query_range" && (q == "ALERTS" || strings.HasPrefix(q, "vector(1)")):
			name := `"alertname":"AlwaysTrue","alertstate":"firing",`
			if q != "ALERTS" {
				name = ""
			}
			fmt.Fprintf(w, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{%s"severity":"none"},"values":[[%d,"1"]]}]}}`, name, t0.Add(10*time.Second).Unix())
		case r.URL.Path == "/api/v1/query_range":
			fmt.Fprint(w, `{"status":"success","data":{"resultType":"matrix","result":[]}}`)
		case r.URL.Path == "/api/v1/rules":
			fmt.Fprint(w, `{"status":"success","data":{"groups":[]}}`)
		case r.URL.Path == "/api/v1/label/__name__/values":
			fmt.Fprint(w, `{"status":"success","data":["ALERTS"]}`)
		case r.URL.Path == "/api/v1/status/buildinfo":
			fmt.Fprint(w, `{"status":"success","data":{"version":"2.42.0+ds"}}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	rules, err := monitoring.Parse("always.yaml", []byte("groups:\n- name: g\n  rules:\n  - alert: AlwaysTrue\n    expr: vector(1) > 0\n    labels: {severity: none}\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &monitoring.Server{Spec: monitoring.ServerSpec{Dir: t.TempDir(), Rules: rules}, Client: &monitoring.Client{Base: api.URL, HTTP: api.Client()}}
	for _, failIn := range []string{"", "traffic"} {
		t.Run("fail in "+failIn, func(t *testing.T) {
			sc, svcs, m, e, tb := fakeRowSetup(t)
			sc.Alerts, sc.Monitoring = "always.yaml", scenarios.MonitoringSpec{Interval: scenarios.Duration{Duration: 50 * time.Millisecond}, TimeScale: 1}
			p := monitoredProxier{recordingProxier{e.p}, srv, t0}
			m.Name, m.New = "fake (kube-proxy)", func(*scenarios.Scenario, proxymodes.Node) (proxymodes.Proxier, error) { return p, nil }
			list := slices.Clone(Phases)
			injected := errors.New("injected failure")
			for i := range list {
				if list[i].Name == failIn {
					list[i].Run = func(context.Context, *Row) error { return injected }
				}
			}
			mr, secs, err := runRow(context.Background(), list, sc, Options{Progress: &recProgress{}}, tb, &e.env, svcs, m, nil)
			if failIn != "" && !errors.Is(err, injected) {
				t.Fatalf("error %v, want the injected one", err)
			}
			if failIn == "" && err != nil {
				t.Fatal(err)
			}
			if mr.Monitoring == nil || len(mr.Monitoring.Alerts) != 1 {
				t.Fatalf("monitoring %+v, want the alert read back", mr.Monitoring)
			}
			a := mr.Monitoring.Alerts[0]
			if a.State != "firing" || a.Value == nil || *a.Value != 1 || mr.Monitoring.Prometheus != "2.42.0+ds" || mr.Monitoring.CPUSeconds != 1 {
				t.Errorf("alert %+v, monitoring %+v, info %v", a, mr.Monitoring, mr.Info)
			}
			if !slices.ContainsFunc(secs, func(s reports.Section) bool { return s.Phase == reports.MonitoringPhase && len(s.Rows) == 1 }) {
				t.Errorf("sections %+v, want the alerts section with one row", secs)
			}
		})
	}
}
