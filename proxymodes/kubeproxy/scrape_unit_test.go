package kubeproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// scrapeMetricsText is a kube-proxy metrics answer: 4 IPv4 syncs, the
// last ended at 1000 s, 7 programming observations.
const scrapeMetricsText = `# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="1"} 4
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="+Inf"} 4
kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv4"} 2
kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} 4
# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"} 1000
# TYPE kubeproxy_network_programming_duration_seconds histogram
kubeproxy_network_programming_duration_seconds_bucket{ip_family="IPv4",le="+Inf"} 7
kubeproxy_network_programming_duration_seconds_sum{ip_family="IPv4"} 3
kubeproxy_network_programming_duration_seconds_count{ip_family="IPv4"} 7
`

// scrapeProxier is a Proxier whose kube-proxy's metrics endpoint is
// handler: every request, whatever its port, goes to one test server,
// with a short client timeout standing for the 10 s of Start's client.
// It returns the request count.
func scrapeProxier(t *testing.T, handler func(n int64, w http.ResponseWriter)) (*Proxier, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handler(n.Add(1), w)
	}))
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	kp := &Proxy{http: &http.Client{Timeout: 100 * time.Millisecond, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}}}}
	kp.Spec.Config.NodeName = "node-0"
	return &Proxier{kp: kp}, &n
}

// stall answers the headers, then holds the body past the client's
// timeout (the failure seen at 50 nodes × 10k: "context deadline exceeded
// (Client.Timeout or context cancellation while reading body)").
func stall(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, "# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram\n")
	w.(http.Flusher).Flush()
	time.Sleep(time.Second)
}

// TestSyncViewRetriesTimedOutScrape: a scrape that times out (kube-proxy
// busy) is asked again and the answer that comes is the view; one that
// keeps timing out fails after scrapeTries requests with the timeout; a
// refused connection (kube-proxy gone) or the caller's own cancelled
// context is not retried.
func TestSyncViewRetriesTimedOutScrape(t *testing.T) {
	p, n := scrapeProxier(t, func(i int64, w http.ResponseWriter) {
		if i == 1 {
			stall(w)
			return
		}
		fmt.Fprint(w, scrapeMetricsText)
	})
	v, err := p.syncView(context.Background())
	if err != nil {
		t.Fatalf("after one timed-out scrape: %v", err)
	}
	if n.Load() != 2 || v.sync.Count != 4 || v.programmed != 7 || !v.ts.Equal(time.Unix(1000, 0)) {
		t.Errorf("%d requests, view %+v; want 2 and the second answer's 4 syncs, 7 observations, ts 1000 s", n.Load(), v)
	}

	p, n = scrapeProxier(t, func(_ int64, w http.ResponseWriter) { stall(w) })
	_, err = p.syncView(context.Background())
	var ne net.Error
	if err == nil || !errors.As(err, &ne) || !ne.Timeout() || n.Load() != scrapeTries {
		t.Errorf("always stalling: %d requests, %v; want %d and a timeout", n.Load(), err, scrapeTries)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p, n = scrapeProxier(t, func(_ int64, w http.ResponseWriter) { fmt.Fprint(w, scrapeMetricsText) })
	if _, err := p.syncView(ctx); err == nil || n.Load() > 1 {
		t.Errorf("cancelled context: %d requests, %v; want an error without retries", n.Load(), err)
	}

	// Nothing listens on a port just closed: refused, not a timeout.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c := &http.Client{Timeout: time.Second}
	_, err = c.Get("http://" + addr + "/metrics")
	if err == nil || scrapeTimedOut(context.Background(), err) {
		t.Errorf("refused connection %v counted as a timeout", err)
	}
}
