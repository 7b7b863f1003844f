//go:build linux

package runner

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/proxybench/proxybench/reports"
	"github.com/proxybench/proxybench/scenarios"
)

// fill sets every field of v (a pointer) to a value that is not zero:
// slices and maps get one element, pointers a value, numbers 1..,
// strings their field's name, so a phase's Report finds figures in every
// typed field, including one added after this test was written.
func fill(v reflect.Value, name string, depth int) {
	if depth > 6 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.Type() == reflect.TypeOf(&scenarios.Scenario{}) {
			return
		}
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), name, depth+1)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)))
			return
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), v.Type().Field(i).Name, depth+1)
			}
		}
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), name, depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fill(k, name, depth+1)
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, name, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		v.SetString(name)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(1 + depth))
	case reflect.Uint, reflect.Uint64, reflect.Uint32:
		v.SetUint(uint64(1 + depth))
	case reflect.Float64, reflect.Float32:
		v.SetFloat(0.5)
	case reflect.Bool:
		v.SetBool(true)
	}
}

// TestPhaseSectionsInEveryFormat: for every phase of Phases that is not
// Core, its Report (row phases) or ReportRun (run phases) builds at least
// one section from a result whose every typed field holds a figure, and
// every report format renders each of those sections (its phase named in
// the output). A phase without a report, or a format that leaves a
// section out, fails here.
func TestPhaseSectionsInEveryFormat(t *testing.T) {
	for _, ph := range Phases {
		if ph.Core {
			continue
		}
		t.Run(ph.Name, func(t *testing.T) {
			var full reports.Result
			fill(reflect.ValueOf(&full).Elem(), "full", 0)
			var secs []reports.Section
			switch ph.Scope {
			case scenarios.ScopeRow:
				if ph.Report == nil {
					t.Fatalf("row phase %s is not Core and has no Report", ph.Name)
				}
				var mr reports.ModeResult
				fill(reflect.ValueOf(&mr).Elem(), "mr", 0)
				secs = ph.Report("iptables", &mr)
			case scenarios.ScopeRun:
				if ph.ReportRun == nil {
					t.Fatalf("run phase %s is not Core and has no ReportRun", ph.Name)
				}
				secs = ph.ReportRun(&full)
			}
			if len(secs) == 0 {
				t.Fatalf("phase %s built no section from a result full of figures", ph.Name)
			}
			res := &reports.Result{SchemaVersion: reports.SchemaVersion, Tool: "proxybench test", RunID: "abc123", Engine: "real",
				Started: full.Started, Finished: full.Started, Scenario: &scenarios.Scenario{Name: "phases"},
				Modes: []reports.ModeResult{{Mode: "iptables", Services: 1}}}
			for _, s := range secs {
				res.MergeSection(s)
			}
			for _, format := range reports.Formats {
				var b bytes.Buffer
				if err := reports.WriteFormat(&b, res, format, reports.ReportOptions{}); err != nil {
					t.Errorf("%s: %v", format, err)
					continue
				}
				for _, s := range secs {
					out := b.String()
					if !strings.Contains(out, s.Phase) && !strings.Contains(out, s.Title) && !strings.Contains(out, phaseMetricName(s.Phase)) {
						t.Errorf("format %s does not render section %q of phase %s", format, s.Title, ph.Name)
					}
				}
			}
		})
	}
}

// phaseMetricName is a phase name as openmetrics spells it in metric
// names (camelCase to snake_case).
func phaseMetricName(p string) string {
	var b strings.Builder
	for i, r := range p {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
