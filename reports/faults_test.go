package reports

import (
	"strings"
	"testing"
)

// TestSliceChurnStreamAlone: a stream the sliceChurn phase wrote (its
// header names the phase) renders alone as a slice churn, not a soak;
// a soak's stream stays a soak.
func TestSliceChurnStreamAlone(t *testing.T) {
	spec := soakSpec()
	h := soakHeader(spec)
	h.Phase = PhaseSliceChurn
	sr := &SoakResult{Header: h, Samples: synthSamples(spec, 0, 1, 0, 0, 1)}
	r, err := ResultFromSoakStreams([]*SoakResult{sr})
	if err != nil {
		t.Fatal(err)
	}
	if r.Modes[0].SliceChurn != sr || r.Modes[0].Soak != nil || !r.soakStreamsOnly() {
		t.Fatalf("row %+v", r.Modes[0])
	}
	var titles []string
	for _, s := range r.AllSections() {
		titles = append(titles, s.Title)
	}
	if got := strings.Join(titles, "|"); !strings.Contains(got, "slice churn: memory slope") || strings.Contains(got, "soak:") {
		t.Errorf("sections %q: want the slice churn's, no soak's", got)
	}
	h.Phase = ""
	r2, _ := ResultFromSoakStreams([]*SoakResult{{Header: h, Samples: sr.Samples}})
	if r2.Modes[0].Soak == nil || r2.Modes[0].SliceChurn != nil {
		t.Errorf("a soak's stream read as %+v", r2.Modes[0])
	}
}
