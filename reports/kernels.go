package reports

import (
	"fmt"
	"slices"
	"strings"
)

// KernelNames returns the distinct kernels of r's modes (ModeResult.Kernel,
// "" read as "host"), in the order they first appear.
func (r *Result) KernelNames() []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range r.Modes {
		k := kernelOf(m)
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// MultiKernel reports whether r's modes ran on more than one kernel: its
// tables are then grouped by kernel, each with its own baselines.
func (r *Result) MultiKernel() bool { return len(r.KernelNames()) > 1 }

// ForKernel returns a shallow copy of r holding only the modes that ran on
// kernel name, with Machine.Kernel set to that kernel's release when r
// records it; nil when no mode ran there.
func (r *Result) ForKernel(name string) *Result {
	c := *r
	c.Modes = nil
	for _, m := range r.Modes {
		if kernelOf(m) == name {
			c.Modes = append(c.Modes, m)
		}
	}
	if len(c.Modes) == 0 {
		return nil
	}
	c.Kernels = nil
	for _, k := range r.Kernels {
		if k.Name == name {
			c.Machine.Kernel, c.Machine.KernelWhere = k.Release, k.Where
			c.Kernels = []KernelRun{k}
			c.Machine.GuestBootNs, c.Machine.GuestInitNs, c.Machine.GuestElapsedNs = k.BootNs, k.InitNs, k.GuestNs
			c.Machine.Warmup = k.Warmup
		}
	}
	if len(c.Kernels) == 0 && name != "host" && r.Machine.GuestKernel != "" {
		c.Machine.Kernel, c.Machine.KernelWhere = r.Machine.GuestKernel, "uml"
	}
	return &c
}

// KernelRunOf returns r's record of kernel name (zero when not recorded).
func (r *Result) KernelRunOf(name string) KernelRun {
	for _, k := range r.Kernels {
		if k.Name == name {
			return k
		}
	}
	return KernelRun{Name: name}
}

func kernelOf(m ModeResult) string {
	if m.Kernel == "" {
		return "host"
	}
	return m.Kernel
}

// isGuest reports whether kernel name is a user-mode-linux guest's.
func isGuest(name string) bool {
	return name != "" && name != "host" && name != "sim" && !strings.HasPrefix(name, "host")
}

// KernelSide returns the modes of r that ran on kernel name as a result of
// their own, for Compare: its modes' Kernel is cleared so that the same
// mode on two kernels (of one run or two) is matched as one figure. The
// error names the kernels r has.
func KernelSide(r *Result, name string) (*Result, error) {
	sub := r.ForKernel(name)
	if sub == nil {
		return nil, fmt.Errorf("run %s has no modes on kernel %q; its kernels: %s", r.RunID, name, strings.Join(r.KernelNames(), ", "))
	}
	sub.Modes = append([]ModeResult(nil), sub.Modes...)
	for i := range sub.Modes {
		sub.Modes[i].Kernel = ""
	}
	return sub, nil
}

// RowSide returns the rows of r named row (ModeResult.Mode, e.g. "nftables
// (kube-proxy v1.36.3)"), renamed to as, with r's mode none kept as their
// baseline, as a result of their own: for Compare, so that two rows of one
// run (two implementations or kube-proxy versions) are matched as one
// figure. The error names the rows r has.
func RowSide(r *Result, row, as string) (*Result, error) {
	c := *r
	c.Modes = nil
	found := false
	for _, m := range r.Modes {
		switch {
		case m.Mode == row:
			m.Mode, m.Implementation, m.BaseMode = as, "", ""
			c.Modes = append(c.Modes, m)
			found = true
		case m.isBaseline() && !isBaselineMode(row):
			c.Modes = append(c.Modes, m)
		}
	}
	if !found {
		var names []string
		for _, m := range r.Modes {
			if !slices.Contains(names, m.Mode) {
				names = append(names, m.Mode)
			}
		}
		return nil, fmt.Errorf("run %s has no row %q; its rows: %s", r.RunID, row, strings.Join(names, ", "))
	}
	return &c, nil
}
