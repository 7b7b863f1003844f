package reports

import (
	"bytes"
	"strings"
	"testing"

	"github.com/proxybench/proxybench/scenarios"
)

// TestMarkdownServiceTotal: the header and the size of a row written
// without ModeResult.Services count services.count and every group's
// services (10k-nodeports: 7,500 plus 2,500 NodePort services is 10,000),
// not services.count alone.
func TestMarkdownServiceTotal(t *testing.T) {
	sc := &scenarios.Scenario{Name: "t", Services: scenarios.ServicesSpec{Count: 7500, Groups: []scenarios.ServiceGroup{{Count: 2500, Type: scenarios.TypeNodePort}}}}
	r := &Result{Scenario: sc, Modes: []ModeResult{{Mode: "iptables"}}}
	if got := modeSize(r, r.Modes[0]); got != 10000 {
		t.Errorf("modeSize = %d, want 10000", got)
	}
	var b bytes.Buffer
	if err := WriteMarkdown(&b, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), " 10000 services × ") {
		t.Errorf("header does not count 10000 services:\n%s", strings.SplitN(b.String(), "\n\n", 3)[1])
	}
}
