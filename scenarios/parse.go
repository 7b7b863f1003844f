package scenarios

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// maxDecodeErrors caps how many unknown-field and type errors Parse reports.
const maxDecodeErrors = 20

// Parse decodes one scenario document strictly, fills defaults and validates
// it. source names the input in error messages ("10k-services.yaml") and
// gives the default Name (its base name without .yaml).
//
// Every error is a *FieldError, or several joined with errors.Join, one per
// line of Error(): malformed YAML (with its line), an unknown or misspelt
// field (full path, line, closest known field), a value of the wrong type
// (path, line), a second YAML document, and every Validate failure.
//
// Parse does not check mode names (see Validate); Catalog.Parse does.
func Parse(data []byte, source string) (*Scenario, error) { return parse(data, source, nil) }

func parse(data []byte, source string, cat *Catalog) (*Scenario, error) {
	if source == "" {
		source = "scenario"
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		return nil, yamlError(source, err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		return nil, &FieldError{Source: source, Line: extra.Line, Msg: "a second YAML document", Fix: "keep one scenario per file (remove the extra ---)"}
	case err != io.EOF:
		return nil, yamlError(source, err)
	}

	if len(doc.Content) == 0 || (doc.Content[0].Kind == yaml.ScalarNode && doc.Content[0].ShortTag() == "!!null") {
		return nil, &FieldError{Source: source, Msg: "the scenario file is empty (no YAML mapping in it, only blank lines or comments)",
			Fix: "write at least services: {count: 100}; `proxybench validate 1k-services` prints a complete example"}
	}
	sc := &Scenario{source: source, lines: map[string]int{}}
	{
		w := walker{source: source, lines: sc.lines}
		w.walk(doc.Content[0], reflect.TypeFor[Scenario](), "")
		if len(w.errs) > 0 {
			return nil, errors.Join(w.errs...)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(sc); err != nil && err != io.EOF {
			return nil, yamlError(source, err)
		}
	}
	sc.SetDefaults()
	if err := sc.validate(cat); err != nil {
		return nil, err
	}
	return sc, nil
}

var lineRE = regexp.MustCompile(`^line (\d+): `)

// yamlError turns a go.yaml.in/yaml error ("yaml: line 3: ...", or a
// TypeError with one "line N: ..." entry per problem) into FieldErrors.
func yamlError(source string, err error) error {
	var te *yaml.TypeError
	msgs := []string{strings.TrimPrefix(err.Error(), "yaml: ")}
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		fe := &FieldError{Source: source, Msg: m, Fix: "correct the YAML at or just after that line (indentation, quoting, ': ' after keys)"}
		if sub := lineRE.FindStringSubmatch(m); sub != nil {
			fe.Line, _ = strconv.Atoi(sub[1])
			fe.Msg = m[len(sub[0]):]
		}
		errs[i] = fe
	}
	return errors.Join(errs...)
}

// walker checks a yaml.Node tree against the Scenario struct's yaml tags
// before decoding, so that every unknown key and mistyped value is reported
// with its full path and line. It records the line of every path it sees.
type walker struct {
	source string
	lines  map[string]int
	errs   []error
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

func (w *walker) fail(path string, line int, msg, fix string) {
	if len(w.errs) == maxDecodeErrors {
		w.errs = append(w.errs, &FieldError{Source: w.source, Line: line, Msg: "too many errors", Fix: "fix the ones above first"})
	}
	if len(w.errs) < maxDecodeErrors {
		w.errs = append(w.errs, &FieldError{Source: w.source, Line: line, Field: path, Msg: msg, Fix: fix})
	}
}

func (w *walker) walk(n *yaml.Node, t reflect.Type, path string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		// An empty block ("churn:") is an empty mapping; an empty value
		// must not silently become its default.
		if t.Kind() != reflect.Struct && (t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct) && path != "" {
			want, fix := describeType(t)
			switch {
			case t == reflect.TypeFor[FreeForm]() || t.Kind() == reflect.Map:
				want, fix = "a mapping", "write key: value lines"
			case t.Kind() == reflect.Slice:
				want, fix = "a list", "write a list such as [a, b]"
			}
			w.fail(path, n.Line, "has no value (want "+want+")", fix+", or remove the line to use the default")
		}
		return
	}
	if t == reflect.TypeFor[FreeForm]() {
		// Decoded as is; its owner checks the fields (kubeProxy.config,
		// Catalog.KubeProxyConfig). Their lines are recorded for its errors.
		if n.Kind != yaml.MappingNode {
			w.fail(path, n.Line, "want a mapping, got "+describe(n), "write key: value lines")
			return
		}
		w.freeLines(n, path)
		return
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		w.leaf(n, t, path)
		return
	}
	switch t.Kind() {
	case reflect.Pointer: // an optional block (services.endpoints.weights)
		w.walk(n, t.Elem(), path)
	case reflect.Struct:
		w.mapping(n, t, path)
	case reflect.Map: // node.sysctls: key -> scalar
		if n.Kind != yaml.MappingNode {
			w.fail(path, n.Line, "want a mapping, got "+describe(n), "write key: value lines")
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := path + "." + n.Content[i].Value
			w.lines[p] = n.Content[i].Line
			w.walk(n.Content[i+1], t.Elem(), p)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			w.fail(path, n.Line, "want a list, got "+describe(n), "write a list such as [a, b]")
			return
		}
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			w.lines[p] = c.Line
			w.walk(c, t.Elem(), p)
		}
	default:
		w.leaf(n, t, path)
	}
}

// freeLines records the line of every key inside a free-form mapping (and
// of every list item), as path.key and path[i].
func (w *walker) freeLines(n *yaml.Node, path string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := path + "." + n.Content[i].Value
			if _, seen := w.lines[p]; !seen {
				w.lines[p] = n.Content[i].Line
			}
			w.freeLines(n.Content[i+1], p)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			w.lines[p] = c.Line
			w.freeLines(c, p)
		}
	}
}

func (w *walker) mapping(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind != yaml.MappingNode {
		where := "the scenario"
		if path != "" {
			where = path
		}
		w.fail(path, n.Line, "want a mapping of fields, got "+describe(n), "write "+where+" as key: value lines")
		return
	}
	fields, names := yamlFields(t)
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if isMerge(k) {
			w.merge(v, t, path)
			continue
		}
		p := k.Value
		if path != "" {
			p = path + "." + k.Value
		}
		if first, dup := seen[k.Value]; dup {
			w.fail(p, k.Line, fmt.Sprintf("duplicate key (first at line %d)", first), "keep one of them")
			continue
		}
		seen[k.Value] = k.Line
		ft, ok := fields[k.Value]
		if !ok {
			msg, fix := "unknown field", "remove it; known fields here: "+strings.Join(names, ", ")
			if s := closest(k.Value, names); s != "" {
				msg, fix = fmt.Sprintf("unknown field (did you mean %q?)", s), fmt.Sprintf("rename it to %q", s)
			}
			w.fail(p, k.Line, msg, fix)
			continue
		}
		w.lines[p] = k.Line
		w.walk(v, ft, p)
	}
}

// merge walks the value of a "<<" merge key: a mapping or a list of them.
func (w *walker) merge(v *yaml.Node, t reflect.Type, path string) {
	for v.Kind == yaml.AliasNode && v.Alias != nil {
		v = v.Alias
	}
	if v.Kind != yaml.SequenceNode {
		w.mapping(v, t, path)
		return
	}
	for _, c := range v.Content {
		for c.Kind == yaml.AliasNode && c.Alias != nil {
			c = c.Alias
		}
		w.mapping(c, t, path)
	}
}

func isMerge(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Value == "<<" && (k.Tag == "" || k.Tag == "!" || k.ShortTag() == "!!merge")
}

func (w *walker) leaf(n *yaml.Node, t reflect.Type, path string) {
	want, fix := describeType(t)
	if n.Kind != yaml.ScalarNode {
		w.fail(path, n.Line, fmt.Sprintf("want %s, got %s", want, describe(n)), fix)
		return
	}
	if msg := exactNumber(n, t); msg != "" {
		w.fail(path, n.Line, msg, fix)
		return
	}
	if err := n.Decode(reflect.New(t).Interface()); err != nil {
		msg := err.Error()
		if _, ok := err.(*yaml.TypeError); ok {
			msg = fmt.Sprintf("want %s, got %q", want, n.Value)
		}
		w.fail(path, n.Line, msg, fix)
	}
}

// octalLike matches a YAML 1.1 octal written like a decimal ("010"), which
// go.yaml.in/yaml reads as 8.
var octalLike = regexp.MustCompile(`^[-+]?0[0-9_]+$`)

// exactNumber refuses a scalar that yaml would decode into an integer or
// float field only approximately: a fraction or exponent into an integer
// (yaml truncates 10.5 to 10), an integer that overflows, a leading-zero
// number yaml reads as octal, and NaN or infinity. It returns "" when the
// value is exact (or not numeric, left to the decoder's type error).
func exactNumber(n *yaml.Node, t reflect.Type) string {
	tag := n.ShortTag()
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32:
		switch {
		case tag == "!!float":
			return fmt.Sprintf("want an integer, got %s (not a whole number, or too large)", n.Value)
		case tag == "!!int" && octalLike.MatchString(n.Value):
			return fmt.Sprintf("%s has a leading zero, which YAML reads as an octal number", n.Value)
		case tag == "!!int":
			var v int64
			if err := n.Decode(&v); err != nil || reflect.Zero(t).OverflowInt(v) {
				return fmt.Sprintf("%s does not fit a %d-bit integer", n.Value, t.Bits())
			}
		}
	case reflect.Float64:
		if tag != "!!int" && tag != "!!float" {
			return ""
		}
		var v float64
		if err := n.Decode(&v); err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
			return fmt.Sprintf("%s is not a finite number", n.Value)
		}
		if tag == "!!int" && octalLike.MatchString(n.Value) {
			return fmt.Sprintf("%s has a leading zero, which YAML reads as an octal number", n.Value)
		}
	}
	return ""
}

// yamlFields maps the yaml names of t's exported fields to their types, and
// lists the names in declaration order.
func yamlFields(t reflect.Type) (map[string]reflect.Type, []string) {
	m := map[string]reflect.Type{}
	var names []string
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		m[name] = f.Type
		names = append(names, name)
	}
	return m, names
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return strconv.Quote(n.Value)
}

func describeType(t reflect.Type) (want, fix string) {
	if t == reflect.TypeFor[Duration]() {
		return "a duration", `write a duration with a unit, such as "2s" or "150ms"`
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer", "write a whole number without quotes or leading zeros, such as 10"
	case reflect.Float64:
		return "a number", "write a number without quotes"
	case reflect.Bool:
		return "true or false", "write true or false"
	}
	return "a string", "write a plain string"
}

// closest returns the candidate nearest to word (case-insensitive
// optimal-string-alignment distance), or "" when none is close enough to be
// a plausible typo.
// Closest is the candidate nearest to word (case-insensitive edit
// distance), or "" when none is close enough to suggest; for checks of
// fields defined above this package (Catalog.KubeProxyConfig).
func Closest(word string, candidates []string) string { return closest(word, candidates) }

func closest(word string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(word), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	if bestD == 0 || (bestD <= 2 && 3*bestD <= len(best)) {
		return best
	}
	return ""
}

// editDistance counts insertions, deletions, substitutions and adjacent
// transpositions turning a into b.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 20
	}
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// UnmarshalYAML decodes a free-form mapping with plain map[string]any
// values inside (not FreeForm), as its owner reads them.
func (f *FreeForm) UnmarshalYAML(n *yaml.Node) error {
	var m map[string]any
	if err := n.Decode(&m); err != nil {
		return err
	}
	*f = m
	return nil
}
