package scenarios

import (
	"encoding/json"
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// parseDuration accepts time.ParseDuration syntax ("2s", "150ms", "1m30s").
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration", s)
	}
	return d, nil
}

// UnmarshalYAML reads a scalar such as "2s" or "150ms".
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a duration like \"2s\"", n.Line)
	}
	v, err := parseDuration(n.Value)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalYAML writes the duration as time.Duration.String ("2s").
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalJSON writes the duration as a JSON string ("2s").
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a JSON string such as "2s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string like \"2s\": %w", err)
	}
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}
