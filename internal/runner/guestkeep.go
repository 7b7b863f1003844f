//go:build linux

package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/proxybench/proxybench/internal/uml"
	"github.com/proxybench/proxybench/reports"
)

// guestKeepFile, in a guest's work folder, says where `proxybench
// cleanup` saves the guest's checkpoint (the modes it finished) when the
// run's proxybench was killed before reading it back (KeepGuestCheckpoint).
const guestKeepFile = "keep.json"

// guestKeep is guestKeepFile's content, written by RunInUML.
type guestKeep struct {
	// Kernel is the guest kernel's Name (uml:6.12), which the host marks
	// the guest's rows with (RunInUML's fromGuest).
	Kernel string `json:"kernel"`
	// Result is the run's result path (Options.ArtifactDir + ".json"),
	// "" when the run has no artifact folder.
	Result string `json:"result,omitempty"`
	// ArtifactDir is the run's artifact folder (Options.ArtifactDir).
	ArtifactDir string `json:"artifactDir,omitempty"`
}

func writeGuestKeep(dir string, k guestKeep) error {
	b, err := json.Marshal(k)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, guestKeepFile), b, 0o644)
}

// KeepGuestCheckpoint saves the checkpoint a killed run's guest left in
// its work folder dir (checkpoint.json, rewritten by the guest after each
// finished mode), marked as RunInUML marks a guest's result (kernelWhere
// uml, each row's kernel) and partial, so that `proxybench report` renders
// it. It goes to the run's result path when no file is there, else beside
// it (<result>-guest-checkpoint[-N].json), or, for a run without one, to
// os.TempDir()/proxybench-guest-checkpoint-<runID>.json; the guest's
// artifacts (kube-proxy configs and logs) go to the run's artifact folder.
// It returns the path written, "" when the guest finished no mode. An
// error (the checkpoint cannot be read or written) means the folder must
// be kept. `proxybench cleanup` calls it for each gone run's folder
// (uml.CleanupOrphans), so a measurement made is never thrown away.
func KeepGuestCheckpoint(dir string) (string, error) {
	cpPath := filepath.Join(dir, "checkpoint.json")
	if _, err := os.Stat(cpPath); os.IsNotExist(err) {
		return "", nil
	}
	cp, err := reports.Read(cpPath)
	if err != nil {
		return "", fmt.Errorf("read the guest's checkpoint: %w", err)
	}
	if len(cp.Modes) == 0 {
		return "", nil
	}
	var k guestKeep
	if b, err := os.ReadFile(filepath.Join(dir, guestKeepFile)); err == nil {
		if err := json.Unmarshal(b, &k); err != nil {
			return "", fmt.Errorf("%s: %w", guestKeepFile, err)
		}
	}
	cp.Machine.KernelWhere = "uml"
	cp.Machine.HostKernel = kernelRelease()
	cp.Kernels = nil
	for i := range cp.Modes {
		if k.Kernel != "" {
			cp.Modes[i].Kernel = k.Kernel
		}
	}
	cp.Partial += "; the run was killed and proxybench cleanup saved what its user-mode-linux guest had finished"
	if k.ArtifactDir != "" {
		if err := copyGuestArtifacts(cp, dir, k.ArtifactDir); err != nil {
			return "", err
		}
	}
	to := keepPath(k.Result, uml.RunIDOfDir(dir))
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return "", err
	}
	if err := cp.Write(to); err != nil {
		return "", err
	}
	return to, nil
}

// keepPath is the first free path of result, result-guest-checkpoint.json,
// result-guest-checkpoint-2.json ...; for result "", in os.TempDir().
func keepPath(result, runID string) string {
	if result == "" {
		result = filepath.Join(os.TempDir(), "proxybench-guest-checkpoint-"+runID+".json")
	}
	base := strings.TrimSuffix(result, ".json")
	for n := 1; ; n++ {
		p := result
		switch {
		case n == 2:
			p = base + "-guest-checkpoint.json"
		case n > 2:
			p = base + "-guest-checkpoint-" + strconv.Itoa(n-1) + ".json"
		}
		if _, err := os.Lstat(p); os.IsNotExist(err) {
			return p
		}
	}
}
