//go:build linux

// Package healthcheck is builtin's copy of kube-proxy's service health
// check server (pkg/proxy/healthcheck, the "service health server"): for
// every service with a healthCheckNodePort (type LoadBalancer with
// externalTrafficPolicy Local) the node answers HTTP on that port with
// the number of the service's endpoints on the node, 200 when there is
// one or more and 503 when there is none, so a cloud load balancer sends
// traffic only to nodes that can take it without a second hop.
package healthcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
)

// Answer is the body kube-proxy v1.37 writes (its JSON field names).
type Answer struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints      int  `json:"localEndpoints"`
	ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
}

// Server is one node's health check listeners.
type Server struct {
	srv []*http.Server
	wg  sync.WaitGroup
}

// Start listens, inside node (a testbed namespace, never the root one),
// on 0.0.0.0:<healthCheckNodePort> for every service of services that
// has one, and answers each GET with Answer for node nodeName
// (Service.LocalEndpoints). Stop it with Close.
func Start(node *topology.Netns, nodeName string, services []workload.Service) (*Server, error) {
	s := &Server{}
	for i := range services {
		svc := &services[i]
		if svc.HealthCheckNodePort == 0 {
			continue
		}
		var l net.Listener
		if err := node.Do(func() error {
			var err error
			l, err = (&net.ListenConfig{}).Listen(context.Background(), "tcp4", net.JoinHostPort("0.0.0.0", strconv.Itoa(int(svc.HealthCheckNodePort))))
			return err
		}); err != nil {
			s.Close()
			return nil, fmt.Errorf("healthcheck: listen on %d in %s: %w", svc.HealthCheckNodePort, node.Name, err)
		}
		var a Answer
		a.Service.Namespace, a.Service.Name = svc.Namespace, svc.Name
		a.LocalEndpoints = len(svc.LocalEndpoints(nodeName))
		a.ServiceProxyHealthy = true
		body, _ := json.Marshal(a)
		code := http.StatusOK
		if a.LocalEndpoints == 0 {
			code = http.StatusServiceUnavailable
		}
		h := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(code)
			_, _ = w.Write(body)
		})}
		s.srv = append(s.srv, h)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := h.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return
			}
		}()
	}
	return s, nil
}

// Close stops every listener and waits for them.
func (s *Server) Close() {
	if s == nil {
		return
	}
	for _, h := range s.srv {
		_ = h.Close()
	}
	s.wg.Wait()
}

// Get asks the health check port port at addr from inside ns (a testbed
// namespace) and returns the HTTP status and the decoded answer's
// localEndpoints (-1 when the body is not kube-proxy's JSON).
func Get(ns *topology.Netns, addr string, port uint16, timeout time.Duration) (status, local int, err error) {
	local = -1
	var conn net.Conn
	if err := ns.Do(func() error {
		var err error
		conn, err = (&net.Dialer{Timeout: timeout}).Dial("tcp4", net.JoinHostPort(addr, strconv.Itoa(int(port))))
		return err
	}); err != nil {
		return 0, local, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	c := &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return conn, nil }, DisableKeepAlives: true}, Timeout: timeout}
	resp, err := c.Get("http://" + net.JoinHostPort(addr, strconv.Itoa(int(port))) + "/")
	if err != nil {
		return 0, local, err
	}
	defer resp.Body.Close()
	var a Answer
	if json.NewDecoder(resp.Body).Decode(&a) == nil {
		local = a.LocalEndpoints
	}
	return resp.StatusCode, local, nil
}
