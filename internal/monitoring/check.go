package monitoring

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Promtool is the rule checker: Debian's prometheus package ships it
// beside prometheus (make setup installs it).
const Promtool = "promtool"

// Check has Prometheus's own checker judge s's groups: `promtool check
// rules` on the groups as Prometheus would load them (for a
// PrometheusRule, its spec.groups at their own lines). It returns nil, or
// one *RuleError per problem promtool reports, at s.Path's line with
// promtool's message (joined with errors.Join). promtool is the path of
// promtool ("": looked up on PATH).
func Check(ctx context.Context, promtool string, s *RuleSet) error {
	if promtool == "" {
		promtool = Promtool
	}
	dir, err := os.MkdirTemp("", "pb-rules-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	name := filepath.Join(dir, "rules.yaml")
	if err := s.WriteGroups(name); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, promtool, "check", "rules", name).CombinedOutput()
	if err == nil {
		return nil
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return fmt.Errorf("%s check rules: %w", promtool, err)
	}
	errs := parsePromtool(string(out), name, s.Path)
	for _, e := range errs {
		if e.Col > 0 {
			e.Col += s.indent // a PrometheusRule's groups were moved left
		}
		if e.Line == 0 {
			e.Line = lineOfQuoted(s.groups, e.Msg)
		}
	}
	if len(errs) == 0 {
		return &RuleError{File: s.Path, Msg: fmt.Sprintf("promtool check rules failed (%v): %s", err, strings.TrimSpace(string(out)))}
	}
	joined := make([]error, len(errs))
	for i, e := range errs {
		joined[i] = e
	}
	return errors.Join(joined...)
}

var quotedRE = regexp.MustCompile(`"([^"]+)"`)

// lineOfQuoted is the first line of text holding the last quoted value of
// msg ("not a valid duration string: \"5 minutes\"": the for: that has
// it), 0 when none: promtool names no line for such a value.
func lineOfQuoted(text []byte, msg string) int {
	m := quotedRE.FindAllStringSubmatch(msg, -1)
	if len(m) == 0 {
		return 0
	}
	v := m[len(m)-1][1]
	for i, l := range strings.Split(string(text), "\n") {
		if strings.Contains(l, v) {
			return i + 1
		}
	}
	return 0
}

// posRE is promtool's "FILE: LINE:COL: message" (a rule's problem).
var posRE = regexp.MustCompile(`^(\d+):(\d+): (.*)$`)

// yamlItemRE is one item of a YAML unmarshal error: "  line 6: field x
// not found in type rulefmt.RuleNode".
var yamlItemRE = regexp.MustCompile(`^\s+line (\d+): (.*)$`)

// parsePromtool reads promtool check rules' output for file name (as
// given to it), each problem at file's line with promtool's message.
// Forms (Prometheus 2.42, cmd/promtool/main.go checkRules):
//
//	NAME: 5:11: group "g", rule 1, "A": could not parse expression: 1:6: parse error: unexpected end of input
//	NAME: yaml: unmarshal errors:
//	  line 6: field forr not found in type rulefmt.RuleNode
//	NAME: yaml: line 3: mapping values are not allowed in this context
func parsePromtool(out, name, file string) []*RuleError {
	var errs []*RuleError
	var yamlHead string // "yaml: unmarshal errors:", items follow
	for _, l := range strings.Split(out, "\n") {
		if m := yamlItemRE.FindStringSubmatch(l); m != nil && yamlHead != "" {
			n, _ := strconv.Atoi(m[1])
			errs = append(errs, &RuleError{File: file, Line: n, Msg: strings.TrimSuffix(yamlHead, ":") + ": " + m[2]})
			continue
		}
		rest, ok := strings.CutPrefix(l, name+": ")
		if !ok {
			continue
		}
		yamlHead = ""
		if m := posRE.FindStringSubmatch(rest); m != nil {
			n, _ := strconv.Atoi(m[1])
			col, _ := strconv.Atoi(m[2])
			errs = append(errs, &RuleError{File: file, Line: n, Col: col, Msg: m[3]})
			continue
		}
		if strings.HasSuffix(rest, "errors:") {
			yamlHead = rest
			continue
		}
		errs = append(errs, &RuleError{File: file, Line: yamlLine(errors.New(rest)), Msg: strings.ReplaceAll(rest, name, file)})
	}
	return errs
}

// promqlWords are PromQL's keywords, aggregation modifiers and literals:
// an identifier among them is not a metric name.
var promqlWords = []string{"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
	"offset", "bool", "inf", "nan", "start", "end", "atan2",
	// Aggregations, which may be followed by by/without before "(".
	"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile"}

// MetricNames returns the metric names expr selects, in order of first
// appearance: each identifier outside string literals, label matchers
// ({...}), ranges ([...]) and the label lists of by, without, on,
// ignoring, group_left and group_right, that is not a function call
// (followed by "("), a keyword or a number; and each {__name__="x"}. A
// lexical reading for warnings only: Prometheus parses and evaluates the
// rules.
func MetricNames(expr string) []string {
	var out []string
	add := func(n string) {
		if n != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	isStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isPart := func(c byte) bool { return isStart(c) || c >= '0' && c <= '9' }
	labelList := false // the next (...) is a label list
	for i := 0; i < len(expr); i++ {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(expr, i) - 1
		case c == '{':
			j := i + 1
			for j < len(expr) && expr[j] != '}' {
				if expr[j] == '"' || expr[j] == '\'' || expr[j] == '`' {
					j = skipString(expr, j)
					continue
				}
				j++
			}
			if m := nameMatcherRE.FindStringSubmatch(expr[i:min(j+1, len(expr))]); m != nil {
				add(m[1])
			}
			i = j
		case c == '[':
			if j := strings.IndexByte(expr[i:], ']'); j >= 0 {
				i += j
			}
		case c == '(' && labelList:
			labelList = false
			if j := strings.IndexByte(expr[i:], ')'); j >= 0 {
				i += j
			}
		case c >= '0' && c <= '9' || c == '.':
			// A number (1e3, 0x1f, 1.5) or a duration: skip it whole.
			for i+1 < len(expr) && (isPart(expr[i+1]) || expr[i+1] == '.') {
				i++
			}
		case isStart(c):
			j := i
			for j < len(expr) && isPart(expr[j]) {
				j++
			}
			word := expr[i:j]
			k := j
			for k < len(expr) && (expr[k] == ' ' || expr[k] == '\n' || expr[k] == '\t') {
				k++
			}
			switch lw := strings.ToLower(word); {
			case slices.Contains([]string{"by", "without", "on", "ignoring", "group_left", "group_right"}, lw):
				labelList = true
			case slices.Contains(promqlWords, lw):
			case k < len(expr) && expr[k] == '(':
				// A function or an aggregation (sum(...)).
			default:
				add(word)
			}
			i = j - 1
		}
	}
	return out
}

var nameMatcherRE = regexp.MustCompile(`__name__\s*=\s*"([^"]+)"`)

// PrometheusOwn are the series Prometheus itself writes: per target
// (up, scrape_*) and per alerting rule (ALERTS, ALERTS_FOR_STATE).
var PrometheusOwn = []string{"up", "scrape_duration_seconds", "scrape_samples_scraped", "scrape_samples_post_metric_relabeling",
	"scrape_series_added", "ALERTS", "ALERTS_FOR_STATE"}

// Unexported returns, per rule of s (in file order), the metric names it
// reads that neither exports (RowExports, or the names a TSDB
// holds), PrometheusOwn, nor a recording rule of s provides: names that
// rule can never see in this testbed.
func (s *RuleSet) Unexported(exports func(name string) bool) []Missing {
	var recorded []string
	for _, r := range s.Records() {
		recorded = append(recorded, r.Record)
	}
	var out []Missing
	for _, r := range s.Rules() {
		for _, n := range MetricNames(r.Expr) {
			if !slices.Contains(PrometheusOwn, n) && !slices.Contains(recorded, n) && !exports(n) {
				out = append(out, Missing{Rule: r.Name(), Line: r.Line, Metric: n})
			}
		}
	}
	return out
}

// Missing is a metric name a rule reads that nothing in the testbed
// exports.
type Missing struct {
	Rule   string
	Line   int
	Metric string
}
