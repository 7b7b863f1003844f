// Package agent is `proxybench agent`, the program the cluster engine's
// agent pods run (docs/cluster.md): from inside its pod, with no
// privileges, it drives the namespace engine's lookup traffic
// (workload/traffic.Drive, in the pod's own network namespace) against
// the services it is told about, probes a service until a change shows
// (black-box programming latency), keeps the raw samples and serves them
// over HTTP on the pod's port. The operator reaches it through the API
// server's pods/proxy subresource, so no network path from the operator
// to the pods is assumed.
//
// The protocol is JSON over HTTP:
//
//	GET    /healthz             Health
//	POST   /lookups             LookupRequest  → 202 Job (runs in the background)
//	GET    /lookups/{id}        LookupStatus   (Result once Done)
//	POST   /probes              ProbeRequest   → 202 Job
//	GET    /probes/{id}         ProbeStatus
//	DELETE /lookups/{id}, /probes/{id}          forget a job (its samples)
//
// A request the agent cannot run (no service, a position that does not
// exist, a job ID given twice) is answered 400 with the reason.
package agent

import (
	"net/netip"
	"time"

	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/traffic"
)

// Port is the agent's default HTTP port in its pod.
const Port = 8080

// Health is what GET /healthz answers.
type Health struct {
	Node    string `json:"node"`    // the node the pod runs on (the downward API's spec.nodeName)
	Pod     string `json:"pod"`     // the pod's name
	PodIP   string `json:"podIP"`   // its address (status.podIP)
	Version string `json:"version"` // proxybench's version
	// Started is when the agent started (its clock, RFC 3339).
	Started time.Time `json:"started"`
	// Now is the agent's clock when it answered: the operator compares
	// it with its own to bound the skew of ProbeStatus times.
	Now time.Time `json:"now"`
}

// Job is the answer to a POST: the job's ID.
type Job struct {
	ID string `json:"id"`
}

// LookupRequest asks for one closed-loop traffic phase from the pod:
// traffic.DriveSpec's fields, the services by value.
type LookupRequest struct {
	ID       string             `json:"id"`
	Services []workload.Service `json:"services"`
	// Position is workload.PosFirst, PosMiddle, PosLast or PosRandom
	// over the ServicePorts of Services in order.
	Position string `json:"position"`
	// Direct dials a ready endpoint's pod IP at its target port instead
	// of the ClusterIP (no proxy: the baseline, traffic.DriveSpec.Direct).
	Direct      bool          `json:"direct,omitempty"`
	Connections int           `json:"connections"`
	Warmup      int           `json:"warmup"`
	Concurrency int           `json:"concurrency"`
	Timeout     time.Duration `json:"timeout"` // per connection, ns
	Seed        int64         `json:"seed"`
}

// LookupStatus is a lookup job's state; Result holds the raw samples
// (every connect time, the endpoint each landed on, the errors) once
// Done, as the namespace engine's traffic phase keeps them.
type LookupStatus struct {
	ID     string               `json:"id"`
	Done   bool                 `json:"done"`
	Error  string               `json:"error,omitempty"`
	Result *traffic.DriveResult `json:"result,omitempty"`
}

// ProbeRequest asks the agent to connect to one ServicePort again and
// again until a connection lands on one of Want (a new endpoint became
// reachable through this node's proxy) or, with Gone, on none of them
// (an endpoint was removed), or Deadline passes.
type ProbeRequest struct {
	ID      string           `json:"id"`
	Service workload.Service `json:"service"`
	Port    int              `json:"port"` // index into Service.Ports
	Want    []netip.Addr     `json:"want"`
	Gone    bool             `json:"gone,omitempty"`
	// Interval is the pause between attempts (default 5 ms); Timeout
	// bounds one connection (default 1 s); Deadline bounds the whole
	// probe from its start (default 60 s).
	Interval time.Duration `json:"interval,omitempty"`
	Timeout  time.Duration `json:"timeout,omitempty"`
	Deadline time.Duration `json:"deadline,omitempty"`
}

// ProbeStatus is a probe's state. FirstSuccess is the agent's clock
// when the first connection that met the probe's condition started
// (the change was programmed by then); Attempts counts the connections
// made, Failures those that failed (refused, timed out, ...).
type ProbeStatus struct {
	ID           string    `json:"id"`
	Done         bool      `json:"done"`
	Met          bool      `json:"met"`
	Started      time.Time `json:"started"`
	FirstSuccess time.Time `json:"firstSuccess,omitzero"`
	Attempts     int       `json:"attempts"`
	Failures     int       `json:"failures"`
	Error        string    `json:"error,omitempty"`
}
