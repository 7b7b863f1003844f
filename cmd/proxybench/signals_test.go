//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunSignalsChildBrokenPipe: under a run's signal setup, writing to
// the stdin of a child that already exited (a kube-proxy or
// iptables-restore that stops early) fails that write with EPIPE and
// leaves the run going; it used to cancel the run "interrupted by SIGPIPE".
// Not parallel: it changes the process's signal handling.
func TestRunSignalsChildBrokenPipe(t *testing.T) {
	ctx, _, stop := runSignals(context.Background())
	defer stop()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command("true")
	c.Stdin = r
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	r.Close() // the child has gone; no reader is left
	_, err = w.Write([]byte(strings.Repeat("x", 1<<17)))
	w.Close()
	if !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("write to the exited child's stdin: %v, want EPIPE", err)
	}
	select {
	case <-ctx.Done():
		t.Fatalf("the run was cancelled by the child's broken pipe: %v", context.Cause(ctx))
	case <-time.After(time.Second):
	}
}

// TestRunSignalsStderrClosed: under a run's signal setup, a write to a
// closed stderr (fd 2) returns EPIPE instead of killing the process, so
// the result can still be saved, and the returned writer cancels the run
// with a cause naming stderr. The test re-runs itself with fd 2 a pipe
// whose reader is gone.
func TestRunSignalsStderrClosed(t *testing.T) {
	if out := os.Getenv("PB_TEST_STDERR_CLOSED"); out != "" {
		ctx, stderr, stop := runSignals(context.Background())
		defer stop()
		_, err := stderr.Write([]byte("progress\n"))
		msg := fmt.Sprintf("alive, err %v, cause %v", err, context.Cause(ctx))
		_ = os.WriteFile(out, []byte(msg), 0o644)
		return
	}
	out := filepath.Join(t.TempDir(), "out")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	c := exec.Command(os.Args[0], "-test.run=^TestRunSignalsStderrClosed$")
	c.Env = append(os.Environ(), "PB_TEST_STDERR_CLOSED="+out)
	c.Stderr = w
	c.Stdout = nil
	err = c.Run()
	w.Close()
	b, rerr := os.ReadFile(out)
	if rerr != nil {
		t.Fatalf("the helper died (%v) before saying it was alive: %v", err, rerr)
	}
	if !strings.Contains(string(b), "broken pipe") || !strings.Contains(string(b), "cause interrupted: stderr was closed") {
		t.Fatalf("helper: %s; want EPIPE and the run cancelled naming stderr", b)
	}
}
