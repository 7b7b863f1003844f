// Package monitoring puts a real Prometheus server in the loop of a
// kube-proxy row: the rule files a scenario names (alerts:), checked by
// Prometheus's own promtool before anything is built; the server, started
// inside the control plane's network namespace, scraping each kube-proxy
// over its link; and, after the row, what Prometheus's HTTP API says its
// rules did (ALERTS, ALERTS_FOR_STATE, the recording rules' series). PromQL
// is never evaluated here: Prometheus evaluates every rule and query.
package monitoring

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// RuleSet is one rule file as Prometheus will load it: a Prometheus rule
// file (groups:) or a PrometheusRule object (the prometheus-operator's
// kind, whose spec.groups is a rule file's groups).
type RuleSet struct {
	// Path is the file as named (scenario field alerts: or --alerts).
	Path string
	// Kind is "rule file" or "PrometheusRule".
	Kind string
	// Groups are the rule groups in file order.
	Groups []Group
	// groups is the decoded text of the groups (line-preserving: a
	// PrometheusRule's spec.groups moved to column 0 by indent columns,
	// every other line blanked), what promtool checks.
	groups []byte
	indent int
}

// Group is one rule group.
type Group struct {
	Name string `yaml:"name"`
	// Interval is the group's own evaluation interval ("" : the global
	// one, the scenario's monitoring.interval).
	Interval string `yaml:"interval,omitempty"`
	Limit    int    `yaml:"limit,omitempty"`
	Rules    []Rule `yaml:"rules"`
}

// Rule is one alerting (Alert set) or recording (Record set) rule.
type Rule struct {
	Record      string            `yaml:"record,omitempty"`
	Alert       string            `yaml:"alert,omitempty"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
	// Line is the rule's line in Path (0 when unknown).
	Line int `yaml:"-"`
}

// Name is the rule's alert or record name.
func (r Rule) Name() string {
	if r.Alert != "" {
		return r.Alert
	}
	return r.Record
}

// Rules are every rule of s, in file order.
func (s *RuleSet) Rules() []Rule {
	var out []Rule
	for _, g := range s.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

// Alerts and Records are the alerting and recording rules of s.
func (s *RuleSet) Alerts() []Rule {
	return slices.DeleteFunc(s.Rules(), func(r Rule) bool { return r.Alert == "" })
}

// Records are the recording rules of s.
func (s *RuleSet) Records() []Rule {
	return slices.DeleteFunc(s.Rules(), func(r Rule) bool { return r.Record == "" })
}

// RuleError is a rule file Prometheus refuses: File and Line (0 when
// promtool names none) and Prometheus's own message.
type RuleError struct {
	File      string
	Line, Col int
	Msg       string
}

func (e *RuleError) Error() string {
	if e.Line > 0 && e.Col > 0 {
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
	}
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// Read reads the rule file path: a Prometheus rule file or a
// PrometheusRule object (apiVersion monitoring.coreos.com/v1, kind
// PrometheusRule, spec.groups). It decodes the groups and keeps each
// rule's line; it does not check the rules (Check does, with promtool).
// A file that is not YAML, or a YAML document that is neither, is a
// *RuleError.
func Read(path string) (*RuleSet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &RuleError{File: path, Msg: err.Error()}
	}
	return Parse(path, data)
}

// Parse is Read of data, the content of path.
func Parse(path string, data []byte) (*RuleSet, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &RuleError{File: path, Line: yamlLine(err), Msg: err.Error()}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, &RuleError{File: path, Msg: "not a Prometheus rule file (want a mapping with groups:) nor a PrometheusRule object"}
	}
	top := doc.Content[0]
	s := &RuleSet{Path: path, Kind: "rule file", groups: data}
	groups := lookup(top, "groups")
	if kind := lookup(top, "kind"); kind != nil {
		if kind.Value != "PrometheusRule" {
			return nil, &RuleError{File: path, Line: kind.Line, Msg: fmt.Sprintf("kind %q: want a Prometheus rule file (groups:) or kind PrometheusRule", kind.Value)}
		}
		s.Kind = "PrometheusRule"
		spec := lookup(top, "spec")
		if spec == nil {
			return nil, &RuleError{File: path, Line: kind.Line, Msg: "PrometheusRule without spec"}
		}
		if groups = lookup(spec, "groups"); groups == nil {
			return nil, &RuleError{File: path, Line: spec.Line, Msg: "PrometheusRule without spec.groups"}
		}
		var err error
		if s.groups, s.indent, err = extractGroups(data, spec); err != nil {
			return nil, &RuleError{File: path, Line: spec.Line, Msg: err.Error()}
		}
	}
	if groups == nil {
		return nil, &RuleError{File: path, Msg: "no groups: (a Prometheus rule file is groups: [{name, rules: [...]}]; a PrometheusRule has them in spec.groups)"}
	}
	if err := groups.Decode(&s.Groups); err != nil {
		return nil, &RuleError{File: path, Line: groups.Line, Msg: err.Error()}
	}
	// Each rule's line: the rules node's items, in order.
	for gi, g := range groups.Content {
		if gi >= len(s.Groups) {
			break
		}
		if rules := lookup(g, "rules"); rules != nil {
			for ri, r := range rules.Content {
				if ri < len(s.Groups[gi].Rules) {
					s.Groups[gi].Rules[ri].Line = r.Line
				}
			}
		}
	}
	return s, nil
}

// extractGroups returns data with a PrometheusRule's spec.groups moved
// to column 0 and every other line blank, so a rule file checker's line
// numbers are the PrometheusRule's own.
func extractGroups(data []byte, spec *yaml.Node) ([]byte, int, error) {
	var key *yaml.Node
	for i := 0; i+1 < len(spec.Content); i += 2 {
		if spec.Content[i].Value == "groups" {
			key = spec.Content[i]
		}
	}
	if key == nil || spec.Kind != yaml.MappingNode {
		return nil, 0, fmt.Errorf("spec.groups: want a mapping key")
	}
	lines := strings.Split(string(data), "\n")
	indent := key.Column - 1
	out := make([]string, len(lines))
	in := false
	for i, l := range lines {
		n := i + 1
		trimmed := strings.TrimLeft(l, " ")
		ind := len(l) - len(trimmed)
		switch {
		case n == key.Line:
			in = true
		case !in:
			continue
		case trimmed == "" || strings.HasPrefix(trimmed, "#"):
			// A blank or comment line stays inside the block.
		case ind > indent, ind == indent && strings.HasPrefix(trimmed, "- "):
		default:
			in = false
			continue
		}
		if ind >= indent {
			out[i] = l[indent:]
		} else {
			out[i] = ""
		}
	}
	return []byte(strings.Join(out, "\n")), indent, nil
}

// lookup is the value of key in mapping m, or nil.
func lookup(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

// yamlLine is the first line a YAML error names (0: none).
func yamlLine(err error) int {
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

// WriteGroups writes s's groups as Prometheus loads them (a rule file,
// line-preserving) to path.
func (s *RuleSet) WriteGroups(path string) error { return os.WriteFile(path, s.groups, 0o644) }

// Scale returns s with every alert's for: and every range window and
// subquery range of every expression multiplied by factor, for runs
// shorter than the rules' minutes (a factor of 0.1 makes "for: 5m" 30s and
// rate(x[5m]) rate(x[30s])); a window is never below minWindow (rate
// needs two samples in it: four scrape intervals is safe). Subquery steps,
// offsets and @ modifiers are kept. The expression is rewritten only
// inside its [...] brackets outside string literals; Prometheus checks the
// result (Check). factor 1 returns s unchanged.
func (s *RuleSet) Scale(factor float64, minWindow time.Duration) (*RuleSet, error) {
	if factor == 1 {
		return s, nil
	}
	if factor <= 0 || math.IsNaN(factor) {
		return nil, fmt.Errorf("time scale %v: want > 0", factor)
	}
	out := &RuleSet{Path: s.Path, Kind: s.Kind}
	for _, g := range s.Groups {
		ng := g
		ng.Rules = nil
		for _, r := range g.Rules {
			nr := r
			expr, err := ScaleExpr(r.Expr, factor, minWindow)
			if err != nil {
				return nil, &RuleError{File: s.Path, Line: r.Line, Msg: fmt.Sprintf("%s: scaling its windows: %v", r.Name(), err)}
			}
			nr.Expr = expr
			if r.For != "" {
				d, err := ParseDuration(r.For)
				if err != nil {
					return nil, &RuleError{File: s.Path, Line: r.Line, Msg: fmt.Sprintf("%s: for %q: %v", r.Name(), r.For, err)}
				}
				nr.For = FormatDuration(time.Duration(float64(d) * factor))
			}
			ng.Rules = append(ng.Rules, nr)
		}
		out.Groups = append(out.Groups, ng)
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(map[string]any{"groups": out.Groups}); err != nil {
		return nil, err
	}
	out.groups = b.Bytes()
	return out, nil
}

// ScaleExpr multiplies every range of expr ([5m], the range of a
// subquery [5m:1m]) by factor, at least minWindow (see RuleSet.Scale).
func ScaleExpr(expr string, factor float64, minWindow time.Duration) (string, error) {
	var b strings.Builder
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		switch c {
		case '"', '\'', '`':
			j := skipString(expr, i)
			b.WriteString(expr[i:j])
			i = j - 1
		case '[':
			j := strings.IndexByte(expr[i:], ']')
			if j < 0 {
				return "", fmt.Errorf("unclosed [ at %d", i)
			}
			inner := expr[i+1 : i+j]
			rng, rest, sub := strings.Cut(inner, ":")
			d, err := ParseDuration(strings.TrimSpace(rng))
			if err != nil {
				return "", fmt.Errorf("range [%s]: %v", inner, err)
			}
			nd := max(time.Duration(float64(d)*factor), minWindow)
			b.WriteString("[" + FormatDuration(nd))
			if sub {
				b.WriteString(":" + rest)
			}
			b.WriteString("]")
			i += j
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// skipString returns the index after the string literal starting at i
// (PromQL: "..." and '...' with backslash escapes, `...` raw).
func skipString(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		if s[j] == '\\' && q != '`' {
			j++
			continue
		}
		if s[j] == q {
			return j + 1
		}
	}
	return len(s)
}

var durRE = regexp.MustCompile(`^(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?$`)

// ParseDuration parses a Prometheus duration ("5m", "1h30m", "90s",
// "1d", "500ms"; units y w d h m s ms, largest first).
func ParseDuration(s string) (time.Duration, error) {
	m := durRE.FindStringSubmatch(s)
	if s == "" || m == nil {
		return 0, fmt.Errorf("not a Prometheus duration (5m, 1h30m, 90s)")
	}
	units := []time.Duration{365 * 24 * time.Hour, 7 * 24 * time.Hour, 24 * time.Hour, time.Hour, time.Minute, time.Second, time.Millisecond}
	var d time.Duration
	for i, u := range units {
		if m[i+1] != "" {
			n, _ := strconv.ParseInt(m[i+1], 10, 64)
			d += time.Duration(n) * u
		}
	}
	return d, nil
}

// FormatDuration writes d as a Prometheus duration: whole minutes as
// "5m", whole seconds as "30s", else milliseconds ("1500ms").
func FormatDuration(d time.Duration) string {
	d = d.Round(time.Millisecond)
	switch {
	case d <= 0:
		return "0s"
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}
