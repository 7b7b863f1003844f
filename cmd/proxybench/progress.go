package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// progress draws a bar per step on a terminal and plain lines otherwise
// (CI logs, pipes). It writes to stderr so stdout carries only the report.
type progress struct {
	w     io.Writer
	tty   bool
	bar   *progressbar.ProgressBar
	step  string
	start time.Time
}

// newProgress draws on w (stderr, or a writer wrapping it).
func newProgress(quiet bool, w io.Writer) *progress {
	if quiet {
		return &progress{w: io.Discard}
	}
	// (Inside the user-mode-linux guest, guest-run draws plain lines:
	// the console is streamed to the host's stderr.)
	tty := term.IsTerminal(int(os.Stdout.Fd())) && term.IsTerminal(int(os.Stderr.Fd()))
	return &progress{w: w, tty: tty}
}

func (p *progress) Start(step string, total int) {
	p.step, p.start = step, time.Now()
	if p.tty {
		p.bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(p.w), progressbar.OptionSetDescription(step),
			progressbar.OptionShowCount(), progressbar.OptionSetElapsedTime(true), progressbar.OptionClearOnFinish())
		return
	}
	fmt.Fprintf(p.w, "%s ...\n", step)
}

func (p *progress) Add(n int) {
	if p.bar != nil {
		_ = p.bar.Add(n)
	}
}

func (p *progress) Done() {
	if p.bar != nil {
		_ = p.bar.Finish()
		p.bar = nil
	}
	fmt.Fprintf(p.w, "%s: done in %.1fs\n", p.step, time.Since(p.start).Seconds())
}
