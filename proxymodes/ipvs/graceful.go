//go:build linux

package ipvs

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/moby/ipvs"
)

// GracefulCheckInterval is kube-proxy's rsCheckDeleteInterval: how often
// the real servers in graceful termination are re-read and deleted once
// drained (pkg/proxy/ipvs/graceful_termination.go).
const GracefulCheckInterval = time.Minute

// graceItem is a real server in graceful termination: weight 0, deleted
// once its active and inactive connections reach 0.
type graceItem struct {
	svc  *ipvs.Service
	dest *ipvs.Destination
}

// graceKey names a real server of a virtual server:
// "TCP/198.18.0.1:80/198.19.0.1:8080" (kube-proxy's GetUniqueRSName).
func graceKey(s *ipvs.Service, d *ipvs.Destination) string {
	return serviceKey(s) + "/" + destKey(addrOf(d.Address), d.Port)
}

// gracefulNeeded reports whether a protocol's real servers drain before
// deletion: TCP does; UDP and SCTP are deleted at once (kube-proxy's
// IsRsGracefulTerminationNeeded; their flows expire on the next packet
// with expire_nodest_conn=1).
func gracefulNeeded(s *ipvs.Service) bool { return protoName(s.Protocol) == "TCP" }

// drained reports whether d may be deleted now: a protocol without
// graceful termination, or no active and no inactive connection.
func drained(s *ipvs.Service, d *ipvs.Destination) bool {
	return !gracefulNeeded(s) || d.ActiveConnections+d.InactiveConnections == 0
}

// Terminating lists the real servers in graceful termination (weight 0,
// waiting for their connections to drain), as graceKey strings, sorted.
func (p *Proxier) Terminating() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.grace))
	for k := range p.grace {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// noteGrace updates the graceful termination list after ops were applied:
// real servers set to weight 0 by a graceful op join it, deleted or
// re-added ones and those of deleted virtual servers leave it.
func (p *Proxier) noteGrace(ops []Op) {
	for _, op := range ops {
		switch op.Kind {
		case OpUpdateDestination:
			k := graceKey(op.Service, op.Dest)
			if op.Graceful {
				if p.grace == nil {
					p.grace = map[string]graceItem{}
				}
				p.grace[k] = graceItem{svc: op.Service, dest: op.Dest}
			} else {
				delete(p.grace, k)
			}
		case OpDelDestination, OpNewDestination:
			delete(p.grace, graceKey(op.Service, op.Dest))
		case OpDelService:
			prefix := serviceKey(op.Service) + "/"
			for k := range p.grace {
				if strings.HasPrefix(k, prefix) {
					delete(p.grace, k)
				}
			}
		}
	}
	p.startGraceLoop()
}

// startGraceLoop starts the periodic check (every cfg.GracefulInterval,
// default GracefulCheckInterval) when real servers wait in the list and no
// check runs yet. Called with p.mu held.
func (p *Proxier) startGraceLoop() {
	if len(p.grace) == 0 || p.graceStop != nil {
		return
	}
	every := p.cfg.GracefulInterval
	if every <= 0 {
		every = GracefulCheckInterval
	}
	stop := make(chan struct{})
	p.graceStop = stop
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				_, _ = p.GracefulCheck() // errors are kept in p.graceErr
			}
		}
	}()
}

// stopGraceLoop ends the periodic check. Called with p.mu held.
func (p *Proxier) stopGraceLoop() {
	if p.graceStop != nil {
		close(p.graceStop)
		p.graceStop = nil
	}
}

// GracefulCheck re-reads the real servers in graceful termination and
// deletes those drained (kube-proxy's tryDeleteRs, which it runs every
// GracefulCheckInterval); a real server no longer in the kernel leaves the
// list. It returns how many it deleted and the first error (also kept for
// GracefulError).
func (p *Proxier) GracefulCheck() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.grace) == 0 || p.h == nil {
		return 0, nil
	}
	keys := make([]string, 0, len(p.grace))
	for k := range p.grace {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	deleted := 0
	var first error
	for _, k := range keys {
		it := p.grace[k]
		ds, err := p.h.GetDestinations(it.svc)
		if err != nil {
			delete(p.grace, k) // the virtual server is gone
			continue
		}
		var have *ipvs.Destination
		for _, d := range ds {
			if addrOf(d.Address) == addrOf(it.dest.Address) && d.Port == it.dest.Port {
				have = d
				break
			}
		}
		if have == nil {
			delete(p.grace, k)
			continue
		}
		if !drained(it.svc, have) {
			continue
		}
		if err := p.h.DelDestination(it.svc, have); err != nil {
			if first == nil {
				first = fmt.Errorf("ipvs: graceful delete of %s: %w", k, err)
			}
			continue
		}
		delete(p.grace, k)
		deleted++
	}
	if first != nil {
		p.graceErr = first
	}
	if len(p.grace) == 0 {
		p.stopGraceLoop()
	}
	return deleted, first
}

// GracefulError returns the last error of a periodic graceful check (nil
// when none failed).
func (p *Proxier) GracefulError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.graceErr
}
