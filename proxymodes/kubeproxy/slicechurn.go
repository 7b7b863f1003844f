//go:build linux

package kubeproxy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/proxybench/proxybench/workload"
	"github.com/proxybench/proxybench/workload/apiobjects"
)

// RenameSlice deletes s's EndpointSlice and re-creates it under a new
// name with the same endpoints (apiobjects.RenameSlice: the new slice
// first), stamped with trigger: the sliceChurn phase's change, which
// changes no endpoint kube-proxy programs but every slice it caches
// (its EndpointSliceCache keys slices by name). The names are
// <service>-pb-<n>, n counting the service's renames. Safe for
// concurrent use on different services.
func (p *Proxier) RenameSlice(ctx context.Context, s workload.Service, trigger time.Time) error {
	if p.cp == nil {
		return errors.New("kubeproxy: RenameSlice with no control plane")
	}
	p.lastMu.Lock()
	if p.sliceGen == nil {
		p.sliceGen = map[string]int{}
	}
	key := s.Namespace + "/" + s.Name
	gen := p.sliceGen[key]
	p.sliceGen[key] = gen + 1
	p.lastMu.Unlock()
	from, to := sliceNameAt(s, gen), sliceNameAt(s, gen+1)
	if err := apiobjects.RenameSlice(ctx, p.cp.Client, s, from, to, trigger); err != nil {
		p.lastMu.Lock()
		p.sliceGen[key] = gen // the old one stands (or the create failed)
		p.lastMu.Unlock()
		return err
	}
	return nil
}

// RestoreSliceNames renames every slice RenameSlice renamed back to its
// first name (apiobjects.SliceName), so later writes (Sync,
// WriteChange) find it. services are the services as they stand.
func (p *Proxier) RestoreSliceNames(ctx context.Context, services []workload.Service) error {
	var errs []error
	for _, s := range services {
		key := s.Namespace + "/" + s.Name
		p.lastMu.Lock()
		gen := p.sliceGen[key]
		p.lastMu.Unlock()
		if gen == 0 {
			continue
		}
		if err := apiobjects.RenameSlice(ctx, p.cp.Client, s, sliceNameAt(s, gen), sliceNameAt(s, 0), time.Now()); err != nil {
			errs = append(errs, err)
			continue
		}
		p.lastMu.Lock()
		delete(p.sliceGen, key)
		p.lastMu.Unlock()
	}
	if len(errs) > 0 {
		return fmt.Errorf("kubeproxy: %d EndpointSlice(s) not renamed back (first: %w)", len(errs), errs[0])
	}
	return nil
}

// sliceNameAt is s's slice name after gen renames.
func sliceNameAt(s workload.Service, gen int) string {
	if gen == 0 {
		return apiobjects.SliceName(s)
	}
	return fmt.Sprintf("%s-%d", apiobjects.SliceName(s), gen)
}
