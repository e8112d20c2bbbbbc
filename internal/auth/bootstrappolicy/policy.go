// Package bootstrappolicy is svcnet's statement of the default RBAC policy
// that kube-apiserver v1.37 creates when it starts (its
// "rbac/bootstrap-roles" post-start hook), with the default feature gates.
//
// Users, kubectl and every component written for Kubernetes expect these
// objects to exist: cluster-admin bound to system:masters; the user-facing
// aggregated roles admin, edit and view, whose rules the clusterrole
// aggregation controller gathers from the system:aggregate-to-* roles; the
// discovery, basic-user, public-info-viewer and monitoring roles; the roles
// of the node, kube-proxy, kube-scheduler, kube-controller-manager and
// kube-dns; one system:controller:<name> role per controller, bound to the
// kube-system service account the controller runs as; and a few Roles in
// kube-system and kube-public (leader election, bootstrap signer, the
// extension-apiserver-authentication reader). Every object carries upstream's
// label kubernetes.io/bootstrapping=rbac-defaults and annotation
// rbac.authorization.kubernetes.io/autoupdate=true, and every rule is stated
// the way upstream states it, in the same order with its lists sorted, so
// `kubectl get clusterrole view -o yaml` shows what a real cluster shows.
//
// Ensure reconciles this policy into a cluster as the upstream hook does:
// missing objects are created; existing ones annotated autoupdate=true gain
// whatever rules, subjects, labels and annotations they lack and keep what
// an administrator added; those annotated autoupdate=false are left alone.
package bootstrappolicy

import (
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// API groups the rules name.
const (
	core          = ""
	admissionReg  = "admissionregistration.k8s.io"
	apiextensions = "apiextensions.k8s.io"
	apps          = "apps"
	authn         = "authentication.k8s.io"
	authz         = "authorization.k8s.io"
	autoscaling   = "autoscaling"
	batch         = "batch"
	certificates  = "certificates.k8s.io"
	coordination  = "coordination.k8s.io"
	customMetrics = "custom.metrics.k8s.io"
	discovery     = "discovery.k8s.io"
	eventsGroup   = "events.k8s.io"
	extensions    = "extensions"
	extMetrics    = "external.metrics.k8s.io"
	metallbGroup  = "metallb.io"
	metrics       = "metrics.k8s.io"
	networking    = "networking.k8s.io"
	nodeGroup     = "node.k8s.io"
	policyGroup   = "policy"
	rbacGroup     = rbacv1.GroupName
	resource      = "resource.k8s.io"
	storage       = "storage.k8s.io"
	storageMig    = "storagemigration.k8s.io"
)

// Well-known users and groups (k8s.io/apiserver/pkg/authentication/user).
const (
	userKubeProxy         = "system:kube-proxy"
	userControllerManager = "system:kube-controller-manager"
	userScheduler         = "system:kube-scheduler"
	groupMasters          = "system:masters"
	groupMonitoring       = "system:monitoring"
	groupAuthenticated    = "system:authenticated"
	groupUnauthenticated  = "system:unauthenticated"
	groupServiceAccounts  = "system:serviceaccounts"
)

// Verb sets.
var (
	read       = []string{"get", "list", "watch"}
	write      = []string{"create", "update", "patch", "delete", "deletecollection"}
	readWrite  = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	readUpdate = []string{"get", "list", "watch", "update", "patch"}
)

// The label and annotation on every object of the default policy.
const (
	bootstrapLabel = "kubernetes.io/bootstrapping"
	bootstrapValue = "rbac-defaults"
	autoUpdateKey  = rbacv1.AutoUpdateAnnotationKey
)

// spec is a PolicyRule being written. Each setter stores its list sorted and
// without duplicates, as upstream's rule builder does; that is the form the
// rules have in a real cluster.
type spec rbacv1.PolicyRule

func rule(verbs ...string) spec           { return spec{Verbs: sorted(verbs)} }
func (s spec) groups(g ...string) spec    { s.APIGroups = sorted(g); return s }
func (s spec) resources(r ...string) spec { s.Resources = sorted(r); return s }
func (s spec) names(n ...string) spec     { s.ResourceNames = sorted(n); return s }
func (s spec) urls(u ...string) spec      { s.NonResourceURLs = sorted(u); return s }
func sorted(in []string) []string         { return slices.Compact(slices.Sorted(slices.Values(in))) }

// eventsRule lets a component record events, in both events APIs.
func eventsRule() spec {
	return rule("create", "update", "patch").groups(core, eventsGroup).resources("events")
}

// aggregateTo is the label by which the aggregated role (admin, edit or
// view) selects the roles whose rules it gathers.
func aggregateTo(role string) map[string]string {
	return map[string]string{"rbac.authorization.k8s.io/aggregate-to-" + role: "true"}
}

// rules turns specs into PolicyRules, refusing (as upstream does) a rule
// without verbs, a resource rule without API groups, or one mixing
// resources and non-resource URLs. The policy is static, so a bad rule is a
// programming error caught by the tests.
func rules(specs ...spec) []rbacv1.PolicyRule {
	if len(specs) == 0 {
		return nil
	}
	out := make([]rbacv1.PolicyRule, len(specs))
	for i, s := range specs {
		r := rbacv1.PolicyRule(s)
		urls, res := len(r.NonResourceURLs) > 0, len(r.Resources) > 0
		if len(r.Verbs) == 0 || urls == res || (urls && (len(r.APIGroups) > 0 || len(r.ResourceNames) > 0)) || (res && len(r.APIGroups) == 0) {
			panic(fmt.Sprintf("bootstrappolicy: malformed rule %+v", r))
		}
		out[i] = r
	}
	return out
}

func clusterRole(name string, specs ...spec) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules(specs...)}
}

func role(name string, specs ...spec) rbacv1.Role {
	return rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules(specs...)}
}

func user(name string) rbacv1.Subject {
	return rbacv1.Subject{APIGroup: rbacGroup, Kind: rbacv1.UserKind, Name: name}
}

func group(name string) rbacv1.Subject {
	return rbacv1.Subject{APIGroup: rbacGroup, Kind: rbacv1.GroupKind, Name: name}
}

func serviceAccounts(namespace string, names ...string) []rbacv1.Subject {
	var out []rbacv1.Subject
	for _, n := range names {
		out = append(out, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: n})
	}
	return out
}

// clusterBinding binds the cluster role of the same name.
func clusterBinding(name string, subjects ...rbacv1.Subject) rbacv1.ClusterRoleBinding {
	return rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacGroup, Kind: "ClusterRole", Name: name},
		Subjects:   subjects,
	}
}

// roleBinding binds the role roleName of the binding's namespace.
func roleBinding(name, roleName string, subjects ...rbacv1.Subject) rbacv1.RoleBinding {
	return rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacGroup, Kind: "Role", Name: roleName},
		Subjects:   subjects,
	}
}

// markDefault adds the bootstrapping label and autoupdate annotation.
func markDefault(m *metav1.ObjectMeta) {
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	m.Labels[bootstrapLabel] = bootstrapValue
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[autoUpdateKey] = "true"
}
