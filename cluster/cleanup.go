package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Cleanup deletes what runs left on the cluster, by label: for run
// runID (every run when empty) each namespace labelled RunLabel, after
// deleting the run's labelled objects in it (agents, pool, Services,
// EndpointSlices, so they go even where no namespace controller runs).
// It waits up to wait for the namespaces to be gone (0: does not wait)
// and returns the namespaces it deleted; one still there after wait is
// an error naming it. Nothing unlabelled is touched.
func Cleanup(ctx context.Context, c kubernetes.Interface, runID string, wait time.Duration) ([]string, error) {
	sel := RunLabel
	if runID != "" {
		sel = RunLabel + "=" + runID
	}
	list, err := c.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("cluster cleanup: list namespaces labelled %s: %w", sel, err)
	}
	var deleted []string
	var errs []error
	bg := metav1.DeletePropagationBackground
	del := metav1.DeleteOptions{PropagationPolicy: &bg}
	// The run's pods hold no state and have no grace period anyway:
	// removed from the API at once (their kubelets stop them after),
	// so they go also from a node whose kubelet is gone.
	zero := int64(0)
	now := metav1.DeleteOptions{PropagationPolicy: &bg, GracePeriodSeconds: &zero}
	for _, ns := range list.Items {
		name := ns.Name
		lo := metav1.ListOptions{LabelSelector: RunLabel + "=" + ns.Labels[RunLabel]}
		for what, f := range map[string]func() error{
			"daemonsets":     func() error { return c.AppsV1().DaemonSets(name).DeleteCollection(ctx, del, lo) },
			"deployments":    func() error { return c.AppsV1().Deployments(name).DeleteCollection(ctx, del, lo) },
			"replicasets":    func() error { return c.AppsV1().ReplicaSets(name).DeleteCollection(ctx, del, lo) },
			"pods":           func() error { return c.CoreV1().Pods(name).DeleteCollection(ctx, now, lo) },
			"endpointslices": func() error { return c.DiscoveryV1().EndpointSlices(name).DeleteCollection(ctx, del, lo) },
			"services":       func() error { return deleteServices(ctx, c, name, lo) },
		} {
			if err := f(); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("cluster cleanup: delete %s in %s: %w", what, name, err))
			}
		}
		if err := c.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("cluster cleanup: delete namespace %s: %w", name, err))
			continue
		}
		deleted = append(deleted, name)
	}
	sort.Strings(deleted)
	if wait > 0 && len(deleted) > 0 {
		deadline := time.Now().Add(wait)
		for {
			var left []string
			for _, n := range deleted {
				if _, err := c.CoreV1().Namespaces().Get(ctx, n, metav1.GetOptions{}); err == nil {
					left = append(left, n)
				}
			}
			if len(left) == 0 {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				errs = append(errs, fmt.Errorf("cluster cleanup: namespace %s still Terminating after %s", strings.Join(left, ", "), wait))
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	return deleted, errors.Join(errs...)
}

// deleteServices deletes the labelled Services of ns one by one (the
// API has no deletecollection for Services).
func deleteServices(ctx context.Context, c kubernetes.Interface, ns string, lo metav1.ListOptions) error {
	list, err := c.CoreV1().Services(ns).List(ctx, lo)
	if err != nil {
		return err
	}
	for _, s := range list.Items {
		if err := c.CoreV1().Services(ns).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}
