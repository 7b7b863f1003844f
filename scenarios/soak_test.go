package scenarios

import (
	"strings"
	"testing"
	"time"
)

// TestSoakDefaults: an empty soak block gets the documented defaults,
// and Total and Intervals follow from them.
func TestSoakDefaults(t *testing.T) {
	sc, err := Parse([]byte("services: {count: 10}\nsoak: {}\n"), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := SoakSpec{Duration: Duration{time.Hour}, Interval: Duration{10 * time.Second}, Rate: 20, Churn: 10, Idle: 3, Quiet: 3, Probes: 2, FlatBound: 5}
	if *sc.Soak != want {
		t.Errorf("defaults %+v, want %+v", *sc.Soak, want)
	}
	if got := sc.Soak.Total(); got != time.Hour+60*time.Second {
		t.Errorf("Total %v, want 1h1m", got)
	}
	if got := sc.Soak.Intervals(); got != 366 {
		t.Errorf("Intervals %d, want 366", got)
	}
	// A duration that is not a whole number of intervals rounds up.
	sc.Soak.Duration.Duration = 25 * time.Second
	if got := sc.Soak.Intervals(); got != 9 {
		t.Errorf("Intervals of 25s + 6×10s: %d, want 9", got)
	}
}

// TestSoakProblems: each bad soak block is refused at its own field and
// line with a fix; the rest of the block is not blamed.
func TestSoakProblems(t *testing.T) {
	for _, tc := range []struct {
		name, body, field, msg string
		line                   int
	}{
		{"shorter than two intervals", "soak:\n  duration: 15s\n  interval: 10s\n", "soak.duration", "shorter than two intervals", 3},
		{"interval zero", "soak:\n  duration: 1m\n  interval: 0s\n", "soak.interval", "not positive", 4},
		{"interval negative", "soak:\n  interval: -1s\n", "soak.interval", "not positive", 3},
		{"interval too short", "soak:\n  interval: 10ms\n", "soak.interval", "out of range", 3},
		{"rate zero", "soak:\n  rate: 0\n", "soak.rate", "(0, 5000]", 3},
		{"rate too high", "soak:\n  rate: 10000\n", "soak.rate", "(0, 5000]", 3},
		{"churn negative", "soak:\n  churn: -1\n", "soak.churn", "[0, 1000]", 3},
		{"churn too high", "soak:\n  churn: 5000\n", "soak.churn", "[0, 1000]", 3},
		{"probes zero", "soak:\n  probes: 0\n", "soak.probes", "out of range", 3},
		{"bound zero", "soak:\n  flatBound: 0\n", "soak.flatBound", "MiB/h", 3},
		{"a week and more", "soak:\n  duration: 200h\n", "soak.duration", "longer than a week", 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte("services: {count: 10}\n"+tc.body), "s.yaml")
			if err == nil {
				t.Fatal("accepted")
			}
			fes := fieldErrors(t, err)
			if len(fes) != 1 {
				t.Fatalf("%d errors, want 1: %v", len(fes), err)
			}
			fe := fes[0]
			if fe.Field != tc.field || fe.Line != tc.line || fe.Fix == "" || !strings.Contains(fe.Msg, tc.msg) {
				t.Errorf("got %v; want %s at line %d saying %q, with a fix", fe, tc.field, tc.line, tc.msg)
			}
		})
	}
	// Two intervals exactly is a soak.
	if _, err := Parse([]byte("services: {count: 10}\nsoak: {duration: 2s, interval: 1s}\n"), "s.yaml"); err != nil {
		t.Errorf("two intervals refused: %v", err)
	}
}
