//go:build linux

package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/proxybench/proxybench/internal/lib/nspool"
	"github.com/proxybench/proxybench/topology"
	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/traffic"
)

// maxRequest bounds a request body (10k services with 3 endpoints each
// are about 2 MB of JSON).
const maxRequest = 64 << 20

// Server is the agent: its jobs and their samples, and the HTTP
// handler serving them. The zero value is not usable: use New.
type Server struct {
	health Health
	// clients are where traffic runs: nil, this process's own network
	// namespace (the pod's; traffic.DriveSpec.InPlace); a test gives
	// a testbed namespace.
	clients []*topology.Netns
	ctx     context.Context
	mu      sync.Mutex
	lookups map[string]*LookupStatus
	probes  map[string]*ProbeStatus
	wg      sync.WaitGroup
}

// New returns an agent that answers /healthz with h (Now filled per
// answer) and runs its jobs until ctx ends, in clients (nil: this
// process's own network namespace, as in a pod).
func New(ctx context.Context, h Health, clients []*topology.Netns) *Server {
	if h.Started.IsZero() {
		h.Started = time.Now()
	}
	return &Server{health: h, clients: clients, ctx: ctx, lookups: map[string]*LookupStatus{}, probes: map[string]*ProbeStatus{}}
}

// Wait waits for the running jobs, which end with the context given to New.
func (s *Server) Wait() { s.wg.Wait() }

// Handler is the agent's HTTP API (the package comment lists it).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		h := s.health
		h.Now = time.Now()
		writeJSON(w, http.StatusOK, h)
	})
	mux.HandleFunc("POST /lookups", s.postLookup)
	mux.HandleFunc("GET /lookups/{id}", getJob(&s.mu, s.lookups, "lookup job"))
	mux.HandleFunc("POST /probes", s.postProbe)
	mux.HandleFunc("GET /probes/{id}", getJob(&s.mu, s.probes, "probe"))
	mux.HandleFunc("DELETE /lookups/{id}", forgetJob(&s.mu, s.lookups))
	mux.HandleFunc("DELETE /probes/{id}", forgetJob(&s.mu, s.probes))
	return mux
}

// getJob answers GET .../{id} with a copy of jobs[id] taken under mu (404
// naming it as what when there is none).
func getJob[T any](mu *sync.Mutex, jobs map[string]*T, what string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		st, ok := jobs[r.PathValue("id")]
		var cp T
		if ok {
			cp = *st
		}
		mu.Unlock()
		if !ok {
			http.Error(w, fmt.Sprintf("no %s %q", what, r.PathValue("id")), http.StatusNotFound)
			return
		}
		writeJSON(w, http.StatusOK, cp)
	}
}

// forgetJob answers DELETE .../{id}: jobs[id] removed under mu, 204.
func forgetJob[T any](mu *sync.Mutex, jobs map[string]*T) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		delete(jobs, r.PathValue("id"))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *Server) postLookup(w http.ResponseWriter, r *http.Request) {
	var req LookupRequest
	if !readJSON(w, r, &req) {
		return
	}
	if err := checkLookup(req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	st := &LookupStatus{ID: req.ID}
	s.mu.Lock()
	if _, dup := s.lookups[req.ID]; dup {
		s.mu.Unlock()
		http.Error(w, fmt.Sprintf("lookup job %q exists; fix: give a new id", req.ID), http.StatusBadRequest)
		return
	}
	s.lookups[req.ID] = st
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		res, err := traffic.Drive(s.ctx, traffic.DriveSpec{Clients: s.clients, InPlace: s.clients == nil,
			Services: req.Services, Direct: req.Direct, Position: req.Position, Connections: req.Connections, Warmup: req.Warmup,
			Concurrency: req.Concurrency, Timeout: req.Timeout, Seed: req.Seed})
		s.mu.Lock()
		defer s.mu.Unlock()
		st.Done, st.Result = true, res
		if err != nil {
			st.Error = err.Error()
		}
	}()
	writeJSON(w, http.StatusAccepted, Job{ID: req.ID})
}

// checkLookup refuses a lookup the driver could not run, naming the field.
func checkLookup(req LookupRequest) error {
	switch {
	case req.ID == "":
		return errors.New("id: empty; fix: give the job an id")
	case len(req.Services) == 0:
		return errors.New("services: none; fix: give the services to look up")
	case req.Connections < 1 || req.Concurrency < 1:
		return fmt.Errorf("connections %d, concurrency %d: want both >= 1", req.Connections, req.Concurrency)
	case req.Timeout <= 0:
		return fmt.Errorf("timeout %s: want > 0", req.Timeout)
	}
	if req.Position != workload.PosRandom {
		if _, err := workload.PositionTarget(workload.FlatTargets(req.Services), req.Position); err != nil {
			return fmt.Errorf("position %q: %w", req.Position, err)
		}
	}
	return nil
}

func (s *Server) postProbe(w http.ResponseWriter, r *http.Request) {
	var req ProbeRequest
	if !readJSON(w, r, &req) {
		return
	}
	switch {
	case req.ID == "":
		http.Error(w, "id: empty; fix: give the probe an id", http.StatusBadRequest)
		return
	case req.Port < 0 || req.Port >= len(req.Service.Ports):
		http.Error(w, fmt.Sprintf("port %d: service %s has %d ports", req.Port, req.Service.Name, len(req.Service.Ports)), http.StatusBadRequest)
		return
	case req.Service.Ports[req.Port].Protocol != "TCP" && req.Service.Ports[req.Port].Protocol != "":
		http.Error(w, fmt.Sprintf("port %d: protocol %s: probes are TCP", req.Port, req.Service.Ports[req.Port].Protocol), http.StatusBadRequest)
		return
	case len(req.Want) == 0:
		http.Error(w, "want: no endpoint; fix: name the endpoints whose (dis)appearance the probe waits for", http.StatusBadRequest)
		return
	}
	if req.Interval <= 0 {
		req.Interval = 5 * time.Millisecond
	}
	if req.Timeout <= 0 {
		req.Timeout = time.Second
	}
	if req.Deadline <= 0 {
		req.Deadline = time.Minute
	}
	st := &ProbeStatus{ID: req.ID, Started: time.Now()}
	s.mu.Lock()
	if _, dup := s.probes[req.ID]; dup {
		s.mu.Unlock()
		http.Error(w, fmt.Sprintf("probe %q exists; fix: give a new id", req.ID), http.StatusBadRequest)
		return
	}
	s.probes[req.ID] = st
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.probe(req, st)
	}()
	writeJSON(w, http.StatusAccepted, Job{ID: req.ID})
}

// probe connects to the ServicePort until the condition holds, on one
// thread in the agent's namespace, recording into st under s.mu.
func (s *Server) probe(req ProbeRequest, st *ProbeStatus) {
	ns := nspool.Here
	if len(s.clients) > 0 {
		ns = s.clients[0]
	}
	port := req.Service.Ports[req.Port]
	deadline := st.Started.Add(req.Deadline)
	attempts, failures := 0, 0
	err := ns.Do(func() error {
		for {
			landed, start, _, err := traffic.DialEcho(req.Service.ClusterIP, port.Port, req.Timeout)
			met := false
			if err == nil {
				met = slices.Contains(req.Want, landed.Addr()) != req.Gone
			}
			attempts++
			if err != nil {
				failures++
			}
			s.mu.Lock()
			st.Attempts, st.Failures = attempts, failures
			if met {
				st.Met, st.FirstSuccess = true, start
			}
			s.mu.Unlock()
			if met {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("probe %s: %s:%d not changed after %s (%d connections, %d failed; last: %v)",
					req.ID, req.Service.ClusterIP, port.Port, req.Deadline, attempts, failures, err)
			}
			select {
			case <-s.ctx.Done():
				return s.ctx.Err()
			case <-time.After(req.Interval):
			}
		}
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	st.Done = true
	if err != nil {
		st.Error = err.Error()
	}
}

// Serve serves the agent on l until ctx ends.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxRequest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		http.Error(w, "bad request body: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Echo runs the namespace engine's echo server (traffic.StartEchoHere)
// on each of ports in this process's own network namespace until ctx
// ends: what the cluster engine's backend pool pods run (proxybench
// echo), answering every TCP connection with the pod address it reached.
func Echo(ctx context.Context, ports []uint16) error {
	s, err := traffic.StartEchoHere(ports)
	if err != nil {
		return err
	}
	<-ctx.Done()
	s.Close()
	return nil
}
