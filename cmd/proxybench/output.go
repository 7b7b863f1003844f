package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

// defaultResultsDir is the only folder proxybench creates for its output.
const defaultResultsDir = "results"

// resultPath is --output, or results/<scenario>[-sim]-<UTC time>.json when
// it is empty (def reports that the default was taken).
func resultPath(output string, sc *scenarios.Scenario, engine string) (path string, def bool) {
	if output != "" {
		return output, false
	}
	tag := ""
	if engine == "sim" {
		tag = "-sim"
	}
	return filepath.Join(defaultResultsDir, fmt.Sprintf("%s%s-%s.json", sc.Name, tag, time.Now().UTC().Format("20060102T150405Z"))), true
}

// checkOutput checks, before anything is measured or created, that a file
// can be written at path: it is not a directory, its folder exists (except
// the default results/, which may be missing: it is created then in a
// writable working directory) and a temporary file can be created and
// removed there. flag names the option in the error ("--output").
// Failures are bad input (exit 2).
func checkOutput(flag, path string, def bool) error {
	bad := func(msg, fix string) error {
		return badInput(fmt.Errorf("%s %s: %s; fix: %s", flag, path, msg, fix))
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return bad("is a directory", "name a file such as "+filepath.Join(path, "result.json"))
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case def && errors.Is(err, fs.ErrNotExist):
		dir = filepath.Dir(dir) // results/ will be created in the working directory
	case errors.Is(err, fs.ErrNotExist):
		return bad("folder "+dir+" does not exist", "create it first (mkdir -p "+dir+") or choose another path; proxybench creates no folder but results/")
	case err != nil:
		return bad(err.Error(), "choose another path")
	case !fi.IsDir():
		return bad(dir+" is not a folder", "choose a path in a folder")
	}
	f, err := os.CreateTemp(dir, ".proxybench-check-*")
	if err != nil {
		return bad("cannot create a file in "+dir+": "+errText(err), "choose a writable folder (checked by creating and removing a temporary file)")
	}
	name := f.Name()
	f.Close()
	if err := os.Remove(name); err != nil {
		return bad("cannot remove the test file "+name+": "+err.Error(), "choose a folder where proxybench may create and remove files")
	}
	return nil
}

// saveResult writes res to path atomically (reports.Result.Write). When
// that fails, it saves the JSON to a fallback file in the temporary folder
// and returns its path with the original error, so that a finished
// measurement is never lost; the caller still prints the summary.
func saveResult(res *reports.Result, path string, def bool) (saved string, err error) {
	if def {
		if merr := os.MkdirAll(filepath.Dir(path), 0o755); merr != nil {
			err = merr
		}
	}
	if err == nil {
		if err = res.Write(path); err == nil {
			return path, nil
		}
	}
	f, ferr := os.CreateTemp("", fmt.Sprintf("proxybench-%s-%s-*.json", res.Scenario.Name, res.RunID))
	if ferr != nil {
		return "", fmt.Errorf("write result %s: %w; the fallback in %s failed too: %v", path, err, os.TempDir(), ferr)
	}
	fallback := f.Name()
	f.Close()
	if ferr := res.Write(fallback); ferr != nil {
		return "", fmt.Errorf("write result %s: %w; the fallback %s failed too: %v", path, err, fallback, ferr)
	}
	return fallback, fmt.Errorf("write result %s: %w", path, err)
}

// errText is the cause of a *fs.PathError (the path is already named).
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
