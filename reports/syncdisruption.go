package reports

import (
	"fmt"
	"strings"
	"time"
)

// SyncWindow is what probes connecting to a fixed set of services saw
// while one sync ran (kubernetes PR#139546: ClusterIP traffic stalls during
// a cold nftables full sync). A connection counts in the window when it
// started between the sync's start and end.
type SyncWindow struct {
	// Kind is "full (restart)": a new proxier's first sync over the rules
	// of the previous one, as kube-proxy after a restart; or "incremental":
	// one endpoint moved.
	Kind string `json:"kind"`
	// SyncNs is the sync's wall time; Objects what it programmed.
	SyncNs  int64 `json:"syncNs"`
	Objects int   `json:"objects"`
	// Attempts, Failed (error or timeout) and Slow (connect time above
	// SlowAbove) count the connections started in the window; MaxNs is the
	// longest connect time of those that succeeded, FailedSamples up to 3
	// errors.
	Attempts      int           `json:"attempts"`
	Failed        int           `json:"failed"`
	Slow          int           `json:"slow"`
	SlowAbove     time.Duration `json:"slowAboveNs"`
	MaxNs         int64         `json:"maxNs"`
	FailedSamples []string      `json:"failedSamples,omitempty"`
	// BeforeAttempts and BeforeFailed count the connections of the second
	// before the sync (the baseline).
	BeforeAttempts int `json:"beforeAttempts"`
	BeforeFailed   int `json:"beforeFailed"`
}

func writeSyncDisruptionMarkdown(b *strings.Builder, r *Result) {
	have := false
	for _, m := range r.Modes {
		have = have || len(m.SyncDisruption) > 0
	}
	if !have {
		return
	}
	b.WriteString("\n### traffic during syncs (probes to a fixed set of services)\n\n")
	b.WriteString("Connections started while the sync ran: attempts, failed (error or timeout), slow (connect above the threshold), the longest successful connect; the second before the sync as baseline.\n\n")
	b.WriteString("| mode | services | sync | sync wall | objects | attempts | failed | slow | max connect | before: attempts / failed | errors seen |\n")
	b.WriteString("|---|--:|---|--:|--:|--:|--:|--:|--:|--:|---|\n")
	for _, m := range r.Modes {
		name := m.Mode
		if m.Kernel == "uml" {
			name += " (uml)"
		}
		for _, w := range m.SyncDisruption {
			errs := strings.Join(w.FailedSamples, "; ")
			if errs == "" {
				errs = "-"
			}
			fmt.Fprintf(b, "| %s | %d | %s | %.3f s | %d | %d | %d | %d (> %s) | %.1f ms | %d / %d | %s |\n",
				name, m.Services, w.Kind, float64(w.SyncNs)/1e9, w.Objects, w.Attempts, w.Failed, w.Slow, w.SlowAbove, float64(w.MaxNs)/1e6, w.BeforeAttempts, w.BeforeFailed, errs)
		}
	}
}
