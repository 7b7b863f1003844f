//go:build linux

package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/reports"
)

// TestKeepGuestCheckpoint: the checkpoint a killed run's guest left is
// saved at the run's result path, marked as a guest result (kernelWhere
// uml, each row's kernel) and partial; a second save never overwrites it
// but goes beside it; a guest that finished no mode, or wrote no
// checkpoint, saves nothing; a checkpoint that cannot be read is an
// error (the folder must be kept).
func TestKeepGuestCheckpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "proxybench-uml-3fa9c1-1")
	results := t.TempDir()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := KeepGuestCheckpoint(dir); got != "" || err != nil {
		t.Fatalf("no checkpoint: saved %q, %v; want nothing", got, err)
	}
	cp := &reports.Result{SchemaVersion: reports.SchemaVersion, RunID: "3fa9c1", Partial: "stopped before the run finished; checkpoint after modes none",
		Modes: []reports.ModeResult{{Mode: "none", Kernel: "host"}}}
	if err := cp.Write(filepath.Join(dir, "checkpoint.json")); err != nil {
		t.Fatal(err)
	}
	if err := writeGuestKeep(dir, guestKeep{Kernel: "uml:6.12", Result: filepath.Join(results, "r.json")}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"r.json", "r-guest-checkpoint.json", "r-guest-checkpoint-2.json"} {
		got, err := KeepGuestCheckpoint(dir)
		if err != nil || got != filepath.Join(results, want) {
			t.Fatalf("saved %q, %v; want %s", got, err, want)
		}
		r, err := reports.Read(got)
		if err != nil {
			t.Fatal(err)
		}
		if r.Machine.KernelWhere != "uml" || len(r.Modes) != 1 || r.Modes[0].Kernel != "uml:6.12" || !strings.Contains(r.Partial, "checkpoint after modes none") || !strings.Contains(r.Partial, "proxybench cleanup saved") {
			t.Errorf("saved %s: kernelWhere %q, rows %+v, partial %q", want, r.Machine.KernelWhere, r.Modes, r.Partial)
		}
	}
	// Without a result path (a run without an artifact folder), to os.TempDir().
	if err := writeGuestKeep(dir, guestKeep{Kernel: "uml:6.12"}); err != nil {
		t.Fatal(err)
	}
	got, err := KeepGuestCheckpoint(dir)
	if err != nil || filepath.Dir(got) != filepath.Clean(os.TempDir()) || !strings.Contains(got, "3fa9c1") {
		t.Errorf("without a result path: saved %q, %v; want os.TempDir()/proxybench-guest-checkpoint-3fa9c1*.json", got, err)
	}
	os.Remove(got)

	empty := &reports.Result{SchemaVersion: reports.SchemaVersion, RunID: "3fa9c1"}
	if err := empty.Write(filepath.Join(dir, "checkpoint.json")); err != nil {
		t.Fatal(err)
	}
	if got, err := KeepGuestCheckpoint(dir); got != "" || err != nil {
		t.Errorf("a checkpoint without modes: saved %q, %v; want nothing", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "checkpoint.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := KeepGuestCheckpoint(dir); err == nil {
		t.Errorf("a torn checkpoint: saved %q without an error; want one (keep the folder)", got)
	}
}
