package reports

import (
	"bytes"
	"strings"
	"testing"
)

// TestHTMLKubeProxyTables: the HTML report of a result with builtin and
// kube-proxy rows has the Markdown report's side-by-side and setup
// tables, with each kube-proxy row and its version.
func TestHTMLKubeProxyTables(t *testing.T) {
	r := kpVersionsRuns(3, 1)[0]
	var b bytes.Buffer
	if err := WriteHTML(&b, r, DefaultBudgets); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		"builtin vs kube-proxy, side by side",
		"kube-proxy rows: setup and where the time went",
		"<th>kube-proxy partial syncs (metric)</th>",
		"<th>control plane up</th>",
		"<td>kube-proxy v1.36.3</td>", "<td>kube-proxy v1.37.2</td>", // side by side
		"<td>v1.36.3</td>", "<td>v1.37.2</td>", // setup table
		"<td>nftables (kube-proxy v1.37.2)</td>",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("HTML report lacks %q", want)
		}
	}
	// The same cells as the Markdown report's table.
	for _, row := range sideBySideTable(r)[1:] {
		if !strings.Contains(page, "<td>"+row[0]+"</td><td>"+row[1]+"</td><td>"+row[2]+"</td>") {
			t.Errorf("HTML lacks the side-by-side row %v", row)
		}
	}
}

// TestSideBySideTitle: the side-by-side heading says what the table
// holds: "builtin vs kube-proxy" only with a builtin row beside a
// kube-proxy one, "kube-proxy versions" for two versions alone.
func TestSideBySideTitle(t *testing.T) {
	r := kpVersionsRuns(4, 1)[0]
	md := func() string {
		var b bytes.Buffer
		if err := WriteMarkdown(&b, r); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if out := md(); !strings.Contains(out, "### builtin vs kube-proxy, side by side") {
		t.Errorf("builtin beside kube-proxy: no builtin vs kube-proxy heading:\n%s", out)
	}
	r.Modes = r.Modes[1:] // the two kube-proxy versions only
	out := md()
	if strings.Contains(out, "builtin vs kube-proxy") {
		t.Errorf("no builtin row, yet the heading says builtin vs kube-proxy:\n%s", out)
	}
	if !strings.Contains(out, "### kube-proxy versions, side by side") {
		t.Errorf("two kube-proxy versions: no kube-proxy versions heading:\n%s", out)
	}
	r.Modes = r.Modes[1:] // one kube-proxy row
	if out := md(); !strings.Contains(out, "### kube-proxy rows\n") {
		t.Errorf("one kube-proxy row: heading not \"kube-proxy rows\":\n%s", out)
	}
}
