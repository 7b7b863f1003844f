//go:build linux

package userspace

import "github.com/proxybench/proxybench/proxymodes/leftovers"

// owns: the userspace mode writes its two portal chains in nat.
var owns = leftovers.Chains(map[string][]string{"nat": {ChainPortalsContainer, ChainPortalsHost}})

// Stop ends the proxy as its process exiting would: every listener and
// every proxied connection closes and the dial pool stops; the portal
// chains and their jumps stay in the kernel (a DaemonSet rollout does
// not flush), so a new connection to a ClusterIP is still redirected to
// a port nobody listens on any more. A later Sync is full.
func (p *Proxier) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLocked()
}

// stopLocked is Stop with p.mu held (Stop, and Cleanup before it removes
// the rules): listeners and proxied connections closed, their goroutines
// waited for, the dial pool stopped, the state reset.
func (p *Proxier) stopLocked() {
	p.cancel()
	for _, sp := range p.ports {
		sp.close()
	}
	p.connMu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.connMu.Unlock()
	p.wg.Wait()
	if p.dialer != nil {
		p.dialer.Close()
		p.dialer = nil
	}
	p.reset()
	p.ensured = false
}
