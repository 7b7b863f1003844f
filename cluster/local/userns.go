package local

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// IDRange is one line of a user namespace's uid_map or gid_map
// (user_namespaces(7)): IDs Inside..Inside+Count-1 of the namespace are
// host IDs Outside..Outside+Count-1.
type IDRange struct {
	Inside, Outside, Count uint32
}

// ParseIDMap parses the text of /proc/PID/uid_map (or gid_map): one
// "inside outside count" triple of decimal numbers a line, as the kernel
// prints it (kernel/user_namespace.c, uid_m_show). Errors: a line that is
// not three numbers, a zero count, or no line at all.
func ParseIDMap(text []byte) ([]IDRange, error) {
	var out []IDRange
	sc := bufio.NewScanner(bytes.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) != 3 {
			return nil, fmt.Errorf("id map line %d %q: want three numbers (inside outside count)", n, sc.Text())
		}
		var v [3]uint32
		for i, s := range f {
			x, err := strconv.ParseUint(s, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("id map line %d %q: %w", n, sc.Text(), err)
			}
			v[i] = uint32(x)
		}
		if v[2] == 0 {
			return nil, fmt.Errorf("id map line %d %q: count 0", n, sc.Text())
		}
		out = append(out, IDRange{Inside: v[0], Outside: v[1], Count: v[2]})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("id map is empty: the user namespace has no mapping yet")
	}
	return out, nil
}

// CheckKubeletUIDMap is the guard every kubelet start passes first: the
// user namespace whose uid_map is text must map its uid 0 to a host uid
// other than 0, and must map no uid at all onto host uid 0. Only then do
// the kubelet's writes of host-global tunables at start (vm.overcommit_memory,
// kernel.panic, kernel.panic_on_oops: kubelet
// pkg/kubelet/cm/container_manager_linux.go, setupKernelTunables) fail
// with EACCES: proc_sys_permission grants a write of a /proc/sys/kernel or
// /proc/sys/vm file to the global root uid only (fs/proc/proc_sysctl.c,
// test_perm), whatever the capabilities inside the namespace. The initial
// namespace ("0 0 4294967295") and a mapping of 0 to 0 are refused; so is
// a namespace where uid 0 is not mapped (nothing would run as its root).
func CheckKubeletUIDMap(text []byte) error {
	m, err := ParseIDMap(text)
	if err != nil {
		return fmt.Errorf("kubelet guard: %w", err)
	}
	root := false
	for _, r := range m {
		// Outside..Outside+Count-1 holds host uid 0 only when it starts there.
		if r.Outside == 0 {
			return fmt.Errorf("kubelet guard: uid map line \"%d %d %d\" maps onto host uid 0: a kubelet there could write the host's kernel tunables (map 0 to a non-root host uid, e.g. 0 %d 65536)", r.Inside, r.Outside, r.Count, DefaultHostUID)
		}
		if r.Inside == 0 {
			root = true
		}
	}
	if !root {
		return fmt.Errorf("kubelet guard: uid 0 is not mapped in %q (map 0 to a non-root host uid, e.g. 0 %d 65536)", strings.TrimSpace(string(text)), DefaultHostUID)
	}
	return nil
}

// CheckKubeletUserNS reads /proc/PID/uid_map and applies
// CheckKubeletUIDMap: a kubelet may be started inside the user namespace
// of process pid only when it passes. The error names the pid.
func CheckKubeletUserNS(pid int) error {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/uid_map", pid))
	if err != nil {
		return fmt.Errorf("kubelet guard: %w", err)
	}
	if err := CheckKubeletUIDMap(b); err != nil {
		return fmt.Errorf("process %d: %w", pid, err)
	}
	return nil
}
