package workload

import (
	"fmt"
	"math/rand"
	"net/netip"
	"time"

	"github.com/proxybench/proxybench/scenarios"
)

// Kinds of change the churn generator makes.
const (
	EndpointAdd     = "endpoint-add"     // a new endpoint (fresh pod IP) joins a service
	EndpointRemove  = "endpoint-remove"  // a ready endpoint leaves its service
	EndpointUnready = "endpoint-unready" // a ready endpoint turns not ready
	EndpointReady   = "endpoint-ready"   // a not-ready endpoint turns ready
	ServiceCreate   = "service-create"   // a new service with the scenario's endpoint count
	ServiceDelete   = "service-delete"   // a service goes away
)

// Appears reports whether a change of kind makes something reachable
// (observed by the first connection that lands on it) rather than
// unreachable (observed after the last connection that still does).
func Appears(kind string) bool {
	return kind == EndpointAdd || kind == EndpointReady || kind == ServiceCreate
}

// Change is one applied change.
type Change struct {
	Kind    string
	Service int // index into Cluster.Services
	// VIP:Port is the service's first ServicePort; Endpoint the endpoint
	// added, removed or flipped (unset for service changes).
	VIP      netip.Addr
	Port     uint16
	Endpoint netip.Addr
	// Ready is the service's ready endpoint count before the change.
	Ready int
}

// Arrivals returns the offsets of an open-loop arrival process of rate
// changes per second over d: poisson (exponential gaps, mean 1/rate, drawn
// from rng) or constant (gaps of exactly 1/rate). Offsets are < d.
func Arrivals(rate float64, d time.Duration, arrival string, rng *rand.Rand) []time.Duration {
	var out []time.Duration
	gap := float64(time.Second) / rate
	t := 0.0
	for {
		if arrival == "constant" {
			t += gap
		} else {
			t += rng.ExpFloat64() * gap
		}
		if t >= float64(d) {
			return out
		}
		out = append(out, time.Duration(t))
	}
}

// Cluster is the desired state that churn mutates: every service ever
// created (deleted ones are kept, marked, to keep indexes stable), with
// fresh pod IPs and ClusterIPs allocated past the initial ones. Once the
// pod CIDR has no fresh address left, an added endpoint takes the pod IP
// of the endpoint removed longest ago (as a long churn reuses the IPs of
// deleted pods), so a churn of any length keeps adding endpoints.
// Endpoint slices are replaced, never modified in place, so a Snapshot
// stays valid while later changes are applied. Not safe for concurrent
// use.
type Cluster struct {
	Services []Service
	deleted  []bool
	busy     []bool
	nextPod  netip.Addr
	podNet   netip.Prefix
	nextVIP  netip.Addr
	svcNet   netip.Prefix
	newEps   int
	// freed are the pod IPs of removed endpoints and deleted services'
	// endpoints, oldest first: reused once the fresh ones run out.
	freed []netip.Addr
}

// NewCluster starts from the scenario's generated services.
func NewCluster(sc *scenarios.Scenario, services []Service) *Cluster {
	svcNet, podNet, _, _ := sc.Prefixes()
	c := &Cluster{Services: append([]Service(nil), services...), podNet: podNet, svcNet: svcNet,
		deleted: make([]bool, len(services)), busy: make([]bool, len(services)),
		nextPod: podNet.Addr().Next(), nextVIP: svcNet.Addr().Next(), newEps: sc.Services.Endpoints.Count}
	if c.newEps < 1 {
		c.newEps = 3
	}
	for _, s := range services {
		if c.nextVIP.Compare(s.ClusterIP) <= 0 {
			c.nextVIP = s.ClusterIP.Next()
		}
		for _, e := range s.Endpoints {
			if c.nextPod.Compare(e.IP) <= 0 {
				c.nextPod = e.IP.Next()
			}
		}
	}
	return c
}

// Snapshot returns the live services in render order (created services
// last), sharing endpoint slices with the Cluster.
func (c *Cluster) Snapshot() []Service {
	out := make([]Service, 0, len(c.Services))
	for i, s := range c.Services {
		if !c.deleted[i] {
			out = append(out, s)
		}
	}
	return out
}

// Release marks service i as no longer under observation, so churn may
// change it again.
func (c *Cluster) Release(i int) { c.busy[i] = false }

// podIP allocates a pod IP: the next fresh one of the pod CIDR, else the
// one freed longest ago.
func (c *Cluster) podIP() (netip.Addr, error) {
	a := c.nextPod
	if !c.podNet.Contains(a) || a == lastAddr(c.podNet) {
		if len(c.freed) == 0 {
			return a, fmt.Errorf("churn: pod CIDR %s is exhausted", c.podNet)
		}
		a = c.freed[0]
		c.freed = c.freed[1:]
		return a, nil
	}
	c.nextPod = a.Next()
	return a, nil
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := (uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func ready(s *Service) int {
	n := 0
	for _, e := range s.Endpoints {
		if e.Ready {
			n++
		}
	}
	return n
}

// Next draws a kind of change by the mix weights and applies it to a
// random live service not under observation, which becomes busy until
// Release. Changes keep every service reachable: a removal or unready flip
// needs two ready endpoints. It returns false when no service fits after a
// few draws (the change is skipped) or an address range is exhausted.
func (c *Cluster) Next(rng *rand.Rand, mix scenarios.ChurnMix) (Change, bool) {
	w := []float64{mix.EndpointAdd, mix.EndpointRemove, mix.ReadinessFlip, mix.ServiceCreate, mix.ServiceDelete}
	total := 0.0
	for _, x := range w {
		total += x
	}
	r := rng.Float64() * total
	kind := 0
	for kind < len(w)-1 && r >= w[kind] {
		r -= w[kind]
		kind++
	}
	if kind == 3 {
		return c.create()
	}
	for try := 0; try < 32; try++ {
		i := rng.Intn(len(c.Services))
		if c.deleted[i] || c.busy[i] {
			continue
		}
		s := &c.Services[i]
		ch := Change{Service: i, VIP: s.ClusterIP, Port: s.Ports[0].Port, Ready: ready(s)}
		eps := append([]Endpoint(nil), s.Endpoints...)
		switch kind {
		case 0:
			ip, err := c.podIP()
			if err != nil {
				return Change{}, false
			}
			eps = append(eps, NewEndpoint(ip))
			ch.Kind, ch.Endpoint = EndpointAdd, ip
		case 1, 2:
			var unready []int
			var readyIdx []int
			for k, e := range eps {
				if e.Ready {
					readyIdx = append(readyIdx, k)
				} else {
					unready = append(unready, k)
				}
			}
			switch {
			case kind == 2 && len(unready) > 0:
				k := unready[rng.Intn(len(unready))]
				eps[k].Ready, eps[k].Serving = true, true
				ch.Kind, ch.Endpoint = EndpointReady, eps[k].IP
			case len(readyIdx) >= 2:
				k := readyIdx[rng.Intn(len(readyIdx))]
				ch.Endpoint = eps[k].IP
				if kind == 1 {
					eps = append(eps[:k], eps[k+1:]...)
					c.freed = append(c.freed, ch.Endpoint)
					ch.Kind = EndpointRemove
				} else {
					eps[k].Ready, eps[k].Serving = false, false
					ch.Kind = EndpointUnready
				}
			default:
				continue
			}
		case 4:
			if len(c.Snapshot()) <= 1 {
				return Change{}, false
			}
			c.deleted[i] = true
			for _, e := range s.Endpoints {
				c.freed = append(c.freed, e.IP)
			}
			ch.Kind = ServiceDelete
		}
		s.Endpoints = eps
		c.busy[i] = true
		return ch, true
	}
	return Change{}, false
}

// create adds a service with the scenario's endpoint count (fixed count,
// or 3) at the end of the render order.
func (c *Cluster) create() (Change, bool) {
	vip := c.nextVIP
	if !c.svcNet.Contains(vip) || vip == lastAddr(c.svcNet) {
		return Change{}, false
	}
	eps := make([]Endpoint, c.newEps)
	for k := range eps {
		ip, err := c.podIP()
		if err != nil {
			return Change{}, false
		}
		eps[k] = NewEndpoint(ip)
	}
	c.nextVIP = vip.Next()
	tmpl := c.Services[0]
	s := Service{Namespace: tmpl.Namespace, Name: fmt.Sprintf("svc-churn-%05d", len(c.Services)), ClusterIP: vip, Ports: tmpl.Ports, Endpoints: eps}
	c.Services = append(c.Services, s)
	c.deleted = append(c.deleted, false)
	c.busy = append(c.busy, true)
	return Change{Kind: ServiceCreate, Service: len(c.Services) - 1, VIP: vip, Port: s.Ports[0].Port}, true
}
