package monitoring

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Client queries a Prometheus server's HTTP API (/api/v1). HTTP dials
// from wherever the server is reachable (inside the control plane's
// namespace, Server.Client).
type Client struct {
	// Base is the server's URL ("http://127.0.0.1:9090").
	Base string
	HTTP *http.Client
}

// APIError is an answer of the API with status "error".
type APIError struct {
	Path, Type, Msg string
}

func (e *APIError) Error() string { return fmt.Sprintf("prometheus %s: %s: %s", e.Path, e.Type, e.Msg) }

// get GETs path with params and decodes the envelope's data into out.
func (c *Client) get(ctx context.Context, path string, params url.Values, out any) error {
	u := c.Base + path
	if len(params) > 0 {
		u += "?" + params.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("prometheus %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("prometheus %s: %w", path, err)
	}
	var env struct {
		Status    string          `json:"status"`
		Data      json.RawMessage `json:"data"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("prometheus %s: %s: not an API answer: %w", path, resp.Status, err)
	}
	if env.Status != "success" {
		return &APIError{Path: path, Type: env.ErrorType, Msg: env.Error}
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return fmt.Errorf("prometheus %s: data: %w", path, err)
	}
	return nil
}

// Sample is one value of a series at a time; V is NaN for "NaN".
type Sample struct {
	T time.Time
	V float64
}

// Series is one labelled series of a range query (a matrix row).
type Series struct {
	Labels  map[string]string
	Samples []Sample
}

// point is the API's [unix seconds, "value"].
type point [2]any

func (p point) sample() (Sample, error) {
	ts, ok := p[0].(float64)
	if !ok {
		return Sample{}, fmt.Errorf("timestamp %v", p[0])
	}
	s, ok := p[1].(string)
	if !ok {
		return Sample{}, fmt.Errorf("value %v", p[1])
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return Sample{}, err
	}
	sec, frac := math.Modf(ts)
	return Sample{T: time.Unix(int64(sec), int64(frac*1e9)).UTC(), V: v}, nil
}

// QueryRange evaluates expr at every step from start to end
// (/api/v1/query_range) and returns its series.
func (c *Client) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Series, error) {
	p := url.Values{"query": {expr}, "start": {unixText(start)}, "end": {unixText(end)}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric map[string]string `json:"metric"`
			Values []point           `json:"values"`
		} `json:"result"`
	}
	if err := c.get(ctx, "/api/v1/query_range", p, &data); err != nil {
		return nil, err
	}
	if data.ResultType != "matrix" {
		return nil, fmt.Errorf("prometheus query_range %q: result type %q, want matrix", expr, data.ResultType)
	}
	out := make([]Series, 0, len(data.Result))
	for _, r := range data.Result {
		s := Series{Labels: r.Metric}
		for _, v := range r.Values {
			smp, err := v.sample()
			if err != nil {
				return nil, fmt.Errorf("prometheus query_range %q: %w", expr, err)
			}
			s.Samples = append(s.Samples, smp)
		}
		out = append(out, s)
	}
	return out, nil
}

func unixText(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', 3, 64)
}

// RuleStatus is one rule as /api/v1/rules lists it.
type RuleStatus struct {
	Group     string
	Name      string `json:"name"`
	Query     string `json:"query"`
	Type      string `json:"type"` // "alerting", "recording"
	Health    string `json:"health"`
	LastError string `json:"lastError"`
	State     string `json:"state"` // alerting: inactive, pending, firing
	Alerts    []struct {
		Labels   map[string]string `json:"labels"`
		State    string            `json:"state"`
		ActiveAt time.Time         `json:"activeAt"`
		Value    string            `json:"value"`
	} `json:"alerts"`
}

// Rules lists the server's rules with their health (/api/v1/rules).
func (c *Client) Rules(ctx context.Context) ([]RuleStatus, error) {
	var data struct {
		Groups []struct {
			Name  string       `json:"name"`
			Rules []RuleStatus `json:"rules"`
		} `json:"groups"`
	}
	if err := c.get(ctx, "/api/v1/rules", nil, &data); err != nil {
		return nil, err
	}
	var out []RuleStatus
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			r.Group = g.Name
			out = append(out, r)
		}
	}
	return out, nil
}

// LabelValues lists the values of label name (/api/v1/label/NAME/values;
// "__name__": every metric name in the TSDB).
func (c *Client) LabelValues(ctx context.Context, name string) ([]string, error) {
	var out []string
	err := c.get(ctx, "/api/v1/label/"+url.PathEscape(name)+"/values", nil, &out)
	return out, err
}

// Version is the server's version (/api/v1/status/buildinfo).
func (c *Client) Version(ctx context.Context) (string, error) {
	var data struct {
		Version string `json:"version"`
	}
	err := c.get(ctx, "/api/v1/status/buildinfo", nil, &data)
	return data.Version, err
}

// Ready reports whether the server answers /-/ready with 200.
func (c *Client) Ready(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+"/-/ready", nil)
	if err != nil {
		return false
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
