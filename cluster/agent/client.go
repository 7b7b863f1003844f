package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Transport sends one request to an agent (method, path such as
// "/lookups/j1", a JSON body or nil) and returns the body of a 2xx
// answer; any other answer is an error holding its status and body. The
// cluster engine's transport goes through the API server's pods/proxy
// subresource; HTTPTransport dials the agent directly.
type Transport func(ctx context.Context, method, path string, body []byte) ([]byte, error)

// HTTPTransport is a Transport to the agent at base ("http://ip:port")
// over hc (nil: http.DefaultClient).
func HTTPTransport(base string, hc *http.Client) Transport {
	if hc == nil {
		hc = http.DefaultClient
	}
	return func(ctx context.Context, method, path string, body []byte) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		out, err := io.ReadAll(io.LimitReader(resp.Body, maxRequest))
		if err != nil {
			return nil, err
		}
		if resp.StatusCode/100 != 2 {
			return nil, fmt.Errorf("agent: %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(out))
		}
		return out, nil
	}
}

// Client calls one agent's API over its Transport.
type Client struct {
	T Transport
	// Poll is the pause between two status reads of Wait* (default 200 ms).
	Poll time.Duration
}

func (c Client) call(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	raw, err := c.T(ctx, method, path, body)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("agent: %s %s: answer: %w", method, path, err)
	}
	return nil
}

// Health reads GET /healthz.
func (c Client) Health(ctx context.Context) (Health, error) {
	var h Health
	return h, c.call(ctx, http.MethodGet, "/healthz", nil, &h)
}

// StartLookup posts a lookup job.
func (c Client) StartLookup(ctx context.Context, req LookupRequest) error {
	return c.call(ctx, http.MethodPost, "/lookups", req, &Job{})
}

// Lookup reads a lookup job's status.
func (c Client) Lookup(ctx context.Context, id string) (LookupStatus, error) {
	var st LookupStatus
	return st, c.call(ctx, http.MethodGet, "/lookups/"+id, nil, &st)
}

// StartProbe posts a probe.
func (c Client) StartProbe(ctx context.Context, req ProbeRequest) error {
	return c.call(ctx, http.MethodPost, "/probes", req, &Job{})
}

// Probe reads a probe's status.
func (c Client) Probe(ctx context.Context, id string) (ProbeStatus, error) {
	var st ProbeStatus
	return st, c.call(ctx, http.MethodGet, "/probes/"+id, nil, &st)
}

// Forget deletes a job ("lookups" or "probes") and its samples on the agent.
func (c Client) Forget(ctx context.Context, kind, id string) error {
	return c.call(ctx, http.MethodDelete, "/"+kind+"/"+id, nil, nil)
}

// WaitLookup reads the job's status until it is done or ctx ends; a job
// that ended with an error returns it (with the status).
func (c Client) WaitLookup(ctx context.Context, id string) (LookupStatus, error) {
	for {
		st, err := c.Lookup(ctx, id)
		if err != nil || st.Done {
			if err == nil && st.Error != "" {
				err = fmt.Errorf("agent: lookup %s: %s", id, st.Error)
			}
			return st, err
		}
		if err := c.sleep(ctx); err != nil {
			return st, err
		}
	}
}

// WaitProbe reads the probe's status until it is done or ctx ends.
func (c Client) WaitProbe(ctx context.Context, id string) (ProbeStatus, error) {
	for {
		st, err := c.Probe(ctx, id)
		if err != nil || st.Done {
			if err == nil && st.Error != "" {
				err = fmt.Errorf("agent: %s", st.Error)
			}
			return st, err
		}
		if err := c.sleep(ctx); err != nil {
			return st, err
		}
	}
}

func (c Client) sleep(ctx context.Context) error {
	d := c.Poll
	if d <= 0 {
		d = 200 * time.Millisecond
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
