package scenarios

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

//go:embed *.yaml
var embedded embed.FS

// Names lists the embedded scenarios, sorted, without ".yaml".
func Names() []string {
	entries, _ := fs.ReadDir(embedded, ".")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	slices.Sort(names)
	return names
}

// Load reads and parses a scenario (see Parse). nameOrPath is a file when
// one exists at that path; otherwise it names an embedded scenario with or
// without ".yaml", optionally under a "scenarios/" folder, so
// "10k-services" and "scenarios/10k-services.yaml" work from any directory.
// An unknown name is an error listing the embedded names.
//
// Load does not check mode names (see Validate); Catalog.Load does.
func Load(nameOrPath string) (*Scenario, error) { return load(nameOrPath, nil) }

func load(nameOrPath string, cat *Catalog) (*Scenario, error) {
	fi, err := os.Stat(nameOrPath)
	switch {
	case err == nil && fi.IsDir():
		return nil, &FieldError{Source: nameOrPath, Msg: "is a directory, not a scenario file", Fix: dirFix(nameOrPath)}
	case err == nil:
		data, err := os.ReadFile(nameOrPath)
		if err != nil {
			return nil, fmt.Errorf("scenario %q: %w", nameOrPath, err)
		}
		return parse(data, nameOrPath, cat)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("scenario %q: %w", nameOrPath, err)
	}
	if dir := filepath.Dir(nameOrPath); dir == "." || filepath.Base(dir) == "scenarios" {
		file := strings.TrimSuffix(filepath.Base(nameOrPath), ".yaml") + ".yaml"
		if data, err := embedded.ReadFile(file); err == nil {
			return parse(data, file, cat)
		}
	}
	return nil, fmt.Errorf("scenario %q: no such file and no embedded scenario of that name (embedded: %s)",
		nameOrPath, strings.Join(Names(), ", "))
}

// YAML re-emits the effective scenario (defaults filled) as a YAML document
// that Parse reads back to an equal Scenario.
func (s *Scenario) YAML() ([]byte, error) {
	var n yaml.Node
	if err := n.Encode(s); err != nil {
		return nil, fmt.Errorf("scenario %q: encode: %w", s.Name, err)
	}
	// Count has omitempty; an explicit fixed count of 0 must survive.
	if e := s.Services.Endpoints; e.Distribution == "fixed" && e.Count == 0 {
		if ep := lookup(lookup(&n, "services"), "endpoints"); ep != nil {
			ep.Content = append(ep.Content,
				&yaml.Node{Kind: yaml.ScalarNode, Value: "count"},
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: "0"})
		}
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, fmt.Errorf("scenario %q: encode: %w", s.Name, err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("scenario %q: encode: %w", s.Name, err)
	}
	return b.Bytes(), nil
}

// lookup is the value of key in mapping node m, or nil.
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

// dirFix suggests the scenario files in dir.
func dirFix(dir string) string {
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) == 0 {
		return "name a scenario file (such as " + filepath.Join(dir, "my.yaml") + ") or an embedded scenario (" + strings.Join(Names(), ", ") + ")"
	}
	if len(files) > 5 {
		files = append(files[:5], "...")
	}
	return "name one scenario file in it: " + strings.Join(files, ", ")
}
