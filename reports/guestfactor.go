package reports

import (
	"fmt"
	"slices"
	"strings"
)

// GuestFactor is how much slower one user-mode-linux guest kernel of a run
// ran than the host, measured on the bridge row that ran on both
// (KernelRun.Bridge: iptables by default under --kernel auto) at the
// largest size both measured. A factor is 0 when it was not measured.
type GuestFactor struct {
	// Kernel and Release name the guest kernel (KernelRun.Name, Release).
	Kernel, Release string
	// Bridge is the bridge row's name, Baseline the baseline row's (none).
	Bridge, Baseline string
	// Services is the size the factors were measured at.
	Services int
	// Sync is the bridge's sync.full p50 in the guest over the host's.
	Sync float64
	// Walk is the bridge's rule walk in the guest over the host's: p50 at
	// the last service minus p50 at the first. 0 when the host's walk is
	// too small to divide by (last under 1.2× first, as Findings calls a
	// lookup flat) or either difference is not positive; WalkWhy then
	// says which.
	Walk    float64
	WalkWhy string `json:",omitempty"`
	// Connect is the baseline's p50 at the last service in the guest over
	// the host's: a connect through no rules. 0 when either kernel's
	// baseline is suspect (slower than its bridge at the last service
	// beyond baselineSlack: a guest's cold start); ConnectWhy then says
	// which.
	Connect    float64
	ConnectWhy string `json:",omitempty"`
	// Only are the rows that ran in this guest and not on the host (ipvs
	// on a host without IP_VS), in run order.
	Only []string
}

// GuestFactors returns one GuestFactor per guest kernel of r that has a
// bridge (KernelRun.Bridge) and a host kernel beside it, in run order; nil
// for a run on one kernel or without a bridge. Pure: figures from the raw
// samples of r's first run.
func GuestFactors(r *Result) []GuestFactor {
	host := ""
	for _, k := range r.Kernels {
		if k.Where == "host" && host == "" {
			host = k.Name
		}
	}
	if host == "" {
		return nil
	}
	var out []GuestFactor
	for _, k := range r.Kernels {
		if k.Where == "host" || k.Bridge == "" {
			continue
		}
		g := GuestFactor{Kernel: k.Name, Release: k.Release, Bridge: k.Bridge, Baseline: k.Baseline}
		hb, gb, size := sharedRow(r, host, k.Name, k.Bridge)
		if hb == nil {
			continue
		}
		g.Services = size
		if h, gs := Summarize(syncWalls(*hb)).P50, Summarize(syncWalls(*gb)).P50; h > 0 && gs > 0 {
			g.Sync = float64(gs) / float64(h)
		}
		hf, hl := posSummary(*hb, "first").P50, posSummary(*hb, "last").P50
		gf, gl := posSummary(*gb, "first").P50, posSummary(*gb, "last").P50
		switch {
		case hf <= 0 || gf <= 0:
			g.WalkWhy = "no first-service lookup on both"
		case float64(hl) < 1.2*float64(hf):
			g.WalkWhy = fmt.Sprintf("the host's lookup is flat: last %s under 1.2× first %s", FormatNs(float64(hl)), FormatNs(float64(hf)))
		case gl <= gf:
			g.WalkWhy = fmt.Sprintf("the guest's lookup is flat: last %s not above first %s", FormatNs(float64(gl)), FormatNs(float64(gf)))
		default:
			g.Walk = float64(gl-gf) / float64(hl-hf)
		}
		if k.Baseline != "" {
			if hn, gn, _ := sharedRow(r, host, k.Name, k.Baseline); hn != nil {
				h, gs := posSummary(*hn, "last").P50, posSummary(*gn, "last").P50
				switch {
				case h <= 0 || gs <= 0:
				case suspectBaseline(float64(gl), float64(gs)):
					g.ConnectWhy = fmt.Sprintf("the guest's %s (%s at the last service) was slower than its %s (%s): a suspect baseline", k.Baseline, FormatNs(float64(gs)), k.Bridge, FormatNs(float64(gl)))
				case suspectBaseline(float64(hl), float64(h)):
					g.ConnectWhy = fmt.Sprintf("the host's %s (%s at the last service) was slower than its %s (%s): a suspect baseline", k.Baseline, FormatNs(float64(h)), k.Bridge, FormatNs(float64(hl)))
				default:
					g.Connect = float64(gs) / float64(h)
				}
			}
		}
		onHost := map[string]bool{}
		for _, m := range r.Modes {
			if kernelOf(m) == host {
				onHost[m.Mode] = true
			}
		}
		for _, m := range r.Modes {
			if kernelOf(m) == k.Name && !onHost[m.Mode] && !slices.Contains(g.Only, m.Mode) {
				g.Only = append(g.Only, m.Mode)
			}
		}
		out = append(out, g)
	}
	return out
}

// sharedRow returns row's results on kernels host and guest at the
// largest size both have (nil when they share none).
func sharedRow(r *Result, host, guest, row string) (h, g *ModeResult, size int) {
	at := map[string]map[int]*ModeResult{host: {}, guest: {}}
	for i, m := range r.Modes {
		if byKernel := at[kernelOf(m)]; byKernel != nil && m.Mode == row {
			byKernel[modeSize(r, m)] = &r.Modes[i]
		}
	}
	for n, hm := range at[host] {
		if gm := at[guest][n]; gm != nil && n >= size {
			h, g, size = hm, gm, n
		}
	}
	return h, g, size
}

// factor formats a guest factor: "4.6×", "12×".
func factor(f float64) string {
	if f >= 10 {
		return fmt.Sprintf("%.0f×", f)
	}
	return fmt.Sprintf("%.1f×", f)
}

// Measured says what the bridge measured, as a clause: "iptables' full
// sync took 4.6× and its rule walk 2.7× the host's, a connect without
// rules (none) 4.0×"; "" when nothing was. The rule walk is p50 at the
// last service minus p50 at the first. A connect factor not given
// (ConnectWhy: a suspect baseline) is said so, with why.
func (g GuestFactor) Measured() string {
	var parts []string
	if g.Sync > 0 {
		parts = append(parts, "full sync took "+factor(g.Sync))
	}
	if g.Walk > 0 {
		w := "rule walk took "
		if len(parts) > 0 {
			w = "its rule walk "
		}
		parts = append(parts, w+factor(g.Walk))
	}
	s := ""
	if len(parts) > 0 {
		s = possessive(g.Bridge) + " " + strings.Join(parts, " and ") + " the host's"
	}
	switch {
	case g.Connect > 0:
		c := fmt.Sprintf("a connect without rules (%s) %s", g.Baseline, factor(g.Connect))
		if s == "" {
			c += " the host's"
		}
		s = strings.TrimPrefix(s+", "+c, ", ")
	case g.ConnectWhy != "" && s != "":
		s += "; a connect without rules not compared: " + g.ConnectWhy
	}
	return s
}

// Sentence is the finding for the guest: which rows ran there alone and
// what the bridge measured ("ipvs ran in a user-mode-linux guest
// (uml:6.12, 6.12.117), where iptables' full sync took 4.6× and its rule
// walk 2.7× the host's ...").
func (g GuestFactor) Sentence() string {
	who := strings.Join(g.Only, ", ")
	if who == "" {
		who = "the guest's rows"
	}
	where := g.Kernel
	if g.Release != "" {
		where += ", " + g.Release
	}
	s := fmt.Sprintf("%s ran in a user-mode-linux guest (%s)", who, where)
	if m := g.Measured(); m != "" {
		s += fmt.Sprintf(", where %s (%s ran on both kernels, at %s services)", m, g.Bridge, thousands(g.Services))
	} else {
		s += fmt.Sprintf(", where the bridge %s measured no figure on both kernels, so the guest's factor against the host is unknown", g.Bridge)
	}
	s += "; its absolute figures are the guest's, not the host kernel's: compare them with the other rows of that kernel only."
	return s
}

// possessive is "iptables'" or "nftables'"; "ipvs'" too: a name ending
// in s takes the apostrophe alone.
func possessive(name string) string {
	if strings.HasSuffix(name, "s") {
		return name + "'"
	}
	return name + "'s"
}

// guestFactorOf returns r's factor for kernel name (nil when none).
func guestFactorOf(fs []GuestFactor, name string) *GuestFactor {
	for i := range fs {
		if fs[i].Kernel == name {
			return &fs[i]
		}
	}
	return nil
}

// guestNote is the line beside a guest kernel's figures: what the bridge
// measured, so a reader does not take them for host figures.
func guestNote(g *GuestFactor) string {
	if m := g.Measured(); m != "" {
		return fmt.Sprintf("Guest figures: in this user-mode-linux guest %s (%s ran on the host too, at %s services). Absolute figures here are the guest's, not the host kernel's.", m, g.Bridge, thousands(g.Services))
	}
	return "Guest figures: absolute figures here are the user-mode-linux guest's, not the host kernel's; no figure of the bridge " + g.Bridge + " was measured on both kernels."
}
