package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

func TestCheckOutput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		path string
		def  bool
		want string // "" = accepted
	}{
		{filepath.Join(dir, "r.json"), false, ""},
		{filepath.Join(dir, "missing", "r.json"), false, "does not exist"},
		{filepath.Join(dir, "missing", "r.json"), true, ""}, // the default results/ may be created
		{dir, false, "is a directory"},
		{"/proc/x.json", false, "cannot create a file in /proc"},
		{filepath.Join(dir, "r.json", "x.json"), false, "does not exist"},
	} {
		err := checkOutput("--output", tc.path, tc.def)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("checkOutput(%s, %t) = %v", tc.path, tc.def, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "fix: ")):
			t.Errorf("checkOutput(%s, %t) = %v, want %q and a fix", tc.path, tc.def, err, tc.want)
		}
	}
	// Nothing is left behind: no folder, no temporary file.
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("checkOutput left %v", ents)
	}
}

func TestSaveResultFallback(t *testing.T) {
	res := &reports.Result{SchemaVersion: reports.SchemaVersion, RunID: "abc123", Scenario: &scenarios.Scenario{Name: "t"}}
	dir := t.TempDir()
	ok := filepath.Join(dir, "r.json")
	if saved, err := saveResult(res, ok, false); err != nil || saved != ok {
		t.Fatalf("saveResult = %s, %v", saved, err)
	}
	if _, err := reports.Read(ok); err != nil {
		t.Fatal(err)
	}
	// The folder went away during the run: the JSON goes to a fallback.
	gone := filepath.Join(dir, "gone", "r.json")
	saved, err := saveResult(res, gone, false)
	if err == nil || saved == "" || saved == gone || !strings.Contains(err.Error(), gone) {
		t.Fatalf("saveResult(%s) = %q, %v; want a fallback and an error naming the path", gone, saved, err)
	}
	defer os.Remove(saved)
	if r, rerr := reports.Read(saved); rerr != nil || r.RunID != "abc123" {
		t.Fatalf("fallback %s: %v", saved, rerr)
	}
	if _, err := os.Stat(filepath.Dir(gone)); err == nil {
		t.Errorf("saveResult created %s", filepath.Dir(gone))
	}
}
