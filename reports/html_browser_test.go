package reports

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/proxybench/proxybench/internal/testenv"
)

// chromium runs Debian's headless chromium on page with extra arguments.
func chromium(t *testing.T, args ...string) []byte {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		testenv.Skip(t, "needs chromium on PATH (make setup installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--no-first-run", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, errb.String())
	}
	return out.Bytes()
}

// TestHTMLInChromium opens the fixture's HTML report in headless
// Chromium: the page's own check finds every plot drawn and no script
// error, and a screenshot shows coloured plot pixels (bars, lines, bands)
// in the plot area, not a blank page.
func TestHTMLInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	r := loadFixture(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	var b bytes.Buffer
	if err := WriteHTML(&b, r, DefaultBudgets); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	svgs := bytes.Count(b.Bytes(), []byte(`<svg class="plot"`))
	if svgs < 9 {
		t.Fatalf("%d plots in the page, want at least 9", svgs)
	}

	dom := chromium(t, "--dump-dom", "file://"+page)
	m := regexp.MustCompile(`plots rendered: (\d+) of (\d+); errors: (\d+)`).FindSubmatch(dom)
	if m == nil {
		t.Fatalf("the page's check did not run; DOM tail: %q", dom[max(0, len(dom)-300):])
	}
	drawn, _ := strconv.Atoi(string(m[1]))
	if drawn != svgs || string(m[3]) != "0" {
		t.Errorf("page check: %s", m[0])
	}

	shot := filepath.Join(dir, "report.png")
	chromium(t, "--screenshot="+shot, "--window-size=1200,3000", "file://"+page)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if keep := os.Getenv("PROXYBENCH_KEEP_SCREENSHOT"); keep != "" {
		data, _ := os.ReadFile(shot)
		_ = os.WriteFile(keep, data, 0o644)
	}
	// Plots start below the header and findings; count saturated
	// (coloured) pixels there: text is black or grey, plots are not.
	bnd := img.Bounds()
	area := image.Rect(bnd.Min.X, bnd.Min.Y+bnd.Dy()/10, bnd.Max.X, bnd.Max.Y)
	coloured := 0
	for y := area.Min.Y; y < area.Max.Y; y += 2 {
		for x := area.Min.X; x < area.Max.X; x += 2 {
			r, g, b, _ := img.At(x, y).RGBA()
			hi, lo := max(r, g, b)>>8, min(r, g, b)>>8
			if hi-lo > 60 {
				coloured++
			}
		}
	}
	if coloured < 5000 {
		t.Errorf("only %d coloured pixels (sampled every 2nd) in the plot area: plots did not render", coloured)
	}
	t.Logf("%d plots drawn, %d coloured pixels sampled", drawn, coloured)
}
