//go:build linux

package kubeproxy

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proxybench/proxybench/measure"
	"github.com/proxybench/proxybench/proxymodes"
)

var _ proxymodes.Exiter = (*Proxier)(nil)

// exitWait is how long an error path waits for kube-proxy's exit to be
// seen (Proxy.exitedWithin) before it calls the error its own.
const exitWait = 2 * time.Second

// Exited implements proxymodes.Exiter: a *proxymodes.Failed once the
// row's kube-proxy has exited on its own (the same one every time after
// the first), nil while it runs or when none runs (before the first
// Sync, halted, cleaned up).
func (p *Proxier) Exited() error {
	return p.exited("the row's phases (seen at their end)", proxymodes.SyncStats{}, 0)
}

// exited checks whether the running kube-proxy has exited on its own,
// waiting up to wait for its exit to be seen. The first time it has, it
// records the exit (the record's Exit, Info "exit") and returns a
// *proxymodes.Failed with st and a message saying what exited, how and
// during what; later calls return that same error. It returns nil while
// kube-proxy runs and when none runs.
func (p *Proxier) exited(during string, st proxymodes.SyncStats, wait time.Duration) error {
	if p.exitErr != nil {
		return p.exitErr
	}
	if p.kp == nil || !p.kp.exitedWithin(wait) {
		return nil
	}
	e := exitRecord(p.kp, during)
	p.exitRec = e
	if p.rec != nil {
		p.rec.Exit = e
	}
	msg := ExitMessage(e)
	if p.info == nil {
		p.info = map[string]string{}
	}
	p.info["exit"] = msg
	p.exitErr = &proxymodes.Failed{Stats: st, Msg: msg}
	return p.exitErr
}

// ExitMessage says e in one line: "kube-proxy exited on its own during
// its first sync: signal: killed (SIGKILL: another process, or the
// kernel's OOM killer), 2.31 s after its start; its log ends: ...".
func ExitMessage(e *measure.KubeProxyExit) string {
	how := e.Status
	if e.Signal == "SIGKILL" {
		how += " (SIGKILL: another process, or the kernel's OOM killer)"
	}
	msg := fmt.Sprintf("kube-proxy exited on its own during %s: %s, %v after its start", e.During, how, time.Duration(e.RanNs).Round(time.Millisecond))
	if n := len(e.LogTail); n > 0 {
		msg += "; its log ends: " + strings.TrimSpace(e.LogTail[n-1])
	}
	return msg
}

// exitRecord describes the exit of kp, which has exited.
func exitRecord(kp *Proxy, during string) *measure.KubeProxyExit {
	_, werr := kp.Proc.Exited()
	e := &measure.KubeProxyExit{Status: "exit status 0", During: during, RanNs: int64(time.Since(kp.Started))}
	switch ps := kp.Proc.Cmd.ProcessState; {
	case ps != nil:
		e.Status, e.Code = ps.String(), ps.ExitCode()
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			e.Signal = unix.SignalName(ws.Signal())
		}
	case werr != nil:
		e.Status, e.Code = werr.Error(), -1
	}
	if _, at := kp.LastScrape(); !at.IsZero() {
		e.LastScrapeNs = int64(at.Sub(kp.Started))
	}
	if tail := strings.TrimRight(kp.LogTail(20), "\n"); tail != "" {
		e.LogTail = strings.Split(tail, "\n")
	}
	return e
}

// orExited returns the Failed error of a kube-proxy that exited (waiting
// up to exitWait for its exit to be seen) in place of err, the error of
// a step that needed it; err when kube-proxy still runs.
func (p *Proxier) orExited(err error, during string) error {
	if xerr := p.exited(during, proxymodes.SyncStats{}, exitWait); xerr != nil {
		return xerr
	}
	return err
}

// readBackStats sets st's Objects and Bytes to what kube-proxy has
// installed in the node namespace so far (readBack) and Info "ruleset"
// to that read, with when after it (" when kubeProxy.firstSyncTimeout
// passed"; "" after a finished sync), or to why it failed.
func (p *Proxier) readBackStats(ctx context.Context, st *proxymodes.SyncStats, when string) {
	rs, err := p.readBack(ctx)
	var info string
	st.Objects, st.Bytes, info = rulesetFigures(rs, err, when)
	if info != "" {
		p.info["ruleset"] = info
	}
}

// rulesetFigures returns a sync's objects and bytes and its Info
// "ruleset" from a read-back of what kube-proxy installed (rs, or err
// when the read failed): what was programmed, never what was asked for.
// A failed read and IPVS (no read: rs.Tool "") give 0 objects and 0
// bytes, which the reports show as "-"; the info says why ("not read:
// ...") or is "" (IPVS).
func rulesetFigures(rs Ruleset, err error, when string) (objects, bytes int, info string) {
	switch {
	case err != nil:
		return 0, 0, "not read" + when + ": " + err.Error()
	case rs.Tool == "":
		return 0, 0, ""
	}
	return rs.Objects, rs.Bytes, fmt.Sprintf("%d objects, %d bytes (%s)%s", rs.Objects, rs.Bytes, rs.Tool, when)
}
