// Package none is the baseline proxy mode: no rules at all. The traffic
// driver dials pod IPs directly in this mode, so its lookup latency is
// what every other mode's is compared with.
package none

import (
	"context"
	"time"

	"github.com/proxybench/proxybench/proxymodes"
	"github.com/proxybench/proxybench/workload"
)

// Proxier programs nothing.
type Proxier struct{}

// New returns the no-op Proxier.
func New() *Proxier { return &Proxier{} }

var _ proxymodes.Proxier = (*Proxier)(nil)

// Mode returns "none".
func (*Proxier) Mode() string { return "none" }

// Sync programs nothing: Kind "full", zero objects and bytes, Wall the
// (tiny) time the call took, CPU zero.
func (*Proxier) Sync(ctx context.Context, services []workload.Service) (proxymodes.SyncStats, error) {
	start := time.Now()
	if err := ctx.Err(); err != nil {
		return proxymodes.SyncStats{Kind: "full"}, err
	}
	return proxymodes.SyncStats{Kind: "full", Wall: time.Since(start)}, nil
}

// Cleanup does nothing.
func (*Proxier) Cleanup(context.Context) error { return nil }

// Info returns {"backend": "none"}.
func (*Proxier) Info() map[string]string { return map[string]string{"backend": "none"} }
