package cluster

import (
	"context"
	"fmt"
	"sort"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// RBACName names the ClusterRole, the kube-system Role and their bindings
// `proxybench rbac` prints.
const RBACName = "proxybench"

// ClusterRules are the least cluster-wide permissions of a run: its own
// namespace (created and deleted by the run, so a Role inside it cannot
// be bound beforehand) and the objects in it, and reading nodes (the
// agents' placement, the node kernels). They are what Access checks.
func ClusterRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "create", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get", "list", "create", "delete"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "create", "update", "delete", "deletecollection"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "daemonsets"}, Verbs: []string{"get", "list", "create", "delete", "deletecollection"}},
		// The pool's ReplicaSets, deleted by label at cleanup.
		{APIGroups: []string{"apps"}, Resources: []string{"replicasets"}, Verbs: []string{"list", "deletecollection"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "create", "delete", "deletecollection"}},
		// The agents' samples, read through the API server.
		{APIGroups: []string{""}, Resources: []string{"pods/proxy"}, Verbs: []string{"get", "create", "delete"}},
	}
}

// KubeSystemRules are the least permissions in kube-system: reading
// kube-proxy's ConfigMap and DaemonSet (its mode, configuration and
// version).
func KubeSystemRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"kube-proxy"}, Verbs: []string{"get"}},
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, ResourceNames: []string{"kube-proxy"}, Verbs: []string{"get"}},
	}
}

// RBACObjects are the ClusterRole (ClusterRules), the kube-system Role
// (KubeSystemRules) and their bindings to subject (kind User, Group or
// ServiceAccount; a ServiceAccount as namespace/name).
func RBACObjects(kind, subject string) (*rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *rbacv1.Role, *rbacv1.RoleBinding, error) {
	sub := rbacv1.Subject{Kind: kind, Name: subject}
	switch kind {
	case rbacv1.UserKind, rbacv1.GroupKind:
		sub.APIGroup = rbacv1.GroupName
	case rbacv1.ServiceAccountKind:
		ns, name, ok := strings.Cut(subject, "/")
		if !ok || ns == "" || name == "" {
			return nil, nil, nil, nil, &Unusable{Cause: fmt.Sprintf("--service-account %q: want namespace/name", subject), Fix: "e.g. --service-account ci/proxybench"}
		}
		sub.Namespace, sub.Name = ns, name
	default:
		return nil, nil, nil, nil, &Unusable{Cause: fmt.Sprintf("subject kind %q: want User, Group or ServiceAccount", kind)}
	}
	tm := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{Kind: kind, APIVersion: "rbac.authorization.k8s.io/v1"}
	}
	om := func(ns string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: RBACName, Namespace: ns} }
	cr := &rbacv1.ClusterRole{TypeMeta: tm("ClusterRole"), ObjectMeta: om(""), Rules: ClusterRules()}
	crb := &rbacv1.ClusterRoleBinding{TypeMeta: tm("ClusterRoleBinding"), ObjectMeta: om(""), Subjects: []rbacv1.Subject{sub},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: RBACName}}
	role := &rbacv1.Role{TypeMeta: tm("Role"), ObjectMeta: om("kube-system"), Rules: KubeSystemRules()}
	rb := &rbacv1.RoleBinding{TypeMeta: tm("RoleBinding"), ObjectMeta: om("kube-system"), Subjects: []rbacv1.Subject{sub},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: RBACName}}
	return cr, crb, role, rb, nil
}

// RBACManifest is the YAML of RBACObjects, which `proxybench rbac` prints.
func RBACManifest(kind, subject string) (string, error) {
	cr, crb, role, rb, err := RBACObjects(kind, subject)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("# The least permissions of proxybench run --engine cluster (proxybench rbac; docs/cluster.md).\n")
	for _, d := range []any{cr, crb, role, rb} {
		y, err := yaml.Marshal(d)
		if err != nil {
			return "", err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.String(), nil
}

// ApplyRBAC creates RBACObjects through the API (what `proxybench rbac
// | kubectl apply -f -` does; a local cluster binds its user so).
func ApplyRBAC(ctx context.Context, c kubernetes.Interface, kind, subject string) error {
	cr, crb, role, rb, err := RBACObjects(kind, subject)
	if err != nil {
		return err
	}
	if _, err := c.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := c.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := c.RbacV1().Roles("kube-system").Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err = c.RbacV1().RoleBindings("kube-system").Create(ctx, rb, metav1.CreateOptions{})
	return err
}

// Access checks with SelfSubjectAccessReviews that the kubeconfig's user
// holds every verb of ClusterRules (in the run's namespace, which does
// not exist yet: a namespaced check there is what the run will need) and
// KubeSystemRules. Any missing is Unusable listing all of them and
// naming `proxybench rbac`.
func (c *Cluster) Access(ctx context.Context, runID string) error {
	return c.access(ctx, map[string][]rbacv1.PolicyRule{Namespace(runID): ClusterRules(), "kube-system": KubeSystemRules()},
		"bind the roles proxybench rbac --user NAME prints (kubectl apply -f -)")
}

// AccessModeSwitch checks ModeSwitchRules as Access checks the others:
// what --allow-mode-switch needs.
func (c *Cluster) AccessModeSwitch(ctx context.Context) error {
	ks, cw := ModeSwitchRules()
	return c.access(ctx, map[string][]rbacv1.PolicyRule{"kube-system": ks, "": cw},
		"grant them (proxybench rbac prints the default run's roles; --allow-mode-switch needs these in addition), or run without --allow-mode-switch")
}

// access checks rules per namespace ("": cluster-wide rules only) with
// SelfSubjectAccessReviews; fix is the Unusable's fix.
func (c *Cluster) access(ctx context.Context, byNS map[string][]rbacv1.PolicyRule, fix string) error {
	var missing []string
	check := func(ns string, rules []rbacv1.PolicyRule) error {
		for _, r := range rules {
			for _, res := range r.Resources {
				resource, sub, _ := strings.Cut(res, "/")
				for _, verb := range r.Verbs {
					name := ""
					if len(r.ResourceNames) > 0 {
						name = r.ResourceNames[0]
					}
					attr := &authorizationv1.ResourceAttributes{Group: r.APIGroups[0], Resource: resource, Subresource: sub, Verb: verb, Name: name}
					if resource != "namespaces" && resource != "nodes" && ns != "" {
						attr.Namespace = ns
					}
					rev, err := c.Client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
						&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attr}}, metav1.CreateOptions{})
					if err != nil {
						return &Unusable{Cause: "cannot check the kubeconfig user's permissions (SelfSubjectAccessReview)", Err: err}
					}
					if !rev.Status.Allowed {
						where := "cluster-wide"
						if attr.Namespace != "" {
							where = "in " + attr.Namespace
						}
						missing = append(missing, fmt.Sprintf("%s %s %s", verb, res, where))
					}
				}
			}
		}
		return nil
	}
	nss := make([]string, 0, len(byNS))
	for ns := range byNS {
		nss = append(nss, ns)
	}
	sort.Strings(nss)
	for _, ns := range nss {
		if err := check(ns, byNS[ns]); err != nil {
			return err
		}
	}
	if len(missing) > 0 {
		return &Unusable{Cause: fmt.Sprintf("the kubeconfig's user may not %s", strings.Join(missing, ", ")), Fix: fix}
	}
	return nil
}
